"""End to end under Harbor: real Harbor, real Docker, the real terminus-2 agent and a scripted
OpenAI-compatible endpoint (tests/_terminus_endpoint.py) over the harbor-mini dataset (3 tasks, the
status-report skill). `make test-harbor` runs it; it skips with one line where Harbor or a Docker
daemon is absent (CI passes without Docker)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
from _harness_fakes import ScriptedServer
from _terminus_endpoint import responder
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.engine.harbor import find_harbor
from skillaudit.importers.harbor import import_harbor

pytestmark = pytest.mark.harbor
MINI = Path(os.environ.get("SKILLAUDIT_HARBOR_MINI")
            or Path(__file__).resolve().parents[2] / "shared" / "data" / "harbor-mini")


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _need_harbor(monkeypatch) -> None:
    """Skip (one line) where Harbor, a Docker daemon or the harbor-mini dataset is absent."""
    if find_harbor() is None:
        pytest.skip("harbor not found (PATH or SKILLAUDIT_HARBOR); make test-harbor sets it up")
    if not _docker_answers():
        pytest.skip("no Docker daemon answers `docker info`")
    if not (MINI / "skills").is_dir():
        pytest.skip(f"{MINI}: the harbor-mini dataset is absent")
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")


def test_terminus2_with_and_without_the_skill_pairs_as_the_script_implies(tmp_path, monkeypatch):
    """The script reads the skill when it is offered and writes the report in its format; without
    it, in another. So: status-report is a rescue whose with-skills run read the skill (S_call 1,
    RAE +100 pp), hello-file and sum-numbers pass both ways; no error trial."""
    _need_harbor(monkeypatch)
    out = tmp_path / "runs.jsonl"
    t0 = time.monotonic()
    with ScriptedServer(responder) as srv:
        res = CliRunner().invoke(cli, [
            "run", "--engine", "harbor", "--dataset", str(MINI), "--agent-name", "terminus-2",
            "--model", "openai/scripted", "--agent-kwarg", f"api_base={srv.url}",
            "--agent-kwarg", "record_terminal_session=false", "--agent-kwarg", "max_turns=6",
            "--skills", str(MINI / "skills"), "--env", "docker", "--n-concurrent", "2", "--out", str(out)])
    wall = time.monotonic() - t0
    assert res.exit_code == 0, res.output
    print(f"harbor end-to-end: {wall:.0f} s wall\n{res.output}")
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    by = {(r["task_id"], r["condition"]): r for r in recs}
    assert len(recs) == 6 and all(r.get("error") is None for r in recs)
    assert by["status-report", "enabled"]["correct"] and not by["status-report", "disabled"]["correct"]
    assert by["status-report", "enabled"]["retrievals"][0]["skills"] == ["status-report"]
    assert by["status-report", "enabled"]["meta"]["use_rules"] == {"status-report": "shell read"}
    for t in ("hello-file", "sum-numbers"):
        assert by[t, "enabled"]["correct"] and by[t, "disabled"]["correct"] and by[t, "enabled"]["retrievals"] == []
    metrics = json.loads(CliRunner().invoke(cli, ["metrics", str(out), "--json"]).output)
    [g] = [g for g in metrics["groups"] if g["benchmark"] == "*"]
    assert (g["n_pairs"], g["n_cond"], g["cond_b"], g["cond_c"], g["rae"]) == (3, 1, 1, 0, 1.0)
    # one job, both arms: each task's two trials started side by side (Harbor: agents innermost)
    job = tmp_path / "runs.jsonl.harbor" / "runs"
    starts: dict[str, dict[str, datetime]] = {}
    for res_file in job.glob("*/result.json"):
        doc = json.loads(res_file.read_text())
        side = "enabled" if doc["config"]["agent"].get("skills") else "disabled"
        starts.setdefault(doc["task_name"], {})[side] = datetime.fromisoformat(doc["started_at"])
    for task, arms in sorted(starts.items()):
        gap = abs((arms["enabled"] - arms["disabled"]).total_seconds())
        print(f"{task}: with skills started {arms['enabled'].isoformat()}, without {arms['disabled'].isoformat()} "
              f"({gap:.1f} s apart)")
        assert gap <= 10, (task, gap)
    # the real job imports into its 3 pairs with no side options (each trial's own agent.skills)
    records, report = import_harbor([str(job)])
    assert report.pairs == 3 and all(r["meta"]["side_from"].startswith("config.agent.skills") for r in records)


def test_triggers_through_harbor_read_what_terminus2_loaded(tmp_path, monkeypatch):
    """`triggers --engine harbor`: each query a generated Harbor task, the skills folder injected as
    in real use. The script reads status-report whenever the prompt mentions a status report, and
    the injected skill's own listing does on every query: so it fires on both, recall 1 and the
    query that must not take it caught (precision 1/2, one should_not fired)."""
    _need_harbor(monkeypatch)
    q = tmp_path / "queries.jsonl"
    q.write_text(json.dumps({"id": "report", "query": "Write this week's status report for the team to "
                             "/app/report.txt.", "should": ["status-report"]}) + "\n"
                 + json.dumps({"id": "other", "query": "Say hello.", "should": [], "should_not": ["status-report"]})
                 + "\n")
    out = tmp_path / "triggers.jsonl"
    t0 = time.monotonic()
    with ScriptedServer(responder) as srv:
        res = CliRunner().invoke(cli, [
            "triggers", "--skills", str(MINI / "skills"), "--queries", str(q), "--out", str(out), "--engine", "harbor",
            "--agent-name", "terminus-2", "--model", "openai/scripted", "--agent-kwarg", f"api_base={srv.url}",
            "--agent-kwarg", "record_terminal_session=false", "--agent-kwarg", "max_turns=6", "--epochs", "1",
            "--task-image", "harbor-local/bookworm:latest", "--no-network", "--n-concurrent", "2",
            "--embedder", "tfidf", "--json"])
    wall = time.monotonic() - t0
    assert res.exit_code == 0, res.output
    print(f"harbor triggers: {wall:.0f} s wall")
    doc = json.loads(res.stdout)
    (s,) = doc["skills"]
    assert (s["skill_id"], s["recall"], s["n_fired"], s["n_false"], s["should_not_fired"]) == ("status-report", 1.0,
                                                                                             2, 1, 1)
    recs = {r["task_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert recs["report"]["meta"]["fired"] == recs["other"]["meta"]["fired"] == ["status-report"]
    assert recs["report"]["meta"]["harbor_task"] == "q-0001"
    assert all(r["error"] is None for r in recs.values())
