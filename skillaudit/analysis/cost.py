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
from operator import attrgetter
from typing import Any

import numpy as np

from skillaudit.errors import InputError


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


def _latency_of(meta: Any) -> float:
    lat = None if meta is None else meta.latency_s
    return float(lat) if isinstance(lat, (int, float)) else np.nan


class _Ids(dict):
    """Values (any hashable) -> ids in first-seen order."""

    def __missing__(self, key: Any) -> int:
        value = self[key] = len(self)
        return value


class _Cond(dict):
    def __missing__(self, key: Any) -> int:
        return 2  # any other condition: such a record is in no pair here


_COND = _Cond(enabled=0, disabled=1)
_FIELDS = ("model", "benchmark", "task_id", "epoch", "condition", "correct")
_GET = {f: attrgetter(f) for f in (*_FIELDS, "meta")}


class _Meta:
    __slots__ = ("latency_s", "usage")

    def __init__(self, meta: dict[str, Any]) -> None:
        self.usage, self.latency_s = meta.get("usage"), meta.get("latency_s")


class _Rec:
    """A record read as a dict, shaped like skillaudit.runs.inputs' typed records."""

    __slots__ = (*_FIELDS, "arm", "error", "meta", "shown")

    def __init__(self, rec: dict[str, Any]) -> None:
        self.arm, self.error = rec.get("arm"), rec.get("error")
        self.model, self.benchmark, self.task_id = rec.get("model"), rec.get("benchmark"), rec.get("task_id")
        self.epoch, self.condition, self.correct = rec.get("epoch", 1), rec.get("condition"), rec.get("correct")
        meta = rec.get("meta") or {}
        self.meta = _Meta(meta if isinstance(meta, dict) else {})
        self.shown = _shown(rec) if str(self.condition) == "enabled" else None


