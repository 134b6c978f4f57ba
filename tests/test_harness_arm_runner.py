"""Counterfactual arms of `skillaudit run --arms` against a scripted ChatML server (skillaudit.engine.arm_runner)."""

from __future__ import annotations

import json
import random
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from _harness_fakes import (
    CORRECT_CODE,
    MBPP_ROWS,
    ScriptedServer,
    text_reply,
    write_library,
    write_rows,
)
from click.testing import CliRunner

from skillaudit.agents.agent import FORCED_PREFILL, AgentConfig
from skillaudit.analysis.counterfactual import causal_effects, load_arms
from skillaudit.analysis.regression import SkillEffectRegression
from skillaudit.cli import cli
from skillaudit.engine.arm_runner import corrupt_body, filler, mask_draw, parse_arms, replay_turns
from skillaudit.engine.dispatch import run
from skillaudit.engine.options import RunOptions
from skillaudit.runs import load_runs
from skillaudit.sandbox.score import Limits

LIMITS = Limits(timeout_s=30, cpu_s=30, memory_mb=512)  # generous: the suite may share the CPU
ENTRY = {r["entry_point"]: r["task_id"] for r in MBPP_ROWS}


def _tid(prompt: str) -> str | None:
    return next((t for e, t in ENTRY.items() if e in prompt), None)


def coder(path: str, body: dict):
    """ChatML: a forced call gets a query; answers are right unless the 'prime-test' skill text is shown."""
    prompt = body["prompt"]
    if prompt.endswith(FORCED_PREFILL):
        return text_reply({"Mbpp/2": "shared elements", "Mbpp/3": "prime number test",
                           "Mbpp/4": "shared prime area"}[_tid(prompt)])
    tid = _tid(prompt)
    code = CORRECT_CODE[tid] if "## Skill: prime-test" not in prompt else "def f():\n    return None\n"
    return text_reply(code)


def agent(url: str) -> AgentConfig:
    return AgentConfig(endpoint=url, model="fake-model", tool_mode="chatml", tool_choice="required",
                       max_calls=1, backoff_s=0.01, retries=1, max_tokens=64)


@pytest.fixture
def base(tmp_path):
    """A main run (3 MBPP tasks, chatml, forced call) and the server that made it."""
    data = write_rows(tmp_path / "mbpp.jsonl", MBPP_ROWS)
    lib = write_library(tmp_path / "skills")
    srv = ScriptedServer(coder)
    srv.__enter__()
    opts = RunOptions(benchmark="mbpp_plus", out=str(tmp_path / "base.jsonl"), agent=agent(srv.url),
                      skills=str(lib), data=str(data), limits=LIMITS, cache_dir=str(tmp_path / "cache"))
    run(opts, quiet=True)
    yield tmp_path, opts, srv
    srv.__exit__(None, None, None)


