"""Run-log reading and pairing (DESIGN §3.1)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from _factories import pair

from skillaudit.errors import RunLogError, UnpairedError
from skillaudit.library import Library, Skill
from skillaudit.runs import load_runs


def test_pairs_on_model_benchmark_task_epoch(write_jsonl):
    """Records pair on (model, benchmark, task_id, epoch), whatever their order in the file."""
    recs = pair("t1", True, False, model="m", benchmark="b") + pair("t1", False, False, model="m", benchmark="b", epoch=2)
    recs += pair("t1", True, True, model="m2", benchmark="b")
    runs = load_runs([write_jsonl(list(reversed(recs)))])
    assert runs.n_pairs == 3
    key = {(runs.models[m], e): (bool(p), bool(n)) for m, e, p, n in zip(runs.model, runs.epoch, runs.y_pos, runs.y_neg, strict=True)}
    assert key == {("m", 1): (True, False), ("m", 2): (False, False), ("m2", 1): (True, True)}


def test_condition_aliases_and_integer_correct(write_jsonl):
    """on/off and skills_on/skills_off are accepted, and correct may be 0/1."""
    recs = [
        {"task_id": "a", "condition": "on", "correct": 1},
        {"task_id": "a", "condition": "off", "correct": 0},
        {"task_id": "b", "condition": "skills_on", "correct": 0},
        {"task_id": "b", "condition": "skills_off", "correct": True},
    ]
    runs = load_runs([write_jsonl(recs)])
    assert runs.flip.tolist() == [1, -1]
    assert runs.models == ("default",) and runs.benchmarks == ("default",)


def test_retrieved_set_is_deduplicated_in_rank_order(write_jsonl):
    """Skills from several calls form one set, ranked by first appearance, scores kept (max)."""
    on = {
        "task_id": "t", "condition": "enabled", "correct": True,
        "retrievals": [
            {"query": "x", "skills": [{"id": "b", "score": 2.0}, {"id": "a", "score": 1.0}], "error": None},
            {"query": "y", "skills": [{"id": "a", "score": 5.0}, {"id": "c", "score": 0.5}], "error": None},
        ],
    }
    runs = load_runs([write_jsonl([on, {"task_id": "t", "condition": "disabled", "correct": False}])])
    row = runs.ranks.getrow(0)
    got = {runs.skills[j]: int(v) for j, v in zip(row.indices, row.data, strict=True)}
    assert got == {"b": 1, "a": 2, "c": 3}
    srow = runs.scores.getrow(0)
    scores = {runs.skills[j]: float(v) for j, v in zip(srow.indices, srow.data, strict=True)}
    assert scores == {"b": 2.0, "a": 5.0, "c": 0.5}
    assert runs.retrieved.tolist() == [True] and runs.invoked.tolist() == [True]


def test_invoked_without_results_is_not_in_s_call(write_jsonl):
    """A call that returned no skill counts as invoked but not retrieved."""
    recs = pair("t", True, False, retrieved=[]) + pair("u", True, False)
    runs = load_runs([write_jsonl(recs)])
    assert runs.invoked.tolist() == [True, False]
    assert runs.retrieved.tolist() == [False, False]


def test_retrieved_shorthand_is_one_call(write_jsonl):
    """`retrieved: [ids]` is read as one call that returned those skills."""
    recs = [{"task_id": "t", "condition": "on", "correct": True, "retrieved": ["x", "y"]},
            {"task_id": "t", "condition": "off", "correct": True}]
    runs = load_runs([write_jsonl(recs)])
    assert runs.skills == ("x", "y") and runs.ranks.toarray().tolist() == [[1.0, 2.0]]


def test_unpaired_records_are_counted_and_left_out(write_jsonl):
    """A record without its other condition is left out, counted, and named in an example."""
    recs = [*pair("t", True, True), {"task_id": "lonely", "condition": "enabled", "correct": True}]
    path = write_jsonl(recs)
    runs = load_runs([path])
    assert runs.n_pairs == 1 and runs.n_unpaired == 1
    assert runs.unpaired_examples == (f"{path}:3: default/default/lonely epoch 1 has only its enabled record",)
    with pytest.raises(UnpairedError):
        load_runs([path], strict=True)


def test_error_records_drop_their_pair(write_jsonl):
    """A harness error record removes its pair from the analysis and is counted."""
    recs = pair("t", True, True) + pair("u", False, False)
    recs[2]["error"] = "HTTP 500 after 5 retries"
    runs = load_runs([write_jsonl(recs)])
    assert runs.n_pairs == 1 and runs.n_error_pairs == 1


def test_several_files_gzip_and_pairing_across_files(write_jsonl, tmp_path):
    """Enabled and disabled halves may come from different files, gzip included."""
    on, off = pair("t", True, False)
    a = write_jsonl([on], "on.jsonl")
    gz = tmp_path / "off.jsonl.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(json.dumps(off) + "\n")
    runs = load_runs([str(a), str(gz)])
    assert runs.n_pairs == 1 and runs.flip.tolist() == [1]


def test_adherence_from_skill_id_or_code_line(write_jsonl):
    """Adherence is seen when the answer names a retrieved skill or repeats one of its code lines."""
    lib = Library(skills=(Skill(id="set-ops", name="set-ops", description="d",
                                 body="```python\nreturn tuple(set(a) & set(b))\n```"),))
    recs = (pair("t1", True, False, retrieved=["set-ops"], answer="def f(a, b):\n    return tuple(set(a) & set(b))")
            + pair("t2", True, False, retrieved=["set-ops"], answer="def f(a, b): return [x for x in a if x in b]")
            + pair("t3", True, False, retrieved=["set-ops"], answer="# following set-ops\n...")
            + pair("t4", True, False, retrieved=["set-ops"]))
    runs = load_runs([write_jsonl(recs)], library=lib)
    assert runs.adhered.tolist() == [1, 0, 1, -1]


BAD_CASES = [
    ('{"task_id": "t", "condition": "enabled"', "runs.jsonl:1: invalid JSON (column 41)"),
    ('[1, 2]', "runs.jsonl:1: record must be a JSON object, got array"),
    ('{"condition": "enabled", "correct": true}', "runs.jsonl:1: missing required field 'task_id'"),
    ('{"task_id": "t", "correct": true}', "runs.jsonl:1: missing required field 'condition'"),
    ('{"task_id": "t", "condition": "on"}', "runs.jsonl:1: missing required field 'correct'"),
    ('{"task_id": 7, "condition": "on", "correct": true}', "runs.jsonl:1: 'task_id' must be a non-empty string, got 7"),
    ('{"task_id": "t", "condition": "maybe", "correct": true}',
     "runs.jsonl:1: unknown condition \"maybe\" (expected enabled or disabled; aliases on/off, skills_on/skills_off)"),
    ('{"task_id": "t", "condition": "on", "correct": "yes"}', "runs.jsonl:1: 'correct' must be true/false or 0/1, got \"yes\""),
    ('{"task_id": "t", "condition": "on", "correct": 2}', "runs.jsonl:1: 'correct' must be true/false or 0/1, got 2"),
    ('{"task_id": "t", "condition": "on", "correct": true, "epoch": 0}', "runs.jsonl:1: 'epoch' must be an integer >= 1, got 0"),
    ('{"task_id": "t", "condition": "on", "correct": true, "retrievals": "x"}', "runs.jsonl:1: 'retrievals' must be a list of calls"),
]


@pytest.mark.parametrize(("line", "message"), BAD_CASES)
def test_bad_records_name_file_and_line(write_jsonl, tmp_path, monkeypatch, line, message):
    """Each malformed record raises RunLogError whose message starts with file:line."""
    monkeypatch.chdir(tmp_path)
    write_jsonl([line])
    with pytest.raises(RunLogError) as err:
        load_runs(["runs.jsonl"])
    assert str(err.value) == message


def test_duplicate_key_names_both_lines(write_jsonl, tmp_path, monkeypatch):
    """A key seen twice for one condition is an error naming both line numbers."""
    monkeypatch.chdir(tmp_path)
    write_jsonl([*pair("t", True, False), {"task_id": "t", "condition": "on", "correct": False}])
    with pytest.raises(RunLogError) as err:
        load_runs(["runs.jsonl"])
    assert str(err.value) == (
        "runs.jsonl:3: duplicate enabled record for model='default' benchmark='default' "
        "task_id='t' epoch=1 (first at runs.jsonl:1)"
    )


def test_binary_and_missing_files(tmp_path, monkeypatch):
    """Binary garbage and missing files are input errors naming the file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blob.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    with pytest.raises(RunLogError, match=r"^blob.jsonl:1: binary data, not a JSON Lines text file$"):
        load_runs(["blob.jsonl"])
    with pytest.raises(RunLogError, match=r"^nope.jsonl: no such file$"):
        load_runs(["nope.jsonl"])


