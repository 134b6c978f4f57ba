"""Load once: rank, prune and audit open each run log once, and what they read in that one pass
(pairs, arm records, skill hashes, cost fields, file digests) equals what separate passes read."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from skillaudit.analysis.cost import (
    inputs_cost,
    library_chars,
    read_records,
    skill_costs,
    table_report,
)
from skillaudit.analysis.counterfactual import load_arms
from skillaudit.cli import cli
from skillaudit.errors import RunLogError
from skillaudit.library import load_library
from skillaudit.runs import reader as runs_reader
from skillaudit.runs import workers as runs_workers
from skillaudit.runs.inputs import load_inputs
from skillaudit.runs.provenance import seen_hashes

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = sorted(str(p) for p in (ROOT / "sample_runs").glob("*.jsonl"))
SKILLS = str(ROOT / "skills")

# ---------------------------------------------------------------- counting opens
# Every way Python opens a file by name (open, io.open, Path.open, gzip.open, os.open) raises the
# audit event "open" with the path; a hook counts the events for the paths being watched.
_WATCHED: list[dict[str, int]] = []


def _hook(event: str, args: tuple) -> None:
    if event != "open" or not _WATCHED or isinstance(args[0], int):
        return
    try:
        path = os.path.abspath(os.fsdecode(args[0]))
    except TypeError:
        return
    counts = _WATCHED[-1]
    if path in counts:
        counts[path] += 1


sys.addaudithook(_hook)


@contextlib.contextmanager
def count_opens(paths: list[str]) -> Iterator[dict[str, int]]:
    """{absolute path: times opened} while the block runs (any thread of this process)."""
    counts = {os.path.abspath(p): 0 for p in paths}
    _WATCHED.append(counts)
    try:
        yield counts
    finally:
        _WATCHED.remove(counts)


def _invoke(args: list[str]) -> None:
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output


def test_the_counter_sees_every_way_of_opening(tmp_path):
    """The hook catches a second open: a separate provenance pass after load_inputs counts 2."""
    with count_opens(SAMPLE) as counts:
        load_inputs(SAMPLE)
    assert set(counts.values()) == {1}
    with count_opens(SAMPLE) as counts:
        load_inputs(SAMPLE)
        seen_hashes(SAMPLE)  # the old second pass
    assert set(counts.values()) == {2}
    gz = tmp_path / "a.jsonl.gz"
    gz.write_bytes(gzip.compress(Path(SAMPLE[0]).read_bytes()))
    with count_opens([str(gz)]) as counts:
        with gzip.open(gz) as fh:
            fh.read()
        with open(gz, "rb"), os.fdopen(os.open(gz, os.O_RDONLY), "rb"):
            pass
    assert counts[str(gz)] == 3


@pytest.mark.parametrize("command", [
    ["rank", "--json"],
    ["prune", "--json", "--embedder", "tfidf"],
    ["audit", "--embedder", "tfidf", "--quiet", "--bootstrap", "50", "--regression-bootstrap", "20"],
])
def test_rank_prune_and_audit_open_each_run_log_once(command, tmp_path):
    """The sample runs hold arm records, skill hashes and token usage: all of them come from one
    read of each log (rank also reports cost; audit also hashes each input file)."""
    extra = ["--out", str(tmp_path / "report")] if command[0] == "audit" else []
    with count_opens(SAMPLE) as counts:
        _invoke([command[0], *SAMPLE, "--skills", SKILLS, *command[1:], *extra])
    assert counts == dict.fromkeys(map(os.path.abspath, SAMPLE), 1)


# ---------------------------------------------------------------- the same as separate passes
def test_one_pass_equals_the_separate_passes():
    """Arms, hashes and cost from the one pass equal load_arms, seen_hashes and skill_costs."""
    lib = load_library(SKILLS)
    got = load_inputs(SAMPLE, library=lib, cost=True, digests=True)
    runs = got.runs
    assert runs.n_arm_records > 0 and got.seen_hashes and got.cost_table is not None
    mine, theirs = got.arms(), load_arms(SAMPLE, runs)
    assert mine.names == theirs.names and mine.skills == theirs.skills and mine.excluded == theirs.excluded
    for field in ("arm", "pair", "correct", "mask_seed"):
        assert np.array_equal(getattr(mine, field), getattr(theirs, field)), field
    for field in ("kept", "withheld"):
        assert (getattr(mine, field).to_scipy() != getattr(theirs, field).to_scipy()).nnz == 0
    assert got.seen_hashes == seen_hashes(SAMPLE)
    chars = library_chars(lib)
    assert inputs_cost(got).to_dict() == skill_costs(read_records(SAMPLE), chars).to_dict()
    assert got.digests == {p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in SAMPLE}
    smol = runs.select(model="smollm2-135m-instruct")
    assert np.array_equal(got.arms(smol).pair, load_arms(SAMPLE, smol).pair)


@pytest.mark.parametrize("scanner", [True, False])
def test_byte_ranges_and_gzip_give_the_same(tmp_path, monkeypatch, scanner):
    """--jobs cuts a large plain file into byte ranges read by separate workers (threads with the
    C scanner, processes without); a gzip file is read whole: arm lines keep their line numbers
    and the cost rows their order either way."""
    if not scanner:
        monkeypatch.setattr(runs_reader, "_scan", None)
    log = tmp_path / "all.jsonl"
    log.write_bytes(b"".join(Path(p).read_bytes() for p in SAMPLE))
    gz = tmp_path / "all.jsonl.gz"
    gz.write_bytes(gzip.compress(log.read_bytes()))
    lib = load_library(SKILLS)
    one = load_inputs([str(log)], library=lib, cost=True, digests=True)
    monkeypatch.setattr(runs_workers, "_MIN_UNIT", 4096)  # cut the 0.8 MB file into ranges
    cut = load_inputs([str(log)], library=lib, cost=True, digests=True, jobs=4)
    zipped = load_inputs([str(gz)], library=lib, cost=True, digests=True, jobs=4)
    want = [(f"{log}:{i}", line) for i, line in enumerate(log.read_bytes().splitlines(keepends=True), 1)
            if b'"arm"' in line]
    assert one.arm_lines == cut.arm_lines == tuple(want)
    assert [w.replace(".jsonl:", ".jsonl.gz:") for w, _ in want] == [w for w, _ in zipped.arm_lines]
    assert inputs_cost(one).to_dict() == inputs_cost(cut).to_dict() == inputs_cost(zipped).to_dict()
    assert one.seen_hashes == cut.seen_hashes == zipped.seen_hashes
    assert one.digests == {str(log): hashlib.sha256(log.read_bytes()).hexdigest()}
    assert cut.digests == {}  # ranges: the audit hashes the file itself
    assert zipped.digests == {str(gz): hashlib.sha256(gz.read_bytes()).hexdigest()}  # the compressed bytes


def test_a_bad_arm_record_names_its_line(tmp_path, monkeypatch):
    """An arm record's error names file:line, also when the line is in a later byte range."""
    main = [{"task_id": f"t{i}", "condition": c, "correct": True, "answer": "x" * 200}
            for i in range(60) for c in ("enabled", "disabled")]
    bad = {"task_id": "t1", "condition": "enabled", "correct": True, "arm": "mask", "meta": {"mask_seed": "x"}}
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in [*main, bad]))
    monkeypatch.setattr(runs_workers, "_MIN_UNIT", 4096)
    for jobs in (1, 3):
        got = load_inputs([str(log)], jobs=jobs)
        with pytest.raises(RunLogError, match=rf"runs\.jsonl:{len(main) + 1}: 'meta\.mask_seed' must be an integer"):
            got.arms()


