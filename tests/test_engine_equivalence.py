"""Every run mode writes the same records as the code it was refactored from (issue 46, step 0).

The golden logs in tests/data/engine/ were written by the harness before the one-engine refactor
(`python tests/test_engine_equivalence.py` writes them again: only do that when a change of the
records is intended and said in the commit). Each mode runs here against a deterministic fake
endpoint (answers depend on the prompt, never on request order) and its records, sorted by key,
with `meta.latency_s` dropped, must equal the golden ones: benchmark runs with epochs (GSM8K; MBPP+
where the sandbox isolates), a task file with the built-in search agent, a Python `--agent`, catalog
mode, the search arms (random, filler, empty, replicate, mask, pruned), catalog arms, `--reuse`
after editing a skill, two shards, and a resumed run.
"""

from __future__ import annotations

import json
import shutil
import sys
import zlib
from pathlib import Path

import pytest
from _harness_fakes import (
    CORRECT_CODE,
    GSM8K_ROWS,
    MBPP_ROWS,
    ScriptedServer,
    chat_reply,
    native_call,
    text_reply,
)
from click.testing import CliRunner

from skillaudit.cli import cli

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "engine"

AGENT = '''
def agent(task, skills):
    """Searches when it has skills; loads the top hit on even-numbered tasks; answers 42 or 41."""
    n = int(task["id"][1:])
    if skills is None:
        return "41" if n % 3 == 0 else "42"
    hits = skills.search(task["prompt"], k=2)
    if n % 2 == 0 and hits:
        skills.load(hits[0]["name"])
    return {"answer": "42" if n % 3 != 1 else "7", "usage": {"prompt_tokens": 100 + n, "completion_tokens": 10}}
'''


def _crc(text: str) -> int:
    return zlib.crc32(text.encode())


def det(path: str, body: dict):
    """The fake endpoint: a tool call first when tools are offered, then an answer that depends on
    the prompt's text (so conditions and arms differ, and concurrency cannot change anything)."""
    if "prompt" in body:  # raw completions (chatml): catalog mode
        prompt = body["prompt"]
        if prompt.endswith('"name": "'):
            return text_reply(["percent-change", "counter-frequency-counting", "unit-rate-problems"][_crc(prompt) % 3])
        return text_reply(f"So \\boxed{{{[42, 7, 30][_crc(prompt) % 3]}}}")
    msgs = body["messages"]
    user = msgs[1]["content"]
    tool_seen = any(m["role"] == "tool" for m in msgs)
    if "tools" in body and not tool_seen:
        return chat_reply(None, [native_call(user[:50])], "tool_calls")
    text = "".join(str(m.get("content")) for m in msgs)
    tid = next((t for t, r in zip(["Mbpp/2", "Mbpp/3", "Mbpp/4"], MBPP_ROWS, strict=True)
                if r["entry_point"] in user), None)
    if tid is not None:
        ok = _crc(text) % 3 != 0
        code = CORRECT_CODE[tid] if ok else f"def {MBPP_ROWS[0]['entry_point']}(*a):\n    return None\n"
        return chat_reply(f"```python\n{code}```")
    right = next((r["answer"].rsplit("####", 1)[1].strip() for r in GSM8K_ROWS if r["question"] in user), "42")
    return chat_reply(f"Adding up... \\boxed{{{right if _crc(text) % 3 else 13}}}")


def _normal(records: list[dict]) -> list[str]:
    out = []
    for r in records:
        r = json.loads(json.dumps(r))
        (r.get("meta") or {}).pop("latency_s", None)
        out.append(json.dumps(r, sort_keys=True))
    key = lambda s: (lambda r: (r["model"], r["benchmark"], r["task_id"], r["condition"], r["epoch"],  # noqa: E731
                                r.get("arm") or "", (r.get("meta") or {}).get("mask_seed", -1)))(json.loads(s))
    return sorted(out, key=key)


def _read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _sandbox_ok() -> bool:
    from skillaudit.sandbox import process as sandbox

    return sandbox.isolation_status()[0]


def _setup(work: Path) -> dict[str, Path]:
    from _harness_fakes import write_rows

    data = work / "data"
    paths = {"gsm8k": write_rows(data / "gsm8k.jsonl", GSM8K_ROWS), "mbpp": write_rows(data / "mbpp.jsonl", MBPP_ROWS)}
    tasks = data / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "prompt": f"How much is {i} times six plus {42 - 6 * i}?",
                                         "answer": "42", "match": "number"}) + "\n" for i in range(6)))
    paths["tasks"] = tasks
    skills = work / "skills"
    shutil.copytree(REPO / "skills", skills)
    paths["skills"] = skills
    (work / "golden_agent.py").write_text(AGENT)
    paths["agent_dir"] = work
    return paths


def _invoke(args: list[str]) -> None:
    res = CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output


