"""Harbor importer: job/trial folders, sides from options or path words, error records, Claude Code skill use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.errors import ImportFormatError
from skillaudit.importers.harbor import _side_of_text, import_harbor, read_claude_code

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "harbor"
CC = REAL / "claude-code"
needs_real = pytest.mark.skipif(not CC.is_dir(), reason="../shared/data/real is absent")
MINIMAX = REAL.parent / "minimax-claude-code" / "minimax-m2.1+claude-code"
T2 = REAL.parent / "harbor-terminus2-local"


def _figures(records: list[dict]) -> dict:
    """What every figure reads from a run log: per (model, task), the sorted (enabled, disabled)
    outcome and use pairs, independent of trial names and meta."""
    from collections import defaultdict

    by = defaultdict(dict)
    for r in records:
        use = tuple(sorted(s for x in r.get("retrievals") or () for s in x["skills"]))
        by[(r["model"], r["task_id"], r["epoch"])][r["condition"]] = (r["correct"], use, r.get("use_logged", True))
    out = defaultdict(list)
    for (m, t, _), sides in by.items():
        out[(m, t)].append((sides.get("enabled"), sides.get("disabled")))
    return {k: sorted(v, key=repr) for k, v in out.items()}


@needs_real
def test_minimax_jobs_pair_every_usable_task_by_hand_count():
    """MiniMax M2.1 under Claude Code (11 tasks, 17 with-skills and 18 no-skills trials, one
    no-skills infrastructure error): by hand, every task pairs, jax-computing-basics included (its
    error trial takes no number), 17 pairs; the error is left out and named; the one with-skills
    trial without a trajectory (civ6-adjacency-optimizer__UWgxt79) is the only one the note names;
    court-form-filling's two trials used a skill."""
    records, report = import_harbor([str(MINIMAX)])
    assert report.pairs == 17 and report.records == 34
    assert report.enabled_read == 17 and report.disabled_read == 18
    tasks = {r["task_id"] for r in records}
    assert len(tasks) == 11 and "jax-computing-basics" in tasks
    [left] = report.unpaired
    assert "jax-computing-basics__2vWZ6YK" in left.where and "RuntimeError" in left.reason
    [traj] = [n for n in report.notes if "without a readable trajectory" in n]
    assert traj.startswith("1 with-skills trial(s)") and "civ6-adjacency-optimizer__UWgxt79" in traj
    used = {r["meta"]["trial"]: r["retrievals"][0]["skills"] for r in records if r.get("retrievals")}
    assert set(used) == {"court-form-filling__7DPpFqJ", "court-form-filling__bdDX65M"}
    unlogged = [r["meta"]["trial"] for r in records if r.get("use_logged") is False]
    assert unlogged == ["civ6-adjacency-optimizer__UWgxt79"]
    assert not any(r["condition"] == "disabled" and "no_trajectory" in r["meta"] for r in records)


@needs_real
def test_no_figure_changes_when_trials_are_renamed_or_an_error_trial_moves(tmp_path):
    """Renaming every trial (reversing their name order) and giving the error trial the first or
    last name in its task leaves every pair's (outcome, use) the same: replicates are numbered by
    content, never by name."""
    base = _figures(import_harbor([str(MINIMAX)])[0])
    for variant in ("reverse", "error-last"):
        root = tmp_path / variant / "minimax"
        shutil.copytree(MINIMAX, root)
        for side in ("skills", "no_skills"):
            trials = sorted(p for p in (root / side).iterdir())
            for i, trial in enumerate(trials):
                d = json.loads((trial / "result.json").read_text())
                task = d["task_name"]
                if variant == "reverse":
                    new = f"{task}__{len(trials) - i:07d}"
                else:
                    new = f"{task}__{'zzzzzzz' if d.get('exception_info') else 'aaaaaa' + str(i)}"
                d["trial_name"] = new
                (trial / "result.json").write_text(json.dumps(d))
                trial.rename(trial.parent / new)
        assert _figures(import_harbor([str(root)])[0]) == base, variant