class CostTable:
    """The fields the cost figures read of main records, as columns, in reading order.

    Per record: its pair key (model, benchmark, task_id, epoch, as logged: a missing model is
    None, not "default"), condition, correct, prompt and completion tokens (`meta.usage`),
    latency (`meta.latency_s`), and for enabled records the skills shown in full (calls without
    an error). Arm and error records are left out. `load_inputs(cost=True)` fills one while it
    reads the logs (`add_block`); `skill_costs` fills one from dicts (`add_record`). `freeze`
    joins the columns into arrays and numbers the pairs (what `report` reads).
    """

    frozen: dict[str, Any] | None = None

    def __init__(self) -> None:
        self.ids = {f: _Ids() for f in ("model", "benchmark", "task_id")}  # raw values -> ids
        self.skills = _Ids()
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in ("m", "b", "t", "e", "cond", "ok", "hu", "tok",
                                                                  "lat", "srec", "sskill")}
        self.n = 0
        self._pending: list[_Rec] = []

    def __len__(self) -> int:
        self._flush()
        return self.n

    def add_block(self, recs: list[Any]) -> None:
        """Records decoded into objects with the fields as attributes (`meta`: an object with
        `usage` and `latency_s`, or None; `shown`: the skills shown in full, or None)."""
        self._flush()
        self._add(recs)

    def _add(self, recs: list[Any]) -> None:
        main = [r for r in recs if r.arm is None and r.error is None]
        n = len(main)
        if not n:
            return
        c, ids = self.cols, self.ids
        for col, f in (("m", "model"), ("b", "benchmark"), ("t", "task_id")):
            c[col].append(np.fromiter(map(ids[f].__getitem__, map(_GET[f], main)), np.int64, n))
        c["e"].append(np.fromiter(map(_GET["epoch"], main), np.int64, n))
        cond = np.fromiter(map(_COND.__getitem__, map(str, map(_GET["condition"], main))), np.int8, n)
        c["cond"].append(cond)
        c["ok"].append(np.fromiter(map(bool, map(_GET["correct"], main)), bool, n))
        metas = list(map(_GET["meta"], main))
        usage = [None if m is None or m.usage is None else _usage_of(m.usage) for m in metas]
        c["hu"].append(np.fromiter((u is not None for u in usage), bool, n))
        c["tok"].append(np.array([u or (0, 0) for u in usage], dtype=np.int64).reshape(n, 2))
        c["lat"].append(np.fromiter(map(_latency_of, metas), np.float64, n))
        skills = self.skills
        rec, col = [], []
        for k, r in enumerate(main):
            if r.shown and cond[k] == 0:
                rec += [k] * len(r.shown)
                col += map(skills.__getitem__, r.shown)
        c["srec"].append(np.array(rec, dtype=np.int64) + self.n)
        c["sskill"].append(np.array(col, dtype=np.int64))
        self.n += n

    def add_record(self, rec: dict[str, Any]) -> None:
        """A record as a dict (arm and error records are skipped)."""
        if rec.get("arm") is None and rec.get("error") is None:
            self._pending.append(_Rec(rec))
            if len(self._pending) >= 4096:
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, []
            self._add(pending)

    def extend(self, other: CostTable) -> None:
        """Append the records of `other` (read after these)."""
        self._flush()
        other._flush()
        remap = {f: np.array([self.ids[f][v] for v in other.ids[f]], dtype=np.int64)
                 for f in ("model", "benchmark", "task_id")}
        skill_map = np.array([self.skills[s] for s in other.skills], dtype=np.int64)
        for k, chunks in other.cols.items():
            f = {"m": "model", "b": "benchmark", "t": "task_id"}.get(k)
            if f is not None:
                chunks = [remap[f][x] for x in chunks]
            elif k == "sskill":
                chunks = [skill_map[x] for x in chunks]
            elif k == "srec":
                chunks = [x + self.n for x in chunks]
            self.cols[k] += chunks
        self.n += other.n

    def freeze(self) -> CostTable:
        """The columns as arrays; each pair numbered in first-seen order (`runs.pairing._slots`)."""
        if self.frozen is not None:
            return self
        self._flush()
        from skillaudit.runs.pairing import _slots

        def joined(k: str, dtype: Any, shape: tuple[int, ...] = ()) -> np.ndarray:
            return np.concatenate(self.cols[k]) if self.cols[k] else np.zeros((0, *shape), dtype)

        r = {"m": joined("m", np.int64), "b": joined("b", np.int64), "t": joined("t", np.int64),
             "e": joined("e", np.int64), "models": list(self.ids["model"]),
             "benchmarks": list(self.ids["benchmark"]), "tasks": list(self.ids["task_id"])}
        slot, first = _slots(r)
        cond = joined("cond", np.int8)
        en_rec, dis_rec = np.full(first.size, -1, np.int64), np.full(first.size, -1, np.int64)
        for rec_of, c in ((en_rec, 0), (dis_rec, 1)):
            at = np.flatnonzero(cond == c)
            rec_of[slot[at]] = at
        self.frozen = {
            "models": r["models"], "benchmarks": r["benchmarks"], "m": r["m"][first], "b": r["b"][first],
            "en_rec": en_rec, "dis_rec": dis_rec, "correct": joined("ok", bool), "has_u": joined("hu", bool),
            "tok": joined("tok", np.int64, (2,)), "lat": joined("lat", np.float64), "n_rec": self.n,
            "shown_rec": joined("srec", np.int64), "shown_skill": joined("sskill", np.int64),
            "skills": list(self.skills),
        }
        self.cols = {k: [] for k in self.cols}
        return self

    def models(self) -> list[str]:
        """The models of the records, as `str` of what they log (sorted)."""
        f: dict[str, Any] = self.freeze().frozen  # type: ignore[assignment]
        return sorted({str(f["models"][i]) for i in np.unique(f["m"]).tolist()})

    def report(self, skill_chars: dict[str, int], keep: Any = None) -> CostReport:
        """Cost figures of the pairs whose (model, benchmark), as logged, `keep(model, benchmark)`
        accepts (None: all)."""
        f: dict[str, Any] = self.freeze().frozen  # type: ignore[assignment]
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
    return table.report(skill_chars)


def library_chars(library: Any) -> dict[str, int]:
    """Characters each skill takes when injected (as `search_skills` renders it)."""
    from skillaudit.agents.retrieve import render_skill

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
