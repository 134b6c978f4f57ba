"""Provenance: was a skill's text edited since the runs that judge it?

An enabled record may log, for every retrieved skill, the content hash of the text the run saw:
`retrievals[].skills[]` objects carry `"hash"`, the first 16 hex characters of
`Skill.content_hash` (sha256 of name, description and body). `skillaudit.runs.inputs.load_inputs`
collects them while it reads the runs (only lines holding the bytes `"hash"` are parsed;
`seen_hashes` does the same in a pass of its own), and `edited_skills` compares them with the
library being audited: a
skill whose current hash is none of the hashes the runs saw has been edited since, and its
verdict describes the old text. Logs without hashes change nothing. Records imported from Harbor
carry instead the digest Harbor gives each injected skill folder (`meta.skill_digests`, from the
trial's lock.json): `edited_by_digest` compares those with the library's folders the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import orjson

from skillaudit.runs.reader import _HASH_NEEDLE as _NEEDLE
from skillaudit.runs.records import _open

_BLOCK = 1 << 22
_ENABLED = {"enabled", "on", "skills_on"}


def edited_warning(skill_id: str) -> str:
    """The warning printed (once per skill) when a skill's text differs from the one the runs saw."""
    return f"skill {skill_id!r} edited since these runs: its verdict describes the old text"


def _lines_with_hash(fh: Any) -> Iterable[bytes]:
    rest = b""
    while True:
        block = fh.read(_BLOCK)
        if not block:
            break
        block = rest + block
        cut = block.rfind(b"\n") + 1
        if cut == 0:  # no line end yet: keep reading
            rest = block
            continue
        rest = block[cut:]
        block = block[:cut]
        at = block.find(_NEEDLE)
        while at >= 0:
            start = block.rfind(b"\n", 0, at) + 1
            end = block.find(b"\n", at)
            yield block[start:end]
            at = block.find(_NEEDLE, end)
    if rest and _NEEDLE in rest:
        yield rest


def add_hashes(line: bytes, out: dict[str, set[str]]) -> None:
    """Add the skill hashes one line logs to `out` ({skill id: hashes}).

    Lines that are not JSON objects, or not in the §3.1 shape, are passed over: the run-log
    reader reports those; this only collects what the well-formed records say.
    """
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return
    if not isinstance(rec, dict) or rec.get("condition") not in _ENABLED:
        return
    calls = rec.get("retrievals")
    for call in calls if isinstance(calls, list) else ():
        skills = call.get("skills") if isinstance(call, dict) else None
        for s in skills if isinstance(skills, list) else ():
            if isinstance(s, dict) and isinstance(s.get("id"), str) and isinstance(s.get("hash"), str):
                h = s["hash"].strip().lower()
                if h:
                    out.setdefault(s["id"], set()).add(h)


def seen_hashes(paths: Iterable[str]) -> dict[str, set[str]]:
    """{skill id: hashes (lower-case hex) logged for it in enabled records}; standard input is skipped.

    A pass of its own over the logs; `skillaudit.runs.inputs.load_inputs` collects the same while it
    reads the runs (`Inputs.seen_hashes`), without opening the logs again.
    """
    out: dict[str, set[str]] = {}
    for path in paths:
        if str(path) == "-":
            continue
        _, fh = _open(path)
        try:
            for line in _lines_with_hash(fh):
                add_hashes(line, out)
        except OSError:
            pass  # the run-log reader has already read these files; nothing to add here
        finally:
            fh.close()
    return out


def edited_skills(seen: dict[str, set[str]], library: Any) -> dict[str, bool]:
    """{skill id: edited?} for the library skills the runs logged a hash for.

    Edited = the library's current content hash starts with none of the logged hashes (a logged
    hash is a prefix: the harness logs 16 hex characters). Skills without a logged hash are absent.
    """
    if library is None or not seen:
        return {}
    out: dict[str, bool] = {}
    for skill in library.skills:
        hashes = seen.get(skill.id)
        if not hashes:
            continue
        full = skill.content_hash
        out[skill.id] = not any(full.startswith(h) for h in hashes)
    return out


def skill_digest(folder: Any) -> str:
    """A skill folder's content digest as Harbor writes it in a trial's lock.json (`skills[].digest`):
    sha256 over every file, in sorted relative-path order, of `path NUL sha256(content) NUL`
    ("sha256:<hex>"). Records imported from Harbor keep it in `meta.skill_digests`."""
    import hashlib
    from pathlib import Path

    folder = Path(folder)
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        h.update(f.relative_to(folder).as_posix().encode())
        h.update(b"\0")
        h.update(hashlib.sha256(f.read_bytes()).hexdigest().encode())
        h.update(b"\0")
    return f"sha256:{h.hexdigest()}"


DIGESTS_NEEDLE = b'"skill_digests"'


def add_digests(line: bytes, out: dict[str, set[str]]) -> None:
    """Add the Harbor skill digests an enabled main record logs (`meta.skill_digests`) to `out`."""
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return
    if not isinstance(rec, dict) or rec.get("arm") is not None or rec.get("condition") not in _ENABLED:
        return
    meta = rec.get("meta")
    got = meta.get("skill_digests") if isinstance(meta, dict) else None
    if isinstance(got, dict):
        for sid, d in got.items():
            if isinstance(sid, str) and isinstance(d, str):
                out.setdefault(sid, set()).add(d)


def edited_by_digest(seen: dict[str, set[str]], library: Any) -> dict[str, bool]:
    """{skill id: edited?} for the library's folder skills (a `<name>/SKILL.md`) whose Harbor digest
    the runs logged: edited = the folder's digest now is none of them."""
    if library is None or not seen:
        return {}
    import os

    out: dict[str, bool] = {}
    for skill in library.skills:
        digests = seen.get(skill.id)
        if not digests or not skill.path.endswith("SKILL.md") or not os.path.isfile(skill.path):
            continue
        out[skill.id] = skill_digest(os.path.dirname(skill.path)) not in digests
    return out


def mark_edited(attr: Any, edited: dict[str, bool]) -> Any:
    """`attr` (ModelAttributions) with every row's `edited` set from `edited` (None where unknown)."""
    if not edited:
        return attr
    results = tuple(
        replace(res, skills=tuple(replace(r, edited=edited.get(r.skill_id)) for r in res.skills))
        for res in attr.results
    )
    return replace(attr, results=results)
