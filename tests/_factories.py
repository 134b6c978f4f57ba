"""Builders of run records and skill folders shared by the tests."""

from __future__ import annotations

from pathlib import Path


def pair(task_id: str, y_pos: bool, y_neg: bool, retrieved: list[str] | None = None, **extra) -> list[dict]:
    """The enabled and disabled records of one task (retrieved=None means the tool was not called)."""
    on = {"task_id": task_id, "condition": "enabled", "correct": y_pos, **extra}
    if retrieved is not None:
        on["retrievals"] = [{"query": "q", "skills": [{"id": s, "score": 1.0} for s in retrieved], "error": None}]
    off = {"task_id": task_id, "condition": "disabled", "correct": y_neg, **extra}
    return [on, off]


def make_skill(root: Path, name: str, description: str = "A skill.", body: str = "## When to apply\nAlways.\n", extra: str = "") -> Path:
    """Create `root/name/SKILL.md` with the given front matter and body."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    path.write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}", encoding="utf-8")
    return path