@needs_real
def test_rewarded_timeouts_are_scored_and_keep_their_exception():
    """The Harbor 0.26.0 terminus-2 pair made here: both trials ended in AgentTimeoutError with a
    verifier reward of 0.0; both are scored (failures), the exception kept in meta, and the import
    note states the rule."""
    records, report = import_harbor(enabled=[str(T2 / "t2-skill")], disabled=[str(T2 / "t2-noskill")])
    assert report.pairs == 1 and not report.unpaired
    assert [r["correct"] for r in records] == [False, False]
    assert {r["meta"]["exception"] for r in records} == {"AgentTimeoutError"}
    en = next(r for r in records if r["condition"] == "enabled")
    # the digest Harbor's lock.json gives the injected skill: the provenance of what the run saw
    assert en["meta"]["skill_digests"] == {
        "status-report": "sha256:c5cb1fc949cee968f86a001bc5ea2dd42e4d9f6f134c29a474013b0b11bc3091"}
    assert en["offered"] == ["status-report"] and en["meta"]["offered_from"] == "agent log"
    assert any("scored by it, whatever the agent raised (2 such trial(s)" in n for n in report.notes)


@needs_real
def test_a_constructed_rewarded_exception_passes_and_surplus_trials_are_counted(tmp_path):
    """A trial that raised but carries reward 1.0 is a pass; a second valid with-skills trial of a
    task with one no-skills trial is a surplus trial: left out and counted in the note, not paired."""
    job = tmp_path / "with-skills"
    shutil.copytree(CC / "main-with-skills-pass2", job)
    trial = next(p for p in job.iterdir() if p.name.startswith("threejs"))
    d = json.loads((trial / "result.json").read_text())
    d.update(exception_info={"exception_type": "AgentTimeoutError"}, verifier_result={"rewards": {"reward": 1.0}})
    (trial / "result.json").write_text(json.dumps(d))
    late = job / f"{trial.name}-late"
    shutil.copytree(trial, late)
    d.update(trial_name=late.name, started_at="9999-01-01T00:00:00Z")
    (late / "result.json").write_text(json.dumps(d))
    records, report = import_harbor(enabled=[str(job)], disabled=[str(CC / "main-without-skills-pass2")])
    three = next(r for r in records if r["task_id"] == "threejs-to-obj" and r["condition"] == "enabled")
    assert three["correct"] is True and three["meta"]["exception"] == "AgentTimeoutError"
    assert three["meta"]["trial"] == trial.name  # the last started is the surplus one
    [surplus] = [u for u in report.unpaired if u.reason.startswith("surplus trial")]
    assert late.name in surplus.where
    assert any(n.startswith("1 surplus trial(s) left out") and late.name in n for n in report.notes)


@needs_real
def test_claude_code_pairs_carry_the_skills_their_trajectories_used():
    """offer-letter-generator used docx; threejs-to-obj was offered obj-exporter and used none."""
    records, report = import_harbor([str(CC / "main-with-skills-pass2"), str(CC / "main-without-skills-pass2")])
    assert report.pairs == 2 and report.records == 4
    by = {(r["task_id"], r["condition"]): r for r in records}
    offer = by[("offer-letter-generator", "enabled")]
    assert offer["retrievals"][0]["skills"] == ["docx"] and offer["offered"] == ["docx"] and offer["correct"]
    three = by[("threejs-to-obj", "enabled")]
    assert three["retrievals"] == [] and three["offered"] == ["obj-exporter"] and "use_logged" not in three
    assert {r["model"] for r in records} == {"claude-code:claude-haiku-4-5@20251001"}
    assert by[("offer-letter-generator", "disabled")]["correct"] is False
    assert "the word 'with-skills' in the path" in report.naming
    missing = [n for n in report.notes if "are not on disk" in n]
    assert len(missing) == 2 and "208 are not on disk" in missing[0]


@needs_real
def test_gemini_cli_pairs_from_its_flattened_paths_alone():
    """The Gemini CLI trial files pair from the skills / noskills words of their names; no trajectory is said so."""
    records, report = import_harbor([str(REAL / "gemini-cli")])
    assert report.pairs == 1
    en = next(r for r in records if r["condition"] == "enabled")
    assert en["use_logged"] is False and en["model"] == "gemini-cli:google/gemini-3-flash-preview"
    assert "the word 'noskills' in the path" in report.naming and "the word 'skills' in the path" in report.naming
    assert any("without a readable trajectory" in n for n in report.notes)


