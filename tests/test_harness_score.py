"""Sandboxed scoring (skillaudit.sandbox.score): hostile code is contained and scored as a failure."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid

import pytest
from _harness_fakes import CORRECT_CODE, MBPP_ROWS, write_rows

from skillaudit.sandbox.process import Limits, netns_available, run_python
from skillaudit.sandbox.programs import GUARD
from skillaudit.sandbox.score import (
    Scorer,
    extract_code,
    extract_math_answer,
    math_equal,
    score_math,
)
from skillaudit.tasks.benchmarks import Task, load_tasks

FAST = Limits(timeout_s=3, cpu_s=3, memory_mb=512, fsize_mb=4, nproc=32)
HOSTILE = Limits(timeout_s=1.5, cpu_s=2, memory_mb=512, fsize_mb=4, nproc=32)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("mbpp")


@pytest.fixture(scope="module")
def mbpp(folder):
    tasks = {t.task_id: t for t in load_tasks("mbpp_plus", write_rows(folder / "m.jsonl", MBPP_ROWS))}
    return tasks, Scorer(FAST, cache_dir=folder / "cache")


@pytest.fixture(scope="module")
def hostile(mbpp, folder):
    """Shorter limits for code that is meant to fail (same oracle cache)."""
    return mbpp[0], Scorer(HOSTILE, cache_dir=folder / "cache")


def fence(code: str) -> str:
    return f"Here you go:\n```python\n{code}\n```\nDone."


# ---- correct and wrong solutions ---------------------------------------------------------------
def test_correct_solutions_pass_base_and_plus(mbpp):
    """A right answer passes every base and plus input, compared with the canonical outputs."""
    tasks, scorer = mbpp
    for tid, code in CORRECT_CODE.items():
        score, logged = scorer.score(tasks[tid], fence(code))
        assert score.correct, (tid, score.reason)
        assert score.details["passed"]["base"] >= 2 and score.details["passed"]["plus"] >= 2
        assert "Done." not in logged and "def " in logged


def test_wrong_output_fails_on_plus_inputs(mbpp):
    """An answer right on base inputs but wrong on a plus input is incorrect, naming the test."""
    tasks, scorer = mbpp
    code = "def is_not_prime(n):\n    return n in (10, 35)\n"
    score, _ = scorer.score(tasks["Mbpp/3"], fence(code))
    assert not score.correct and score.reason.startswith("failed plus test")


def test_floats_compare_with_tolerance(mbpp):
    """Float outputs within atol pass; outputs off by more than atol fail."""
    tasks, scorer = mbpp
    close = "def circle_area(r):\n    return 3.14159265358979 * r * r\n"
    far = "def circle_area(r):\n    return 3.14 * r * r\n"
    assert scorer.score(tasks["Mbpp/4"], fence(close))[0].correct
    assert not scorer.score(tasks["Mbpp/4"], fence(far))[0].correct


def test_missing_function_and_no_code_fail(mbpp):
    """An answer without the entry point, or without any code, is a failure with a reason."""
    tasks, scorer = mbpp
    s1, _ = scorer.score(tasks["Mbpp/2"], fence("def other(a, b):\n    return ()"))
    s2, _ = scorer.score(tasks["Mbpp/2"], "I cannot solve this.")
    assert not s1.correct and "KeyError" in s1.reason
    assert not s2.correct and s2.reason == "no code in the answer"


def test_candidate_printing_and_asserting_does_not_matter(mbpp):
    """Prints and top-level test calls in the answer are stripped before scoring."""
    tasks, scorer = mbpp
    code = CORRECT_CODE["Mbpp/2"] + "print(similar_elements((1,), (2,)))\nassert False\n"
    assert scorer.score(tasks["Mbpp/2"], fence(code))[0].correct


def test_outputs_cross_the_sandbox_as_tagged_json():
    """Tuples, sets, dicts, complex, bytes, NaN and big ints come back as themselves; unknown types equal nothing."""
    from skillaudit.sandbox.programs import _decode_output
    from skillaudit.sandbox.score import _output_matches

    doc = json.loads(json.dumps(
        [{"t": [1, {"s": ["a", {"t": [2, 3]}]}]}, {"d": [[{"t": [1, 2]}, [1.5, None]]]}, {"c": [1.0, -2.0]},
         {"b": "00ff"}, float("nan"), 10**30, {"fs": [True]}, {"r": "Decimal"}]))
    got = _decode_output(doc)
    assert got[:4] == [(1, {"a", (2, 3)}), {(1, 2): [1.5, None]}, complex(1, -2), b"\x00\xff"]
    assert got[4] != got[4] and got[5] == 10**30 and got[6] == frozenset({True})
    assert (got[7] == got[7]) is False and not _output_matches("f", got[7], 0, 0, False)
    with pytest.raises(TypeError):
        bool(got[7])
    assert not _output_matches("f", [got[7]], [1], 0, False)
    assert _output_matches("f", [1.0, 2.0000001], [1.0, 2.0], 0, False)
    assert not _output_matches("f", (1, 2), [1, 2], 0, False)


def test_forged_verdicts_and_expected_outputs_are_out_of_reach(mbpp):
    """An answer cannot pass by printing the runner's marker, exiting early or reading the payload."""
    tasks, scorer = mbpp
    forgeries = [
        # print the runner's own success line, then leave before any output is recorded
        "import __main__, os\n\ndef is_not_prime(n):\n"
        "    __main__.report({'ok': True, 'passed': {'base': 9, 'plus': 9}})\n    os._exit(0)\n",
        # return the expected outputs, if the sandbox was given them
        "import pickle\n\ndef is_not_prime(n, _seen=[]):\n"
        "    p = pickle.load(open('payload.pkl', 'rb'))\n"
        "    exp = p['expected']['base'] + p['expected']['plus']\n"
        "    _seen.append(n)\n    return exp[len(_seen) - 1][1]\n",
    ]
    for code in forgeries:
        score, _ = scorer.score(tasks["Mbpp/3"], fence(code))
        assert not score.correct, (code, score.reason)


