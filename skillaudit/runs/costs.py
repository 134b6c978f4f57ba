"""The cost columns of main records, read once while the run logs are read (`inputs.load_inputs`
with `cost=True`) or from dicts (`add_record`): what `skillaudit.analysis.cost` computes its figures
from (`table_report`).
"""

from __future__ import annotations

import math
from itertools import chain, repeat
from operator import attrgetter, is_not
from typing import Any

import numpy as np

from skillaudit.runs.records import fired_of


def _shown(rec: dict[str, Any]) -> list[str]:
    """Skills an enabled record was shown in full, first time each (logged order)."""
    return fired_of(rec.get("retrievals") or [])


def _cached_of(u: Any) -> float:
    """Cached prompt tokens (`cached_tokens`, or OpenAI's `prompt_tokens_details.cached_tokens`), nan if not logged."""
    if not isinstance(u, dict):
        return np.nan
    c = u.get("cached_tokens")
    if c is None and isinstance(u.get("prompt_tokens_details"), dict):
        c = u["prompt_tokens_details"].get("cached_tokens")
    return float(c) if isinstance(c, int) and not isinstance(c, bool) and c >= 0 else np.nan


def _usage_of(u: Any) -> tuple[int, int] | None:
    if not isinstance(u, dict) or not isinstance(u.get("prompt_tokens"), int):
        return None
    return int(u["prompt_tokens"]), int(u.get("completion_tokens") or 0)


_NO_USAGE = (0, 0)


