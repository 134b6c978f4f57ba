"""Issue 56 step 1a: the optional pair-level `preference` (win | tie | loss) on the enabled record
reads the same through every reader path, reaches `PairedRuns.preference`, and bad uses are one
line naming the file and line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from skillaudit.errors import RunLogError
from skillaudit.runs import load_runs


def _log(tmp_path, records, tail=""):
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return str(path)


def _pairs(prefs):
    out = []
    for i, p in enumerate(prefs):
        en = {"task_id": f"t{i}", "condition": "enabled", "correct": i % 2 == 0, "retrieved": ["a"]}
        if p is not None:
            en["preference"] = p
        out += [en, {"task_id": f"t{i}", "condition": "disabled", "correct": False}]
    return out


@pytest.mark.parametrize("tail", ["", "\n"])  # a blank line sends the block through the exact path
def test_preference_reaches_the_pairs(tmp_path, tail):
    runs = load_runs([_log(tmp_path, _pairs(["win", "tie", "loss", None]), tail)])
    assert runs.preference.tolist() == [1, 0, -1, -2]
    assert runs.subset(np.array([True, False, True, False])).preference.tolist() == [1, -1]


def test_no_preference_anywhere_is_none_and_uses_the_c_scanner_path(tmp_path):
    assert load_runs([_log(tmp_path, _pairs([None, None]))]).preference is None


@pytest.mark.parametrize("bad, message", [
    ({"preference": "better"}, "'preference' must be win, tie or loss, got \"better\""),
    ({"preference": 1}, "'preference' must be win, tie or loss, got 1"),
])
def test_a_bad_preference_names_the_line(tmp_path, bad, message):
    recs = _pairs([None, None])
    recs[2].update(bad)
    with pytest.raises(RunLogError) as exc:
        load_runs([_log(tmp_path, recs)])
    assert str(exc.value) == f"{tmp_path / 'runs.jsonl'}:3: {message}"


def test_a_preference_on_the_disabled_record_is_an_error(tmp_path):
    recs = _pairs([None, None])
    recs[3]["preference"] = "win"
    with pytest.raises(RunLogError) as exc:
        load_runs([_log(tmp_path, recs)])
    assert str(exc.value).endswith(":4: 'preference' belongs on the enabled record (its answer against the "
                                   "disabled one)")


@pytest.mark.parametrize("tail", ["", "\n"])
def test_the_judges_aa_check_reaches_the_pairs_and_bad_uses_name_the_line(tmp_path, tail):
    """`judge_aa` (tie | flip) on the enabled record, beside its preference or alone."""
    recs = _pairs(["win", None, "tie"])
    recs[0]["judge_aa"], recs[2]["judge_aa"] = "flip", "tie"
    runs = load_runs([_log(tmp_path, recs, tail)])
    assert runs.judge_aa.tolist() == [1, 0, -1] and runs.subset(np.array([False, True, True])).judge_aa.tolist() == [0, -1]
    assert load_runs([_log(tmp_path, _pairs(["win"]))]).judge_aa is None
    for at, value, message in ((0, "maybe", "'judge_aa' must be tie or flip, got \"maybe\""),
                               (1, "tie", "'judge_aa' belongs on the enabled record (beside its preference)")):
        bad = _pairs([None, None])
        bad[at]["judge_aa"] = value
        with pytest.raises(RunLogError) as exc:
            load_runs([_log(tmp_path, bad, tail)])
        assert str(exc.value) == f"{tmp_path / 'runs.jsonl'}:{at + 1}: {message}"
