"""Pairing: the parts read (per-record columns, `runs.reader`) become `PairedRuns`.

Vocabularies are merged and columns concatenated once; each record gets the slot of its (model,
benchmark, task, epoch) key; a repeated key and condition is the error a one-by-one reader meets
first; a slot seen in both conditions, without a harness error, is a pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from skillaudit.errors import RunLogError, UnpairedError
from skillaudit.runs.paired import PairedRuns
from skillaudit.runs.reader import _REC_DTYPES, _RET_DTYPES, _VOCAB_OF, _Interner
from skillaudit.runs.records import (
    ADHERENCE_UNKNOWN,
    DISABLED,
    ENABLED,
    JUDGE_AA_NONE,
    PREFERENCE_NONE,
)
from skillaudit.stats._csr import Csr, indptr_of


def _remap(vocab: _Interner, names: tuple[str, ...]) -> np.ndarray:
    return np.fromiter(map(vocab.__getitem__, names), np.int32, len(names))


def _concat(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One part from parts read in order: vocabularies merged in first-seen order, ids remapped,
    every column concatenated once."""
    def joined(chunks: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype)

    if len(parts) == 1:  # its vocabularies are already in first-seen order
        p = parts[0]
        merged = {k: joined(p[k], dt) for k, dt in _REC_DTYPES.items()}
        merged.update({f"r_{k}": joined(p[f"r_{k}"], dt) for k, dt in _RET_DTYPES.items()})
        merged.update({k: p[k] for k in ("models", "benchmarks", "tasks", "skills", "names", "error")})
        merged["n_arm"] = p.get("n_arm", 0)
        merged["hash"] = p.get("hash", True)
        return merged
    vocabs = {k: _Interner() for k in ("models", "benchmarks", "tasks", "skills")}
    out: dict[str, list[np.ndarray]] = {k: [] for k in (*_REC_DTYPES, *(f"r_{k}" for k in _RET_DTYPES))}
    names: dict[int, str] = {}
    base = 0
    for p in parts:
        for field_ in _REC_DTYPES:
            vocab = _VOCAB_OF.get(field_)
            if vocab is None:
                out[field_] += p[field_]
            else:
                ids = _remap(vocabs[vocab], p[vocab])
                out[field_] += [ids[chunk] for chunk in p[field_]]
        ids = _remap(vocabs["skills"], p["skills"])
        out["r_col"] += [ids[chunk] for chunk in p["r_col"]]
        out["r_rec"] += [chunk + base for chunk in p["r_rec"]]
        out["r_rk"] += p["r_rk"]
        out["r_sc"] += p["r_sc"]
        names.update(p["names"])
        base += p["n"]
    merged: dict[str, Any] = {k: joined(out[k], _REC_DTYPES[k]) for k in _REC_DTYPES}
    merged.update({f"r_{k}": joined(out[f"r_{k}"], dt) for k, dt in _RET_DTYPES.items()})
    merged.update({k: v.vocab() for k, v in vocabs.items()})
    merged.update(names=names, error=None, n_arm=sum(p.get("n_arm", 0) for p in parts),
                  hash=any(p.get("hash", True) for p in parts))
    return merged