def test_blank_lines_are_skipped_and_line_numbers_kept(write_jsonl, tmp_path, monkeypatch):
    """Blank lines are ignored but still count for the line numbers in errors."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(["", json.dumps(pair("t", True, True)[0]), "", "{bad"])
    with pytest.raises(RunLogError, match=r"^runs.jsonl:4: invalid JSON"):
        load_runs(["runs.jsonl"])


def test_subset_and_select_keep_vocabularies(write_jsonl):
    """select() narrows to one model/benchmark and keeps the sparse rows aligned."""
    recs = pair("t", True, False, retrieved=["a"], model="m1") + pair("t", False, True, retrieved=["b"], model="m2")
    runs = load_runs([write_jsonl(recs)])
    sub = runs.select(model="m2")
    assert sub.n_pairs == 1 and sub.flip.tolist() == [-1]
    assert [sub.skills[j] for j in sub.ranks.indices] == ["b"]
    assert runs.select(model="absent").n_pairs == 0
    assert np.array_equal(runs.select().y_pos, runs.y_pos)


def _messy_records(rng: np.random.Generator, n: int) -> list[dict]:
    """Records exercising every field the reader interprets, in a shuffled file order."""
    out = []
    for i in range(n):
        on = {"task_id": f"t{i % (n // 2)}", "epoch": 1 + i // (n // 2), "model": f"m{i % 2}",
              "condition": str(rng.choice(["enabled", "on", "skills_on"])),
              "correct": [True, False, 0, 1][int(rng.integers(4))]}
        off = {**on, "condition": str(rng.choice(["disabled", "off", "skills_off"])),
               "correct": bool(rng.random() < 0.5)}
        kind = int(rng.integers(6))
        if kind >= 2:
            calls = []
            for _ in range(int(rng.integers(0, 3))):
                skills = []
                for _ in range(int(rng.integers(0, 4))):
                    sid = f"s{int(rng.integers(12))}"
                    form = int(rng.integers(4))
                    skills.append(sid if form == 0 else {"id": sid} if form == 1 else
                                  {"id": sid, "score": None} if form == 2 else
                                  {"id": sid, "score": round(float(rng.normal()), 3)})
                calls.append({"query": "q", "skills": skills if skills or rng.random() < 0.5 else None})
            on["retrievals"] = calls
        if kind in (1, 5):
            on["retrieved"] = [f"s{int(j)}" for j in rng.integers(0, 12, size=int(rng.integers(0, 3)))]
        if rng.random() < 0.2:
            on["invoked"] = [True, False, 0, 1][int(rng.integers(4))]
        answer = int(rng.integers(5))
        if answer:
            on["answer"] = ["", "uses s3 and s7", "return sorted(set(values))  # ok", 42][answer - 1]
        if rng.random() < 0.05:
            (on if rng.random() < 0.5 else off)["error"] = "timeout"
        out += [on, off]
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def _reference(path, code_line: str, adherence: bool) -> dict:
    """DESIGN §3.1 read the plain way: json.loads per line, dicts, one record at a time."""
    seen_order: dict[str, dict] = {"models": {}, "benchmarks": {}, "tasks": {}, "skills": {}}
    pairs: dict[tuple, dict] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        key = (rec.get("model", "default"), rec.get("benchmark", "default"), rec["task_id"], rec.get("epoch", 1))
        for vocab, value in zip(("models", "benchmarks", "tasks"), key[:3], strict=False):
            seen_order[vocab].setdefault(value, None)
        slot = pairs.setdefault(key, {})
        side = "pos" if rec["condition"] in ("enabled", "on", "skills_on") else "neg"
        slot[side] = bool(rec["correct"])
        slot.setdefault("error", False)
        slot["error"] |= rec.get("error") is not None
        if side == "neg":
            continue
        got: dict[str, float] = {}
        calls = 0
        for call in rec.get("retrievals") or []:
            calls += 1
            for s in call.get("skills") or []:
                sid, score = (s, float("nan")) if isinstance(s, str) else (s["id"], s.get("score"))
                score = float("nan") if score is None else float(score)
                if sid not in got or score > got[sid]:
                    got[sid] = score
        if rec.get("retrieved") is not None:
            calls += 1
            for sid in rec["retrieved"]:
                got.setdefault(sid, float("nan"))
        for sid in got:
            seen_order["skills"].setdefault(sid, None)
        slot["invoked"] = bool(rec["invoked"]) if rec.get("invoked") is not None else calls > 0
        slot["got"] = list(got.items())
        answer = rec.get("answer")
        slot["adhered"] = -1
        if adherence and isinstance(answer, str) and answer:
            slot["adhered"] = int(bool(got) and any(sid in answer or (sid == "s3" and code_line in answer)
                                                    for sid in got))
    kept = {k: v for k, v in pairs.items() if "pos" in v and "neg" in v and not v["error"]}
    return {"vocab": {k: tuple(v) for k, v in seen_order.items()}, "pairs": kept}


def assert_matches_reference(runs, ref: dict) -> None:
    """Vocabularies, pairs, outcomes, invoked, adherence and each pair's ranked skills equal `ref`'s."""
    assert (runs.models, runs.benchmarks, runs.tasks, runs.skills) == tuple(ref["vocab"].values())
    assert runs.n_pairs == len(ref["pairs"]) > 100
    ranks, scores = runs.ranks.tocsr(), runs.scores.tocsr()
    for i in range(runs.n_pairs):
        key = (runs.models[runs.model[i]], runs.benchmarks[runs.benchmark[i]], runs.tasks[runs.task[i]],
               int(runs.epoch[i]))
        want = ref["pairs"][key]
        assert (runs.y_pos[i], runs.y_neg[i], runs.invoked[i]) == (want["pos"], want["neg"], want["invoked"])
        assert runs.adhered[i] == want["adhered"]
        row = slice(ranks.indptr[i], ranks.indptr[i + 1])
        got = sorted(zip(ranks.data[row], ranks.indices[row], scores.data[row], strict=True))
        assert [runs.skills[j] for _, j, _ in got] == [sid for sid, _ in want["got"]]
        np.testing.assert_allclose([v for *_, v in got], [v for _, v in want["got"]], rtol=1e-6)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("adherence", [True, False])
def test_reader_equals_a_plain_json_reference(write_jsonl, seed, adherence):
    """Pairs, outcomes, invoked, adherence and each pair's skills (rank order, best score) match a json.loads reader."""
    code_line = "return sorted(set(values))"
    lib = Library(skills=(Skill(id="s3", name="s3", description="d", body=f"```python\n{code_line}\n```"),))
    path = write_jsonl(_messy_records(np.random.default_rng(seed), 400))
    runs = load_runs([path], library=lib, adherence=adherence)
    assert_matches_reference(runs, _reference(path, code_line, adherence))
    assert runs.ranks.nnz > 100 and np.isnan(runs.scores.data).any()
    assert ((runs.adhered == 1).any() and (runs.adhered == 0).any()) == adherence