def test_arm_records_from_standard_input(write_jsonl):
    """One pass reads the arm records of a stream too (a second pass could not)."""
    recs = [{"task_id": f"t{i}", "condition": c, "correct": (i + (c == "enabled")) % 2 == 0,
             **({"retrieved": ["s"]} if c == "enabled" else {})}
            for i in range(12) for c in ("enabled", "disabled")]
    recs += [{"task_id": f"t{i}", "condition": "enabled", "correct": True, "arm": "random", "retrieved": ["r"]}
             for i in range(12)]
    text = "".join(json.dumps(r) + "\n" for r in recs)
    res = CliRunner().invoke(cli, ["metrics", "-", "--json", "--bootstrap", "0"], input=text)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["groups"][0]["arms"]["random"]["n"] == 12
    from_file = CliRunner().invoke(cli, ["metrics", str(write_jsonl(recs)), "--json", "--bootstrap", "0"])
    assert json.loads(from_file.output)["groups"] == doc["groups"]


# ---------------------------------------------------------------- cost: the one pass vs the record dicts
def _reference_costs(records: list[dict], chars: dict[str, int]) -> dict:
    """The per-record reading of the cost figures before the one pass (git history of cost.py)."""
    pairs: dict = {}
    for rec in records:
        if rec.get("arm") is not None or rec.get("error") is not None:
            continue
        key = (rec.get("model"), rec.get("benchmark"), rec.get("task_id"), rec.get("epoch", 1))
        pairs.setdefault(key, {})[str(rec.get("condition"))] = rec

    def shown(rec: dict) -> list[str]:
        out: list[str] = []
        for call in rec.get("retrievals") or []:
            if isinstance(call, dict) and not call.get("error"):
                for h in call.get("skills") or []:
                    sid = h.get("id") if isinstance(h, dict) else h
                    if isinstance(sid, str) and sid not in out:
                        out.append(sid)
        return out

    def usage(rec: dict) -> tuple[int, int] | None:
        u = (rec.get("meta") or {}).get("usage")
        if not isinstance(u, dict) or not isinstance(u.get("prompt_tokens"), int):
            return None
        return int(u["prompt_tokens"]), int(u.get("completion_tokens") or 0)

    full = [p for p in pairs.values() if "enabled" in p and "disabled" in p]
    rows = [(sum(chars.get(s, 0) for s in shown(p["enabled"])), usage(p["enabled"]), usage(p["disabled"]))
            for p in full]
    rows = [r for r in rows if r[1] is not None and r[2] is not None]
    counts: dict[str, list[int]] = {}
    for p in full:
        e, d = bool(p["enabled"].get("correct")), bool(p["disabled"].get("correct"))
        for s in shown(p["enabled"]):
            c = counts.setdefault(s, [0, 0, 0])
            c[0], c[1], c[2] = c[0] + 1, c[1] + (e and not d), c[2] + (d and not e)
    lat = [float(p["enabled"]["meta"]["latency_s"]) for p in full
           if isinstance((p["enabled"].get("meta") or {}).get("latency_s"), (int, float))]
    return {"n_pairs": len(full), "n_pairs_with_usage": len(rows), "counts": counts,
            "enabled_prompt": [u[0] for u in (usage(p["enabled"]) for p in full) if u],
            "enabled_latency": lat}