def _first_error(parts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """The parts a one-by-one reader would have read before its first error, and that error."""
    for i, p in enumerate(parts):
        if p["error"] is not None:
            return parts[: i + 1], p["error"]
    return parts, None


def _slots(r: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Slot of each record (keys numbered in first-seen order) and each slot's first record."""
    n = r["m"].size
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    e = r["e"]
    if int(e.max()) <= n:  # small epochs (the usual 1..k) index directly
        e_ix, n_e = e - 1, int(e.max())
    else:
        ue, e_ix = np.unique(e, return_inverse=True)
        e_ix, n_e = e_ix.ravel(), ue.size
    sizes = [max(len(r["models"]), 1), max(len(r["benchmarks"]), 1), max(len(r["tasks"]), 1), max(n_e, 1)]
    space = float(np.prod(np.array(sizes, dtype=np.float64)))
    if space < 2**62:
        key = ((r["m"].astype(np.int64) * sizes[1] + r["b"]) * sizes[2] + r["t"]) * sizes[3] + e_ix
        if space <= 4 * n:  # a table over the key space: no sort
            first_at = np.full(int(space), n, np.int64)
            np.minimum.at(first_at, key, np.arange(n))
            first = np.flatnonzero(first_at[key] == np.arange(n))  # first records, in reading order
            slot_of_key = np.empty(int(space), np.int64)
            slot_of_key[key[first]] = np.arange(first.size)
            return slot_of_key[key], first
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    else:  # pragma: no cover - astronomically many distinct keys
        _, first, inv = np.unique(np.stack([r["m"], r["b"], r["t"], e_ix], 1), axis=0,
                                  return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    slot_of = np.empty_like(order)
    slot_of[order] = np.arange(order.size)
    return slot_of[inv.ravel()], first[order]


def _duplicate(r: dict[str, Any], slot: np.ndarray) -> RunLogError | None:
    """The error a one-by-one reader raises first: the earliest record whose key and condition repeat."""
    cond_slot = slot * 2 + r["en"]
    if cond_slot.size == 0 or np.bincount(cond_slot).max() < 2:  # the usual case, without a sort
        return None
    order = np.argsort(cond_slot, kind="stable")  # each (slot, condition) group in reading order
    cs = cond_slot[order]
    again = np.flatnonzero(cs[1:] == cs[:-1]) + 1
    if again.size == 0:
        return None
    second = order[again]
    j = int(again[np.argmin(second)])  # sorted position of the earliest repeat
    k = int(order[j])
    start = j
    while start > 0 and cs[start - 1] == cs[j]:
        start -= 1
    f = int(order[start])
    names = r["names"]
    return RunLogError(
        f"{names[int(r['file'][k])]}:{int(r['line'][k])}: duplicate "
        f"{'enabled' if r['en'][k] else 'disabled'} record for model={r['models'][r['m'][k]]!r} "
        f"benchmark={r['benchmarks'][r['b'][k]]!r} task_id={r['tasks'][r['t'][k]]!r} "
        f"epoch={int(r['e'][k])} (first at {names[int(r['file'][f])]}:{int(r['line'][f])})"
    )


def _pair(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-slot arrays (what _paired reads) from the parts' records; raises the first error."""
    parts, error = _first_error(parts)
    r = _concat(parts)
    slot, first = _slots(r)
    n = first.size
    dup = _duplicate(r, slot)
    if dup is not None:  # a repeat before the bad line is what reading one by one meets first
        raise dup
    if error is not None:
        raise RunLogError(error)
    en_ix, dis_ix = np.flatnonzero(r["en"]), np.flatnonzero(~r["en"])  # positions, taken once
    es, ds = slot[en_ix], slot[dis_ix]
    seen = np.zeros(n, np.uint8)
    seen[es] |= np.where(r["err"][en_ix], 5, 1).astype(np.uint8)
    seen[ds] |= np.where(r["err"][dis_ix], 6, 2).astype(np.uint8)
    y_pos, y_neg, invoked = np.zeros(n, np.uint8), np.zeros(n, np.uint8), np.zeros(n, np.uint8)
    y_pos[es], y_neg[ds], invoked[es] = r["ok"][en_ix], r["ok"][dis_ix], r["inv"][en_ix]
    use_logged = np.ones(n, bool)
    use_logged[es] = r["ul"][en_ix]
    pref = np.full(n, PREFERENCE_NONE, np.int8)
    pref[es] = r["pref"][en_ix]
    aa = np.full(n, JUDGE_AA_NONE, np.int8)
    aa[es] = r["aa"][en_ix]
    adh = np.full(n, ADHERENCE_UNKNOWN, np.int8)
    adh[es] = r["adh"][en_ix]
    src = (np.full(n, -1, np.int32), np.full(n, -1, np.int32))
    line = (np.zeros(n, np.int64), np.zeros(n, np.int64))
    src[1][es], line[1][es] = r["file"][en_ix], r["line"][en_ix]
    src[0][ds], line[0][ds] = r["file"][dis_ix], r["line"][dis_ix]
    return {
        "models": r["models"], "benchmarks": r["benchmarks"], "tasks": r["tasks"], "skills": r["skills"],
        "m": r["m"][first], "b": r["b"][first], "t": r["t"][first], "e": r["e"][first],
        "seen": seen, "y_pos": y_pos, "y_neg": y_neg, "invoked": invoked, "adh": adh,
        "src": src, "line": line, "rows": slot[r["r_rec"]].astype(np.int32), "cols": r["r_col"],
        "rk": r["r_rk"], "sc": r["r_sc"], "names": r["names"], "n_arm": r.get("n_arm", 0),
        "hash": r.get("hash", True), "ul": use_logged, "pref": pref, "aa": aa,
    }


def _paired(p: dict[str, Any], strict: bool) -> PairedRuns:
    seen_arr = p["seen"]
    names = p["names"]
    both = (seen_arr & 3) == 3
    errored = (seen_arr & 4) != 0
    keep = both & ~errored
    unpaired = np.flatnonzero(~both)
    examples = []
    if unpaired.size:
        for s in unpaired[:5]:
            only = "enabled" if seen_arr[s] & 1 else "disabled"
            c = ENABLED if only == "enabled" else DISABLED
            examples.append(
                f"{names[int(p['src'][c][s])]}:{int(p['line'][c][s])}: {p['models'][p['m'][s]]}/"
                f"{p['benchmarks'][p['b'][s]]}/{p['tasks'][p['t'][s]]} epoch {int(p['e'][s])} "
                f"has only its {only} record"
            )
        if strict:
            raise UnpairedError(
                f"{examples[0]} ({unpaired.size} unpaired record(s); drop --strict to leave them out)"
            )
    n_slots = seen_arr.size
    idx = np.flatnonzero(keep)
    # the kept slots' retrieved skills, straight into CSR (rows in pair order, columns sorted);
    # a slot's skills come from its one enabled record, already deduplicated
    row_of = np.full(n_slots, -1, np.int64)
    row_of[idx] = np.arange(idx.size)
    rows = row_of[p["rows"]]
    sel = np.flatnonzero(rows >= 0)
    shape = (idx.size, len(p["skills"]))
    # the items in (row, column) order: one stable sort of a combined key (the items arrive
    # nearly in row order, which the sort exploits)
    r_sel = rows[sel]
    order = sel[np.argsort(r_sel * shape[1] + p["cols"][sel], kind="stable")]
    hits = Csr(p["rk"][order], p["cols"][order].astype(np.int32), indptr_of(r_sel, shape[0]), shape)
    return PairedRuns(
        models=tuple(p["models"]), benchmarks=tuple(p["benchmarks"]), tasks=tuple(p["tasks"]),
        skills=tuple(p["skills"]),
        model=p["m"][idx].astype(np.int32), benchmark=p["b"][idx].astype(np.int32),
        task=p["t"][idx].astype(np.int32), epoch=p["e"][idx].astype(np.int32),
        y_pos=p["y_pos"][idx].astype(bool), y_neg=p["y_neg"][idx].astype(bool),
        invoked=p["invoked"][idx].astype(bool), adhered=p["adh"][idx].copy(),
        retrieval=hits, retrieval_scores=p["sc"][order],
        n_unpaired=int(unpaired.size), unpaired_examples=tuple(examples),
        n_error_pairs=int((both & errored).sum()), sources=tuple(names[i] for i in sorted(names)),
        n_arm_records=int(p.get("n_arm", 0)), skill_hashes=bool(p.get("hash", True)),
        use_logged=None if p["ul"][idx].all() else p["ul"][idx].copy(),
        preference=None if (p["pref"][idx] == PREFERENCE_NONE).all() else p["pref"][idx].copy(),
        judge_aa=None if (p["aa"][idx] == JUDGE_AA_NONE).all() else p["aa"][idx].copy(),
    )
