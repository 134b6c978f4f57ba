"""The bundled demo: `sample_runs/*.jsonl` audited against the `skills/` library.

In the source tree `skillaudit/demo/skills` and `skillaudit/demo/sample_runs` are symbolic links to
the repository's `skills/` and `sample_runs/`; building a wheel or an sdist copies the files they
point at into the package (package data `demo/**/*`), so an installed skillaudit carries its own
copy. When the links are missing (a checkout without symlink support) the repository copies next
to the package are used instead.

Layer (pyproject.toml `[tool.importlinter]`): May import errors only.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from skillaudit.errors import InputError


@dataclass(frozen=True)
class Demo:
    """Where the demo's run logs and skill library are."""

    runs: tuple[Path, ...]
    skills: Path
    root: Path


def _candidates() -> list[Path]:
    out = []
    try:
        pkg = resources.files(__name__)
        out.append(Path(str(pkg)))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - zipimport etc.
        pass
    repo = Path(__file__).resolve().parents[2]  # <repo>/skillaudit/demo/__init__.py
    out.append(repo)
    return out


def demo_paths() -> Demo:
    """The demo's run logs (sorted) and library; InputError when the package has none."""
    tried = []
    for root in _candidates():
        skills, runs_dir = root / "skills", root / "sample_runs"
        tried.append(str(root))
        if not skills.is_dir() or not any(skills.glob("*/SKILL.md")):
            continue
        runs = tuple(sorted(p for p in runs_dir.glob("*.jsonl") if p.is_file())) if runs_dir.is_dir() else ()
        if not runs:
            raise InputError(
                f"the bundled demo has no sample runs yet ({runs_dir} holds no *.jsonl); "
                "give run logs: skillaudit audit RUNS... --skills DIR"
            )
        return Demo(runs=runs, skills=skills, root=root)
    raise InputError(f"the bundled demo is not installed (looked in {', '.join(tried)})")