def _odd_records(fallback: bool) -> list[dict | str]:
    """Pairs with odd shapes: a `retrieved` shorthand, a failed call, condition aliases, a missing
    model, a boolean or float token count; `fallback`: also a blank line and a meta that is not
    an object (which the typed reading of a block does not take: that block is read as dicts)."""
    recs: list[dict | str] = []
    for i in range(40):
        sk = [f"s{i % 4}", {"id": f"s{(i + 1) % 4}", "score": 1.0}]
        calls = [{"query": "q", "skills": sk, "error": None}, {"query": "q2", "skills": ["s9"], "error": "boom"}]
        en = {"task_id": f"t{i}", "model": "m", "condition": "on" if i == 7 else "enabled",
              "correct": i % 3 == 0, "retrievals": calls,
              "meta": {"usage": {"prompt_tokens": 900 + 37 * (i % 7) + (i % 4) * 11,
                                 "completion_tokens": 20.7 if i == 3 else 20}, "latency_s": 1.5 + i / 10}}
        dis = {"task_id": f"t{i}", "model": "m", "condition": "off" if i == 7 else "disabled",
               "correct": i % 4 == 0, "meta": {"usage": {"prompt_tokens": 800 + i}, "latency_s": True}}
        if i % 5 == 0:
            del en["model"], dis["model"]
        if i == 11:
            en["retrieved"] = ["s3"]
        if i == 13:
            dis["meta"] = {"usage": {"prompt_tokens": False}}
        if i == 17:
            dis["meta"] = "not an object" if fallback else {}
        recs += [en, dis]
        if i == 20 and fallback:
            recs.append("   ")
    recs.append({"task_id": "t0", "condition": "enabled", "correct": True, "arm": "random"})
    return recs


