"""One episode's record: the task view an agent sees, and filling a record from the agent's
episode and its score (an agent or harness failure becomes the record's `error`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skillaudit.agents.agent import AgentError
from skillaudit.agents.protocol import AgentFailure, ProtocolEpisode
from skillaudit.errors import HarnessError
from skillaudit.sandbox.score import Scorer
from skillaudit.tasks.benchmarks import Task


def task_view(task: Task, seed: int, epoch: int) -> dict[str, Any]:
    """What an agent sees of a task (a task file's view, or a benchmark item's)."""
    from skillaudit.tasks.taskfile import agent_view

    if "kind" in task.data:
        d = agent_view(task)
    else:
        d = {"id": task.task_id, "prompt": task.prompt, "kind": "tests" if task.is_code else "answer"}
        if task.is_code:
            d["entry_point"] = task.data.get("entry_point")
    return {**d, "seed": seed, "epoch": epoch, "benchmark": task.benchmark}


BUILTIN_AGENT = "built-in search agent"


def finish(rec: dict[str, Any], task: Task, ep: ProtocolEpisode, score, answer: str) -> None:
    """Fill a record from a protocol episode of the built-in search agent and its score."""
    rec["correct"] = bool(score.correct)
    rec["invoked"] = ep.invoked
    rec["retrievals"] = ep.retrievals
    rec["answer"] = answer
    m = ep.meta
    rec["meta"].update({
        "latency_s": round(ep.latency_s, 3), "usage": ep.usage, "turns": m.get("turns"),
        "finish_reason": m.get("finish_reason"), "score": score.reason,
        "tool_calls": m.get("tool_calls", 0),
        "malformed_calls": m.get("malformed_calls", 0), "refused_calls": m.get("refused_calls", 0),
    })
    if m.get("replayed_turns"):
        rec["meta"]["replayed_turns"] = m["replayed_turns"]
    if task.is_code:
        rec["meta"]["response"] = ep.answer
    elif "extracted" in score.details:
        rec["meta"]["extracted"] = score.details["extracted"]


def attempt(rec: dict[str, Any], task: Task, scorer: Scorer,
             episode: Callable[[], ProtocolEpisode]) -> dict[str, Any]:
    """Run `episode()`, score its answer and fill `rec`; a failure becomes the record's `error`."""
    try:
        warm_oracle(scorer, task)
        ep = episode()
        score, answer = scorer.score(task, ep.answer)
    except (AgentError, AgentFailure) as exc:
        rec["error"] = f"agent: {exc}"
        return rec
    except HarnessError as exc:
        rec["error"] = f"harness: {exc}"
        return rec
    except Exception as exc:  # a bug or an odd reply must not kill a long run
        rec["error"] = f"unexpected {type(exc).__name__}: {exc}"
        return rec
    finish(rec, task, ep, score, answer)
    return rec


def warm_oracle(scorer: Scorer, task: Task) -> None:
    if task.benchmark == "mbpp_plus":
        from skillaudit.tasks.benchmarks import mbpp_deserialize_inputs

        scorer.oracles.get(task, {
            "base": mbpp_deserialize_inputs(task.task_id, task.data["base_input"]),
            "plus": mbpp_deserialize_inputs(task.task_id, task.data["plus_input"])})
