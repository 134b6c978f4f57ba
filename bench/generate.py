"""Generate a realistic paired run log (DESIGN §3.1) and a skill library, for the benchmarks.

    python bench/generate.py OUT_DIR --pairs 100000 [--skills 2000] [--files 4] [--seed 0] [--pattern zipf|uniform]

Writes OUT_DIR/runs-<k>.jsonl (one file per model, enabled and disabled records interleaved as a
harness writes them), OUT_DIR/skills/<name>/SKILL.md (the library) and OUT_DIR/skills.jsonl (the
same library as JSON Lines). Shape: 4 models x 3 benchmarks, 3 epochs per task, 40% of enabled
runs retrieve (1-2 calls of 1-3 skills, Zipf-like popularity over the library, a few skills that
hurt and a few that help), every record carries an answer string and a meta object. `--pattern
uniform` retrieves differently: one call of 1-3 skills drawn uniformly from the library, so every
skill is retrieved about equally often (the co-retrieval graph is one component). All randomness
is drawn in numpy up front; lines are formatted as bytes, so 1M pairs take well under a minute.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

MODELS = ("qwen2.5-coder-7b", "llama-3.1-8b", "mistral-small", "gpt-oss-20b")
BENCHMARKS = ("mbpp_plus", "humaneval_plus", "math500")
TOPICS = ("sort", "string", "graph", "dp", "math", "parse", "search", "set", "tree", "regex", "io",
          "bits", "float", "date", "matrix", "hash", "queue", "stack", "heap", "prime")


def skill_names(n: int) -> list[str]:
    return [f"{TOPICS[i % len(TOPICS)]}-skill-{i:04d}" for i in range(n)]


def write_library(out: Path, n_skills: int, seed: int = 0) -> None:
    """A folder of <name>/SKILL.md and the same skills as skills.jsonl."""
    import json

    rng = np.random.default_rng(seed + 1)
    words = ("list", "edge", "case", "empty", "input", "loop", "index", "sorted", "unique", "count",
             "window", "prefix", "sum", "modulo", "overflow", "recursion", "memo", "cache", "key",
             "value", "bound", "binary", "split", "join", "strip", "tolerance", "round", "gcd")
    lib = out / "skills"
    lib.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, name in enumerate(skill_names(n_skills)):
        topic = TOPICS[i % len(TOPICS)]
        pick = rng.choice(len(words), size=24)
        desc = f"Use for {topic} problems with " + " ".join(words[j] for j in pick[:8]) + "."
        body = (f"## When to apply\n{topic} tasks: " + " ".join(words[j] for j in pick[8:]) + ".\n\n"
                f"## Snippet\n```python\nresult_{i} = sorted(set(values_{i}), key=lambda v: (v, {i}))\n```\n\n"
                "## Self-test\nRun the examples before answering.\n")
        (lib / name).mkdir(exist_ok=True)
        (lib / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n{body}",
                                             encoding="utf-8")
        lines.append(json.dumps({"id": name, "name": name, "description": desc, "body": body}))
    (out / "skills.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


PATTERNS = ("zipf", "uniform")


def generate(out: Path, n_pairs: int, n_skills: int = 2000, n_files: int = 4, seed: int = 0,
             pattern: str = "zipf") -> list[Path]:
    """Write `n_pairs` pairs over `n_files` files; return the file paths."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}")
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    names = [s.encode() for s in skill_names(n_skills)]
    n = n_pairs
    # keys: pair i -> (model, benchmark, task, epoch), unique; 3 epochs per task
    model = np.arange(n) % len(MODELS)
    bench = (np.arange(n) // len(MODELS)) % len(BENCHMARKS)
    per_cell = np.arange(n) // (len(MODELS) * len(BENCHMARKS))  # position within its (model, bench)
    epoch = per_cell % 3 + 1
    task = per_cell // 3
    y_neg = rng.random(n) < 0.55
    retrieve = rng.random(n) < 0.40
    invoked = retrieve | (rng.random(n) < 0.05)  # a few calls that return nothing
    n_calls = np.where(retrieve, rng.integers(1, 3, size=n), 0)
    # Zipf-like popularity: a few skills are retrieved very often
    pop = 1.0 / np.arange(1, n_skills + 1) ** 0.8
    if pattern == "uniform":  # one call of 1-3 skills, every skill equally likely
        n_calls = np.where(retrieve, 1, 0)
        pop = np.ones(n_skills)
    pop /= pop.sum()
    perm = rng.permutation(n_skills)
    harmful = set(perm[:40].tolist())
    helpful = set(perm[40:80].tolist())
    flip_noise = rng.random(n)
    answers = [b"def solve(values):\n    return sorted(set(values))\n",
               b"def solve(a, b):\n    return tuple(set(a) & set(b))\n",
               b"The answer is \\boxed{42}.",
               b"import math\ndef solve(n):\n    return math.gcd(n, 12)\n"]
    files = [out / f"runs-{k}.jsonl" for k in range(n_files)]
    handles = [f.open("wb") for f in files]
    skill_draws = rng.choice(n_skills, size=(n, 6), p=pop)
    k_per_call = rng.integers(1, 4, size=(n, 2))
    scores = np.round(rng.uniform(2, 12, size=(n, 6)), 2)
    try:
        for i in range(n):
            m, b = int(model[i]), int(bench[i])
            head = (b'{"task_id":"' + BENCHMARKS[b].encode() + b"/" + str(int(task[i])).encode()
                    + b'","model":"' + MODELS[m].encode() + b'","benchmark":"' + BENCHMARKS[b].encode()
                    + b'","epoch":' + str(int(epoch[i])).encode())
            yn = bool(y_neg[i])
            calls = []
            got = set()
            col = 0
            for c in range(int(n_calls[i])):
                sk = []
                for _ in range(int(k_per_call[i, c])):
                    j = int(skill_draws[i, col])
                    sk.append(b'{"id":"' + names[j] + b'","score":' + str(scores[i, col]).encode() + b"}")
                    got.add(j)
                    col += 1
                calls.append(b'{"query":"' + TOPICS[(i + c) % len(TOPICS)].encode()
                             + b' helper","skills":[' + b",".join(sk) + b'],"error":null}')
            if invoked[i] and not calls:
                calls.append(b'{"query":"nothing","skills":[],"error":null}')
            p_flip = 0.15
            yp = yn
            if (got & harmful and yn) or (got & helpful and not yn):
                p_flip = 0.45
            if flip_noise[i] < p_flip:
                yp = not yn
            ans = answers[(i // 7) % len(answers)]
            ans_json = ans.replace(b"\\", b"\\\\").replace(b"\n", b"\\n")
            rets = b',"retrievals":[' + b",".join(calls) + b"]" if calls else b""
            on = (head + b',"condition":"enabled","correct":' + (b"true" if yp else b"false")
                  + rets + b',"answer":"' + ans_json
                  + b'","meta":{"latency_s":1.5,"tokens":512}}\n')
            off = (head + b',"condition":"disabled","correct":' + (b"true" if yn else b"false")
                   + b',"answer":"' + ans_json + b'","meta":{"latency_s":1.1,"tokens":430}}\n')
            fh = handles[m % n_files]
            fh.write(on)
            fh.write(off)
    finally:
        for fh in handles:
            fh.close()
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--skills", type=int, default=2000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pattern", choices=PATTERNS, default="zipf",
                    help="zipf: 1-2 calls of 1-3 skills, Zipf-like popularity; uniform: one call of 1-3 "
                         "skills drawn uniformly (every skill retrieved about equally often)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    files = generate(args.out, args.pairs, args.skills, args.files, args.seed, args.pattern)
    write_library(args.out, args.skills, args.seed)
    size = sum(f.stat().st_size for f in files) / 1e6
    print(f"{args.pairs:,} pairs in {len(files)} files ({size:.0f} MB), {args.skills:,} skills, "
          f"{time.perf_counter() - t0:.1f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
