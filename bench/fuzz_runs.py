"""Differential fuzz campaign over run logs (issue 16): generated hostile logs, three reader paths.

    python bench/fuzz_runs.py [--logs 2000] [--seed 0] [--cli-sample 40] [--show 5]

Each log is a valid generated log (plain or .gz) mutated by one or more of: truncation, byte
flips, huge numbers (1e400, 400-digit integers), NaN / Infinity, deep nesting, a BOM (at the
start or inside), bad UTF-8, NUL bytes, duplicate keys, wrong types, missing fields, escapes
and lone surrogates in ids, CRLF, blank lines, long lines, arm records, gzip truncation or
corruption. Every log is read in-process by the three reader paths of `skillaudit.runs` (the C
scanner, msgspec, the exact orjson path), with and without answers, and by `validate`,
`metrics` and `rank` through click's CliRunner; a sample also through `python -m skillaudit.cli`
in a subprocess. Counted: tracebacks (any exception that is not a skillaudit error), exit codes,
and logs on which the three paths' verdicts (the error message, or a digest of the pairs) differ.
Prints one table; exits 1 if anything but 0 tracebacks, exit codes in {0, 2} and 0 disagreements.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from click.testing import CliRunner  # noqa: E402

from skillaudit import runs  # noqa: E402
from skillaudit.cli import cli  # noqa: E402
from skillaudit.errors import SkillauditError  # noqa: E402
from skillaudit.runs import reader as runs_reader  # noqa: E402 - where the three paths are chosen

PATHS = ("c", "msgspec", "exact")
SKILLS = ["set-ops", "sort-key", "percent-change", "gcd", "Ünïcode-skill", "a\\u0041b"]


# ---------------------------------------------------------------- generating
def _record(rng: random.Random, task: str, cond: str, epoch: int, model: str) -> dict:
    rec: dict = {"task_id": task, "condition": cond, "correct": rng.choice([True, False, 0, 1]),
                 "model": model, "benchmark": rng.choice(["mbpp", "math"])}
    if epoch != 1 or rng.random() < 0.3:
        rec["epoch"] = epoch
    if cond in ("enabled", "on") and rng.random() < 0.7:
        calls = []
        for _ in range(rng.randint(0, 3)):
            skills = []
            for s in rng.sample(SKILLS[:5], rng.randint(0, 3)):
                skills.append(s if rng.random() < 0.3 else {"id": s, "score": rng.choice(
                    [round(rng.uniform(-5, 20), 3), None, 7, 1.5e10, 2.5e-7])})
            calls.append({"query": "q " + task, "skills": skills, "error": None})
        rec["retrievals"] = calls
        if rng.random() < 0.2:
            rec["retrieved"] = rng.sample(SKILLS[:5], rng.randint(0, 2))
    if rng.random() < 0.6:
        rec["answer"] = rng.choice(["def f(a, b):\n    return sorted(a, key=len)", "set-ops used", "",
                                    "x = 1e5 \u00e9\u4e2d", None, 42])
    if rng.random() < 0.3:
        rec["meta"] = {"latency": rng.random(), "tags": ["a", {"b": [1, 2.5, None]}]}
    if rng.random() < 0.05:
        rec["error"] = "timeout"
    return rec


def base_log(rng: random.Random) -> list[str]:
    lines = []
    models = ["m1", "m2"][: rng.randint(1, 2)]
    for t in range(rng.randint(1, 30)):
        for e in range(1, rng.choice([1, 1, 2]) + 1):
            model = rng.choice(models)
            for cond in rng.sample([rng.choice(["enabled", "on"]), rng.choice(["disabled", "off"])], 2):
                lines.append(json.dumps(_record(rng, f"T/{t}", cond, e, model), ensure_ascii=rng.random() < 0.5))
    if rng.random() < 0.1:  # a counterfactual arm record
        lines.append(json.dumps({"task_id": "T/0", "condition": "enabled", "correct": True, "arm": "random"}))
    return lines


HUGE = ["1e400", "-1e400", "1" + "0" * 400, "NaN", "Infinity", "-Infinity", "9.9e308", "1e-400", "1e308",
        "9223372036854775808", "18446744073709551616", "1" + "0" * 30, "-0", "1.0", "1E+999"]


def _mutate_line(rng: random.Random, line: str) -> str:
    kind = rng.randrange(16)
    if kind == 0:  # a huge / non-finite number in a field read or skipped
        key = rng.choice(["answer", "epoch", "correct", "meta", "extra", "score"])
        v = rng.choice(HUGE)
        if key == "score":
            return line.replace('"score": ', f'"score": {v}, "x": ', 1) if '"score": ' in line else \
                line[:-1] + f', "retrievals": [{{"skills": [{{"id": "a", "score": {v}}}]}}]}}'
        if key == "meta":
            v = f'{{"deep": [{v}]}}'
        return line[:-1] + f', "{key}": {v}}}'
    if kind == 1:  # deep nesting
        d = rng.choice([10, 63, 64, 65, 200, 3000])
        return line[:-1] + f', "meta": {"[" * d}{"]" * d}}}'
    if kind == 2:  # duplicate key
        key = rng.choice(["task_id", "condition", "correct", "epoch", "model", "retrievals", "answer"])
        return line[:-1] + f', "{key}": {rng.choice(["true", "1", chr(34) + "t" + chr(34), "null", "[]"])}}}'
    if kind == 3:  # wrong type
        key = rng.choice(["task_id", "condition", "correct", "epoch", "model", "benchmark", "retrievals",
                          "retrieved", "invoked", "arm"])
        v = rng.choice(["null", "1", "2", '""', '"x"', "[]", "{}", "[1]", "true", "1.5", '["a", 1]', "-3"])
        return line[:-1] + f', "{key}": {v}}}'
    if kind == 4:  # a missing field
        try:
            rec = json.loads(line)
        except ValueError:  # an earlier mutation broke it
            return line[: len(line) // 2]
        if not isinstance(rec, dict) or not rec:
            return line
        rec.pop(rng.choice(list(rec)), None)
        return json.dumps(rec)
    if kind == 5:  # escapes and surrogates in ids
        esc = rng.choice(["\\u0041", "\\ud800", "\\udc00x", "\\ud83d\\ude00", "\\n", "\\u0000", "\\x", "\\/"])
        return line.replace('"T/', f'"T{esc}/', 1)
    if kind == 6:
        return line + "\r"
    if kind == 7:
        return ""
    if kind == 8:  # a long line
        return line[:-1] + f', "answer": "{"x" * rng.choice([1000, 70000])}"}}'
    if kind == 9:  # not an object
        return rng.choice(["[]", "1", '"x"', "null", "{", "}", "{}", " ", "\t{}"])
    if kind == 10:  # condition aliases and odd spellings
        return line.replace('"enabled"', rng.choice(['"skills_on"', '"Enabled"', '"on "', '"o\\u006e"']), 1)
    if kind == 11:  # retrieval shapes
        v = rng.choice(['[{"skills": null}]', '[{"skills": [{"id": "a", "id": "b"}]}]', '[{}]', '[null]',
                        '[{"skills": [{"score": 1}]}]', '[{"skills": [{"id": "a", "score": "1"}]}]',
                        '[{"skills": [{"id": "a", "score": true}]}]', '[{"skills": ["a", "a"]}]'])
        return line[:-1] + f', "retrievals": {v}}}'
    if kind == 12:  # trailing garbage / two values on a line
        return line + rng.choice([" x", " {}", ",", " ", "\t"])
    if kind == 13:  # an arm
        return line[:-1] + f', "arm": {rng.choice(["null", chr(34) + "mask" + chr(34), chr(34) + chr(34), "1"])}}}'
    if kind == 14:  # whitespace inside
        return line.replace(", ", " ,\t", 2)
    return line.replace('"correct": true', '"correct": 1.0', 1)


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    kind = rng.randrange(7)
    b = bytearray(data)
    if kind == 0 and b:  # byte flips
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256)
    elif kind == 1:  # truncation
        del b[rng.randrange(len(b) + 1):]
    elif kind == 2:  # BOM at the start or inside
        at = 0 if rng.random() < 0.6 else (data.find(b"\n") + 1)
        b[at:at] = rng.choice([b"\xef\xbb\xbf", b"\xff\xfe", b"\xef\xbb"])
    elif kind == 3 and b:  # bad UTF-8
        i = rng.randrange(len(b))
        b[i:i] = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80"])
    elif kind == 4 and b:  # NUL / control bytes
        i = rng.randrange(len(b))
        b[i:i] = rng.choice([b"\x00", b"\x1b[31m", b"\x01", b"\x7f"])
    elif kind == 5:  # no final newline / extra blank lines
        b = bytearray(data.rstrip(b"\n")) if rng.random() < 0.5 else bytearray(data + b"\n\n  \n")
    else:  # duplicated records
        lines = data.split(b"\n")
        if lines:
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(lines))
        b = bytearray(b"\n".join(lines))
    return bytes(b)


def _gz_mutate(rng: random.Random, gz: bytes) -> bytes:
    kind = rng.randrange(4)
    b = bytearray(gz)
    if kind == 0:
        return bytes(b[: rng.randrange(len(b))])
    if kind == 1:
        i = rng.randrange(10, len(b))
        b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 2:  # two members, the second one cut
        return gz + gz[: rng.randrange(len(gz))]
    return gz + rng.choice([b"garbage", b"\x1f\x8b", b""])


@dataclass
class Case:
    name: str
    data: bytes  # file content as written (gzip-compressed for .gz)
    mutations: list[str] = field(default_factory=list)


def generate(rng: random.Random, i: int) -> Case:
    lines = base_log(rng)
    muts = []
    n_line_muts = rng.choice([0, 1, 1, 1, 2, 3])
    for _ in range(n_line_muts):
        k = rng.randrange(len(lines))
        lines[k] = _mutate_line(rng, lines[k])
        muts.append("line")
    data = ("\n".join(lines) + "\n").encode()
    if rng.random() < 0.5:
        data = _mutate_bytes(rng, data)
        muts.append("bytes")
    gz = rng.random() < 0.3
    if gz:
        data = gzip.compress(data, compresslevel=rng.choice([1, 6, 9]))
        if rng.random() < 0.4:
            data = _gz_mutate(rng, data)
            muts.append("gzip")
    return Case(f"log{i:05d}.jsonl{'.gz' if gz else ''}", data, muts)


# ---------------------------------------------------------------- running
def _force(path: str, saved: dict) -> None:
    runs_reader._scan = saved["_scan"] if path == "c" else None
    runs_reader._decode = saved["_decode"] if path != "exact" else None
    runs_reader._decode_core = saved["_decode_core"] if path != "exact" else None


def _digest(paired) -> str:
    h = hashlib.sha256()
    for name in ("models", "benchmarks", "tasks", "skills", "unpaired_examples"):
        h.update(repr(getattr(paired, name)).encode())
    for name in ("model", "benchmark", "task", "epoch", "y_pos", "y_neg", "invoked", "adhered", "retrieval_scores"):
        h.update(getattr(paired, name).tobytes())
    r = paired.retrieval
    for a in (r.data, r.indices, r.indptr):
        h.update(a.tobytes())
    h.update(repr((paired.n_unpaired, paired.n_error_pairs, paired.n_arm_records)).encode())
    return h.hexdigest()[:16]


def read_verdict(path: str, adherence: bool) -> tuple[str, str]:
    """("ok", digest) / ("error", message) / ("traceback", text)."""
    try:
        return "ok", _digest(runs.load_runs([path], adherence=adherence))
    except SkillauditError as exc:
        return "error", str(exc)
    except BaseException:  # a traceback is what the campaign counts
        return "traceback", traceback.format_exc(limit=-3)


CLI_COMMANDS = (["validate"], ["metrics", "--bootstrap", "0"], ["rank", "--bootstrap", "0"])


@dataclass
class Tally:
    logs: int = 0
    gz: int = 0
    tracebacks: int = 0
    disagreements: int = 0
    exit_codes: Counter = field(default_factory=Counter)
    verdicts: Counter = field(default_factory=Counter)
    subprocess_runs: int = 0
    examples: list[str] = field(default_factory=list)


def run_campaign(n_logs: int, seed: int = 0, cli_sample: int = 0, workdir: str | None = None,
                 show: int = 5) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    saved = {k: getattr(runs_reader, k) for k in ("_scan", "_decode", "_decode_core")}
    runner = CliRunner()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        sample = set(rng.sample(range(n_logs), min(cli_sample, n_logs)))
        for i in range(n_logs):
            case = generate(rng, i)
            path = os.path.join(tmp, case.name)
            Path(path).write_bytes(case.data)
            tally.logs += 1
            tally.gz += case.name.endswith(".gz")
            try:
                for adherence in (True, False):
                    got = {}
                    for p in PATHS:
                        _force(p, saved)
                        got[p] = read_verdict(path, adherence)
                    kinds = {v[0] for v in got.values()}
                    if "traceback" in kinds:
                        tally.tracebacks += 1
                        if len(tally.examples) < show:
                            tb = next(v[1] for v in got.values() if v[0] == "traceback")
                            tally.examples.append(f"{case.name} traceback:\n{tb}")
                    if len(set(got.values())) > 1:
                        tally.disagreements += 1
                        if len(tally.examples) < show:
                            tally.examples.append(f"{case.name} paths differ (adherence={adherence}): {got}")
                    tally.verdicts[got["c"][0]] += 1
            finally:
                for k, v in saved.items():
                    setattr(runs_reader, k, v)
            for cmd in CLI_COMMANDS:
                res = runner.invoke(cli, [*cmd, path])
                tally.exit_codes[res.exit_code] += 1
                if res.exception is not None and not isinstance(res.exception, SystemExit):
                    tally.tracebacks += 1
                    if len(tally.examples) < show:
                        tally.examples.append(f"{case.name} {cmd[0]}: {''.join(traceback.format_exception(res.exception))[-600:]}")
                elif res.exit_code not in (0, 2) and len(tally.examples) < show:
                    tally.examples.append(f"{case.name} {cmd[0]} exit {res.exit_code}: {res.output[-300:]}")
            if i in sample:
                for cmd in CLI_COMMANDS:
                    proc = subprocess.run([sys.executable, "-m", "skillaudit.cli", *cmd, path], capture_output=True,
                                          env=env, timeout=120)
                    tally.subprocess_runs += 1
                    tally.exit_codes[proc.returncode] += 1
                    if b"Traceback" in proc.stderr:
                        tally.tracebacks += 1
                        if len(tally.examples) < show:
                            tally.examples.append(f"{case.name} {cmd[0]} (subprocess): {proc.stderr.decode()[-600:]}")
            os.unlink(path)
    return tally


def ok(t: Tally) -> bool:
    return t.tracebacks == 0 and t.disagreements == 0 and set(t.exit_codes) <= {0, 2}


def table(t: Tally, seconds: float) -> str:
    rows = [
        ("logs generated", f"{t.logs} ({t.logs - t.gz} plain, {t.gz} .gz)"),
        ("reads (3 paths x 2 modes)", str(t.logs * 6)),
        ("path verdicts (C path)", ", ".join(f"{k} {v}" for k, v in sorted(t.verdicts.items()))),
        ("CLI runs (in-process + subprocess)", f"{sum(t.exit_codes.values())} ({t.subprocess_runs} subprocess)"),
        ("exit codes", ", ".join(f"{k}: {v}" for k, v in sorted(t.exit_codes.items()))),
        ("tracebacks", str(t.tracebacks)),
        ("path disagreements", str(t.disagreements)),
        ("wall time", f"{seconds:.1f} s"),
    ]
    w = max(len(r[0]) for r in rows)
    return "\n".join(f"{a:<{w}}  {b}" for a, b in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cli-sample", type=int, default=40, help="logs also run through a subprocess CLI")
    ap.add_argument("--show", type=int, default=5, help="failures to print")
    args = ap.parse_args()
    start = time.perf_counter()
    t = run_campaign(args.logs, args.seed, args.cli_sample, show=args.show)
    print(table(t, time.perf_counter() - start))
    for e in t.examples:
        print("\n" + e)
    return 0 if ok(t) else 1


if __name__ == "__main__":
    sys.exit(main())