def _number(v: Any) -> float:
    """A finite logged number as a float, else nan (not logged)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else np.nan


def _latency_of(meta: Any) -> float:
    lat = None if meta is None else meta.latency_s
    return float(lat) if isinstance(lat, (int, float)) else np.nan


def _interned(local: np.ndarray, vocab: list[str], ids: dict[Any, int]) -> np.ndarray:
    """Block-local ids (-1: None) as ids of `ids`, interned in the order the records first use them."""
    uniq, first = np.unique(local, return_index=True)
    to = np.empty(len(vocab) + 1, np.int64)  # the last slot is -1's: None
    for u in uniq[np.argsort(first, kind="stable")].tolist():
        to[u] = ids[vocab[u] if u >= 0 else None]
    return to[local]


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
_USAGE, _COST_USD, _TURNS, _SCORE, _TIMEOUT = (attrgetter(a) for a in ("usage", "cost_usd", "turns", "score", "timeout"))


class _Meta:
    __slots__ = ("cost_usd", "latency_s", "timeout", "turns", "usage")

    def __init__(self, meta: dict[str, Any]) -> None:
        self.usage, self.latency_s, self.timeout = meta.get("usage"), meta.get("latency_s"), meta.get("timeout")
        self.cost_usd, self.turns = meta.get("cost_usd"), meta.get("turns")


class _Rec:
    """A record read as a dict, shaped like skillaudit.runs.inputs' typed records."""

    __slots__ = (*_FIELDS, "arm", "error", "meta", "score", "shown")

    def __init__(self, rec: dict[str, Any]) -> None:
        self.arm, self.error = rec.get("arm"), rec.get("error")
        self.model, self.benchmark, self.task_id = rec.get("model"), rec.get("benchmark"), rec.get("task_id")
        self.epoch, self.condition, self.correct = rec.get("epoch", 1), rec.get("condition"), rec.get("correct")
        self.score = rec.get("score")
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
        self.timeouts = _Ids()  # `meta.timeout` labels (what limited the run's time), None first-seen too
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in ("m", "b", "t", "e", "cond", "ok", "hu", "tok",
                                                                  "lat", "tmo", "score", "srec", "sskill",
                                                                  "cached", "usd", "turns")}
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
        # fields many logs never carry: one C-level pass says so, and the column is filled without a
        # Python call per record
        present = [m for m in metas if m is not None]
        logged = any(map(is_not, map(_USAGE, present), repeat(None)))
        if logged:
            usage = [None if m is None or m.usage is None else _usage_of(m.usage) for m in metas]
            c["hu"].append(np.fromiter(map(is_not, usage, repeat(None)), bool, n))
            c["tok"].append(np.fromiter(chain.from_iterable(u or _NO_USAGE for u in usage), np.int64,
                                        2 * n).reshape(n, 2))
        else:
            c["hu"].append(np.zeros(n, bool))
            c["tok"].append(np.zeros((n, 2), np.int64))
        c["lat"].append(np.fromiter(map(_latency_of, metas), np.float64, n))
        c["cached"].append(np.fromiter((np.nan if m is None else _cached_of(m.usage) for m in metas), np.float64, n)
                           if logged else np.full(n, np.nan))
        for col, get in (("usd", _COST_USD), ("turns", _TURNS)):
            c[col].append(np.fromiter((np.nan if m is None else _number(get(m)) for m in metas), np.float64, n)
                          if any(map(is_not, map(get, present), repeat(None))) else np.full(n, np.nan))
        c["score"].append(np.fromiter(map(_number, map(_SCORE, main)), np.float64, n)
                          if any(map(is_not, map(_SCORE, main), repeat(None))) else np.full(n, np.nan))
        tmo = self.timeouts
        if any(map(is_not, map(_TIMEOUT, present), repeat(None))):
            c["tmo"].append(np.fromiter((tmo[m.timeout if m is not None and isinstance(m.timeout, str) else None]
                                         for m in metas), np.int64, n))
        else:
            c["tmo"].append(np.full(n, tmo[None], np.int64))
        skills = self.skills
        rec, col = [], []
        for k, r in enumerate(main):
            if r.shown and cond[k] == 0:
                rec += [k] * len(r.shown)
                col += map(skills.__getitem__, r.shown)
        c["srec"].append(np.array(rec, dtype=np.int64) + self.n)
        c["sskill"].append(np.array(col, dtype=np.int64))
        self.n += n

    def add_columns(self, cols: tuple[Any, ...]) -> None:
        """A block's columns from the C scanner (`skillaudit.runs._scan.costs`): block-local ids
        (-1: not logged) are interned into the vocabularies in the order the records first use
        them, so the table equals the one `add_block` builds from the same records."""
        self._flush()
        (n, m, b, t, tmo, e, cond, ok, hu, tok, lat, cached, usd, turns, score, srec, sskill,
         v_m, v_b, v_t, v_tmo, v_s) = cols
        if not n:
            return
        c = self.cols
        for col, vocab, ids, raw in (("m", v_m, self.ids["model"], m), ("b", v_b, self.ids["benchmark"], b),
                                     ("t", v_t, self.ids["task_id"], t), ("tmo", v_tmo, self.timeouts, tmo)):
            c[col].append(_interned(np.frombuffer(raw, np.int32), vocab, ids))
        c["e"].append(np.frombuffer(e, np.int64))
        c["cond"].append(np.frombuffer(cond, np.int8))
        c["ok"].append(np.frombuffer(ok, bool))
        c["hu"].append(np.frombuffer(hu, bool))
        c["tok"].append(np.frombuffer(tok, np.int64).reshape(n, 2))
        for col, raw in (("lat", lat), ("cached", cached), ("usd", usd), ("turns", turns), ("score", score)):
            c[col].append(np.frombuffer(raw, np.float64))
        skills = self.skills
        smap = np.fromiter(map(skills.__getitem__, v_s), np.int64, len(v_s))
        c["srec"].append(np.frombuffer(srec, np.int64) + self.n)
        c["sskill"].append(smap[np.frombuffer(sskill, np.int64)])
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
        tmo_map = np.array([self.timeouts[x] for x in other.timeouts], dtype=np.int64)
        for k, chunks in other.cols.items():
            f = {"m": "model", "b": "benchmark", "t": "task_id"}.get(k)
            if f is not None:
                chunks = [remap[f][x] for x in chunks]
            elif k == "sskill":
                chunks = [skill_map[x] for x in chunks]
            elif k == "tmo":
                chunks = [tmo_map[x] for x in chunks]
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
            "t": r["t"][first],
            "en_rec": en_rec, "dis_rec": dis_rec, "correct": joined("ok", bool), "has_u": joined("hu", bool),
            "tok": joined("tok", np.int64, (2,)), "lat": joined("lat", np.float64), "n_rec": self.n,
            "timeout": joined("tmo", np.int64), "timeouts": list(self.timeouts),
            "score": joined("score", np.float64), "cached": joined("cached", np.float64),
            "usd": joined("usd", np.float64), "turns": joined("turns", np.float64),
            "shown_rec": joined("srec", np.int64), "shown_skill": joined("sskill", np.int64),
            "skills": list(self.skills),
        }
        self.cols = {k: [] for k in self.cols}
        return self

    def models(self) -> list[str]:
        """The models of the records, as `str` of what they log (sorted)."""
        f: dict[str, Any] = self.freeze().frozen  # type: ignore[assignment]
        return sorted({str(f["models"][i]) for i in np.unique(f["m"]).tolist()})