# ---- hostile code --------------------------------------------------------------------------------
def test_infinite_loop_times_out_and_fails(hostile):
    """An infinite loop is killed at the wall-clock timeout and scored as a failure."""
    tasks, scorer = hostile
    start = time.monotonic()
    score, _ = scorer.score(tasks["Mbpp/2"], fence("def similar_elements(a, b):\n    while True:\n        pass"))
    assert not score.correct and "timeout" in score.reason
    assert time.monotonic() - start < HOSTILE.timeout_s + 6


def _count_sandbox_processes() -> int:
    """Live sandbox processes left behind by this test process's runs. We are a child subreaper,
    so whatever escapes a run (and its PID namespace) re-parents to us; other programs' sandboxes
    running at the same time are not counted."""
    import contextlib
    import ctypes

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER (for the next runs too)
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read().rsplit(")", 1)[1].split()
                if stat[0] != "Z" and int(stat[1]) == os.getpid() and \
                        "skillaudit-sbx-" in os.readlink(f"/proc/{entry}/cwd"):
                    n += 1
            except OSError:
                pass
    return n


def test_fork_bomb_is_contained_and_cleaned_up(hostile):
    """A fork bomb hits the process limit, fails, and leaves no process behind."""
    tasks, scorer = hostile
    _count_sandbox_processes()  # become a subreaper before the runs
    bomb = ("import os\ndef similar_elements(a, b):\n    while True:\n        try:\n"
            "            os.fork()\n        except OSError:\n            pass\n")
    # the audit hook refuses os.fork; ctypes' fork does not go through it, so try both
    raw = ("import ctypes\ndef similar_elements(a, b):\n    libc = ctypes.CDLL(None)\n"
           "    while True:\n        libc.fork()\n")
    for code in (bomb, raw):
        score, _ = scorer.score(tasks["Mbpp/2"], fence(code))
        assert not score.correct
    time.sleep(0.5)
    assert _count_sandbox_processes() == 0