@needs_real
def test_explicit_sides_and_error_records(tmp_path):
    """--enabled/--disabled decide the side; exception_info, no verifier result and a text reward are error records."""
    job = tmp_path / "run-a"
    shutil.copytree(CC / "main-with-skills-pass2", job)
    trial = next(p for p in job.iterdir() if p.name.startswith("threejs"))
    for i, change in enumerate(({"exception_info": {"exception_type": "AgentTimeoutError"}, "verifier_result": None},
                                {"verifier_result": None}, {"verifier_result": {"rewards": {"reward": "n/a"}}})):
        copy = job / f"{trial.name}-{i}"
        shutil.copytree(trial, copy)
        d = json.loads((copy / "result.json").read_text())
        d.update(change, trial_name=copy.name)
        (copy / "result.json").write_text(json.dumps(d))
    _, report = import_harbor(enabled=[str(job)], disabled=[str(CC / "main-without-skills-pass2")])
    assert report.pairs == 2
    reasons = sorted(u.reason for u in report.unpaired if u.condition == "enabled")
    assert reasons == ["error record (not a failure): no verifier result",
                       "error record (not a failure): the reward is not a number (n/a)",
                       "error record (not a failure): the trial raised AgentTimeoutError (exception_info) and has no "
                       "verifier reward"]
    assert "--enabled" in report.naming


def test_path_words():
    """Path words decide the side; both sides' words in one path is ambiguous; skillsbench is no side word."""
    assert _side_of_text("jobs/main-without-skills-pass2/t__x")[:2] == ("disabled", "without-skills")
    assert _side_of_text("x__skills__citation-check")[:2] == ("enabled", "skills")
    assert _side_of_text("no-skills/run")[:2] == ("disabled", "no-skills")
    assert _side_of_text("skillsbench/run")[:2] == (None, None)
    assert _side_of_text("with-skills/vs/noskills")[2] is True


def _trial(folder: Path, **over) -> Path:
    folder.mkdir(parents=True)
    d = {"task_name": "t1", "trial_name": folder.name, "config": {"agent": {"name": "codex", "model_name": "m"}},
         "verifier_result": {"rewards": {"reward": 1.0}}, "exception_info": None}
    d.update(over)
    (folder / "result.json").write_text(json.dumps(d))
    return folder


def test_bad_input_names_the_file_and_place(tmp_path):
    """A task_id object instead of task_name, an ambiguous path, or invalid JSON: one line naming the file, exit 2."""
    bad = _trial(tmp_path / "with-skills" / "t1__a", task_name=None, task_id={"path": "/x"})
    with pytest.raises(ImportFormatError, match=r"t1__a/result\.json: task_name: expected the task's name"):
        import_harbor([str(tmp_path / "with-skills")])
    amb = _trial(tmp_path / "with-skills-vs-noskills" / "t1__b")
    with pytest.raises(ImportFormatError, match=r"names both sides"):
        import_harbor([str(amb.parent)])
    (bad / "result.json").write_text("{not json")
    res = CliRunner().invoke(cli, ["import", "harbor", str(bad), "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2
    assert res.output.strip().splitlines()[-1].startswith(f"Error: {bad}/result.json:1: not valid JSON")
    assert not (tmp_path / "o.jsonl").exists()


def test_other_agents_trajectories_are_named_not_guessed(tmp_path):
    """A trial with an agent file skillaudit cannot read says so and its use is not logged."""
    on = _trial(tmp_path / "skills" / "t1__a")
    (on / "agent").mkdir()
    (on / "agent" / "goose.txt").write_text("{}\n")
    _trial(tmp_path / "noskills" / "t1__b", verifier_result={"rewards": {"reward": 0.0}})
    records, _ = import_harbor([str(tmp_path / "skills"), str(tmp_path / "noskills")])
    en = next(r for r in records if r["condition"] == "enabled")
    assert en["use_logged"] is False and "agent/goose.txt is not a trajectory format" in en["meta"]["no_trajectory"]


def test_claude_code_reads_skill_md_reads_and_dedupes_offers(tmp_path):
    """Duplicate init skills collapse; a Read or Bash of skills/<name>/SKILL.md counts as a use."""
    lines = [
        {"type": "system", "subtype": "init", "skills": ["a", "b", "a"]},
        {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "name": "Read", "input": {"file_path": "/root/.claude/skills/b/SKILL.md"}},
            {"type": "tool_use", "name": "Bash", "input": {"command": "cat /x/skills/c/SKILL.md | head"}}]}},
        "not json at all",
    ]
    p = tmp_path / "claude-code.txt"
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    t = read_claude_code(str(p))
    # a used skill is always offered (c was used, so it was there to use)
    assert t.offered == ("a", "b", "c") and t.used == ("b", "c") and t.problem is None


