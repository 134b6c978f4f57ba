"""`skillaudit run` end to end against a scripted server (skillaudit.engine.runner and the CLI)."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from _harness_fakes import (
    CORRECT_CODE,
    GSM8K_ROWS,
    MBPP_ROWS,
    ScriptedServer,
    chat_reply,
    native_call,
    write_library,
    write_rows,
)
from click.testing import CliRunner

from skillaudit.agents.agent import AgentConfig
from skillaudit.cli import cli
from skillaudit.engine.dispatch import run
from skillaudit.engine.options import RunOptions, parse_exclude, task_seed
from skillaudit.runs import load_runs
from skillaudit.sandbox.score import Limits

LIMITS = Limits(timeout_s=5, cpu_s=5, memory_mb=512)


def smart(path: str, body: dict):
    """Enabled runs search once then answer; answers are right except for Mbpp/3 when disabled."""
    msgs = body["messages"]
    user = msgs[1]["content"]
    tid = next((t for t, r in zip(["Mbpp/2", "Mbpp/3", "Mbpp/4"], MBPP_ROWS, strict=True)
                if r["entry_point"] in user), None)
    if "tools" in body and not any(m["role"] == "tool" for m in msgs):
        return chat_reply(None, [native_call(user[:60])], "tool_calls")
    if tid is None:  # gsm8k
        return chat_reply("Adding up... \\boxed{7}")
    enabled = any(m["role"] == "tool" for m in msgs)
    code = CORRECT_CODE[tid] if (tid != "Mbpp/3" or enabled) else "def is_not_prime(n):\n    return False\n"
    return chat_reply(f"```python\n{code}```")


@pytest.fixture(scope="module")
def oracle_cache(tmp_path_factory):
    """One oracle cache for the module: expected outputs depend only on the task's content."""
    return str(tmp_path_factory.mktemp("oracles"))


@pytest.fixture
def setup(tmp_path, oracle_cache):
    options.cache = oracle_cache
    data = write_rows(tmp_path / "mbpp.jsonl", MBPP_ROWS)
    lib = write_library(tmp_path / "skills")
    return tmp_path, data, lib


def options(tmp_path, data, lib, url, **kw) -> RunOptions:
    agent = AgentConfig(endpoint=url, model="fake-model", tool_mode="native", backoff_s=0.01, retries=1)
    base = {"benchmark": "mbpp_plus", "out": str(tmp_path / "out.jsonl"), "agent": agent,
            "skills": str(lib), "data": str(data), "limits": LIMITS,
            "cache_dir": getattr(options, "cache", None) or str(tmp_path / "cache")}
    base.update(kw)
    return RunOptions(**base)


