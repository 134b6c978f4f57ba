"""The audit document (`skillaudit.audit/v1`): `AuditResult`, what `audit.json` holds, and the
pieces only the document needs (input hashes, compaction of long lists, the 2-D skill map).

`skillaudit.audit.flow` builds it as the last step of the audit flow; `load_audit` reads one back.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skillaudit import __version__
from skillaudit.errors import InputError

AUDIT_SCHEMA = "skillaudit.audit/v1"
SECTIONS = ("metrics", "skills", "clusters", "recommendations", "graph", "inputs")

# ---------------------------------------------------------------- the result
@dataclass(frozen=True)
class AuditResult:
    """The whole audit as plain data; `to_dict()` is what `audit.json` holds.

    Sections: `headline` (the verdict), `metrics` (skillaudit.metrics/v1), `skills`
    (skillaudit.rank/v1), `clusters` (skillaudit.clusters/v1 plus a 2-D `map`, or None without a
    library), `recommendations` (skillaudit.prune/v1), `graph` (co-retrieval graph summary),
    `inputs` (file hashes, version, settings), `figures` (file names inside the report).
    """

    headline: dict[str, Any]
    metrics: dict[str, Any]
    skills: dict[str, Any]
    clusters: dict[str, Any] | None
    recommendations: dict[str, Any]
    graph: dict[str, Any]
    inputs: dict[str, Any]
    figures: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # library-level verdicts per model and benchmark (skillaudit.analysis.library_effect)
    library: list[dict[str, Any]] = field(default_factory=list)
    # measured vs projected, where `pruned` re-runs exist (skillaudit.verify/v1)
    verify: dict[str, Any] | None = None
    # paired token and time differences per model (skillaudit.efficiency/v1), where the runs log them
    efficiency: dict[str, Any] | None = None
    # per model: where each skill fired and whether it helped there; with expected_skills, the
    # shadowing split and confusion counts (skillaudit.analysis.triggers.trigger_view)
    triggers: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": AUDIT_SCHEMA,
            "headline": self.headline,
            "library": list(self.library),
            "verify": self.verify,
            "efficiency": self.efficiency,
            "triggers": self.triggers,
            "metrics": self.metrics,
            "skills": self.skills,
            "clusters": self.clusters,
            "recommendations": self.recommendations,
            "graph": self.graph,
            "inputs": self.inputs,
            "figures": dict(self.figures),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> AuditResult:
        if not isinstance(doc, dict) or doc.get("schema") != AUDIT_SCHEMA:
            raise InputError(f"not a {AUDIT_SCHEMA} document")
        missing = [s for s in (*SECTIONS, "headline") if s not in doc]
        if missing:
            raise InputError(f"{AUDIT_SCHEMA} document lacks section(s): {', '.join(missing)}")
        return cls(
            headline=doc["headline"], metrics=doc["metrics"], skills=doc["skills"],
            clusters=doc["clusters"], recommendations=doc["recommendations"], graph=doc["graph"],
            inputs=doc["inputs"], figures=dict(doc.get("figures") or {}),
            notes=list(doc.get("notes") or []), library=list(doc.get("library") or []),
            verify=doc.get("verify"), efficiency=doc.get("efficiency"), triggers=doc.get("triggers"),
        )


def load_audit(path: str | Path) -> AuditResult:
    """Read an `audit.json` back (InputError when it is not one)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read an audit document: {exc}") from None
    try:
        return AuditResult.from_dict(doc)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None


