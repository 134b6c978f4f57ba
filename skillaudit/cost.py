"""What each skill costs: tokens it adds to the context when injected, tokens and latency per condition.

Tokens per skill come from the logs' usage deltas, not a tokenizer: for each pair, the enabled run's
prompt tokens minus the disabled run's are regressed (least squares) on the characters of skill text
the enabled run was shown in full and on the disabled run's prompt tokens (an enabled run re-sends
the task in its later turns):

    delta_i = a + r * chars_shown_i + g * disabled_prompt_i

`r` (tokens per character of injected skill text) times a skill's rendered length is the tokens that
skill adds each time it is injected. When the logs carry no usage, or too few pairs show skills,
the estimate is None and the method says why. Per skill: injections (enabled runs it was shown in),
b and c among those pairs, and tokens per net rescue (injections x tokens per injection / (b - c),
None when b - c <= 0: the skill pays tokens for no measured gain).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InputError


@dataclass(frozen=True)
class SkillCost:
    """One skill's cost figures."""

    skill_id: str
    chars: int
    tokens_per_injection: float | None
    injections: int
    b: int
    c: int

    @property
    def tokens_per_net_rescue(self) -> float | None:
        net = self.b - self.c
        if self.tokens_per_injection is None or net <= 0:
            return None
        return self.injections * self.tokens_per_injection / net

    def to_dict(self) -> dict[str, Any]:
        return {"skill_id": self.skill_id, "chars": self.chars,
                "tokens_per_injection": None if self.tokens_per_injection is None else round(self.tokens_per_injection, 1),
                "injections": self.injections, "b": self.b, "c": self.c,
                "tokens_per_net_rescue": None if self.tokens_per_net_rescue is None else round(self.tokens_per_net_rescue, 1)}


@dataclass(frozen=True)
class CostReport:
    """Per-skill costs plus the per-condition means they rest on."""

    method: str
    tokens_per_char: float | None
    n_pairs: int
    n_pairs_with_usage: int
    per_condition: dict[str, dict[str, float | None]]
    skills: tuple[SkillCost, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "skillaudit.cost/v1", "method": self.method,
                "tokens_per_char": None if self.tokens_per_char is None else round(self.tokens_per_char, 4),
                "n_pairs": self.n_pairs, "n_pairs_with_usage": self.n_pairs_with_usage,
                "per_condition": self.per_condition, "skills": [s.to_dict() for s in self.skills]}


def _shown(rec: dict[str, Any]) -> list[str]:
    """Skills an enabled record was shown in full, first time each (logged order)."""
    out: list[str] = []
    for call in rec.get("retrievals") or []:
        if not isinstance(call, dict) or call.get("error"):
            continue
        for h in call.get("skills") or []:
            sid = h.get("id") if isinstance(h, dict) else h
            if isinstance(sid, str) and sid not in out:
                out.append(sid)
    return out


def _usage(rec: dict[str, Any]) -> tuple[int, int] | None:
    u = (rec.get("meta") or {}).get("usage")
    if not isinstance(u, dict) or not isinstance(u.get("prompt_tokens"), int):
        return None
    return int(u["prompt_tokens"]), int(u.get("completion_tokens") or 0)


def _mean(xs: Sequence[float]) -> float | None:
    return round(float(np.mean(xs)), 2) if xs else None