def test_huge_allocation_fails_without_hurting_the_host(hostile):
    """Allocating far beyond the memory limit raises MemoryError inside the sandbox: a failure."""
    tasks, scorer = hostile
    code = "def similar_elements(a, b):\n    x = bytearray(8 * 1024 ** 3)\n    return tuple(set(a) & set(b))"
    score, _ = scorer.score(tasks["Mbpp/2"], fence(code))
    assert not score.correct and "MemoryError" in score.reason


def test_writing_outside_its_folder_is_refused(hostile, tmp_path):
    """Writes to the host (a root-owned folder, /tmp) never reach it; writing its own folder works."""
    if os.geteuid() != 0 and not netns_available():
        pytest.skip("needs root (privileges are dropped) or mount namespaces")
    tasks, scorer = hostile
    tag = uuid.uuid4().hex
    targets = [tmp_path / f"escape-{tag}.txt", f"/tmp/escape-{tag}.txt", f"/var/tmp/escape-{tag}.txt"]
    code = (
        "def similar_elements(a, b):\n"
        "    open('mine.txt', 'w').write('ok')\n"
        f"    for p in {[str(t) for t in targets]!r}:\n"
        "        open(p, 'w').write('x')\n"
        "    return tuple(set(a) & set(b))\n"
    )
    score, _ = scorer.score(tasks["Mbpp/2"], fence(code))
    if os.geteuid() == 0:  # dropped to nobody: the root-owned folder refuses the first write
        # refused (root-owned folder), or not even visible (/tmp is private in the sandbox)
        assert not score.correct
        assert "PermissionError" in score.reason or "FileNotFoundError" in score.reason
    for t in targets:
        assert not os.path.exists(t), t


def test_opening_a_socket_fails_and_nothing_connects(hostile):
    """Code that connects to a listening local port gets no connection and is scored a failure."""
    tasks, scorer = hostile
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    hits: list[object] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = srv.accept()
                hits.append(conn)
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    code = ("import socket\ndef similar_elements(a, b):\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hi')\n"
            "    return tuple(set(a) & set(b))\n")
    score, _ = scorer.score(tasks["Mbpp/2"], fence(code))
    time.sleep(0.3)  # a connection made at the very end would still be accepted
    done.set()
    th.join()
    srv.close()
    assert not score.correct
    assert hits == []


def test_output_flood_is_capped():
    """A program printing without end is stopped (file-size limit or timeout) with capped output."""
    res, _ = run_python(GUARD + "while True:\n    print('x' * 1000)\n", limits=FAST)
    assert res.returncode != 0
    assert len(res.stdout) <= 200_000


def test_sandbox_runs_as_nobody_when_root():
    """Under root, sandboxed code runs with an unprivileged uid of its own (no group, no login) and an
    empty environment."""
    res, _ = run_python("import os\nprint(os.getuid(), sorted(os.environ))\n", limits=FAST)
    uid, env = res.stdout.split(" ", 1)
    if os.geteuid() == 0:
        import pwd

        assert int(uid) >= 1_000_000
        with pytest.raises(KeyError):
            pwd.getpwuid(int(uid))
    assert "OPENAI_API_KEY" not in env and "HOME" in env


def test_humaneval_check_passes_and_fails():
    """HumanEval answers are run against the problem's own check function."""
    task = {t.task_id: t for t in load_tasks("humaneval")}["HumanEval/0"]
    good = ("def has_close_elements(numbers, threshold):\n"
            "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n")
    bad = "def has_close_elements(numbers, threshold):\n    return False\n"
    scorer = Scorer(FAST)
    assert scorer.score(task, fence(good))[0].correct
    assert not scorer.score(task, fence(bad))[0].correct