@pytest.mark.parametrize("fallback", [False, True])
def test_cost_fields_of_every_shape(write_jsonl, fallback, monkeypatch):
    """The cost fields kept in the one pass give the figures the per-record reading gave (with
    `fallback`, in blocks of ~2 KB: typed blocks and blocks read as dicts, in reading order)."""
    if fallback:
        monkeypatch.setattr(runs_reader, "_BLOCK", 2048)
    path = write_jsonl(_odd_records(fallback))
    chars = {"s0": 100, "s1": 250, "s2": 400, "s3": 1000}
    got = table_report(load_inputs([str(path)], cost=True).cost_table, chars)
    dicts = read_records([str(path)])
    for r in dicts:  # the old reading failed on a meta that is not an object; now it means "no meta"
        if not isinstance(r.get("meta", {}), dict):
            r["meta"] = {}
    ref = _reference_costs(dicts, chars)
    assert (got.n_pairs, got.n_pairs_with_usage) == (ref["n_pairs"], ref["n_pairs_with_usage"]) == (39, 38)
    assert {s.skill_id: [s.injections, s.b, s.c] for s in got.skills if s.injections} == ref["counts"]
    assert "s9" not in ref["counts"] and ref["counts"]["s3"][0] == 19  # a failed call's skills are not shown
    assert got.per_condition["enabled"]["prompt_tokens"] == round(float(np.mean(ref["enabled_prompt"])), 2)
    assert got.per_condition["enabled"]["latency_s"] == round(float(np.mean(ref["enabled_latency"])), 2)
    assert got.tokens_per_char is not None
    assert got.to_dict() == skill_costs(dicts, chars).to_dict()  # the one pass = the dict reading


def test_validate_checks_arm_records_too(write_jsonl):
    """validate reads the logs through load_inputs: a bad arm record is one line naming it, exit 2."""
    recs = [{"task_id": "t1", "condition": c, "correct": True} for c in ("enabled", "disabled")]
    good = write_jsonl([*recs, {"task_id": "t1", "condition": "enabled", "correct": True, "arm": "random"}], "good.jsonl")
    bad = write_jsonl([*recs, {"task_id": "t1", "condition": "enabled", "correct": True, "arm": "mask",
                               "meta": {"mask_seed": "x"}}], "bad.jsonl")
    ok = CliRunner().invoke(cli, ["validate", str(good)])
    assert ok.exit_code == 0 and ok.output.startswith("runs: 1 pairs"), ok.output
    res = CliRunner().invoke(cli, ["validate", str(bad)])
    assert res.exit_code == 2
    assert res.output.strip().splitlines()[-1] == f"Error: {bad}:3: 'meta.mask_seed' must be an integer"


def test_leaks_are_found_in_either_key_order_and_only_when_asked(tmp_path):
    """A disabled record whose retrievals name a skill is a leak whether `condition` comes before or
    after `retrievals` and whether the skill is an id or an object; a disabled record with an empty
    list is none; the scan runs only with integrity=True (the audit and check ask for it)."""
    from skillaudit.runs.inputs import load_inputs

    lines = [
        {"task_id": "a", "condition": "enabled", "correct": True, "retrievals": []},
        {"task_id": "a", "condition": "disabled", "correct": False, "retrievals": [{"skills": ["s1"]}]},
        {"task_id": "b", "condition": "enabled", "correct": True, "retrievals": []},
        {"retrievals": [{"skills": [{"id": "s2", "score": 1.0}]}], "task_id": "b", "condition": "off",
         "correct": False},
        {"task_id": "c", "condition": "enabled", "correct": True, "retrievals": []},
        {"task_id": "c", "condition": "disabled", "correct": False, "retrievals": [{"skills": []}]},
    ]
    log = tmp_path / "r.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    issues = load_inputs([str(log)], integrity=True).arm_issues
    assert [(kind, key[2], skills, where) for kind, key, skills, where in issues] == [
        ("leak", "a", ("s1",), f"{log}:2"), ("leak", "b", ("s2",), f"{log}:4")]
    assert load_inputs([str(log)]).arm_issues == ()