def test_a_trial_folder_without_result_json_is_named_not_silent(tmp_path):
    """Issue 53: a without-skills trial folder with config.json and an agent log but no result.json
    is named in the import note (passed over, no outcome) with what it costs: the leak check was not
    possible for it; the trials with a result still pair."""
    _trial(tmp_path / "with-skills" / "t1__a")
    _trial(tmp_path / "noskills" / "t1__b")
    gap = tmp_path / "noskills" / "t2__gap"
    (gap / "agent").mkdir(parents=True)
    (gap / "config.json").write_text(json.dumps({"task": {"path": "t2"}}))
    (gap / "agent" / "codex.txt").write_text('{"type":"thread.started"}\n')
    _, report = import_harbor(enabled=[str(tmp_path / "with-skills")], disabled=[str(tmp_path / "noskills")])
    assert report.pairs == 1
    [note] = [n for n in report.notes if "no result.json" in n]
    assert "noskills/t2__gap" in note
    assert note.endswith("the leak check was not possible for 1 without-skills trial(s)")
    # passed explicitly (alone, or as well as its job), the folder is named, once
    for disabled in ([str(gap)], [str(tmp_path / "noskills"), str(gap)]):
        _, report = import_harbor(enabled=[str(tmp_path / "with-skills")], disabled=disabled)
        [note] = [n for n in report.notes if "no result.json" in n]
        assert note.startswith("1 trial folder(s)") and "t2__gap" in note