def modes(work: Path, url: str) -> dict[str, Path]:
    """Run every mode into its own log under `work`; {mode: log}."""
    p = _setup(work)
    sys.path.insert(0, str(p["agent_dir"]))
    sys.modules.pop("golden_agent", None)
    common = ["--skills", str(p["skills"]), "--endpoint", url, "--model", "fake-model", "--retries", "0",
              "--quiet"]
    search = [*common, "--tool-mode", "native"]
    catalog = [*common, "--tool-mode", "chatml", "--tool-choice", "required", "--skills-mode", "catalog"]
    out = {}

    def log(name: str) -> Path:
        out[name] = work / f"{name}.jsonl"
        return out[name]

    _invoke(["--benchmark", "gsm8k", "--data", str(p["gsm8k"]), "--epochs", "2", "--out", str(log("gsm8k")), *search])
    if _sandbox_ok():
        _invoke(["--benchmark", "mbpp_plus", "--data", str(p["mbpp"]), "--out", str(log("mbpp")), *search])
    _invoke(["--tasks", str(p["tasks"]), "--out", str(log("tasks")), *search])
    _invoke(["--tasks", str(p["tasks"]), "--agent", "golden_agent:agent", "--skills", str(p["skills"]),
             "--out", str(log("agent")), "--quiet"])
    _invoke(["--tasks", str(p["tasks"]), "--out", str(log("catalog")), *catalog])
    _invoke(["--benchmark", "gsm8k", "--data", str(p["gsm8k"]), "--arms", "random,filler,empty,replicate,mask:2",
             "--base", str(out["gsm8k"]), "--out", str(log("arms")), *search])
    _invoke(["--benchmark", "gsm8k", "--data", str(p["gsm8k"]), "--arms", "pruned", "--prune",
             "percent-change,unit-rate-problems", "--base", str(out["gsm8k"]), "--out", str(log("pruned")), *search])
    _invoke(["--tasks", str(p["tasks"]), "--arms", "random,filler,empty,mask:2", "--base", str(out["catalog"]),
             "--out", str(log("catalog_arms")), *catalog])
    edited = work / "skills-edited"
    shutil.copytree(p["skills"], edited)
    for sid in ("percent-change", "unit-rate-problems"):
        md = edited / sid / "SKILL.md"
        md.write_text(md.read_text() + "\nAlso check the units twice.\n")
    reuse = [x if x != str(p["skills"]) else str(edited) for x in search]
    _invoke(["--benchmark", "gsm8k", "--data", str(p["gsm8k"]), "--epochs", "2", "--reuse", str(out["gsm8k"]),
             "--out", str(log("reuse")), *reuse])
    _invoke(["--tasks", str(p["tasks"]), "--reuse", str(out["catalog"]), "--out", str(log("catalog_reuse")),
             *[x if x != str(p["skills"]) else str(edited) for x in catalog]])
    return out


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    work = tmp_path_factory.mktemp("engine")
    with ScriptedServer(det) as srv:
        logs = modes(work, srv.url)
    return work, logs


@pytest.mark.parametrize("mode", ["gsm8k", "mbpp", "tasks", "agent", "catalog", "arms", "pruned", "catalog_arms",
                                  "reuse", "catalog_reuse"])
def test_every_run_mode_writes_the_golden_records(ran, mode):
    """The records of each mode, sorted by key and without latency, equal the golden log's."""
    _, logs = ran
    if mode not in logs:
        pytest.skip("the sandbox cannot isolate code here: MBPP+ is not scored")
    golden = GOLDEN / f"{mode}.jsonl"
    got = _normal(_read(logs[mode]))
    want = _normal(_read(golden))
    assert len(got) == len(want)
    assert got == want


def test_shards_and_a_resumed_run_write_the_golden_records(ran, tmp_path):
    """Shards 1/2 and 2/2 together, and a run resumed from the first third of its records, write
    exactly the records of one uninterrupted run (the golden GSM8K log)."""
    work, _ = ran
    want = _normal(_read(GOLDEN / "gsm8k.jsonl"))
    p = {"gsm8k": work / "data" / "gsm8k.jsonl", "skills": work / "skills"}
    with ScriptedServer(det) as srv:
        args = ["--benchmark", "gsm8k", "--data", str(p["gsm8k"]), "--epochs", "2", "--skills", str(p["skills"]),
                "--endpoint", srv.url, "--model", "fake-model", "--retries", "0", "--quiet", "--tool-mode", "native"]
        for i in (1, 2):
            _invoke([*args, "--shard", f"{i}/2", "--out", str(tmp_path / f"s{i}.jsonl")])
        resumed = tmp_path / "resumed.jsonl"
        lines = (GOLDEN / "gsm8k.jsonl").read_text().splitlines(keepends=True)
        resumed.write_text("".join(lines[: len(lines) // 3]))
        _invoke([*args, "--out", str(resumed)])
    assert _normal(_read(tmp_path / "s1.jsonl") + _read(tmp_path / "s2.jsonl")) == want
    assert _normal(_read(resumed)) == want


if __name__ == "__main__":  # write the golden logs (only when a change of the records is intended)
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d, ScriptedServer(det) as srv:
        for name, path in modes(Path(d), srv.url).items():
            (GOLDEN / f"{name}.jsonl").write_text("".join(x + "\n" for x in _normal(_read(path))))
            print(name, len(_read(path)))