def skill_costs(records: Iterable[dict[str, Any]], skill_chars: dict[str, int]) -> CostReport:
    """Cost figures from main-pair records (arm and error records are skipped)."""
    pairs: dict[tuple, dict[str, dict[str, Any]]] = {}
    for rec in records:
        if rec.get("arm") is not None or rec.get("error") is not None:
            continue
        key = (rec.get("model"), rec.get("benchmark"), rec.get("task_id"), rec.get("epoch", 1))
        pairs.setdefault(key, {})[str(rec.get("condition"))] = rec
    full = [p for p in pairs.values() if "enabled" in p and "disabled" in p]
    per_cond: dict[str, dict[str, float | None]] = {}
    for cond in ("enabled", "disabled"):
        us = [_usage(p[cond]) for p in full]
        lat = [float((p[cond].get("meta") or {}).get("latency_s")) for p in full
               if isinstance((p[cond].get("meta") or {}).get("latency_s"), (int, float))]
        per_cond[cond] = {"prompt_tokens": _mean([u[0] for u in us if u]),
                          "completion_tokens": _mean([u[1] for u in us if u]), "latency_s": _mean(lat)}
    rows, y = [], []
    for p in full:
        ue, ud = _usage(p["enabled"]), _usage(p["disabled"])
        if ue is None or ud is None:
            continue
        chars = sum(skill_chars.get(s, 0) for s in _shown(p["enabled"]))
        rows.append([1.0, float(chars), float(ud[0])])
        y.append(float(ue[0] - ud[0]))
    rate = None
    method = ("usage deltas: enabled minus disabled prompt tokens regressed on the characters of skill text "
              "shown (and the disabled prompt), tokens = rate x the skill's rendered characters")
    if len(rows) >= 5 and len({r[1] for r in rows}) >= 3:
        coef, *_ = np.linalg.lstsq(np.array(rows), np.array(y), rcond=None)
        rate = float(coef[1]) if coef[1] > 0 else None
    if rate is None:
        method += (" (not estimable: fewer than 5 pairs with usage, or too little variation in the skill text "
                   "shown)")
    counts: dict[str, list[int]] = {}
    for p in full:
        en_ok, dis_ok = bool(p["enabled"].get("correct")), bool(p["disabled"].get("correct"))
        for s in _shown(p["enabled"]):
            c = counts.setdefault(s, [0, 0, 0])
            c[0] += 1
            c[1] += en_ok and not dis_ok
            c[2] += dis_ok and not en_ok
    skills = []
    for sid in sorted(set(skill_chars) | set(counts)):
        n, b, c = counts.get(sid, [0, 0, 0])
        chars = skill_chars.get(sid, 0)
        tok = rate * chars if rate is not None and chars else None
        skills.append(SkillCost(sid, chars, tok, n, b, c))
    skills.sort(key=lambda s: -(s.tokens_per_injection or 0) * max(s.injections, 1))
    return CostReport(method=method, tokens_per_char=rate, n_pairs=len(full), n_pairs_with_usage=len(rows),
                      per_condition=per_cond, skills=tuple(skills))


def library_chars(library: Any) -> dict[str, int]:
    """Characters each skill takes when injected (as `search_skills` renders it)."""
    from .harness.retrieve import render_skill

    return {s.id: len(render_skill(s)) for s in library.skills}


def read_records(paths: Sequence[str]) -> list[dict[str, Any]]:
    """Records of JSON Lines logs (gzip allowed); a bad line names file and line."""
    import gzip

    import orjson

    out = []
    for path in paths:
        try:
            raw = gzip.open(path, "rb").read() if str(path).endswith(".gz") else open(path, "rb").read()  # noqa: SIM115 - read at once
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
        for lineno, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise InputError(f"{path}:{lineno}: not valid JSON") from None
            if isinstance(rec, dict):
                out.append(rec)
    return out


def cost_sentence(cost: SkillCost) -> str | None:
    """"keeps N tokens in context for no measurable gain" when a skill was injected without net rescue."""
    if cost.tokens_per_injection is None or cost.injections == 0 or cost.b - cost.c > 0:
        return None
    return (f"{cost.skill_id} adds ~{cost.tokens_per_injection:,.0f} tokens each time it is injected "
            f"({cost.injections} injections, {cost.injections * cost.tokens_per_injection:,.0f} tokens in all) "
            f"for no measurable gain (b={cost.b}, c={cost.c})")


def cost_by_model(paths: Sequence[str], library: Any) -> dict[str, Any] | None:
    """`{"schema", "method", "models": {model: skillaudit.cost/v1}}` for the audit (None when the logs
    are standard input or carry no usage); each model's own usage deltas (tokenizers differ)."""
    if library is None or "-" in paths:
        return None
    recs = read_records(paths)
    chars = library_chars(library)
    models = sorted({str(r.get("model")) for r in recs if r.get("arm") is None})
    out = {}
    for m in models:
        rep = skill_costs([r for r in recs if str(r.get("model")) == m], chars)
        if rep.n_pairs_with_usage:
            out[m] = rep.to_dict()
    if not out:
        return None
    return {"schema": "skillaudit.cost/v1", "method": next(iter(out.values()))["method"].split(" (not")[0],
            "models": out}
