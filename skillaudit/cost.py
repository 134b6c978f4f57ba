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


def _mean(xs: Any) -> float | None:
    return round(float(np.mean(xs)), 2) if len(xs) else None


def _usage_of(u: Any) -> tuple[int, int] | None:
    if not isinstance(u, dict) or not isinstance(u.get("prompt_tokens"), int):
        return None
    return int(u["prompt_tokens"]), int(u.get("completion_tokens") or 0)


_COND = {"enabled": 0, "disabled": 1}  # any other condition: 2 (such a record is in no pair here)


class CostTable:
    """The fields the cost figures read of main records, as columns, in reading order.

    Per record: its pair key (model, benchmark, task_id, epoch, as logged: a missing model is
    None), condition, correct, prompt and completion tokens (`meta.usage`), latency
    (`meta.latency_s`), and for enabled records the skills shown in full (calls without an
    error). Arm and error records are left out. `load_inputs(cost=True)` fills one while it reads
    the logs (`add`, `add_block`); `skill_costs` fills one from dicts (`add_record`). `freeze`
    turns the columns into arrays (what `report` reads; nothing can be added after).
    """

    frozen: dict[str, Any] | None = None

    def __init__(self) -> None:
        self.keys: dict[tuple[Any, Any, Any, Any], int] = {}  # pair key -> slot, first-seen order
        self.slot: list[int] = []
        self.cond: list[int] = []
        self.correct: list[bool] = []
        self.usage: list[tuple[int, int] | None] = []
        self.latency: list[float] = []  # nan: not logged
        self.shown_rec: list[int] = []  # (record, skill) of each skill shown, flat
        self.shown_skill: list[int] = []
        self.skills: dict[str, int] = {}  # skill id -> column

    def __len__(self) -> int:
        return len(self.slot)

    def add(self, model: Any, benchmark: Any, task_id: Any, epoch: Any, condition: Any, correct: Any,
            meta: Any, shown: list[str] | None) -> None:
        """One main record's fields, as `skill_costs` reads them of a dict."""
        keys = self.keys
        key = (model, benchmark, task_id, epoch)
        slot = keys.get(key)
        if slot is None:
            slot = keys[key] = len(keys)
        cond = _COND.get(str(condition), 2)
        if not isinstance(meta, dict):
            meta = {}
        lat = meta.get("latency_s")
        if shown and cond == 0:
            rec, skills = len(self.slot), self.skills
            for sid in shown:
                col = skills.get(sid)
                if col is None:
                    col = skills[sid] = len(skills)
                self.shown_rec.append(rec)
                self.shown_skill.append(col)
        self.slot.append(slot)
        self.cond.append(cond)
        self.correct.append(bool(correct))
        self.usage.append(_usage_of(meta.get("usage")))
        self.latency.append(float(lat) if isinstance(lat, (int, float)) else np.nan)

    def add_block(self, recs: list[Any]) -> None:
        """Records decoded into objects with the fields as attributes (`meta` an object with
        `usage` and `latency_s`, or None; `shown` the skills shown, or None): `add` for many."""
        main = [r for r in recs if r.arm is None and r.error is None]
        keys, skills = self.keys, self.skills
        base = len(self.slot)
        self.slot += [keys.setdefault((r.model, r.benchmark, r.task_id, r.epoch), len(keys)) for r in main]
        conds = [_COND.get(str(r.condition), 2) for r in main]
        self.cond += conds
        self.correct += [bool(r.correct) for r in main]
        metas = [r.meta for r in main]
        self.usage += [None if m is None else _usage_of(m.usage) for m in metas]
        self.latency += [np.nan if m is None or not isinstance(m.latency_s, (int, float)) else float(m.latency_s)
                         for m in metas]
        for k, r in enumerate(main):
            if conds[k] == 0 and r.shown:
                for sid in r.shown:
                    col = skills.get(sid)
                    if col is None:
                        col = skills[sid] = len(skills)
                    self.shown_rec.append(base + k)
                    self.shown_skill.append(col)

    def add_record(self, rec: dict[str, Any]) -> None:
        """A record as a dict (arm and error records are skipped)."""
        if rec.get("arm") is not None or rec.get("error") is not None:
            return
        cond = rec.get("condition")
        self.add(rec.get("model"), rec.get("benchmark"), rec.get("task_id"), rec.get("epoch", 1), cond,
                 rec.get("correct"), rec.get("meta") or {}, _shown(rec) if str(cond) == "enabled" else None)

    def extend(self, other: CostTable) -> None:
        """Append the records of `other` (read after these)."""
        slot_of = [self.keys.setdefault(k, len(self.keys)) for k in other.keys]
        col_of = [self.skills.setdefault(k, len(self.skills)) for k in other.skills]
        base = len(self.slot)
        self.slot += [slot_of[s] for s in other.slot]
        self.shown_rec += [base + r for r in other.shown_rec]
        self.shown_skill += [col_of[c] for c in other.shown_skill]
        self.cond += other.cond
        self.correct += other.correct
        self.usage += other.usage
        self.latency += other.latency

    def freeze(self) -> CostTable:
        """The columns as arrays; each pair's model and benchmark as ids into small vocabularies."""
        if self.frozen is not None:
            return self
        groups: dict[tuple[Any, Any], int] = {}  # (model, benchmark) as logged -> id
        group = [groups.setdefault((k[0], k[1]), len(groups)) for k in self.keys]
        n_slots = len(self.keys)
        slot, cond = np.array(self.slot, dtype=np.int64), np.array(self.cond, dtype=np.int8)
        en_rec, dis_rec = np.full(n_slots, -1, np.int64), np.full(n_slots, -1, np.int64)
        for rec_of, c in ((en_rec, 0), (dis_rec, 1)):
            at = np.flatnonzero(cond == c)
            rec_of[slot[at]] = at
        self.frozen = {
            "groups": list(groups), "group": np.array(group, dtype=np.int64), "en_rec": en_rec, "dis_rec": dis_rec,
            "correct": np.array(self.correct, dtype=bool),
            "has_u": np.array([u is not None for u in self.usage], dtype=bool),
            "tok": np.array([u if u is not None else (0, 0) for u in self.usage], dtype=np.int64).reshape(-1, 2),
            "lat": np.array(self.latency, dtype=np.float64), "n_rec": len(self.slot),
            "shown_rec": np.array(self.shown_rec, dtype=np.int64),
            "shown_skill": np.array(self.shown_skill, dtype=np.int64), "skills": list(self.skills),
        }
        self.keys, self.slot, self.cond, self.correct, self.usage, self.latency = {}, [], [], [], [], []
        self.shown_rec, self.shown_skill, self.skills = [], [], {}
        return self

    def models(self) -> list[str]:
        """The models of the records, as `str` of what they log (sorted)."""
        return sorted({str(m) for m, _ in self.freeze().frozen["groups"]})  # type: ignore[index]

    def report(self, skill_chars: dict[str, int], keep: Any = None) -> CostReport:
        """Cost figures of the pairs whose (model, benchmark), as logged, `keep(model, benchmark)`
        accepts (None: all)."""
        f: dict[str, Any] = self.freeze().frozen  # type: ignore[assignment]
        en_rec, dis_rec = f["en_rec"], f["dis_rec"]
        both = (en_rec >= 0) & (dis_rec >= 0)
        if keep is not None:
            both &= np.array([bool(keep(m, b)) for m, b in f["groups"]], dtype=bool)[f["group"]]
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
    return table.report(skill_chars)


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
        rep = table.report(chars, keep=lambda model, _, m=m: str(model) == m)
        if rep.n_pairs_with_usage:
            out[m] = rep.to_dict()
    if not out:
        return None
    return {"schema": "skillaudit.cost/v1", "method": next(iter(out.values()))["method"].split(" (not")[0],
            "models": out}
