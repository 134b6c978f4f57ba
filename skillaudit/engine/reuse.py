"""Re-audit only what changed (`run --reuse OLD`): which records of an old log cannot have changed
with the library (copied) and which episodes must run again, and why (`ReusePlan`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from skillaudit.agents.protocol import catalog_hash
from skillaudit.agents.retrieve import SkillIndex
from skillaudit.engine.options import RunOptions
from skillaudit.engine.output import existing_records, record_key
from skillaudit.errors import InputError


@dataclass
class ReusePlan:
    """Which records of an old log can be copied and which episodes must be re-run (and why)."""

    old: str
    copy: list[dict[str, Any]] = field(default_factory=list)
    rerun: list[dict[str, Any]] = field(default_factory=list)  # {task_id, epoch, condition, why, tokens}
    total: int = 0

    @property
    def reasons(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rerun:
            out[r["why"]] = out.get(r["why"], 0) + 1
        return out

    def sentence(self, copied: int | None = None) -> str:
        why = "; ".join(f"{n} {w}" for w, n in sorted(self.reasons.items())) or "nothing changed"
        return f"re-ran {len(self.rerun)} of {self.total} episodes ({why})"

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "skillaudit.plan/v1", "old": self.old, "episodes": self.total,
                "copied": len(self.copy), "rerun": len(self.rerun), "reasons": self.reasons,
                "estimated_tokens": sum(r.get("tokens") or 0 for r in self.rerun),
                "episodes_to_rerun": self.rerun}


def _tokens(rec: dict[str, Any]) -> int:
    u = (rec.get("meta") or {}).get("usage") or {}
    return int(u.get("prompt_tokens") or 0) + int(u.get("completion_tokens") or 0)


def _why_rerun(rec: dict[str, Any], index: SkillIndex, mode: str, old_index: SkillIndex | None,
               cat_hash: str, top_k: int) -> str | None:
    """Why an enabled record's view of the library may have changed (None: it cannot have)."""
    meta = rec.get("meta") or {}
    if meta.get("arm"):
        return "arm record"
    listed = mode == "catalog" or meta.get("skills_mode") == "catalog" or bool(meta.get("listed"))
    if listed and meta.get("catalog_hash") != cat_hash:
        return "catalog names/descriptions changed"
    k = int(meta.get("top_k") or top_k)
    for call in rec.get("retrievals") or []:
        if not isinstance(call, dict):
            return "unreadable retrievals"
        for h in call.get("skills") or []:
            sid = h.get("id") if isinstance(h, dict) else None
            old_hash = h.get("hash") if isinstance(h, dict) else None
            if old_hash is None and old_index is not None:
                old_hash = old_index.hash_of(sid)
            if old_hash is None:
                return "no content hash logged (pass --reuse-skills OLD_LIBRARY)"
            if index.hash_of(sid) != old_hash:
                return "a skill it was shown changed"
        if call.get("tool", "search") == "search" and call.get("error") is None and call.get("query") is not None:
            again = index.search(call.get("query"), call.get("types"), k=k)
            if [h.id for h in again.hits] != [h.get("id") for h in call.get("skills") or []]:
                return "its search returns another list now"
    return None


def plan_reuse(old: str, index: SkillIndex, mode: str = "search", reuse_library: str | None = None,
               top_k: int = 3) -> ReusePlan:
    """Plan a re-audit: disabled records are copied (they never see the library); an enabled record
    is copied when the skills it was shown are unchanged (content hash), its searches, re-ranked
    offline over the new library, return the same list, and (catalog mode) the catalog is unchanged."""
    from skillaudit.library import load_library

    path = Path(old)
    if not path.is_file():
        raise InputError(f"--reuse {old}: no such file")
    old_index = SkillIndex(load_library(reuse_library)) if reuse_library else None
    cat_hash = catalog_hash(index)
    plan = ReusePlan(old=old)
    for _, rec in existing_records(path):
        if rec.get("arm") is not None:
            continue  # arms are re-run against their base (`run --arms`), not copied
        plan.total += 1
        if rec.get("error") is not None:
            why: str | None = "error record"
        elif rec.get("condition") == "disabled":
            why = None
        else:
            why = _why_rerun(rec, index, mode, old_index, cat_hash, top_k)
        if why is None:
            plan.copy.append(rec)
        else:
            plan.rerun.append({"task_id": rec.get("task_id"), "epoch": rec.get("epoch", 1),
                               "condition": rec.get("condition"), "model": rec.get("model"),
                               "benchmark": rec.get("benchmark"), "why": why, "tokens": _tokens(rec)})
    return plan


def seed_output(out: Path, plan: ReusePlan) -> int:
    """Write the plan's copied records into a new `out` (refuses to touch the old log)."""
    from skillaudit.util.files import atomic_write_bytes

    if out.resolve() == Path(plan.old).resolve():
        raise InputError("--reuse: --out must be a new file, not the old log")
    have = {record_key(r) for _, r in existing_records(out)} if out.exists() else set()
    add = [r for r in plan.copy if record_key(r) not in have]
    if not add:
        return 0
    old = out.read_bytes() if out.exists() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    atomic_write_bytes(out, old + b"".join(orjson.dumps(r) + b"\n" for r in add))
    return len(add)


def reuse_plan_for(opts: RunOptions) -> ReusePlan:
    """The `--reuse OLD --dry-run` plan for these options (no model call, nothing written)."""
    from skillaudit.library import load_library

    if not opts.skills:
        raise InputError("--skills is required: the plan re-ranks logged searches over it")
    index = SkillIndex(load_library(opts.skills), set(opts.exclude_skills))
    return plan_reuse(opts.reuse or "", index, opts.skills_mode, reuse_library=opts.reuse_skills,
                      top_k=opts.agent.top_k)
