"""The one run loop: execute a plan's episodes with bounded concurrency and append each record as
it lands (flushed and fsynced by the writer), counting what the summary reports, with progress.

Resume, retries of error records and reuse happen before (`plan`: the episodes already logged are
not planned); error records come from the episode step (`episode.attempt`), never from here."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from skillaudit.engine.output import Writer
from skillaudit.engine.plan import Episode, Plan


@dataclass
class RunSummary:
    """What a run did: records written, skipped (resume), errors, wall time."""

    out: str
    n_tasks: int
    planned: int
    written: int = 0
    skipped: int = 0
    errors: int = 0
    correct: dict[str, int] = field(default_factory=lambda: {"enabled": 0, "disabled": 0})
    invoked: int = 0
    retrieved: int = 0
    wall_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    arms: dict[str, int] = field(default_factory=dict)  # arm -> records written
    arm_correct: dict[str, int] = field(default_factory=dict)
    reuse: str | None = None  # `--reuse`: "re-ran N of M episodes (why)"



def progress_bar(total: int, quiet: bool):
    """A rich progress bar on stderr (rate and ETA), or a no-op."""
    if quiet or total == 0:
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    class _Rate(TextColumn):
        def __init__(self) -> None:
            super().__init__("")

        def render(self, task):  # type: ignore[override]
            from rich.text import Text

            elapsed = task.elapsed or 0.0  # the mean over the run: records differ a lot in cost
            speed = task.completed / elapsed if elapsed > 0 and task.completed else None
            return Text(f"{speed * 60:.1f} rec/min" if speed else "-- rec/min", style="progress.data.speed")

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TaskProgressColumn(), _Rate(), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=False)


def execute(plan: Plan, one: Callable[[Episode], dict[str, Any]], writer: Writer, client: Any,
            summary: RunSummary, concurrency: int, quiet: bool,
            on_record: Callable[[dict[str, Any]], None] | None) -> None:
    """Run `one(episode)` for every episode of `plan` with bounded concurrency, appending each record
    as it lands; the writer and `client` (anything with `close()`) are closed at the end. `one`
    returns a record, or a list of records (none while a judged pair waits for its other run, both
    when it lands)."""
    units = plan.episodes
    progress = progress_bar(len(units), quiet)
    bar = progress.add_task(plan.label, total=len(units)) if progress else None
    t0 = time.monotonic()
    try:
        if progress:
            progress.start()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            pending: set[Future] = set()
            queue = iter(units)

            def fill() -> None:
                for unit in queue:
                    pending.add(pool.submit(one, unit))
                    if len(pending) >= concurrency:
                        break

            fill()
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    pending.discard(fut)
                    out = fut.result()  # a record, or a list (a judged pair lands when its second run does)
                    for rec in out if isinstance(out, list) else (out,):
                        _land(rec, writer, summary, on_record)
                    if progress:
                        progress.advance(bar)
                fill()
    finally:
        if progress:
            progress.stop()
        writer.close()
        client.close()
        summary.wall_s = time.monotonic() - t0


def _land(rec: dict[str, Any], writer: Writer, summary: RunSummary,
          on_record: Callable[[dict[str, Any]], None] | None) -> None:
    """Append one record and count it in the summary."""
    writer.write(rec)
    summary.written += 1
    arm = rec.get("arm")
    if arm:
        summary.arms[arm] = summary.arms.get(arm, 0) + 1
    if rec["error"] is not None:
        summary.errors += 1
    elif rec["correct"] and not arm:
        summary.correct[rec["condition"]] += 1
    elif rec["correct"]:
        summary.arm_correct[arm] = summary.arm_correct.get(arm, 0) + 1
    if rec["condition"] == "enabled" and rec.get("invoked") and not arm:
        summary.invoked += 1
        if any(r["skills"] for r in rec["retrievals"]):
            summary.retrieved += 1
    if on_record:
        on_record(rec)


def engine_for(name: str) -> Callable[..., None]:
    """The `execute` of engine `name`: the built-in `threads` (this module's `execute`) or an
    installed plugin's (`skillaudit.util.plugins`, group `skillaudit.engines`)."""
    if name == "threads":
        return execute
    from skillaudit.util.plugins import load

    fn = load("engines", name, f"--engine {name}")
    if not callable(fn):
        from skillaudit.errors import InputError

        raise InputError(f"--engine {name}: the plugin's object is not callable")
    return fn
