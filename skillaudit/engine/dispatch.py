"""`run(opts)`: the run mode the options ask for, each a plan executed by the one loop.

- benchmarks with the built-in search agent (`harness.runner.run_benchmark`), and their
  counterfactual arms (`harness.runner.run_arms`);
- task files, a Python `--agent`, catalog mode (`harness.taskrun.run_tasks`), and catalog arms
  (`harness.taskrun.run_catalog_arms`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skillaudit.engine.loop import RunSummary
from skillaudit.engine.options import RunOptions
from skillaudit.errors import InputError


def run(opts: RunOptions, quiet: bool = False,
        on_record: Callable[[dict[str, Any]], None] | None = None) -> RunSummary:
    """Run every selected task in both conditions (and epochs), or the arms of `opts.base`, and
    append the records to `opts.out`."""
    if opts.epochs < 1:
        raise InputError("--epochs must be at least 1")
    if opts.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if opts.agent.tool_mode not in ("text", "native", "chatml"):
        raise InputError("--tool-mode must be text, native or chatml")
    if opts.tasks or opts.agent_spec or opts.skills_mode != "search":
        from skillaudit.engine.taskrun import run_tasks

        return run_tasks(opts, quiet, on_record)
    from skillaudit.engine.runner import run_arms, run_benchmark

    if opts.arms:
        if opts.reuse:
            raise InputError("--reuse re-runs main pairs; run the arms of the new log with --arms --base NEW")
        return run_arms(opts, quiet, on_record)
    return run_benchmark(opts, quiet, on_record)