@pytest.mark.parametrize(("epochs", "n_tasks"), [("small", 400), ("huge", 400), ("small", 100_000)])
def test_slots_number_keys_in_first_seen_order(epochs, n_tasks):
    """Pairing keys are numbered in order of first appearance, by a key table or by sorting (sparse keys)."""
    from skillaudit.runs.pairing import _slots

    rng = np.random.default_rng(5)
    n = 3000
    e = rng.integers(1, 4, n) * (10**15 if epochs == "huge" else 1)
    r = {"m": rng.integers(0, 3, n).astype(np.int32), "b": rng.integers(0, 2, n).astype(np.int32),
         "t": rng.integers(0, n_tasks, n).astype(np.int32), "e": e.astype(np.int64),
         "models": ("a", "b", "c"), "benchmarks": ("x", "y"), "tasks": tuple(map(str, range(n_tasks)))}
    seen: dict[tuple, int] = {}
    want_slot, want_first = [], []
    for i, key in enumerate(zip(r["m"].tolist(), r["b"].tolist(), r["t"].tolist(), r["e"].tolist(), strict=True)):
        if key not in seen:
            seen[key] = len(seen)
            want_first.append(i)
        want_slot.append(seen[key])
    slot, first = _slots(r)
    assert slot.tolist() == want_slot and first.tolist() == want_first


