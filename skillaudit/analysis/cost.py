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

from skillaudit.errors import InputError
from skillaudit.runs.costs import CostTable  # the reading side (runs/costs.py)


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




def _mean(xs: Any) -> float | None:
    return round(float(np.mean(xs)), 2) if len(xs) else None


def table_report(table: CostTable, skill_chars: dict[str, int], keep: Any = None) -> CostReport:
    """Cost figures of the pairs whose (model, benchmark), as logged, `keep(model, benchmark)`
    accepts (None: all)."""
    f: dict[str, Any] = table.freeze().frozen  # type: ignore[assignment]
    en_rec, dis_rec = f["en_rec"], f["dis_rec"]
    both = (en_rec >= 0) & (dis_rec >= 0)
    if keep is not None and both.size:
        mb, inv = np.unique(np.stack([f["m"], f["b"]], 1), axis=0, return_inverse=True)
        ok = np.array([bool(keep(f["models"][m], f["benchmarks"][b])) for m, b in mb.tolist()], dtype=bool)
        both &= ok[inv.ravel()]
    full = np.flatnonzero(both)  # pairs in first-seen order
    en, dis = en_rec[full], dis_rec[full]
    has_u, tok, lat = f["has_u"], f["tok"], f["lat"]
    per_cond: dict[str, dict[str, float | None]] = {}
    for name, recs in (("enabled", en), ("disabled", dis)):
        used = recs[has_u[recs]]
        la = lat[recs]
        per_cond[name] = {"prompt_tokens": _mean(tok[used, 0]), "completion_tokens": _mean(tok[used, 1]),
                          "latency_s": _mean(la[~np.isnan(la)])}
    # characters of skill text each pair's enabled run was shown
    chars_of = np.array([skill_chars.get(s, 0) for s in f["skills"]], dtype=np.int64)
    pair_of = np.full(f["n_rec"], -1, np.int64)
    pair_of[en] = np.arange(full.size)
    sp = pair_of[f["shown_rec"]]
    sel = sp >= 0
    sp, ss = sp[sel], f["shown_skill"][sel]
    chars = np.zeros(full.size, np.int64)
    np.add.at(chars, sp, chars_of[ss])
    reg = np.flatnonzero(has_u[en] & has_u[dis])
    x = np.column_stack([np.ones(reg.size), chars[reg].astype(np.float64),
                         tok[dis[reg], 0].astype(np.float64)])
    y = (tok[en[reg], 0] - tok[dis[reg], 0]).astype(np.float64)
    rate = None
    method = ("usage deltas: enabled minus disabled prompt tokens regressed on the characters of skill text "
              "shown (and the disabled prompt), tokens = rate x the skill's rendered characters")
    if reg.size >= 5 and np.unique(x[:, 1]).size >= 3:
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        rate = float(coef[1]) if coef[1] > 0 else None
    if rate is None:
        method += (" (not estimable: fewer than 5 pairs with usage, or too little variation in the skill text "
                   "shown)")
    ok = f["correct"]
    en_ok, dis_ok = ok[en], ok[dis]
    n_cols = len(f["skills"])
    injections = np.bincount(ss, minlength=n_cols)
    b = np.bincount(ss, weights=(en_ok & ~dis_ok)[sp], minlength=n_cols).astype(np.int64)
    c = np.bincount(ss, weights=(dis_ok & ~en_ok)[sp], minlength=n_cols).astype(np.int64)
    shown = {s: i for i, s in enumerate(f["skills"]) if injections[i]}
    skills = []
    for sid in sorted(set(skill_chars) | set(shown)):
        i = shown.get(sid)
        n, nb, nc = (0, 0, 0) if i is None else (int(injections[i]), int(b[i]), int(c[i]))
        ch = skill_chars.get(sid, 0)
        skills.append(SkillCost(sid, ch, rate * ch if rate is not None and ch else None, n, nb, nc))
    skills.sort(key=lambda s: -(s.tokens_per_injection or 0) * max(s.injections, 1))
    return CostReport(method=method, tokens_per_char=rate, n_pairs=int(full.size),
                      n_pairs_with_usage=int(reg.size), per_condition=per_cond, skills=tuple(skills))




def skill_costs(records: Iterable[dict[str, Any]], skill_chars: dict[str, int]) -> CostReport:
    """Cost figures from main-pair records (arm and error records are skipped)."""
    table = CostTable()
    for rec in records:
        table.add_record(rec)
    return table_report(table, skill_chars)


def library_chars(library: Any) -> dict[str, int]:
    """Characters each skill takes when injected (as `search_skills` renders it)."""
    from skillaudit.library import render_skill

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


def cost_by_model(paths: Sequence[str], library: Any, table: CostTable | None = None) -> dict[str, Any] | None:
    """`{"schema", "method", "models": {model: skillaudit.cost/v1}}` for the audit (None when the logs
    are standard input or carry no usage); each model's own usage deltas (tokenizers differ).
    `table`: the logs' cost fields when already read (`Inputs.cost_table`); else the logs are read."""
    if library is None or (table is None and "-" in paths):
        return None
    if table is None:
        table = CostTable()
        for rec in read_records(paths):
            table.add_record(rec)
    chars = library_chars(library)
    out = {}
    for m in table.models():
        rep = table_report(table, chars, keep=lambda model, _, m=m: str(model) == m)
        if rep.n_pairs_with_usage:
            out[m] = rep.to_dict()
    if not out:
        return None
    return {"schema": "skillaudit.cost/v1", "method": next(iter(out.values()))["method"].split(" (not")[0],
            "models": out}


def inputs_cost(inputs: Any, model: str | None = None, benchmark: str | None = None) -> CostReport | None:
    """Cost figures of one model and/or benchmark (None = all) from the inputs read once
    (`load_inputs(cost=True)`); None without a library or cost columns."""
    if inputs.library is None or inputs.cost_table is None:
        return None

    def keep(m: Any, b: Any) -> bool:
        return (model is None or m == model) and (benchmark is None or b == benchmark)

    return table_report(inputs.cost_table, library_chars(inputs.library),
                        None if model is None and benchmark is None else keep)


def inputs_cost_by_model(inputs: Any) -> dict[str, Any] | None:
    """The audit's cost section (`cost_by_model`) from the inputs read once."""
    if inputs.cost_table is None:
        return None
    return cost_by_model(inputs.paths, inputs.library, table=inputs.cost_table)