def test_humaneval_answer_that_exits_early_does_not_pass():
    """A wrong answer that ends the program with status 0 before check() runs is scored as failed."""
    task = {t.task_id: t for t in load_tasks("humaneval")}["HumanEval/0"]
    scorer = Scorer(FAST)
    for answer in ("    return False\nimport sys; sys.exit(0)\n", "    return False\nimport os; os._exit(0)\n"):
        score = scorer.score(task, answer)[0]
        assert not score.correct and score.reason == "exited before check() finished", answer


# ---- extraction and math -----------------------------------------------------------------------
def test_extract_code_keeps_definitions_and_repairs_truncation():
    """Definitions and imports are kept from all blocks; a block cut off mid-line is parsed up to it."""
    text = ("```python\nimport math\nX = 3\ndef f(a):\n    return a\nprint(f(1))\n```\n"
            "and\n```python\ndef g(b):\n    return b\ndef h(c):\n    return (c +\n")
    code = extract_code(text)
    assert "import math" in code and "def f" in code and "def g" in code and "X = 3" in code
    assert "print" not in code and "def h" not in code


@pytest.mark.parametrize(
    ("text", "want"),
    [("so \\boxed{\\frac{1}{2}} is it", "\\frac{1}{2}"), ("work\n#### 1,234", "1,234"),
     ("The answer is 42.", "42"), ("3 apples then 7 apples", "7"), ("no digits", None),
     ("\\boxed{a{b}c} then \\boxed{5}", "5")],
)
def test_math_answer_extraction(text, want):
    """Boxed answers win, then '#### N', then 'answer is', then the last number."""
    assert extract_math_answer(text) == want


def test_math_equal_uses_math_verify_and_numeric_fallback():
    """Equivalent forms match (1/2 vs 0.5, 1,234 vs 1234); different values do not."""
    assert math_equal("\\frac{1}{2}", "0.5")
    assert math_equal("1234", "1,234")
    assert math_equal("18", "$18.00")
    assert math_equal("\\frac{3}{4}", "0.75") and math_equal("2\\sqrt{2}", "\\sqrt{8}")
    assert not math_equal("18", "17") and not math_equal("\\frac{1}{2}", "12")
    assert not math_equal("18", None)


def test_score_math_reports_what_it_extracted():
    """A GSM8K verdict records the extracted answer and explains a mismatch."""
    task = Task("gsm8k/0", "gsm8k", "q", {"answer": "7"})
    ok, pred = score_math(task, "3 + 4 = 7 so \\boxed{7}")
    bad, pred2 = score_math(task, "I think 8")
    assert ok.correct and pred == "7"
    assert not bad.correct and pred2 == "8" and "expected '7'" in bad.reason


def test_score_still_exports_the_sandbox_and_its_programs():
    """The sandbox and the programs that run in it live in their own modules; `score` re-exports their
    public names (the same objects) for code that imported them from it, and every program sent to
    the sandbox starts with the audit-hook guard and the codec."""
    from skillaudit.sandbox import process as sandbox
    from skillaudit.sandbox import programs, score

    home = {n: (sandbox if hasattr(sandbox, n) else programs) for n in score.__all__
            if hasattr(sandbox, n) or hasattr(programs, n)}
    assert {"Limits", "ExecResult", "run_python", "isolation_status", "sandbox_layers", "cgroup_status",
            "seccomp_filter", "SANDBOX_TAG", "GUARD", "RUNNER", "CALLS_RUNNER", "HE_ARGS", "HE_REPLAY"} <= set(home)
    for name, mod in home.items():
        assert getattr(score, name) is getattr(mod, name), name
    assert all(hasattr(score, n) for n in score.__all__)
    for name in ("RUNNER", "HE_RECORD", "HE_REPLAY", "HE_ARGS", "CALLS_RUNNER"):
        assert getattr(programs, name).startswith(programs.GUARD + programs.CODEC), name
    assert sandbox.BOOTSTRAP.startswith(sandbox.SANDBOX_TAG)