# ---------------------------------------------------------------- inputs: hashes
def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _library_digest(path: Path, unreadable: list[str] | None = None) -> tuple[str, int]:
    """sha256 over a library's files (relative path + content, sorted); (digest, file count).

    A file that cannot be read counts by its path and the word `unreadable` (appended to
    `unreadable`); special files (FIFOs, sockets, devices) are not files here."""
    if path.is_file():
        return _sha256_file(path), 1
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file() and not any(
        part.startswith(".") for part in p.relative_to(path).parts))
    for p in files:
        h.update(p.relative_to(path).as_posix().encode("utf-8") + b"\0")
        try:
            h.update(_sha256_file(p).encode("ascii") + b"\n")
        except OSError as exc:
            h.update(b"unreadable\n")
            if unreadable is not None:
                unreadable.append(f"{p}: cannot read ({exc.strerror or exc}); hashed as unreadable")
    return h.hexdigest(), len(files)


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def describe_inputs(run_paths: Sequence[str], skills_path: str | None, library: Any,
                    settings: dict[str, Any], demo: bool = False,
                    digests: dict[str, str] | None = None) -> dict[str, Any]:
    """Paths, sizes and sha256 of the inputs, versions and settings. `digests`: {path: sha256} of
    the run logs already hashed as they were read (`Inputs.digests`); others are hashed here."""
    runs = []
    for r in run_paths:
        p = Path(r)
        if r == "-" or not _is_regular(p):  # a stream (stdin, a FIFO, <(...)) was read once, already
            runs.append({"path": str(r), "sha256": None, "bytes": None})
            continue
        digest = (digests or {}).get(str(r))
        try:
            digest = digest or _sha256_file(p)
        except OSError:
            digest = None
        runs.append({"path": str(r), "name": p.name, "sha256": digest, "bytes": p.stat().st_size})
    lib = None
    if skills_path is not None:
        unreadable: list[str] = []
        digest, n_files = _library_digest(Path(skills_path), unreadable)
        lib = {
            "path": str(skills_path), "sha256": digest, "files": n_files,
            "n_skills": len(library) if library is not None else 0,
            "warnings": [*getattr(library, "warnings", ()), *unreadable],
        }
    return {
        "skillaudit_version": __version__,
        "python": platform.python_version(),
        "generated_at": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "demo": demo,
        "runs": runs,
        "library": lib,
        "settings": settings,
    }


# ---------------------------------------------------------------- pieces
#: lists longer than this inside audit.json are cut (the full lists are a command away)
MAX_EVIDENCE_LIST = 25
MAX_NEAR_DUPLICATES = 5000
MAX_INTERFERENCE = 200
#: skill_graph.graphml keeps only the backbone of a co-retrieval graph with more edges than this
#: (the graph the communities are found on): a large library co-retrieved at random has
#: hundreds of thousands of edges, which no graph viewer shows usefully
MAX_GRAPH_EDGES = 20_000


def _compact_recommendations(doc: dict[str, Any]) -> dict[str, Any]:
    """Cut long lists in the evidence (e.g. a harmful cluster of hundreds of skills, repeated for
    every member) to MAX_EVIDENCE_LIST items plus a `<key>_total` count."""
    for rec in doc.get("recommendations", []):
        ev = rec.get("evidence") or {}
        for key, value in list(ev.items()):
            if isinstance(value, (list, tuple)) and len(value) > MAX_EVIDENCE_LIST:
                ev[key] = list(value[:MAX_EVIDENCE_LIST])
                ev[f"{key}_total"] = len(value)
    return doc


def _map_coordinates(emb: Any) -> list[dict[str, Any]]:
    """2-D PCA coordinates of the skill vectors (deterministic sign)."""
    if emb is None or len(emb.keys) == 0:
        return []
    v = np.asarray(emb.vectors, dtype=np.float64)
    n = v.shape[0]
    if n == 1:
        xy = np.zeros((1, 2))
    else:
        centred = v - v.mean(axis=0)
        u, s, _ = np.linalg.svd(centred, full_matrices=False)
        xy = u[:, :2] * s[:2]
        if xy.shape[1] < 2:
            xy = np.hstack([xy, np.zeros((n, 2 - xy.shape[1]))])
        for j in range(2):  # fix the sign so the same library always draws the same way
            k = int(np.argmax(np.abs(xy[:, j])))
            if xy[k, j] < 0:
                xy[:, j] = -xy[:, j]
    return [{"skill_id": k, "x": round(float(x), 6), "y": round(float(y), 6)}
            for k, (x, y) in zip(emb.keys, xy, strict=True)]
