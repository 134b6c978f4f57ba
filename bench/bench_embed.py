"""Benchmark: cold and cached embedding time for a generated skill library (minilm and tfidf).

    python bench/bench_embed.py [--skills 2000] [--words 220] [--batch-size 64]

Cold = empty cache (for minilm: model load + encoding + cache write, the load shown apart);
cached = a second run on the same cache, with a fresh embedder (it never loads the model).
tfidf vectors are not cached (they depend on the whole corpus), so both of its runs compute.
Figures, not assertions: run it on the machine you care about and compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skillaudit.library import Skill
from skillaudit.library.embed import MiniLMEmbedder, embed_library

VOCAB = ["list", "string", "sort", "key", "tuple", "set", "dictionary", "count", "frequency", "regex", "pattern", "match", "loop", "index", "slice", "recursion", "memo", "cache", "base", "case", "prime", "divisor", "gcd", "heap", "largest", "smallest", "binary", "search", "bisect", "float", "tolerance", "round", "percent", "discount", "rate", "unit", "hour", "minute", "price", "total", "average", "ratio", "fraction", "equation", "answer", "format", "matrix", "row", "column", "edge", "empty", "input", "return", "value", "check", "invariant", "step", "apply", "test"]


def make_skills(n: int, words: int, seed: int = 0) -> list[Skill]:
    """SKILL.md-shaped skills of about `words` words each, drawn from a coding/math vocabulary."""
    rng = np.random.default_rng(seed)
    # a realistic vocabulary size: the topic words plus 3,000 pseudo-words (identifiers, nouns)
    vocab = np.array(list(VOCAB) + [f"{rng.choice(VOCAB)}{k}" for k in range(3000)])
    out = []
    for i in range(n):
        def sent(k: int) -> str:
            return " ".join(rng.choice(vocab, k)) + "."

        body = "\n".join([
            "## When to apply", *(f"- {sent(12)}" for _ in range(3)),
            "## Steps", *(f"{j}. {sent(14)}" for j in range(1, 5)),
            "## Invariants", *(f"- {sent(10)}" for _ in range(3)),
            "## Self-test", f"- {sent(max(1, words - 150))}",
        ])
        out.append(Skill(id=f"skill-{i:04d}", name=f"skill-{i:04d}", description=sent(25), body=body))
    return out


def timed(fn):
    t = time.perf_counter()
    res = fn()
    return res, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skills", type=int, default=2000)
    ap.add_argument("--words", type=int, default=220)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--backends", default="minilm,tfidf", help="Comma-separated: minilm, tfidf.")
    args = ap.parse_args()
    skills = make_skills(args.skills, args.words)
    n_words = np.mean([len(s.text.split()) for s in skills])
    print(f"{len(skills)} skills, {n_words:.0f} words each on average; {os.cpu_count()} CPU(s), "
          f"load average {os.getloadavg()[0]:.1f} at start")
    backends = args.backends.split(",")
    if "minilm" in backends:
        bench_minilm(skills, args.batch_size)
    if "tfidf" in backends:
        for run in ("cold", "again"):
            out, t = timed(lambda: embed_library(skills, "tfidf"))
            print(f"tfidf   {run:<11} {t:7.3f} s  ({out.vectors.shape[1]}-d, not cached by design)")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def bench_minilm(skills: list[Skill], batch_size: int) -> None:
    args = argparse.Namespace(batch_size=batch_size)
    with tempfile.TemporaryDirectory() as cache:
        emb = MiniLMEmbedder(batch_size=args.batch_size)
        _, t_load = timed(emb.load)
        cold, t_cold = timed(lambda: embed_library(skills, emb, cache_dir=cache))
        assert cold.n_encoded == len(skills) and cold.fallback_reason is None
        warm_emb = MiniLMEmbedder(batch_size=args.batch_size)
        warm, t_warm = timed(lambda: embed_library(skills, warm_emb, cache_dir=cache))
        assert warm.n_encoded == 0 and warm_emb.n_encoded == 0
        assert np.array_equal(cold.vectors, warm.vectors)
        size = sum(p.stat().st_size for p in Path(cache).rglob("*.npz"))
    print(f"minilm  model load  {t_load:7.2f} s")
    print(f"minilm  cold        {t_cold:7.2f} s  ({len(skills) / t_cold:6.0f} skills/s, encode + cache write)")
    print(f"minilm  cached      {t_warm:7.3f} s  (0 encoded; cache {size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
