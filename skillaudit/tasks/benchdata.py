"""Where a benchmark's data file is on a user's machine: the places the tools that download it
leave it, searched in a fixed order; never a download, never a folder of this repository.

For a benchmark with no `--data PATH`, the first of these that holds the file wins:

1. `SKILLAUDIT_DATA`: folders (separated by `os.pathsep`) holding the file under its plain name
   (`mbpp_plus.jsonl`, `gsm8k_test.jsonl`, `math500_test.jsonl`);
2. EvalPlus's cache (MBPP+): `MBPP_OVERRIDE_PATH` as EvalPlus honours it, else
   `$XDG_CACHE_HOME/evalplus/MbppPlus-<version>.jsonl` (`~/.cache/evalplus`), the newest version;
3. the Hugging Face hub cache (`HF_HUB_CACHE`, `HF_HOME/hub`, `~/.cache/huggingface/hub`): the test
   split of `openai/gsm8k` (config `main`, parquet) and `HuggingFaceH4/MATH-500` (`test.jsonl`), in
   the snapshot `refs/main` names, else the newest;
4. the Hugging Face datasets cache (`HF_DATASETS_CACHE`, `HF_HOME/datasets`,
   `~/.cache/huggingface/datasets`): the Arrow files `datasets.load_dataset` wrote for those splits.

Parquet and Arrow files need pyarrow (the `parquet` extra), imported only when such a file is read.
When nothing is found, `missing_message` is one line naming the file and how to get it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

#: the plain file names (`SKILLAUDIT_DATA`, `--data` examples)
PLAIN_FILES = {
    "mbpp_plus": "mbpp_plus.jsonl",
    "gsm8k": "gsm8k_test.jsonl",
    "math500": "math500_test.jsonl",
}


@dataclass(frozen=True)
class HubDataset:
    """One Hugging Face dataset split: its repository, where the split lies in a hub snapshot,
    and the datasets cache's folder and Arrow file name for it."""

    repo: str
    snapshot_glob: str  # relative to a snapshot folder
    cache_dir: str  # datasets cache: <owner>___<name, lower case>/<config>
    arrow_name: str
    config: str | None = None


HUB = {
    "gsm8k": HubDataset("openai/gsm8k", "main/test-*.parquet", "openai___gsm8k/main", "gsm8k-test.arrow", "main"),
    "math500": HubDataset("HuggingFaceH4/MATH-500", "test.jsonl", "HuggingFaceH4___math-500/default",
                          "math-500-test.arrow"),
}

#: how to get each file, for the message when it is absent
HOW_TO_GET = {
    "mbpp_plus": ("pip install evalplus && python -c 'from evalplus.data import get_mbpp_plus; get_mbpp_plus()' "
                  "(caches ~/.cache/evalplus/MbppPlus-v0.2.0.jsonl)"),
    "gsm8k": "huggingface-cli download openai/gsm8k --repo-type dataset (or datasets.load_dataset('openai/gsm8k', 'main'))",
    "math500": ("huggingface-cli download HuggingFaceH4/MATH-500 --repo-type dataset "
                "(or datasets.load_dataset('HuggingFaceH4/MATH-500'))"),
}


@dataclass(frozen=True)
class Found:
    """A data file and which place it came from (said in the run's progress line)."""

    path: Path
    where: str


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def _xdg_cache(env: Mapping[str, str]) -> Path:
    return Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else _home(env) / ".cache"


def _hf_home(env: Mapping[str, str]) -> Path:
    return Path(env["HF_HOME"]) if env.get("HF_HOME") else _xdg_cache(env) / "huggingface"


def hub_cache(env: Mapping[str, str]) -> Path:
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(key):
            return Path(env[key])
    return _hf_home(env) / "hub"


def datasets_cache(env: Mapping[str, str]) -> Path:
    return Path(env["HF_DATASETS_CACHE"]) if env.get("HF_DATASETS_CACHE") else _hf_home(env) / "datasets"


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:
        return False


def _newest(paths: Iterator[Path]) -> Path | None:
    """The most recently modified file of `paths` (ties: the greatest name), or None."""
    best: tuple[float, str, Path] | None = None
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            continue
        key = (st.st_mtime, str(p), p)
        if best is None or key[:2] > best[:2]:
            best = key
    return None if best is None else best[2]


def _version_key(p: Path) -> tuple[int, ...]:
    digits = p.stem.rsplit("-v", 1)[-1].split(".")
    try:
        return tuple(int(d) for d in digits)
    except ValueError:
        return (-1,)


def _evalplus(env: Mapping[str, str]) -> Found | None:
    override = env.get("MBPP_OVERRIDE_PATH")
    if override and _is_file(Path(override)):
        return Found(Path(override), "MBPP_OVERRIDE_PATH")
    folder = _xdg_cache(env) / "evalplus"
    try:
        cands = [p for p in folder.glob("MbppPlus-v*.jsonl")
                 if "Mini" not in p.name and "NoExtreme" not in p.name and _is_file(p)]
    except OSError:
        return None
    if not cands:
        return None
    best = max(cands, key=lambda p: (_version_key(p), p.name))
    return Found(best, "the EvalPlus cache")


def _hub(ds: HubDataset, env: Mapping[str, str]) -> Found | None:
    root = hub_cache(env) / ("datasets--" + ds.repo.replace("/", "--"))
    snaps = root / "snapshots"
    try:
        ref = (root / "refs" / "main").read_text().strip()
    except OSError:
        ref = ""
    order: list[Path] = []
    if ref and (snaps / ref).is_dir():
        order.append(snaps / ref)
    try:
        others = sorted((p for p in snaps.iterdir() if p.is_dir()), key=lambda p: -p.stat().st_mtime)
    except OSError:
        others = []
    order += [p for p in others if p not in order]
    for snap in order:
        files = sorted(p for p in snap.glob(ds.snapshot_glob) if _is_file(p))
        if len(files) == 1:  # a split sharded over several files is not read as one
            return Found(files[0], f"the Hugging Face hub cache ({ds.repo})")
    return None


def _datasets_cache(ds: HubDataset, env: Mapping[str, str]) -> Found | None:
    folder = datasets_cache(env) / ds.cache_dir
    try:
        found = _newest(p for p in folder.glob(f"*/*/{ds.arrow_name}") if _is_file(p))
    except OSError:
        return None
    return None if found is None else Found(found, f"the Hugging Face datasets cache ({ds.repo})")


def find_data(benchmark: str, env: Mapping[str, str] | None = None) -> Found | None:
    """The data file of `benchmark` in the standard places (module docstring), or None."""
    env = os.environ if env is None else env
    name = PLAIN_FILES.get(benchmark)
    if name is None:
        return None
    for folder in (env.get("SKILLAUDIT_DATA") or "").split(os.pathsep):
        if folder and _is_file(Path(folder) / name):
            return Found(Path(folder) / name, "SKILLAUDIT_DATA")
    if benchmark == "mbpp_plus":
        return _evalplus(env)
    ds = HUB[benchmark]
    return _hub(ds, env) or _datasets_cache(ds, env)


def missing_message(benchmark: str) -> str:
    """One line: which file is missing, where it was looked for and how to get it."""
    places = "SKILLAUDIT_DATA"
    places += ", the EvalPlus cache" if benchmark == "mbpp_plus" else ", the Hugging Face hub and datasets caches"
    return (f"no data file for {benchmark} ({PLAIN_FILES[benchmark]}; looked in {places}): "
            f"get it with {HOW_TO_GET[benchmark]}, or pass --data PATH")