def read(path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def test_run_writes_valid_paired_records(setup):
    """Every task gets an enabled and a disabled record that load_runs pairs; fields follow §3.1."""
    tmp_path, data, lib = setup
    with ScriptedServer(smart) as srv:
        summary = run(options(tmp_path, data, lib, srv.url), quiet=True)
    recs = read(tmp_path / "out.jsonl")
    assert summary.written == 6 and summary.errors == 0 and len(recs) == 6
    by = {(r["task_id"], r["condition"]): r for r in recs}
    on, off = by[("Mbpp/3", "enabled")], by[("Mbpp/3", "disabled")]
    assert on["correct"] is True and off["correct"] is False
    assert on["invoked"] is True and on["retrievals"][0]["skills"][0]["id"] == "prime-test"
    assert off["invoked"] is False and off["retrievals"] == []
    assert on["meta"]["seed"] == off["meta"]["seed"] == task_seed(0, "Mbpp/3", 1)
    assert on["meta"]["temperature"] == 0.7 and "latency_s" in on["meta"] and on["error"] is None
    assert on["model"] == "fake-model" and on["benchmark"] == "mbpp_plus" and on["epoch"] == 1
    paired = load_runs([tmp_path / "out.jsonl"], strict=True)
    assert paired.n_pairs == 3 and paired.n_error_pairs == 0


def test_resume_skips_logged_records_and_finishes_a_killed_run(setup):
    """A second run writes nothing; a run cut off mid-record is completed without duplicates."""
    tmp_path, data, lib = setup
    out = tmp_path / "out.jsonl"
    with ScriptedServer(smart) as srv:
        run(options(tmp_path, data, lib, srv.url), quiet=True)
        again = run(options(tmp_path, data, lib, srv.url), quiet=True)
        assert again.written == 0 and again.skipped == 6
        lines = out.read_bytes().splitlines(keepends=True)
        out.write_bytes(b"".join(lines[:3]) + lines[3][:25])  # killed while writing record 4
        n_before = len(srv.requests)
        resumed = run(options(tmp_path, data, lib, srv.url), quiet=True)
    assert resumed.skipped == 3 and resumed.written == 3
    assert len(srv.requests) > n_before
    recs = read(out)
    assert len(recs) == 6 and len({(r["task_id"], r["condition"]) for r in recs}) == 6
    assert load_runs([out], strict=True).n_pairs == 3


def test_epochs_multiply_records_with_distinct_seeds(setup):
    """--epochs 2 logs each task and condition twice, with a different seed per epoch."""
    tmp_path, data, lib = setup
    with ScriptedServer(smart) as srv:
        run(options(tmp_path, data, lib, srv.url, epochs=2, limit=1, seed=3), quiet=True)
    recs = read(tmp_path / "out.jsonl")
    assert sorted((r["epoch"], r["condition"]) for r in recs) == [
        (1, "disabled"), (1, "enabled"), (2, "disabled"), (2, "enabled")]
    seeds = {r["epoch"]: r["meta"]["seed"] for r in recs}
    assert seeds[1] != seeds[2]


def test_endpoint_failures_become_error_records(setup):
    """When the endpoint keeps failing, each record says so in `error`, with correct false."""
    tmp_path, data, lib = setup
    with ScriptedServer(lambda p, b: (500, {"error": "down"})) as srv:
        summary = run(options(tmp_path, data, lib, srv.url, limit=1), quiet=True)
    recs = read(tmp_path / "out.jsonl")
    assert summary.errors == 2 and len(recs) == 2
    assert all(r["error"].startswith("agent: endpoint failed") and r["correct"] is False for r in recs)
    paired = load_runs([tmp_path / "out.jsonl"])
    assert paired.n_pairs == 0 and paired.n_error_pairs == 1


def test_retry_errors_replaces_error_records(setup):
    """--retry-errors re-runs error records and leaves one record per key."""
    tmp_path, data, lib = setup
    with ScriptedServer(lambda p, b: (500, {"error": "down"})) as srv:
        run(options(tmp_path, data, lib, srv.url, limit=1), quiet=True)
    with ScriptedServer(smart) as srv:
        summary = run(options(tmp_path, data, lib, srv.url, limit=1, retry_errors=True), quiet=True)
    recs = read(tmp_path / "out.jsonl")
    assert summary.written == 2 and len(recs) == 2 and all(r["error"] is None for r in recs)


def test_exclude_skills_never_retrieves_them(setup):
    """With --exclude-skills the pruned skill is never offered and the exclusion is logged."""
    tmp_path, data, lib = setup
    with ScriptedServer(smart) as srv:
        run(options(tmp_path, data, lib, srv.url, exclude_skills=("prime-test",)), quiet=True)
    recs = read(tmp_path / "out.jsonl")
    got = {s["id"] for r in recs for c in r["retrievals"] for s in c["skills"]}
    assert "prime-test" not in got and got
    assert all(r["meta"]["excluded_skills"] == ["prime-test"] for r in recs)


def test_parse_exclude_accepts_lists_files_and_prune_json(tmp_path):
    """--exclude-skills takes 'a,b', a file with one id per line, or prune --json output."""
    assert parse_exclude("a, b,a") == ("a", "b")
    txt = tmp_path / "ids.txt"
    txt.write_text("x  # noisy\ny\n")
    assert parse_exclude(str(txt)) == ("x", "y")
    js = tmp_path / "prune.json"
    js.write_text(json.dumps({"recommendations": [{"skill_id": "p", "action": "prune"},
                                                  {"skill_id": "k", "action": "keep"}]}))
    assert parse_exclude(str(js)) == ("p",)


def test_math_benchmark_runs_and_scores(tmp_path):
    """GSM8K tasks run through the same loop and are scored by their final answer."""
    data = write_rows(tmp_path / "g.jsonl", GSM8K_ROWS)
    lib = write_library(tmp_path / "skills")
    with ScriptedServer(smart) as srv:
        run(options(tmp_path, data, lib, srv.url, benchmark="gsm8k"), quiet=True)
    recs = read(tmp_path / "out.jsonl")
    ok = {(r["task_id"], r["condition"]): r["correct"] for r in recs}
    assert ok[("gsm8k/0", "enabled")] and ok[("gsm8k/0", "disabled")]
    assert not ok[("gsm8k/1", "enabled")]
    assert recs[0]["meta"]["extracted"] == "7"


def test_cli_run_with_json_summary_and_resume(setup):
    """`skillaudit run --json` prints a skillaudit.run/v1 summary; rerunning skips what is logged."""
    tmp_path, data, lib = setup
    out = tmp_path / "cli.jsonl"
    args = ["run", "--benchmark", "mbpp_plus", "--data", str(data), "--skills", str(lib), "--out", str(out),
            "--model", "fake-model", "--tool-mode", "native", "--limit", "2", "--timeout", "5", "--json"]
    with ScriptedServer(smart) as srv:
        first = CliRunner().invoke(cli, [*args, "--endpoint", srv.url], env={"OPENAI_API_KEY": "sk-cli-secret"})
        second = CliRunner().invoke(cli, [*args, "--endpoint", srv.url])
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert doc["schema"] == "skillaudit.run/v1" and doc["written"] == 4 and doc["errors"] == 0
    assert json.loads(second.stdout)["skipped"] == 4
    assert "sk-cli-secret" not in out.read_text()
    assert srv.headers[0]["Authorization"] == "Bearer sk-cli-secret"


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    """A missing data file exits 2 with a one-line message naming it, and no traceback."""
    lib = write_library(tmp_path / "skills")
    res = CliRunner().invoke(cli, ["run", "--benchmark", "gsm8k", "--data", str(tmp_path / "none.jsonl"),
                                   "--skills", str(lib), "--endpoint", "http://127.0.0.1:9/v1",
                                   "--model", "m", "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2
    assert re.search(r"none\.jsonl: no such file", res.output) and "Traceback" not in res.output


def _llm_up() -> bool:
    try:
        return httpx.get("http://127.0.0.1:8765/v1/models", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.llm
@pytest.mark.skipif(not _llm_up(), reason="local model server not reachable on 127.0.0.1:8765")
def test_real_local_model_runs_two_mbpp_tasks(tmp_path):
    """Against the real local model, 2 MBPP+ tasks produce 4 valid, paired, non-error records."""
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "mbpp_plus.jsonl"
    if not data.is_file():
        pytest.skip("shared MBPP+ data not present")
    lib = Path(__file__).resolve().parents[1] / "skills"
    models = httpx.get("http://127.0.0.1:8765/v1/models", timeout=5).json()["data"]
    agent = AgentConfig(endpoint="http://127.0.0.1:8765/v1", model=models[0]["id"], max_tokens=200,
                        tool_mode="chatml", tool_choice="required", max_calls=1)
    opts = RunOptions(benchmark="mbpp_plus", out=str(tmp_path / "llm.jsonl"), agent=agent, skills=str(lib),
                      data=str(data), limit=2, seed=1, cache_dir=str(tmp_path / "cache"))
    summary = run(opts, quiet=True)
    recs = read(tmp_path / "llm.jsonl")
    assert summary.errors == 0 and len(recs) == 4
    assert all(r["meta"]["usage"]["completion_tokens"] > 0 for r in recs)
    assert all(r["invoked"] for r in recs if r["condition"] == "enabled")
    assert load_runs([tmp_path / "llm.jsonl"], strict=True).n_pairs == 2


def test_shards_split_the_tasks_and_pair_like_one_run(setup):
    """--shard 1/2 and 2/2 run disjoint halves of the tasks; their two logs pair like a single run's."""
    tmp_path, data, lib = setup
    with ScriptedServer(smart) as srv:
        one = run(options(tmp_path, data, lib, srv.url, out=str(tmp_path / "all.jsonl")), quiet=True)
        a = run(options(tmp_path, data, lib, srv.url, out=str(tmp_path / "s1.jsonl"), shard=(1, 2)), quiet=True)
        b = run(options(tmp_path, data, lib, srv.url, out=str(tmp_path / "s2.jsonl"), shard=(2, 2)), quiet=True)
    assert (one.n_tasks, a.n_tasks, b.n_tasks) == (3, 2, 1)
    ids = [{r["task_id"] for r in read(tmp_path / f"s{k}.jsonl")} for k in (1, 2)]
    assert ids == [{"Mbpp/2", "Mbpp/4"}, {"Mbpp/3"}]
    both = load_runs([tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"], strict=True)
    whole = load_runs([tmp_path / "all.jsonl"], strict=True)
    assert both.n_pairs == whole.n_pairs == 3
    assert sorted(both.tasks) == sorted(whole.tasks) and both.flip.sum() == whole.flip.sum()


@pytest.mark.parametrize("value", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_bad_shard_is_a_usage_error(setup, value):
    """--shard must be I/N with 1 <= I <= N; anything else exits 2 naming the option."""
    tmp_path, data, lib = setup
    res = CliRunner().invoke(cli, ["run", "--benchmark", "mbpp_plus", "--data", str(data), "--skills", str(lib),
                                   "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                                   "--out", str(tmp_path / "o.jsonl"), "--shard", value])
    assert res.exit_code == 2
    assert f"Invalid value for '--shard': {value!r} is not I/N with 1 <= I <= N (e.g. 2/4)" in res.output


def test_benchmark_reuse_reruns_only_changed_enabled_runs_with_plain_run_fields(setup):
    """`run --benchmark --reuse OLD`: disabled and untouched enabled records are copied byte for byte,
    only the enabled runs that were shown an edited skill go back to the model, through the same
    protocol entry as a plain run, so their records have exactly a plain run's fields."""
    import shutil

    tmp_path, data, lib = setup
    old = tmp_path / "old.jsonl"
    with ScriptedServer(smart) as srv:
        run(options(tmp_path, data, lib, srv.url, out=str(old)), quiet=True)
    shown = {r["task_id"] for r in read(old) for c in r["retrievals"] for s in c["skills"] if s["id"] == "prime-test"}
    assert shown and len(shown) < 3
    new_lib = tmp_path / "skills2"
    shutil.copytree(lib, new_lib)
    md = new_lib / "prime-test" / "SKILL.md"
    md.write_text(md.read_text(encoding="utf-8") + "Check divisors up to the square root only.\n", encoding="utf-8")
    new = tmp_path / "new.jsonl"
    with ScriptedServer(smart) as srv:
        summary = run(options(tmp_path, data, new_lib, srv.url, out=str(new), reuse=str(old)), quiet=True)
        n_requests = len(srv.requests)
    rerun = [r for r in read(new) if r not in read(old)]
    assert summary.reuse is not None and summary.reuse.startswith(f"re-ran {summary.written} of 6 episodes")
    assert {r["task_id"] for r in rerun} >= shown and all(r["condition"] == "enabled" for r in rerun)
    assert summary.written == len(rerun) and n_requests == 2 * len(rerun)  # native: a search turn + an answer
    old_lines = set(old.read_bytes().splitlines())
    assert sum(line in old_lines for line in new.read_bytes().splitlines()) == 6 - len(rerun)
    plain = {(r["task_id"], r["condition"]): r for r in read(old)}
    for r in rerun:
        ref = plain[(r["task_id"], r["condition"])]
        assert list(r) == list(ref) and list(r["meta"]) == list(ref["meta"])
        assert [list(c) for c in r["retrievals"]] == [list(c) for c in ref["retrievals"]]
    assert load_runs([new], strict=True).n_pairs == 3


def test_benchmark_episode_timeout_is_an_error_record(setup):
    """The built-in agent runs through the protocol's call_agent, so --episode-timeout bounds a
    benchmark episode too: a run that hangs is an error record naming the task."""
    import time

    tmp_path, data, lib = setup

    def slow(path, body):  # the disabled run (the last unit: the scripted server answers one at a time) hangs
        if "tools" not in body:
            time.sleep(1.5)
        return smart(path, body)

    with ScriptedServer(slow) as srv:
        summary = run(options(tmp_path, data, lib, srv.url, limit=1, episode_timeout=0.3), quiet=True)
    by = {r["condition"]: r for r in read(tmp_path / "out.jsonl")}
    assert summary.errors == 1 and by["enabled"]["error"] is None and by["enabled"]["invoked"] is True
    assert by["disabled"]["error"] == (f"agent: built-in search agent did not return within 0.3s on task "
                                       f"{by['disabled']['task_id']}")


def test_run_warns_when_code_is_scored_without_cgroup_limits(monkeypatch):
    """A code benchmark scored in a sandbox without cgroups says so (with the reason) in the run's
    warnings; with cgroups, or on a benchmark that runs no code, nothing is said."""
    from types import SimpleNamespace

    from skillaudit.engine import runner
    from skillaudit.sandbox import process as sandbox

    monkeypatch.setattr(sandbox, "cgroup_status", lambda: (False, "not running as root: no per-sandbox cgroups; "
                                                                "falling back to per-process limits: RLIMIT_AS"))
    assert runner._sandbox_warnings(SimpleNamespace(benchmark="mbpp_plus"), None) == [
        "sandbox: no per-sandbox cgroup limits (not running as root: no per-sandbox cgroups); "
        "per-process limits apply (docs/sandbox.md)"]
    assert runner._sandbox_warnings(SimpleNamespace(benchmark="gsm8k"), None) == []
    assert runner._sandbox_warnings(SimpleNamespace(benchmark="gsm8k"), "no root") == [
        "--unsafe-scoring: model-written code runs unisolated (no root)"]
    monkeypatch.setattr(sandbox, "cgroup_status", lambda: (True, "cgroup v1 under /x"))
    assert runner._sandbox_warnings(SimpleNamespace(benchmark="humaneval"), None) == []
