"""`run --engine harbor`: two job configs that differ only in the injected skills, the exact commands
(--dry-run, without Harbor installed), and a run through a stand-in `harbor` executable that writes
recorded trial folders: progress per trial, import and pairing into the run log, resume."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from click.testing import CliRunner

from skillaudit.cli import cli

REPO = Path(__file__).resolve().parents[1]


def _dataset(tmp_path: Path) -> Path:
    ds = tmp_path / "mini"
    for t in ("hello-file", "status-report"):
        (ds / t).mkdir(parents=True, exist_ok=True)
        (ds / t / "task.toml").write_text('version = "1.0"\n')
    return ds


def _skills(tmp_path: Path) -> Path:
    s = tmp_path / "skills" / "status-report"
    s.mkdir(parents=True, exist_ok=True)
    if not (s / "SKILL.md").exists():  # kept across calls: a test may edit it
        (s / "SKILL.md").write_text("---\nname: status-report\ndescription: The team's status-report format.\n---\nUse it.\n")
    return tmp_path / "skills"


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return ["run", "--engine", "harbor", "--dataset", str(_dataset(tmp_path)), "--agent-name", "terminus-2",
            "--model", "openai/qwen2.5-coder-0.5b-instruct", "--skills", str(_skills(tmp_path)),
            "--agent-kwarg", "api_base=http://127.0.0.1:8765/v1", "--agent-kwarg", "max_turns=6",
            "--out", str(tmp_path / "runs.jsonl"), *extra]


def test_dry_run_writes_one_job_whose_two_agents_differ_only_in_the_skills(tmp_path, monkeypatch):
    """--dry-run writes one job config with two agents identical but for `skills` (Harbor builds a
    job's trials task by task, agents innermost: each task's arms run side by side) and prints the
    one command; it needs no Harbor."""
    monkeypatch.setenv("SKILLAUDIT_HARBOR", str(tmp_path / "no-such-harbor"))
    res = CliRunner().invoke(cli, _args(tmp_path, "--dry-run", "--trials", "3", "--n-concurrent", "2",
                                        "--harbor-arg", "--timeout-multiplier=2"))
    assert res.exit_code == 0, res.output
    jobs = tmp_path / "runs.jsonl.harbor"
    assert sorted(p.name for p in jobs.iterdir()) == ["runs.config.json"]
    cfg = json.loads((jobs / "runs.config.json").read_text())
    on, off = cfg["agents"]
    assert on["skills"] == [str((tmp_path / "skills").resolve())] and off["skills"] == []
    assert {k: v for k, v in on.items() if k != "skills"} == {k: v for k, v in off.items() if k != "skills"} == {
        "name": "terminus-2", "model_name": "openai/qwen2.5-coder-0.5b-instruct",
        "kwargs": {"api_base": "http://127.0.0.1:8765/v1", "max_turns": 6}}
    assert cfg["n_attempts"] == 3 and cfg["n_concurrent_trials"] == 2 and cfg["environment"] == {"type": "docker"}
    assert cfg["job_name"] == "runs"
    commands = [ln for ln in res.output.splitlines() if " run -c " in ln]
    assert len(commands) == 1 and commands[0].endswith(f"run -c {jobs / 'runs.config.json'} -y --timeout-multiplier=2")
    assert not (tmp_path / "runs.jsonl").exists()


def test_a_dataset_whose_tasks_ship_skills_is_refused_unless_a_skills_free_copy_is_given(tmp_path, monkeypatch):
    """A task with environment/skills/ (SkillsBench) has its skills in both arms: refused in one
    line naming the tasks; with --no-skills-dataset (a copy without them) the arms are two jobs,
    each with half of --n-concurrent; a copy that still ships skills is refused too."""
    monkeypatch.setenv("SKILLAUDIT_HARBOR", str(tmp_path / "no-such-harbor"))
    ds = _dataset(tmp_path)
    (ds / "status-report" / "environment" / "skills" / "fmt").mkdir(parents=True)
    (ds / "status-report" / "environment" / "skills" / "fmt" / "SKILL.md").write_text("---\nname: fmt\n---\n")
    res = CliRunner().invoke(cli, _args(tmp_path, "--dry-run"))
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert res.output == (f"Error: --dataset {ds}: 1 task(s) ship their own skills in environment/skills/ "
                          "(status-report (fmt)): a no-skills arm cannot be made by injection; give "
                          "--no-skills-dataset DIR, a copy of the tasks without their skills\n")
    res = CliRunner().invoke(cli, _args(tmp_path, "--dry-run", "--no-skills-dataset", str(ds)))
    assert res.exit_code == 2 and "still ship skills" in res.output
    free = tmp_path / "free"
    for t in ("hello-file", "status-report"):
        (free / t).mkdir(parents=True)
        (free / t / "task.toml").write_text('version = "1.0"\n')
    res = CliRunner().invoke(cli, _args(tmp_path, "--dry-run", "--no-skills-dataset", str(free),
                                        "--n-concurrent", "4"))
    assert res.exit_code == 0, res.output
    jobs = tmp_path / "runs.jsonl.harbor"
    on = json.loads((jobs / "runs-skills.config.json").read_text())
    off = json.loads((jobs / "runs-noskills.config.json").read_text())
    assert on["n_concurrent_trials"] == off["n_concurrent_trials"] == 2
    assert on["datasets"] == [{"path": str(ds.resolve())}] and off["datasets"] == [{"path": str(free.resolve())}]
    assert on["agents"][0]["skills"] and off["agents"][0]["skills"] == []
    assert len([ln for ln in res.output.splitlines() if " run -c " in ln]) == 2


def test_without_harbor_the_run_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLAUDIT_HARBOR", str(tmp_path / "no-such-harbor"))
    res = CliRunner().invoke(cli, _args(tmp_path))
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert "harbor is not installed: install it with `uv tool install harbor`" in res.output


FAKE_HARBOR = r'''#!PYTHON
"""A stand-in for `harbor run -c CONFIG` / `harbor jobs resume -p FOLDER`: writes one trial per
task, attempt and agent (agents innermost, as Harbor's job plan builds them), each result.json
carrying its own config.agent (skills included) and the job's id; the reward is 1 with skills on
status-report and 0 otherwise (hello-file passes both ways); the with-skills status-report trial's
ATIF reads the skill."""
import json, os, sys, time
from pathlib import Path

args = sys.argv[1:]
LOG = Path(os.environ["FAKE_HARBOR_LOG"])
with LOG.open("a") as fh:
    fh.write(" ".join(args) + "\n")
if args[:2] == ["jobs", "resume"]:
    sys.exit(0)
cfg = json.loads(Path(args[args.index("-c") + 1]).read_text())
job = Path(cfg["jobs_dir"]) / cfg["job_name"]
job.mkdir(parents=True)
(job / "config.json").write_text(json.dumps(cfg))
tasks = cfg["datasets"][0].get("task_names") or ["hello-file", "status-report"]
for task in tasks:
    for k in range(cfg["n_attempts"]):
        for agent in cfg["agents"]:
            on = bool(agent["skills"])
            trial = job / f"{task}__t{k}{'s' if on else 'n'}"
            (trial / "agent").mkdir(parents=True)
            steps = [{"step_id": 1, "source": "user", "message": "<available_skills><skill><name>status-report</name>"
                      "</skill></available_skills>" if on else "do it"}]
            if on and task == "status-report":
                steps.append({"step_id": 2, "source": "agent", "tool_calls": [
                    {"tool_call_id": "c1", "function_name": "bash_command",
                     "arguments": {"keystrokes": "cat /runtime/skills/status-report/SKILL.md\n"}}]})
            (trial / "agent" / "trajectory.json").write_text(json.dumps({"schema_version": "ATIF-v1.8", "steps": steps}))
            reward = 1.0 if (task == "hello-file" or on) else 0.0
            (trial / "result.json").write_text(json.dumps({
                "task_name": task, "trial_name": trial.name, "started_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "config": {"job_id": cfg["job_name"] + "-id", "task": {"path": f"/elsewhere/{task}"},
                           "agent": {"name": agent["name"], "model_name": agent.get("model_name"),
                                     "skills": agent["skills"]}},
                "verifier_result": {"rewards": {"reward": reward}}, "exception_info": None}))
print("done")
'''


def _fake_harbor(tmp_path: Path, monkeypatch) -> Path:
    exe = tmp_path / "harbor"
    exe.write_text(FAKE_HARBOR.replace("PYTHON", sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("SKILLAUDIT_HARBOR", str(exe))
    monkeypatch.setenv("FAKE_HARBOR_LOG", str(tmp_path / "calls.log"))
    return exe


def test_a_run_imports_and_pairs_the_trials_and_resumes(tmp_path, monkeypatch):
    """Through a stand-in harbor: each trial is reported as it lands; the import gives 2 tasks x 2
    trials = 4 pairs; status-report is a rescue on both trials with the skill read (RAE's S_call),
    hello-file passes both ways; re-running resumes both jobs and writes nothing twice."""
    _fake_harbor(tmp_path, monkeypatch)
    res = CliRunner().invoke(cli, _args(tmp_path, "--trials", "2"))
    assert res.exit_code == 0, res.output
    assert "enabled: trial status-report__t0s finished: reward 1.0" in res.output
    assert "wrote 8 record(s) (4 pairs), skipped 0 already logged, 0 error trial(s)" in res.output
    recs = [json.loads(x) for x in (tmp_path / "runs.jsonl").read_text().splitlines()]
    en = {(r["task_id"], r["epoch"]): r for r in recs if r["condition"] == "enabled"}
    dis = {(r["task_id"], r["epoch"]): r for r in recs if r["condition"] == "disabled"}
    assert all(en["status-report", e]["correct"] and not dis["status-report", e]["correct"] for e in (1, 2))
    assert en["status-report", 1]["retrievals"][0]["skills"] == ["status-report"]
    assert en["hello-file", 1]["retrievals"] == [] and en["hello-file", 1]["offered"] == ["status-report"]
    assert {r["model"] for r in recs} == {"terminus-2:openai/qwen2.5-coder-0.5b-instruct"}
    metrics = json.loads(CliRunner().invoke(cli, ["metrics", str(tmp_path / "runs.jsonl"), "--json"]).output)
    [g] = [g for g in metrics["groups"] if g["benchmark"] == "*"]
    assert (g["n_cond"], g["cond_b"], g["cond_c"], g["rae"]) == (2, 2, 0, 1.0)
    res = CliRunner().invoke(cli, _args(tmp_path, "--trials", "2"))
    assert res.exit_code == 0, res.output
    assert "wrote 0 record(s) (4 pairs), skipped 8 already logged" in res.output
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["run", "jobs"]  # one job with both arms, then resumed
    assert calls[1] == f"jobs resume -p {tmp_path / 'runs.jsonl.harbor' / 'runs'}"


def test_a_failing_harbor_is_an_error_naming_the_job(tmp_path, monkeypatch):
    exe = tmp_path / "harbor"
    exe.write_text(f"#!{sys.executable}\nimport sys\nprint('docker daemon not reachable')\nsys.exit(3)\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("SKILLAUDIT_HARBOR", str(exe))
    res = CliRunner().invoke(cli, _args(tmp_path))
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert "harbor (job runs) exited 3: docker daemon not reachable" in res.output
    assert not (tmp_path / "runs.jsonl").exists()
    assert os.path.isdir(tmp_path / "runs.jsonl.harbor")


# ---------------------------------------------------------------- the scripted terminus-2 endpoint
REAL_T2 = REPO.parent / "shared" / "data" / "real" / "harbor-terminus2-local"


def _first_prompt(trial: Path) -> str:
    return json.loads((trial / "agent" / "trajectory.json").read_text())["steps"][0]["message"]


def test_scripted_endpoint_answers_terminus2s_recorded_prompts():
    """On the first prompts terminus-2 really sent (the Harbor 0.26.0 pair made here): with the skill
    offered it reads SKILL.md; without, it writes a report in another format; after the skill's
    body is in the terminal output, it writes the skill's format; a confirmation is answered."""
    import pytest

    if not REAL_T2.is_dir():
        pytest.skip("../shared/data/real is absent")
    from _terminus_endpoint import reply

    on = _first_prompt(next((REAL_T2 / "t2-skill").glob("status-report__*")))
    off = _first_prompt(next((REAL_T2 / "t2-noskill").glob("status-report__*")))
    first = reply([{"role": "user", "content": on}])
    assert first["commands"] == [{"keystrokes": "cat /runtime/skills/status-report/SKILL.md\n", "duration": 0.5}]
    assert first["task_complete"] is False
    skill = "# Status report format\nA status report is a plain-text file..."
    second = reply([{"role": "user", "content": on}, {"role": "assistant", "content": json.dumps(first)},
                    {"role": "user", "content": f"New Terminal Output:\n{skill}"}])
    assert second["commands"][0]["keystrokes"].startswith("printf '# STATUS\\nstate: green\\nowner: skillaudit\\n'")
    plain = reply([{"role": "user", "content": off}])
    assert "Status: healthy" in plain["commands"][0]["keystrokes"] and plain["task_complete"] is True
    confirm = reply([{"role": "user", "content": off},
                     {"role": "user", "content": "Are you sure you want to mark the task as complete?"}])
    assert confirm == {"analysis": "done", "plan": "nothing left", "commands": [], "task_complete": True}


def test_skill_digest_is_harbors(tmp_path):
    """The digest of a skill folder is the one Harbor writes in lock.json (checked on the real pair's
    status-report skill when ../shared is present, and on a constructed folder always)."""
    from skillaudit.engine.harbor import skill_digest

    mini = REPO.parent / "shared" / "data" / "harbor-mini" / "skills" / "status-report"
    if mini.is_dir():
        assert skill_digest(mini) == "sha256:c5cb1fc949cee968f86a001bc5ea2dd42e4d9f6f134c29a474013b0b11bc3091"
    d = _skills(tmp_path) / "status-report"
    before = skill_digest(d)
    (d / "scripts").mkdir()
    (d / "scripts" / "run.sh").write_text("echo hi\n")
    assert skill_digest(d) != before


def test_reuse_reruns_only_the_tasks_whose_used_skill_changed(tmp_path, monkeypatch):
    """After a run, editing the body of the skill status-report used re-runs only status-report with
    skills (its old no-skills trials pair with the new ones); editing nothing re-runs nothing;
    editing a description (the catalog every task saw) re-runs every task."""
    _fake_harbor(tmp_path, monkeypatch)
    assert CliRunner().invoke(cli, _args(tmp_path)).exit_code == 0
    old = tmp_path / "runs.jsonl"
    calls = tmp_path / "calls.log"

    def reuse(out: str):
        return CliRunner().invoke(cli, [*_args(tmp_path), "--reuse", str(old), "--out", str(tmp_path / out),
                                        "--jobs-dir", str(tmp_path / f"{out}.jobs")])

    n = len(calls.read_text().splitlines())
    res = reuse("same.jsonl")
    assert res.exit_code == 0, res.output
    assert "re-ran 0 of 2 tasks with skills (nothing changed)" in res.output
    assert len(calls.read_text().splitlines()) == n
    assert sorted((tmp_path / "same.jsonl").read_text().splitlines()) == sorted(old.read_text().splitlines())
    md = tmp_path / "skills" / "status-report" / "SKILL.md"
    md.write_text(md.read_text() + "Also date it.\n")
    res = reuse("body.jsonl")
    assert res.exit_code == 0, res.output
    assert "re-ran 1 of 2 tasks with skills (1 a skill it used changed)" in res.output
    cfg = json.loads((tmp_path / "body.jsonl.jobs" / "body-reuse.config.json").read_text())
    assert cfg["datasets"][0]["task_names"] == ["status-report"]
    assert len(cfg["agents"]) == 1 and cfg["agents"][0]["skills"]  # the with-skills agent only
    recs = [json.loads(x) for x in (tmp_path / "body.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and sorted((r["task_id"], r["condition"]) for r in recs) == sorted(
        (t, c) for t in ("hello-file", "status-report") for c in ("enabled", "disabled"))
    new_on = next(r for r in recs if r["task_id"] == "status-report" and r["condition"] == "enabled")
    assert "body.jsonl.jobs" in new_on["meta"]["source"]
    md.write_text(md.read_text().replace("The team's status-report format.", "The status-report format."))
    res = reuse("desc.jsonl")
    assert "re-ran 2 of 2 tasks with skills (2 the catalog (names, descriptions) changed)" in res.output
