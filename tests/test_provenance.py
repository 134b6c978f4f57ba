"""Provenance: skills whose text changed since the runs that judge them are warned about and marked."""

from __future__ import annotations

import csv
import gzip
import io
import json

import pytest
from _factories import make_skill
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.library import load_library
from skillaudit.runs.provenance import edited_skills, seen_hashes

WARN_FIXED = "warning: skill 'fixed' edited since these runs: its verdict describes the old text"


@pytest.fixture
def library(tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "same", "Unchanged skill.", "## Steps\nDo it.\n")
    make_skill(root, "fixed", "Skill edited after the runs.", "## Steps\nThe old text.\n")
    make_skill(root, "quiet", "Skill the runs logged no hash for.", "## Steps\nQuiet.\n")
    return root


def _hash(lib_root, sid: str) -> str:
    return load_library(str(lib_root)).get(sid).content_hash[:16]


def _records(hashes: dict[str, str]) -> list[dict]:
    """12 pairs retrieving same+fixed, and quiet alone; hits carry the given hashes."""
    recs = []
    for i in range(12):
        hits = [{"id": s, "score": 1.0, **({"hash": hashes[s]} if s in hashes else {})} for s in ("same", "fixed")]
        if i % 3 == 0:
            hits = [{"id": "quiet", "score": 1.0}]
        recs.append({"task_id": f"t{i}", "condition": "enabled", "correct": i % 2 == 0,
                     "retrievals": [{"query": "q", "skills": hits, "error": None}]})
        recs.append({"task_id": f"t{i}", "condition": "disabled", "correct": i % 4 == 0})
    return recs


@pytest.fixture
def edited_log(library, write_jsonl):
    """A log whose 'fixed' hits carry the hash of text that is no longer in the library."""
    old = make_skill(library.parent / "old", "fixed", "Skill edited after the runs.", "## Steps\nThe older text.\n")
    old_hash = _hash(old.parent.parent, "fixed")
    return str(write_jsonl(_records({"same": _hash(library, "same"), "fixed": old_hash})))


def test_seen_hashes_reads_enabled_hits_only(library, write_jsonl, tmp_path):
    """Hashes come from enabled records' retrieved skills (gzip too); disabled records and stdin are ignored."""
    recs = _records({"same": "abc123"})
    recs.append({"task_id": "x", "condition": "disabled", "correct": True,
                 "retrievals": [{"query": "q", "skills": [{"id": "quiet", "hash": "ffff"}]}]})
    path = tmp_path / "runs.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in recs))
    assert seen_hashes([str(path), "-"]) == {"same": {"abc123"}}


def test_edited_skill_is_the_one_whose_hash_changed(library, edited_log):
    """Only the skill whose current hash matches none of the logged ones is edited; unlogged ones are unknown."""
    lib = load_library(str(library))
    assert edited_skills(seen_hashes([edited_log]), lib) == {"same": False, "fixed": True}


def test_rank_warns_once_and_marks_the_edited_row(library, edited_log):
    """rank --json warns on stderr, once, naming the edited skill, and its row has "edited": true."""
    res = CliRunner().invoke(cli, ["rank", edited_log, "--skills", str(library), "--json", "--bootstrap", "0"])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines() == [WARN_FIXED]
    rows = {r["skill_id"]: r["edited"] for r in json.loads(res.stdout)["skills"]}
    assert rows == {"same": False, "fixed": True, "quiet": None}


def test_rank_table_flags_the_edited_skill(library, edited_log):
    """The human rank table flags the edited skill and explains the flag."""
    res = CliRunner().invoke(cli, ["rank", edited_log, "--skills", str(library), "--bootstrap", "0"])
    assert res.exit_code == 0, res.output
    assert "edited: the library's text differs from the one these runs retrieved." in res.stdout


def test_logs_without_hashes_warn_about_nothing(library, write_jsonl):
    """A log whose hits carry no hashes gives no warning and no row is marked."""
    log = str(write_jsonl(_records({})))
    res = CliRunner().invoke(cli, ["rank", log, "--skills", str(library), "--json", "--bootstrap", "0"])
    assert res.exit_code == 0 and res.stderr == ""
    assert {r["edited"] for r in json.loads(res.stdout)["skills"]} == {None}


def test_matching_hashes_warn_about_nothing(library, write_jsonl):
    """When every logged hash is the library's current text, nothing is edited."""
    log = str(write_jsonl(_records({"same": _hash(library, "same"), "fixed": _hash(library, "fixed")})))
    res = CliRunner().invoke(cli, ["rank", log, "--skills", str(library), "--json", "--bootstrap", "0"])
    assert res.exit_code == 0 and res.stderr == ""
    assert {r["skill_id"]: r["edited"] for r in json.loads(res.stdout)["skills"]}["fixed"] is False


def test_prune_warns_about_the_edited_skill(library, edited_log):
    """prune prints the same warning for the edited skill."""
    res = CliRunner().invoke(cli, ["prune", edited_log, "--skills", str(library), "--json", "--bootstrap", "0",
                                   "--embedder", "none"])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines() == [WARN_FIXED]


