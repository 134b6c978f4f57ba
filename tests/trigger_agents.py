"""Scripted agents for the trigger tests (`--agent trigger_agents:...`): no model, deterministic."""

from __future__ import annotations

import json
import random
import re


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3}


def best_match(task, skills):
    """Loads the catalog entry sharing most words with the query; a planted poacher,
    tally-element-occurrences, takes every query that says "how many times"."""
    cat = skills.catalog()
    q = _words(task["prompt"])
    if "how many times" in task["prompt"].lower():
        pick = "tally-element-occurrences"
    else:
        scored = sorted(((len(q & _words(c["name"].replace("-", " ") + " " + c["description"])), c["name"])
                         for c in cat), reverse=True)
        pick = scored[0][1] if scored and scored[0][0] >= 2 else None
    if pick:
        skills.load(pick)
    return {"answer": "done", "usage": {"prompt_tokens": 1000, "completion_tokens": 50}}


def coin(task, skills):
    """Loads `percent-change` on a fair coin per run (seeded by the episode): a query's runs vote."""
    skills.catalog()
    if random.Random(task["seed"]).random() < 0.5:
        skills.load("percent-change")
    return "done"


def broken(task, skills):
    raise RuntimeError("endpoint down")


def seen(task, skills):
    """Answers with the task it was given (keys and prompt), to show what an agent sees."""
    return json.dumps(sorted(task))


def crowded(task, skills):
    """best_match, except that in a catalog of more than 100 skills every other query loads the
    alphabetically first skill that is not one of the bundled library's (a distractor) instead."""
    cat = skills.catalog()
    if len(cat) > 100 and sum(map(ord, task["prompt"])) % 2 == 0:
        from pathlib import Path

        lib = {p.name for p in (Path(__file__).resolve().parents[1] / "skillaudit" / "demo" / "skills").iterdir()}
        skills.load(sorted(c["name"] for c in cat if c["name"] not in lib)[0])
        return "done"
    return best_match(task, skills)