def test_use_logged_false_marks_pairs_offered_only_on_every_reader_path(tmp_path, monkeypatch):
    """`"use_logged": false` on an enabled record is read the same by the scanner bypass, msgspec and the exact path."""
    import skillaudit.runs as runs_mod
    from skillaudit.runs import reader

    lines = [
        '{"task_id":"a","condition":"enabled","correct":true,"use_logged":false,"offered":["a/skills"]}',
        '{"task_id":"a","condition":"disabled","correct":false}',
        '{"task_id":"b","condition":"enabled","correct":true,"retrieved":["s"]}',
        '{"task_id":"b","condition":"disabled","correct":true,"use_logged":false}',
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    got = runs_mod.load_runs([str(path)])
    assert got.use_unlogged.tolist() == [True, False]  # only the enabled record's flag counts
    assert got.retrieved.tolist() == [False, True]
    assert got.subset(np.array([True, False])).use_unlogged.tolist() == [True]
    monkeypatch.setattr(reader, "_decode", None)  # the exact path alone
    assert runs_mod.load_runs([str(path)]).use_unlogged.tolist() == [True, False]
    plain = tmp_path / "p.jsonl"
    plain.write_text("\n".join([*lines[2:3], '{"task_id":"b","condition":"disabled","correct":true}']) + "\n")
    assert runs_mod.load_runs([str(plain)]).use_logged is None


def test_use_logged_must_be_a_boolean(tmp_path):
    """A non-boolean use_logged is an error naming the file and line."""
    path = tmp_path / "r.jsonl"
    path.write_text('{"task_id":"a","condition":"on","correct":true}\n'
                    '{"task_id":"a","condition":"off","correct":true,"use_logged":"no"}\n')
    with pytest.raises(RunLogError, match=r"r\.jsonl:2: 'use_logged' must be true or false, got \"no\""):
        load_runs([str(path)])