def test_audit_warns_and_the_report_marks_the_row(library, edited_log, tmp_path):
    """audit warns, and report.md, report.html, skills.csv and audit.json mark the edited skill's row."""
    out = tmp_path / "report"
    res = CliRunner().invoke(cli, ["audit", edited_log, "--skills", str(library), "--out", str(out),
                                   "--embedder", "tfidf", "--bootstrap", "200", "--regression-bootstrap", "0",
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    assert WARN_FIXED in res.stderr.splitlines()
    md = (out / "report.md").read_text()
    assert "`fixed` (edited since these runs)" in md and "`same` (edited" not in md
    assert "1 skill(s) edited since these runs (fixed)" in md
    assert "edited since these runs</span>" in (out / "report.html").read_text()
    rows = {r["skill_id"]: r["edited"] for r in csv.DictReader(io.StringIO((out / "skills.csv").read_text()))}
    assert rows == {"same": "False", "fixed": "True", "quiet": ""}
    doc = json.loads((out / "audit.json").read_text())
    assert {r["skill_id"]: r["edited"] for r in doc["skills"]["skills"]}["fixed"] is True


def test_importers_keep_the_hash_of_a_retrieved_skill():
    """A tool result's skill objects keep their "hash" through the importers' parser, so provenance survives import."""
    from skillaudit.importers._common import skills_from_json

    assert skills_from_json([{"id": "a", "score": 2, "hash": "0123456789abcdef"}, "b"]) == [
        {"id": "a", "score": 2.0, "hash": "0123456789abcdef"}, {"id": "b"}]


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_loader_tells_whether_any_line_can_hold_a_hash(library, write_jsonl, tmp_path, monkeypatch, jobs):
    """load_runs sets skill_hashes only when some line holds the bytes "hash": in a later block, in the second file, with parsing workers too; without it the provenance pass is skipped."""
    from skillaudit.runs import load_runs, reader, workers

    monkeypatch.setattr(reader, "_BLOCK", 256)  # many blocks per file
    monkeypatch.setattr(workers, "_MIN_UNIT", 1)  # workers even for small files
    plain = str(write_jsonl(_records({})))
    assert not load_runs([plain], jobs=jobs).skill_hashes
    recs = [{**r, "task_id": "b" + r["task_id"]} for r in _records({})]  # other tasks than `plain`'s
    recs[-2]["retrievals"][0]["skills"][0]["hash"] = "abc123"  # the last enabled record only
    second = tmp_path / "second.jsonl"
    second.write_text("".join(json.dumps(r) + "\n" for r in recs))
    both = load_runs([plain, str(second)], jobs=jobs)
    assert both.skill_hashes and both.select(model=both.models[0]).skill_hashes
    with gzip.open(tmp_path / "z.jsonl.gz", "wt") as fh:
        fh.write(second.read_text())
    assert load_runs([plain, str(tmp_path / "z.jsonl.gz")], jobs=jobs).skill_hashes


def test_an_edited_skill_in_the_second_log_still_warns(library, edited_log, write_jsonl):
    """rank over a log without hashes followed by one with them warns about the edited skill (the loader's flag covers every file)."""
    plain = str(write_jsonl([{**r, "task_id": "b" + r["task_id"]} for r in _records({})], "plain.jsonl"))
    res = CliRunner().invoke(cli, ["rank", plain, edited_log, "--skills", str(library), "--json", "--bootstrap", "0"])
    assert res.exit_code == 0, res.output
    assert WARN_FIXED in res.stderr.splitlines()


def test_harbor_digests_say_whether_a_folder_skill_was_edited(tmp_path):
    """Records imported from Harbor carry each injected skill's folder digest (lock.json); the
    library's folders are compared with them: unchanged -> not edited, a changed script -> edited
    (a file other than SKILL.md counts: the folder is what the agent had)."""
    import json as _json

    from skillaudit.library import load_library
    from skillaudit.runs.inputs import load_inputs
    from skillaudit.runs.provenance import skill_digest

    lib = tmp_path / "skills"
    (lib / "a" / "scripts").mkdir(parents=True)
    (lib / "a" / "SKILL.md").write_text("---\nname: a\ndescription: d\n---\nRun scripts/go.sh.\n")
    (lib / "a" / "scripts" / "go.sh").write_text("echo go\n")
    digest = skill_digest(lib / "a")
    runs = tmp_path / "runs.jsonl"
    runs.write_text(_json.dumps({"task_id": "t", "condition": "enabled", "correct": True,
                                 "retrievals": [{"query": None, "skills": ["a"]}],
                                 "meta": {"skill_digests": {"a": digest}}}) + "\n"
                    + _json.dumps({"task_id": "t", "condition": "disabled", "correct": False}) + "\n")
    assert load_inputs([str(runs)], library=load_library(lib)).edited == {"a": False}
    (lib / "a" / "scripts" / "go.sh").write_text("echo stop\n")
    assert load_inputs([str(runs)], library=load_library(lib)).edited == {"a": True}


def test_skill_digest_matches_harbors_lock(tmp_path):
    """The digest Harbor 0.26.0 wrote in the recorded pair's lock.json for the harbor-mini skill."""
    from pathlib import Path

    from skillaudit.runs.provenance import skill_digest

    mini = Path(__file__).resolve().parents[2] / "shared" / "data" / "harbor-mini" / "skills" / "status-report"
    if not mini.is_dir():
        pytest.skip("../shared/data is absent")
    assert skill_digest(mini) == "sha256:c5cb1fc949cee968f86a001bc5ea2dd42e4d9f6f134c29a474013b0b11bc3091"