def test_a_without_skills_log_no_reader_can_read_is_named():
    """Issue 53: a without-skills trial whose agent log no reader can parse (a Gemini CLI session
    without sessionId, here an unknown file) is named in the note: its leak check was not possible;
    one with no log at all is not (it never needs one)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        _trial(root / "with-skills" / "t1__a")
        off = _trial(root / "noskills" / "t1__b")
        (off / "agent").mkdir()
        (off / "agent" / "gemini-cli.trajectory.json").write_text('{"messages": []}')
        _, report = import_harbor(enabled=[str(root / "with-skills")], disabled=[str(root / "noskills")])
        [note] = [n for n in report.notes if "leak check was not possible" in n]
        assert "1 without-skills trial(s) whose agent log skillaudit cannot read: t1__b (" in note
        (off / "agent" / "gemini-cli.trajectory.json").unlink()
        (off / "agent").rmdir()
        _, report = import_harbor(enabled=[str(root / "with-skills")], disabled=[str(root / "noskills")])
        assert not [n for n in report.notes if "leak check was not possible" in n]


def _codex_log(folder: Path, *items: dict, extra: str = "") -> None:
    """agent/codex.txt of `codex exec --json` events: the items completed, then turn.completed."""
    (folder / "agent").mkdir()
    events = [{"type": "thread.started"}, *({"type": "item.completed", "item": it} for it in items),
              {"type": "turn.completed"}]
    (folder / "agent" / "codex.txt").write_text(extra + "\n".join(json.dumps(e) for e in events) + "\n")


def _cmd(command: str, output: str = "") -> dict:
    return {"type": "command_execution", "command": f"/bin/bash -lc '{command}'", "aggregated_output": output,
            "exit_code": 0, "status": "completed"}


def test_skills_seen_in_passing_failed_loads_and_unchecked_without_skills_trials(tmp_path):
    """Issue 53: a listing of the skills folder names skills present (seen, never used nor an offered
    list); a failed load ("failed to load skill .../threejs/SKILL.md: invalid YAML", Codex's stderr)
    is shipped but not loadable, with the reason; a without-skills trial whose listing shows skills
    had skills present (a broken arm); a without-skills trial with no log, or one no reader can read,
    while its partner's log was read, fails `check` closed (exit 1 naming it; 0 with --allow-leaks)."""
    on, off = tmp_path / "with-skills", tmp_path / "without-skills"
    t1 = _trial(on / "t1__a")
    _codex_log(t1, _cmd("ls /root/.codex/skills", "pdf\nxlsx\nthreejs\nREADME.md\n"),
               _cmd("cat /root/.codex/skills/pdf/SKILL.md", "---"),
               extra="2026-01-25T10:00:00Z ERROR codex_core::skills: failed to load skill "
                     "/root/.codex/skills/threejs/SKILL.md: invalid YAML: mapping values are not allowed here\n")
    u1 = _trial(off / "t1__b", verifier_result={"rewards": {"reward": 0.0}})
    _codex_log(u1, _cmd("ls -la /root/.codex/skills/", "total 8\ndrwxr-xr-x 2 root root 4096 Jan 1 00:00 .\n"
                                                        "drwxr-xr-x 3 root root 4096 Jan 1 00:00 pdf\n"))
    t2 = _trial(on / "t2__a", task_name="t2")
    _codex_log(t2, _cmd("cat /root/.codex/skills/xlsx/SKILL.md", "---"))
    u2 = _trial(off / "t2__b", task_name="t2")
    (u2 / "agent").mkdir()
    (u2 / "agent" / "codex.txt").write_text("no events here\n")
    t3 = _trial(on / "t3__a", task_name="t3")
    _codex_log(t3, _cmd("ls /root"))
    _trial(off / "t3__b", task_name="t3")  # no agent/ folder at all
    log = tmp_path / "runs.jsonl"
    res = CliRunner().invoke(cli, ["import", "harbor", str(on), str(off), "-o", str(log)])
    assert res.exit_code == 0, res.output
    notes = [ln for ln in res.output.splitlines() if ln.startswith("note: ")]
    assert ("note: 1 with-skills trial(s) show skills present but unused (a listing of a skills folder; named "
            "as seen, never counted as used or as the offered list): t1__a: xlsx, threejs") in notes
    assert ("note: 1 skill(s) shipped but not loadable (the agent's log says it failed to load them): threejs in "
            "t1__a (invalid YAML: mapping values are not allowed here)") in notes
    assert ("note: arm integrity: 1 without-skills trial(s) had skills present (a broken arm, gated like a "
            "leak): t1__b (a listing of a skills folder shows pdf)") in notes
    assert any(n.startswith("note: arm integrity: the leak check was not possible for 2 without-skills trial(s) "
                            "whose with-skills partner's log was read") and "t2__b, t3__b" in n for n in notes)
    recs = {(r["task_id"], r["condition"]): r for r in map(json.loads, log.read_text().splitlines())}
    en = recs[("t1", "enabled")]
    assert [s for r in en["retrievals"] for s in r["skills"]] == ["pdf"]
    assert en["meta"]["seen_skills"] == ["xlsx", "threejs"]
    assert en["meta"]["unloadable_skills"] == {"threejs": "invalid YAML: mapping values are not allowed here"}
    assert en["offered"] == ["pdf"] and en["meta"]["offered_from"] == "unknown"  # no "of n" from a listing
    res = CliRunner().invoke(cli, ["check", str(log)])
    assert res.exit_code == 1
    fails = [ln for ln in res.output.splitlines() if ln.startswith("FAIL")]
    assert fails == [
        "FAIL integrity: broken arm (skills present): codex:m t1 (epoch 1), trial t1__b: a listing of a skills "
        "folder shows pdf",
        "FAIL integrity: leak check not possible: codex:m t2 (epoch 1), trial t2__b: "
        f"{u2}/agent/codex.txt: no Codex exec --json events found; its with-skills partner's log was read",
        "FAIL integrity: leak check not possible: codex:m t3 (epoch 1), trial t3__b: no agent/ trajectory; its "
        "with-skills partner's log was read"]
    res = CliRunner().invoke(cli, ["check", str(log), "--allow-leaks"])
    assert res.exit_code == 0 and "FAIL" not in res.output


def test_offered_from_the_tasks_own_skills_folder(tmp_path):
    """Issue 53: SkillsBench tasks ship their skills in environment/skills/; with --tasks, a trial's
    task is the folder named by the last part of its config.task.path (a path on another machine)
    and its skills are the offered list: the headline says "opened 1 of 2 offered". Without --tasks
    nothing states an offered count (headline, report.md, audit.json)."""
    tasks = tmp_path / "tasks"
    for t in ("t1", "t2"):
        for sk in ("pdf", "xlsx"):
            (tasks / t / "environment" / "skills" / sk).mkdir(parents=True)
            (tasks / t / "environment" / "skills" / sk / "SKILL.md").write_text(f"---\nname: {sk}\n---\n")
    on, off = tmp_path / "with-skills", tmp_path / "without-skills"
    for i, t in enumerate(("t1", "t2", "t3")):
        cfg = {"task": {"path": f"/home/someone/SkillsBench/tasks/{t}"},
               "agent": {"name": "codex", "model_name": "m"}}
        a = _trial(on / f"{t}__a", task_name=f"{t}-renamed" if t == "t1" else t, config=cfg)
        _codex_log(a, _cmd("cat /root/.codex/skills/pdf/SKILL.md", "---") if i < 2 else _cmd("ls"))
        b = _trial(off / f"{t}__b", task_name=f"{t}-renamed" if t == "t1" else t, config=cfg,
                   verifier_result={"rewards": {"reward": 0.0}})
        _codex_log(b, _cmd("ls /root"))
    log, plain = tmp_path / "runs.jsonl", tmp_path / "plain.jsonl"
    res = CliRunner().invoke(cli, ["import", "harbor", str(on), str(off), "--tasks", str(tasks), "-o", str(log)])
    assert res.exit_code == 0, res.output
    assert ("note: 1 with-skills trial(s) whose task is not a folder of --tasks "
            f"{tasks} (by the last part of config.task.path, then task_name): t3__a") in res.output
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    en = {r["task_id"]: r for r in recs if r["condition"] == "enabled"}
    assert en["t1-renamed"]["offered"] == ["pdf", "xlsx"]
    assert en["t1-renamed"]["meta"]["offered_from"] == "the task's skills folder"
    assert en["t3"]["meta"]["offered_from"] == "unknown"
    res = CliRunner().invoke(cli, ["audit", str(log), "--out", str(tmp_path / "rep"), "-q", "--embedder", "tfidf",
                                   "--bootstrap", "0"])
    assert res.exit_code == 0, res.output
    assert "opened 1 of 2 offered" in " ".join(res.output.split())
    assert CliRunner().invoke(cli, ["import", "harbor", str(on), str(off), "-o", str(plain), "-q"]).exit_code == 0
    res = CliRunner().invoke(cli, ["audit", str(plain), "--out", str(tmp_path / "rep2"), "-q", "--embedder", "tfidf",
                                   "--bootstrap", "0"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "offered list was not logged" in text and " of 2 offered" not in text and "offered skills" not in text
    md = (tmp_path / "rep2" / "report.md").read_text()
    assert "skills the runs say were offered" not in md and " of 2 offered" not in md
    doc = json.loads((tmp_path / "rep2" / "audit.json").read_text())
    [r] = [v["reach"] for v in doc["headline"]["per_model"] if v.get("reach")]
    assert r["n_offered"] in (0, None)


def test_one_job_with_both_arms_and_many_agents_imports_without_side_options(tmp_path):
    """Issue 53: a job whose agents differ only in `skills` (as `run --engine harbor` writes it; here
    with two agents x models mixed in, as SkillsBench's archive jobs are): each trial's side comes
    from its own config.agent.skills, no --enabled / --disabled needed, one pair per agent, model
    and task. Given under --disabled, the with-skills trials keep their config's side and are named
    as conflicts that fail `check`."""
    job = tmp_path / "myjob"
    for task in ("t1", "t2"):
        for agent, model in (("codex", "gpt"), ("terminus-2", "qwen")):
            for on in (True, False):
                _trial(job / f"{task}__{agent}{'S' if on else 'N'}", task_name=task,
                       config={"job_id": "j1", "agent": {"name": agent, "model_name": model,
                                                         "skills": ["/x/skills"] if on else []}},
                       verifier_result={"rewards": {"reward": 1.0 if on or task == "t1" else 0.0}})
    records, report = import_harbor([str(job)])
    assert report.pairs == 4 and len(records) == 8
    assert sorted({r["model"] for r in records}) == ["codex:gpt", "terminus-2:qwen"]
    assert all(r["meta"]["side_from"].startswith("config.agent.skills") for r in records)
    assert "sides from config.agent.skills (8 trial(s))" in report.naming
    log = tmp_path / "runs.jsonl"
    res = CliRunner().invoke(cli, ["import", "harbor", "--disabled", str(job), "-o", str(log)])
    assert res.exit_code == 0, res.output
    assert ("note: arm integrity: 4 trial(s) whose sources disagree on the side (an option says one, the trial's "
            "config.agent.skills the other; the config decides, `check` fails on them): t1__codexS, "
            "t1__terminus-2S, t2__codexS, t2__terminus-2S") in res.output
    res = CliRunner().invoke(cli, ["check", str(log)])
    assert res.exit_code == 1
    assert ("FAIL integrity: side conflict: codex:gpt t1 (epoch 1), trial t1__codexS: given as --disabled "
            f"({job}), but its config's agent.skills is ['/x/skills']: counted as enabled") in res.output


def test_a_passed_over_folder_is_named_before_the_error_when_nothing_pairs(tmp_path):
    """Issue 53: when nothing pairs (exit 2), the lines before the error still name the trial folder
    without result.json; with bare paths its side comes from its path's words (or its config's
    agent.skills), so the note still says what it costs."""
    _trial(tmp_path / "with-skills" / "t1__a")
    gap = tmp_path / "noskills" / "t1__gap"
    (gap / "agent").mkdir(parents=True)
    (gap / "config.json").write_text(json.dumps({"task": {"path": "t1"}, "agent": {"skills": []}}))
    (gap / "agent" / "codex.txt").write_text('{"type":"thread.started"}\n')
    res = CliRunner().invoke(cli, ["import", "harbor", str(tmp_path / "with-skills"), str(tmp_path / "noskills"),
                                   "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2
    lines = res.output.splitlines()
    assert lines[-1].startswith("Error: nothing to write: no enabled run pairs with a disabled run")
    [note] = [ln for ln in lines if "no result.json" in ln]
    assert "noskills/t1__gap" in note and note.endswith("the leak check was not possible for 1 without-skills "
                                                        "trial(s)")
    assert lines.index(note) < len(lines) - 1 and not (tmp_path / "o.jsonl").exists()


def test_a_graded_reward_is_kept_as_the_records_score(tmp_path):
    """A verifier reward of partial credit is the record's `score` beside `correct` (reward >=
    --threshold); a non-finite reward gives no score."""
    _trial(tmp_path / "with" / "t1__a", verifier_result={"rewards": {"reward": 0.45}})
    _trial(tmp_path / "without" / "t1__b", verifier_result={"rewards": {"reward": 0.1}})
    _trial(tmp_path / "with" / "t2__c", task_name="t2", verifier_result={"rewards": {"reward": 1}})
    _trial(tmp_path / "without" / "t2__d", task_name="t2", verifier_result={"rewards": {"reward": 0.0}})
    records, _ = import_harbor(enabled=[str(tmp_path / "with")], disabled=[str(tmp_path / "without")],
                               threshold=0.4)
    got = {(r["task_id"], r["condition"]): (r["correct"], r.get("score")) for r in records}
    assert got == {("t1", "enabled"): (True, 0.45), ("t1", "disabled"): (False, 0.1),
                   ("t2", "enabled"): (True, 1.0), ("t2", "disabled"): (False, 0.0)}
    from skillaudit.importers.harbor import _reward

    assert _reward({"verifier_result": {"rewards": {"reward": float("inf")}}}) is None
    assert _reward({"verifier_result": {"rewards": {"reward": True}}}) is None


def test_tokens_cost_and_agent_time_come_from_result_json(tmp_path):
    """agent_result's token counts are meta.usage (cached apart), cost_usd when a number, and the
    agent's own wall time (agent_execution) is meta.latency_s; nulls are left out, never 0."""
    ex = {"started_at": "2026-01-27T04:44:14.825593Z", "finished_at": "2026-01-27T04:47:27.513391Z"}
    _trial(tmp_path / "with" / "t1__a", agent_execution=ex, agent_result={
        "n_input_tokens": 1000, "n_cache_tokens": 600, "n_output_tokens": 0, "cost_usd": 0.25})
    _trial(tmp_path / "without" / "t1__b", agent_execution={"started_at": "x", "finished_at": "y"},
           agent_result={"n_input_tokens": None, "n_cache_tokens": None, "n_output_tokens": None, "cost_usd": None})
    records, _ = import_harbor(enabled=[str(tmp_path / "with")], disabled=[str(tmp_path / "without")])
    meta = {r["condition"]: r["meta"] for r in records}
    assert meta["enabled"]["usage"] == {"prompt_tokens": 1000, "completion_tokens": 0, "cached_tokens": 600}
    assert meta["enabled"]["cost_usd"] == 0.25 and meta["enabled"]["latency_s"] == 192.688
    assert not {"usage", "cost_usd", "latency_s", "timeout"} & set(meta["disabled"])
    from skillaudit.importers.harbor import _timeout_label

    assert _timeout_label({"config": {"timeout_multiplier": 4.0, "agent": {"override_timeout_sec": 900}}}) == \
        "timeout x4, agent timeout 900 s"
    assert _timeout_label({"config": {"timeout_multiplier": None, "agent": {}}}) is None
