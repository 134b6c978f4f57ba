"""Plugins: agents, graders, importers and engines from installed packages, beside the built-ins.

A package extends skillaudit by declaring entry points (pyproject.toml), as pytest, llm and Inspect
plugins do; nothing is imported until it is used, and `skillaudit plugins` lists what is installed
and where it came from (docs/plugins.md has a worked example).

| group | the entry point's object | used by |
|---|---|---|
| `skillaudit.agents` | `agent(task, skills)` -> answer (the protocol of `--agent module:callable`, docs/agents.md) | `run --agent NAME` |
| `skillaudit.graders` | `grade(task, answer)` -> bool or number (correct when >= `--threshold`); an object with `pairwise = True` compares both conditions' answers (only the built-in `judge` so far; a plugin's is refused) | a task file's `grader: NAME` |
| `skillaudit.importers` | a `click.Command` | `skillaudit import NAME` |
| `skillaudit.engines` | `execute(plan, one, writer, client, summary, concurrency, quiet, on_record)`, as `engine.loop.execute` | `run --engine NAME` |

The built-ins are registered the same way (origin "built-in"): agents `search` and `catalog` (the
chat loops of `--skills-mode`), graders `tests`, `answer`, `checker` (the task-file checkers), `judge` (a judge model on the task's
rubric) and
the benchmark scorers, the importers of `skillaudit import`, and the engine `threads`. A plugin
may not take a built-in's name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from skillaudit.errors import InputError

GROUPS = {"agents": "skillaudit.agents", "graders": "skillaudit.graders",
          "importers": "skillaudit.importers", "engines": "skillaudit.engines"}

BUILTINS: dict[str, dict[str, str]] = {
    "agents": {"search": "skillaudit.agents.protocol:search_agent",
               "catalog": "skillaudit.agents.protocol:catalog_agent"},
    "graders": {"tests": "skillaudit.tasks.taskfile:score_tests",
                "answer": "skillaudit.tasks.taskfile:score_answer",
                "checker": "skillaudit.tasks.taskfile:score_checker",
                "judge": "skillaudit.agents.judge:Judge",
                **{b: "skillaudit.sandbox.score:Scorer" for b in ("mbpp_plus", "humaneval", "gsm8k", "math500")}},
    "importers": {"inspect": "skillaudit.commands.logs:import_inspect_cmd",
                  "evalplus": "skillaudit.commands.logs:import_evalplus_cmd",
                  "lm-eval": "skillaudit.commands.logs:import_lm_eval_cmd",
                  "skillsbench": "skillaudit.commands.logs:import_skillsbench_cmd",
                  "harbor": "skillaudit.commands.logs:import_harbor_cmd"},
    "engines": {"threads": "skillaudit.engine.loop:execute",
                "harbor": "skillaudit.engine.harbor:run_harbor"},
}


@dataclass(frozen=True)
class Plugin:
    kind: str  # agents | graders | importers | engines
    name: str
    value: str  # module:object
    origin: str  # "built-in", or the distribution's name and version

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "object": self.value, "origin": self.origin}


def _entry_points(kind: str) -> list[Any]:
    try:
        return list(metadata.entry_points(group=GROUPS[kind]))
    except Exception:  # a broken installation must not stop the CLI  # pragma: no cover
        return []


def _origin(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown distribution"
    try:
        return f"{dist.metadata['Name']} {dist.version}"
    except Exception:  # pragma: no cover - odd metadata
        return "unknown distribution"


def installed(kind: str | None = None) -> list[Plugin]:
    """The built-ins, then the installed plugins, of one kind or all; a plugin named like a
    built-in (or like an earlier plugin of its kind) is listed with its origin but never used."""
    out: list[Plugin] = []
    for k in ([kind] if kind else list(GROUPS)):
        out += [Plugin(k, n, v, "built-in") for n, v in BUILTINS[k].items()]
        out += [Plugin(k, ep.name, ep.value, _origin(ep)) for ep in sorted(_entry_points(k), key=lambda e: e.name)]
    return out


def find(kind: str, name: str) -> Plugin | None:
    """The plugin `name` of `kind` (a built-in first), or None."""
    return next((p for p in installed(kind) if p.name == name), None)


def load(kind: str, name: str, what: str) -> Any:
    """The object of plugin `name`; one clear line (InputError) when it is unknown or fails to
    import. `what` names the option or field asking for it (e.g. "--agent demo")."""
    plugin = find(kind, name)
    if plugin is None:
        have = ", ".join(p.name for p in installed(kind)) or "none"
        raise InputError(f"{what}: no {kind[:-1]} named {name!r} (installed: {have}; `skillaudit plugins` "
                         "lists them, with where each came from)")
    mod, _, attr = plugin.value.partition(":")
    try:
        obj: Any = importlib.import_module(mod)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except Exception as exc:  # a plugin may raise anything on import
        raise InputError(f"{what}: plugin {name!r} ({plugin.value}, {plugin.origin}) cannot be imported "
                         f"({type(exc).__name__}: {exc})") from None
    return obj
