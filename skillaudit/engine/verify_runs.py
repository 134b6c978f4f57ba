"""The `pruned` re-runs `skillaudit verify --endpoint` measures (a run mode: the engine makes them;
`skillaudit.analysis.verify` says what they show)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from skillaudit.errors import InputError


def _meta_num(meta: dict[str, Any], key: str, default: float, path: str, whole: bool = True) -> Any:
    """A run setting from the base records' meta, or a one-line error naming the log."""
    import math

    v = meta.get(key, default)
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
            or (whole and v != int(v))):
        kind = "a whole number" if whole else "a number"
        raise InputError(f"{path}: meta.{key} of the enabled records must be {kind}, not {v!r:.40}")
    return int(v) if whole else float(v)


def rerun_pruned(paths: tuple[str, ...], skills: str, endpoint: str, model: str, label: str, out: str,
                 prune: tuple[str, ...], api_key: str | None = None, data: str | None = None,
                 quiet: bool = False) -> Iterator[str]:
    """Make the `pruned` re-runs `verify` measures: for each base log and benchmark of `label`,
    replay the touched retrieving pairs against the library without `prune`, with the base runs'
    own sampling and tool settings (from their records' meta). Yields one summary line per log."""
    from skillaudit.agents.agent import AgentConfig
    from skillaudit.engine.arm_runner import base_models, read_base
    from skillaudit.engine.options import RunOptions
    from skillaudit.engine.runner import run_arms

    done = 0
    for path in paths:
        if path == "-" or path == out:
            continue
        for m, bench in sorted(base_models(path)):
            if m != label:
                continue
            pairs = read_base(path, label, bench)
            if not pairs:
                continue
            meta = next(iter(pairs.values())).enabled.get("meta") or {}
            if not isinstance(meta, dict):
                raise InputError(f"{path}: the enabled records' meta must be an object")

            agent = AgentConfig(
                endpoint=endpoint, model=model, api_key=api_key,
                temperature=_meta_num(meta, "temperature", 0.7, path, whole=False),
                max_tokens=_meta_num(meta, "max_tokens", 512, path),
                tool_mode=str(meta.get("tool_call_mode", "text")), tool_choice=str(meta.get("tool_choice", "auto")),
                max_calls=_meta_num(meta, "max_calls", 3, path), unescape_html=bool(meta.get("unescape_html", False)),
                top_k=_meta_num(meta, "top_k", 3, path))
            opts = RunOptions(benchmark=bench, out=out, agent=agent, skills=skills, model_label=label, data=data,
                              arms="pruned", base=path, prune=prune)
            summary = run_arms(opts, quiet=quiet)
            done += 1
            yield (f"{path} ({bench}): re-ran {summary.written} touched pair(s) without "
                   f"{', '.join(prune)}, {summary.skipped} already logged, {summary.errors} error(s)")
    if not done:
        raise InputError(f"no pairs of model {label!r} in {', '.join(paths)} to re-run (set --model-label)")
