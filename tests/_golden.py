"""Goldens for the equivalence test (issue 54): what today's code writes for three inputs, so the
layout refactor can prove that no value moved.

    .venv/bin/python tests/_golden.py --write     # regenerate tests/data/golden/ (only on purpose)

Inputs: the bundled sample (sample_runs/*.jsonl against skills/), a simulated 45-skill, 3-model
library (simulate(..., seed=1), as the prune view's test) and the imported SkillsBench registry
(sample_runs/skillsbench/registry.jsonl.gz). Outputs: audit.json and skills.csv of `audit`, and the
`--json` of metrics, rank, prune, check, compare, clusters, cost and verify where the input
allows. Each is stored gzipped as `<input>/<output>.gz`.

`same(old, new)` is the equivalence: every value of the golden is in the new output and equal
(numbers, also a CSV cell's number text, to 1e-9 relative), except the clock (`generated_at`), words (a string with a space in it: sentences may be corrected)
and except that the new output may add `method` fields.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "golden"
FAST = ["--bootstrap", "300"]
VOLATILE = {"generated_at"}  # the clock: never compared


def _sample() -> tuple[list[str], str]:
    runs = sorted(str(p) for p in (REPO / "sample_runs").glob("*.jsonl"))
    return runs, str(REPO / "skills")


def _sim45(tmp: Path) -> tuple[list[str], str]:
    from skillaudit.runs.simulate import simulate

    out = tmp / "sim45"
    if not (out / "runs.jsonl").exists():
        simulate(n_tasks=600, n_skills=45, n_harmful=3, n_helpful=3, n_mixed=2, n_alias_pairs=2, n_unused=2,
                 models=("model-a", "model-b", "model-c"), seed=1).write(out)
    return [str(out / "runs.jsonl")], str(out / "skills")


def _registry() -> tuple[list[str], str | None]:
    return [str(REPO / "sample_runs" / "skillsbench" / "registry.jsonl.gz")], None


INPUTS: dict[str, Callable[..., tuple[list[str], str | None]]] = {
    "sample": lambda tmp: _sample(), "sim45": _sim45, "registry": lambda tmp: _registry()}


def _commands(runs: list[str], skills: str | None, name: str) -> dict[str, list[str]]:
    lib = ["--skills", skills] if skills else []
    out = {
        "metrics": ["metrics", *runs, *lib, *FAST, "--json"],
        "rank": ["rank", *runs, *lib, *FAST, "--json"],
        "check": ["check", *runs, *lib, *FAST, "--json"],
        "compare": ["compare", *runs, *FAST, "--json"],
    }
    if skills:
        out["cost"] = ["cost", *runs, *lib, "--json"]
        out["prune"] = ["prune", *runs, *lib, "--embedder", "tfidf", *FAST, "--json"]
        out["clusters"] = ["clusters", *runs, *lib, "--embedder", "tfidf", "--json"]
    if name == "sample":
        out["verify"] = ["verify", *runs, *lib, *FAST, "--json"]
    return out


def outputs(tmp: Path) -> Iterator[tuple[str, str, bytes]]:
    """(input, output name, bytes) of every golden output, computed by the code as it is now (the
    temporary folder and the repository's path written as <TMP> and <REPO>)."""
    for inp, name, data in _raw_outputs(tmp):
        yield inp, name, data.replace(str(tmp).encode(), b"<TMP>").replace(str(REPO).encode(), b"<REPO>")


def _raw_outputs(tmp: Path) -> Iterator[tuple[str, str, bytes]]:
    from click.testing import CliRunner

    from skillaudit.cli import cli

    for name, make in INPUTS.items():
        runs, skills = make(tmp)
        rep = tmp / f"{name}-report"
        args = ["audit", *runs, *(["--skills", skills] if skills else []), "--out", str(rep), "-q",
                "--embedder", "tfidf", *FAST]
        res = CliRunner().invoke(cli, args)
        if res.exit_code != 0:
            raise RuntimeError(f"{name}: audit exited {res.exit_code}: {res.output[-400:]}")
        yield name, "audit.json", (rep / "audit.json").read_bytes()
        if (rep / "skills.csv").exists():
            yield name, "skills.csv", (rep / "skills.csv").read_bytes()
        for cmd, argv in _commands(runs, skills, name).items():
            res = CliRunner().invoke(cli, argv)
            if res.exit_code not in (0, 1):  # check exits 1 when something fails: its JSON is the output
                raise RuntimeError(f"{name}: {cmd} exited {res.exit_code}: {res.output[-400:]}")
            yield name, f"{cmd}.json", res.stdout_bytes


def _is_words(s: str) -> bool:
    return " " in s.strip()


def same(old: Any, new: Any, where: str = "$") -> list[str]:
    """Where `new` differs from the golden `old` (module docstring); [] when equivalent."""
    if isinstance(old, dict):
        if not isinstance(new, dict):
            return [f"{where}: an object became {type(new).__name__}"]
        out = []
        for k, v in old.items():
            if k in VOLATILE:
                continue
            if k not in new:
                out.append(f"{where}.{k}: missing")
            else:
                out += same(v, new[k], f"{where}.{k}")
        return out
    if isinstance(old, list):
        if not isinstance(new, list) or len(old) != len(new):
            return [f"{where}: a list of {len(old)} became {len(new) if isinstance(new, list) else type(new).__name__}"]
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in same(a, b, f"{where}[{i}]")]
    if isinstance(old, bool) or old is None:
        return [] if old is new or (old == new and type(old) is type(new)) else [f"{where}: {old!r} -> {new!r}"]
    if isinstance(old, (int, float)):
        if isinstance(new, bool) or not isinstance(new, (int, float)):
            return [f"{where}: {old!r} -> {new!r}"]
        if math.isclose(old, new, rel_tol=1e-9, abs_tol=1e-12):
            return []
        return [f"{where}: {old!r} -> {new!r}"]
    if isinstance(old, str):
        if _is_words(old) or old == new:
            return []
        a, b = _number_text(old), _number_text(new)  # a CSV cell holds a number as text
        if a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
            return []
        return [f"{where}: {old!r} -> {new!r}"]
    return [] if old == new else [f"{where}: {old!r} -> {new!r}"]


def _number_text(s: Any) -> float | None:
    """The number a text cell holds (a CSV field), else None."""
    if not isinstance(s, str):
        return None
    try:
        return float(s)
    except ValueError:
        return None


def parse(name: str, data: bytes) -> Any:
    if name.endswith(".csv"):
        import csv
        import io

        return list(csv.reader(io.StringIO(data.decode("utf-8"))))
    return json.loads(data)


def _write() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for inp, name, data in outputs(Path(tmp)):
            path = GOLDEN / inp / f"{name}.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(gzip.compress(data, mtime=0))
            print(f"{path.relative_to(REPO)}: {len(data):,} bytes")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/_golden.py --write")
    _write()