def _records(path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def _arm_opts(opts: RunOptions, out, arms: str, **kw) -> RunOptions:
    return RunOptions(**{**opts.__dict__, "out": str(out), "arms": arms, "base": opts.out, **kw})


def _answer_prompts(srv, start: int) -> list[str]:
    return [r["prompt"] for r in srv.requests[start:] if not r["prompt"].endswith(FORCED_PREFILL)]


def _split(prompt: str) -> tuple[str, str]:
    """A chatml answer prompt around its tool result: (text up to 'returned:\\n', text from the nudge on)."""
    head, _, rest = prompt.partition(" returned:\n")
    return head, rest[rest.index("\n\nThat was your last search."):]


def test_enabled_records_log_the_turns_an_arm_replays(base):
    """The enabled record's meta.replay holds the model's call turn verbatim with the parsed call."""
    _, opts, _ = base
    recs = [r for r in _records(opts.out) if r["condition"] == "enabled"]
    for r in recs:
        (turn,) = r["meta"]["replay"]
        assert turn["content"] == FORCED_PREFILL + r["retrievals"][0]["query"] + '"}}\n</tool_call>'
        assert turn["calls"] == [{"name": "search_skills", "arguments": {"query": r["retrievals"][0]["query"]}}]
        assert replay_turns({**r, "meta": {}}, chatml_forced=True) == r["meta"]["replay"]
        assert all(len(h["hash"]) == 16 for h in r["retrievals"][0]["skills"])


def test_an_arm_replays_the_call_and_changes_only_the_tool_result(base):
    """Arms never ask the model for the call again; the query and every prompt byte outside the tool result match the enabled run."""
    tmp, opts, srv = base
    enabled_prompts = {_tid(p): p for p in _answer_prompts(srv, 0) if "search_skills(" in p}
    start = len(srv.requests)
    summary = run(_arm_opts(opts, tmp / "arms.jsonl", "random,filler,empty,corrupted"), quiet=True)
    assert summary.errors == 0 and summary.written == 4 * 3
    assert not any(r["prompt"].endswith(FORCED_PREFILL) for r in srv.requests[start:])  # no call re-sampled
    base_recs = {r["task_id"]: r for r in _records(opts.out) if r["condition"] == "enabled"}
    results = {}
    for p in _answer_prompts(srv, start):
        tid = _tid(p)
        head, tail = _split(p)
        e_head, e_tail = _split(enabled_prompts[tid])
        assert (head, tail) == (e_head, e_tail)
        results.setdefault(tid, []).append(p)
    for rec in _records(tmp / "arms.jsonl"):
        b = base_recs[rec["task_id"]]
        assert rec["condition"] == "enabled" and rec["meta"]["seed"] == b["meta"]["seed"]
        assert rec["retrievals"][0]["query"] == b["retrievals"][0]["query"]
        assert rec["meta"]["replayed_turns"] == 1
    # what each arm's tool returned
    by_arm = {r["arm"]: r for r in _records(tmp / "arms.jsonl") if r["task_id"] == "Mbpp/2"}
    got = {s["id"] for s in base_recs["Mbpp/2"]["retrievals"][0]["skills"]}
    rnd = {s["id"] for s in by_arm["random"]["retrievals"][0]["skills"]}
    assert len(rnd) == min(len(got), 4 - len(got)) and not rnd & got
    assert by_arm["empty"]["retrievals"][0]["skills"] == [] and by_arm["filler"]["retrievals"][0]["skills"] == []
    assert {s["id"] for s in by_arm["corrupted"]["retrievals"][0]["skills"]} == got


def test_filler_has_the_length_of_the_real_result_and_no_procedure(base):
    """The filler arm's tool result is exactly as long as the real one and names no skill."""
    tmp, opts, srv = base
    enabled = {_tid(p): _result(p) for p in _answer_prompts(srv, 0) if "search_skills(" in p}
    start = len(srv.requests)
    run(_arm_opts(opts, tmp / "filler.jsonl", "filler"), quiet=True)
    for p in _answer_prompts(srv, start):
        res = _result(p)
        assert len(res) == len(enabled[_tid(p)]) and "## Skill:" not in res


def _result(prompt: str) -> str:
    _, _, rest = prompt.partition(" returned:\n")
    return rest[:rest.index("\n\nThat was your last search.")]


def test_mask_arm_withholds_exactly_the_logged_skills(base):
    """Each mask record's prompt shows every skill in meta.kept and none in meta.withheld."""
    tmp, opts, srv = base
    start = len(srv.requests)
    run(_arm_opts(opts, tmp / "mask.jsonl", "mask:6"), quiet=True)
    recs = _records(tmp / "mask.jsonl")
    prompts = _answer_prompts(srv, start)
    assert len(recs) == len(prompts) == 18
    base_recs = {r["task_id"]: r for r in _records(opts.out) if r["condition"] == "enabled"}
    for rec in recs:
        meta = rec["meta"]
        retrieved = [s["id"] for s in base_recs[rec["task_id"]]["retrievals"][0]["skills"]]
        assert sorted(meta["kept"] + meta["withheld"]) == sorted(retrieved)
        assert [s["id"] for s in rec["retrievals"][0]["skills"]] == meta["kept"]
        # the answer prompt of this record: same task, its kept skills shown
        shown = [p for p in prompts if _tid(p) == rec["task_id"]
                 and all(f"## Skill: {k}\n" in p for k in meta["kept"])
                 and not any(f"## Skill: {w}\n" in p for w in meta["withheld"])]
        assert shown
    assert len({(r["task_id"], r["meta"]["mask_seed"]) for r in recs}) == 18


def test_replicate_is_a_disabled_run_with_another_seed_and_resume_skips_it(base):
    """replicate re-runs each disabled run with a new seed and the same prompt; a second run writes nothing."""
    tmp, opts, srv = base
    disabled = {r["task_id"]: r for r in _records(opts.out) if r["condition"] == "disabled"}
    start = len(srv.requests)
    run(_arm_opts(opts, tmp / "rep.jsonl", "replicate"), quiet=True)
    reqs = srv.requests[start:]
    for rec in _records(tmp / "rep.jsonl"):
        assert rec["condition"] == "disabled" and rec["arm"] == "replicate"
        assert rec["meta"]["seed"] != disabled[rec["task_id"]]["meta"]["seed"]
    assert {r["seed"] for r in reqs}.isdisjoint({d["meta"]["seed"] for d in disabled.values()})
    again = run(_arm_opts(opts, tmp / "rep.jsonl", "replicate"), quiet=True)
    assert (again.written, again.skipped) == (0, 3)


def test_pruned_arm_reruns_only_pairs_that_touched_the_prune_set(base):
    """pruned re-runs the pairs whose retrieved set holds a pruned skill, against the library without it."""
    tmp, opts, _ = base
    base_recs = [r for r in _records(opts.out) if r["condition"] == "enabled"]
    touched = {r["task_id"] for r in base_recs
               if "prime-test" in {s["id"] for s in r["retrievals"][0]["skills"]}}
    assert touched and len(touched) < 3
    run(_arm_opts(opts, tmp / "pruned.jsonl", "pruned", prune=("prime-test",)), quiet=True)
    recs = _records(tmp / "pruned.jsonl")
    assert {r["task_id"] for r in recs} == touched
    for r in recs:
        assert r["meta"]["excluded"] == ["prime-test"]
        assert "prime-test" not in {s["id"] for s in r["retrievals"][0]["skills"]}
        assert r["correct"]  # the planted harm is gone with the skill


def test_arms_load_and_join_their_pairs(base):
    """Arm records written by the harness load with the main pairs unchanged and join every pair."""
    tmp, opts, _ = base
    run(_arm_opts(opts, tmp / "arms.jsonl", "empty,replicate,mask:2"), quiet=True)
    paths = [opts.out, str(tmp / "arms.jsonl")]
    runs = load_runs(paths)
    assert runs.n_pairs == 3 and runs.n_arm_records == 3 + 3 + 6
    arms = load_arms(paths, runs)
    assert arms.n_unjoined == 0 and sorted(arms.names) == ["empty", "mask", "replicate"]


def test_cli_arms_errors_are_one_line(base):
    """--arms without --base, an unknown arm, and a base run with other settings: exit 2, one line."""
    tmp, opts, srv = base
    common = ["run", "--benchmark", "mbpp_plus", "--data", opts.data, "--skills", opts.skills,
              "--endpoint", srv.url, "--model", "fake-model", "--out", str(tmp / "x.jsonl"),
              "--tool-mode", "chatml", "--tool-choice", "required", "--max-calls", "1", "--max-tokens", "64",
              "--quiet"]
    r = CliRunner().invoke(cli, [*common, "--arms", "empty"])
    assert r.exit_code == 2 and r.output.strip() == "Error: --arms needs --base: the log whose enabled runs the arms replay"
    r = CliRunner().invoke(cli, [*common, "--arms", "nonsense", "--base", opts.out])
    assert r.exit_code == 2 and "unknown arm 'nonsense'" in r.output and r.output.count("\n") == 1
    r = CliRunner().invoke(cli, [*common[:-3], "--max-tokens", "99", "--quiet", "--arms", "empty", "--base", opts.out])
    assert r.exit_code == 2 and "the base run used max_tokens = 64, this run 99" in r.output


def test_parse_arms_and_helpers():
    """Arm lists parse with mask counts; masks keep about half; corruption keeps the words and changes the order; filler has the length asked."""
    specs = parse_arms("random, mask:8,replicate")
    assert [(s.name, s.masks) for s in specs] == [("random", 1), ("mask", 8), ("replicate", 1)]
    kept = [len(mask_draw(tuple("abcdefghij"), s)[0]) for s in range(400)]
    assert 4.6 < np.mean(kept) < 5.4
    body = "## Steps\n1. first\n2. second\n3. third\n4. fourth\n```python\nx = 1\ny = 2\nz = 3\n```"
    bent = corrupt_body(body, random.Random(1))
    assert bent != body and sorted(bent.split("```")[1].split("\n")) == sorted(body.split("```")[1].split("\n"))
    assert sorted(re.findall(r"\d\. (\w+)", bent)) == sorted(re.findall(r"\d\. (\w+)", body))
    assert len(filler(1234)) == 1234 and "step" not in filler(1234).lower()


# ---------------------------------------------------------------- planted per-skill effects
MATH_LIB = {
    "harmful-tip": "Add two numbers with a plus sign: sum totals quickly.",
    "neutral-tip": "Add two numbers with a plus sign: sum totals carefully.",
    "plain-tip": "Add two numbers with a plus sign: sum totals in a column.",
    "far-1": "Geometry of circles and their areas.",
    "far-2": "Probability of dice and coins.",
}


def _math_rows(n: int) -> list[dict]:
    rng = random.Random(0)
    rows = []
    for i in range(n):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        rows.append({"question": f"Problem {i}: what is {a} plus {b}?", "answer": f"#### {a + b}"})
    return rows


def planted(path: str, body: dict):
    """Always the same query; an answer is wrong with probability 0.7 when harmful-tip's text is shown, 0.1 otherwise."""
    prompt = body["prompt"]
    if prompt.endswith(FORCED_PREFILL):
        return text_reply("add two numbers plus sum")
    a, b = map(int, re.findall(r"what is (\d+) plus (\d+)\?", prompt)[0])
    r = random.Random(zlib.crc32(prompt.encode()) + body["seed"]).random()
    wrong = r < (0.7 if "## Skill: harmful-tip\n" in prompt else 0.1)
    return text_reply(f"So the answer is \\boxed{{{a + b + (1 if wrong else 0)}}}")


def test_mask_surrogate_recovers_planted_effects_the_observational_regression_cannot(tmp_path):
    """With every task retrieving the same 3 skills, the observational regression cannot tell them apart; mask re-runs put the planted skill's interval below 0 and cover 0 for a neutral one."""
    data = write_rows(tmp_path / "gsm8k.jsonl", _math_rows(60))
    lib = tmp_path / "lib"
    for name, desc in MATH_LIB.items():
        (lib / name).mkdir(parents=True)
        (lib / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {json.dumps(desc)}\nmetadata:\n  domain: math\n---\n"
                                             f"## Steps\n1. {desc}\n", encoding="utf-8")
    with ScriptedServer(planted) as srv:
        opts = RunOptions(benchmark="gsm8k", out=str(tmp_path / "base.jsonl"), agent=agent(srv.url),
                          skills=str(lib), data=str(data), limits=LIMITS, cache_dir=str(tmp_path / "c"))
        run(opts, quiet=True)
        run(_arm_opts(opts, tmp_path / "masks.jsonl", "mask:8"), quiet=True)
    paths = [opts.out, str(tmp_path / "masks.jsonl")]
    runs = load_runs(paths)
    X = (runs.ranks > 0).astype(np.float64).tocsr()
    got = {frozenset(runs.skills[j] for j in X[i].indices) for i in range(runs.n_pairs)}
    assert got == {frozenset({"harmful-tip", "neutral-tip", "plain-tip"})}  # one retrieved set for all
    flips = runs.y_pos.astype(float) - runs.y_neg.astype(float)
    reg = SkillEffectRegression(n_boot=200, random_state=0).fit(X, flips, runs.task)
    cols = [runs.skills.index(s) for s in ("harmful-tip", "neutral-tip")]
    assert not reg.identifiable_[cols].any()
    ce = causal_effects(runs, load_arms(paths, runs), n_boot=500, seed=0)
    harm, neutral = ce.get("harmful-tip"), ce.get("neutral-tip")
    assert harm["causal_ci"][1] < 0 and harm["causal_effect"] < -0.3
    assert neutral["causal_ci"][0] <= 0 <= neutral["causal_ci"][1]
    assert ce.validation is not None and ce.validation > 0.2


def test_verify_with_an_endpoint_reruns_the_touched_pairs_and_measures_the_prune(base):
    """verify --endpoint re-runs only the pairs that retrieved the pruned skill, with the base run's settings, and reports measured RAE 0 where pruning the planted skill removes the harm."""
    tmp, opts, srv = base
    base_recs = {r["task_id"]: r for r in _records(opts.out) if r["condition"] == "enabled"}
    touched = {t for t, r in base_recs.items() if "prime-test" in {s["id"] for s in r["retrievals"][0]["skills"]}}
    args = ["verify", opts.out, "--prune", "prime-test", "--skills", opts.skills, "--endpoint", srv.url,
            "--model", "fake-model", "--out", str(tmp / "verify.jsonl"), "--data", opts.data, "--bootstrap", "200", "--json"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "skillaudit.verify/v1"
    (overall,) = [x for x in doc["rows"] if x["skill_id"] is None]
    assert overall["n_rerun"] == len(touched) and overall["excluded"] == ["prime-test"]
    assert overall["measured"] == 0.0 and overall["rae_before"] < 0
    assert {x["task_id"] for x in _records(tmp / "verify.jsonl")} == touched
    again = CliRunner().invoke(cli, args)  # resumable: nothing re-run
    assert again.exit_code == 0 and len(_records(tmp / "verify.jsonl")) == len(touched)
    bad = CliRunner().invoke(cli, ["verify", opts.out, "--prune", "prime-test", "--endpoint", srv.url])
    assert bad.exit_code == 2 and bad.output == "Error: verify --endpoint needs --skills, --model and --out\n"


def test_verify_names_a_base_log_whose_settings_are_not_numbers(base):
    """A base log whose enabled records carry meta.temperature "hot" (or a string epoch) stops verify with one line naming the log, exit 2, before any re-run."""
    tmp, opts, srv = base
    recs = _records(opts.out)
    for r in recs:
        if r["condition"] == "enabled":
            r["meta"]["temperature"] = "hot"
    bad = tmp / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    n_requests = len(srv.requests)
    args = ["verify", str(bad), "--prune", "prime-test", "--skills", opts.skills, "--endpoint", srv.url,
            "--model", "fake-model", "--out", str(tmp / "v.jsonl"), "--data", opts.data]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2
    assert r.output == f"Error: {bad}: meta.temperature of the enabled records must be a number, not 'hot'\n"
    recs[0]["epoch"] = "one"
    bad.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2 and r.output == f"Error: {bad}:1: epoch must be an integer, not 'one'\n"
    assert len(srv.requests) == n_requests


def test_cli_run_of_only_errors_exits_2_and_out_may_not_be_the_base(base):
    """run --arms against a dead endpoint writes error records and exits 2 with one line; --out equal to
    --base is refused before anything is written (the base log is unchanged)."""
    tmp, opts, _ = base
    common = ["run", "--benchmark", "mbpp_plus", "--data", opts.data, "--skills", opts.skills,
              "--endpoint", "http://127.0.0.1:9", "--model", "fake-model", "--tool-mode", "chatml",
              "--tool-choice", "required", "--max-calls", "1", "--max-tokens", "64", "--retries", "0",
              "--request-timeout", "2", "--quiet", "--arms", "empty", "--base", opts.out]
    before = Path(opts.out).read_bytes()
    r = CliRunner().invoke(cli, [*common, "--out", opts.out])
    assert r.exit_code == 2 and r.output.strip().endswith("is the --base input; choose another file"), r.output
    assert Path(opts.out).read_bytes() == before
    out = tmp / "dead.jsonl"
    r = CliRunner().invoke(cli, [*common, "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert r.output.strip() == f"Error: {out}: every one of the 3 record(s) of this run is an error (see their 'error' field)"
    assert all(json.loads(ln)["error"] for ln in out.read_text().splitlines())
