"""Skill libraries: a folder of `<name>/SKILL.md` (Agent Skills format) or a JSON Lines file.

Loading is lenient (a bad skill becomes a warning and is skipped); `validate_library` is strict and
lists every problem. Skill id = `name`.

Layer (pyproject.toml `[tool.importlinter]`): May import stats, util, errors.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from skillaudit.errors import LibraryError

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
KNOWN_FIELDS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500


@dataclass(frozen=True)
class Skill:
    """One skill: its id (= name), description and Markdown body, plus where it came from."""

    id: str
    name: str
    description: str
    body: str
    path: str = ""
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    allowed_tools: str | None = None

    @property
    def text(self) -> str:
        """Name, description and body: what embedders and retrievers read."""
        return f"{self.name}\n{self.description}\n{self.body}"

    @property
    def content_hash(self) -> str:
        """sha256 of name, description and body; changes whenever the skill's content does."""
        h = hashlib.sha256()
        for part in (self.name, self.description, self.body):
            h.update(part.encode("utf-8"))
            h.update(b"\0")
        return h.hexdigest()


@dataclass(frozen=True)
class Problem:
    """One validation problem: where (file[:line]) and what."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class Library:
    """A loaded skill library, skills in a stable (sorted by id) order."""

    skills: tuple[Skill, ...]
    source: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.skills)

    def get(self, skill_id: str) -> Skill | None:
        for s in self.skills:
            if s.id == skill_id:
                return s
        return None

    def __len__(self) -> int:
        return len(self.skills)

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills)


#: the `source` of a library made of the skill ids the runs say were offered (`offered_library`)
OFFERED_SOURCE = "the skills the runs say were offered"


#: ... when no run logged what it was offered (each lists only what it used)
USED_SOURCE = "the skills the runs used (no run logged what it was offered)"
#: ... when some did and some did not
MIXED_SOURCE = "the skills the runs say were offered, and those used where no offered list was logged"


def offered_library(offered: Any, unlisted: Any = frozenset()) -> Library | None:
    """A library of the skill ids the runs' enabled records list as offered (`Inputs.offered`),
    with no texts; None when no record lists any. It stands for `--skills` where none was given:
    per-skill verdicts, "unused" and "use not logged" need the ids, not the texts. `unlisted` are
    the records whose list is only what they used (`Inputs.offered_unknown`); the library's
    `source` says which it is, so no sentence calls used skills "offered"."""
    ids = sorted({sid for skills, _ in offered.values() for sid in skills})
    if not ids:
        return None
    keys = set(offered)
    source = (OFFERED_SOURCE if not keys & set(unlisted) else USED_SOURCE if keys <= set(unlisted)
              else MIXED_SOURCE)
    return Library(tuple(Skill(id=i, name=i, description="", body="") for i in ids), source=source)


def split_front_matter(text: str) -> tuple[str | None, str, int]:
    """Return (yaml text or None, body, line number where the body starts)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text, 1
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :]), i + 2
    return None, text, 1


def _check_name(name: Any, where: str, folder: str | None) -> list[Problem]:
    out = []
    if not isinstance(name, str) or not name:
        return [Problem(where, "front matter needs a non-empty string 'name'")]
    if len(name) > MAX_NAME:
        out.append(Problem(where, f"name {name!r} is longer than {MAX_NAME} characters"))
    if not NAME_RE.match(name):
        out.append(
            Problem(
                where,
                f"name {name!r} must be lowercase letters, digits and single hyphens, "
                "not starting or ending with a hyphen",
            )
        )
    if folder is not None and name != folder:
        out.append(Problem(where, f"name {name!r} does not match its folder {folder!r}"))
    return out


def _check_fields(meta: dict[str, Any], where: str, folder: str | None) -> list[Problem]:
    out = _check_name(meta.get("name"), where, folder)
    desc = meta.get("description")
    if not isinstance(desc, str) or not desc.strip():
        out.append(Problem(where, "front matter needs a non-empty string 'description'"))
    elif len(desc) > MAX_DESCRIPTION:
        out.append(Problem(where, f"description is {len(desc)} characters; at most {MAX_DESCRIPTION}"))
    comp = meta.get("compatibility")
    if comp is not None and (not isinstance(comp, str) or len(comp) > MAX_COMPATIBILITY):
        out.append(Problem(where, f"compatibility must be a string of at most {MAX_COMPATIBILITY} characters"))
    md = meta.get("metadata")
    if md is not None and not isinstance(md, dict):
        out.append(Problem(where, "metadata must be a mapping"))
    lic = meta.get("license")
    if lic is not None and not isinstance(lic, str):
        out.append(Problem(where, "license must be a string"))
    tools = meta.get("allowed-tools")
    if tools is not None and not isinstance(tools, str):
        out.append(Problem(where, "allowed-tools must be a string (space-separated tool names)"))
    for key in meta:
        if key not in KNOWN_FIELDS:
            out.append(Problem(where, f"unknown front-matter field {key!r}"))
    return out


# Front matter that is only `key: plain text` lines (most SKILL.md files) is read without a YAML
# parser: the same mapping YAML gives, for the subset where that is certain - ASCII values that
# start with a letter, with no ": ", " #", trailing ":" or tab, and that are not one of YAML 1.1's
# boolean or null words. Anything else goes to the YAML parser.
_SIMPLE_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*): ([A-Za-z][\x20-\x7e]*)")
_YAML_WORDS = frozenset(
    w for base in ("yes", "no", "true", "false", "on", "off", "null")
    for w in (base, base.capitalize(), base.upper())
)


def _simple_front_matter(text: str) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _SIMPLE_LINE.fullmatch(line)
        if m is None:
            return None
        key, value = m.group(1), m.group(2).rstrip(" ")
        if ": " in value or " #" in value or value.endswith(":") or value in _YAML_WORDS or key in out:
            return None
        out[key] = value
    return out or None


class _AliasError(Exception):
    """Front matter uses a YAML anchor or alias (refused: one alias can expand to gigabytes)."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def _refuse_aliases(text: str, loader: Any) -> None:
    """Raise _AliasError at the first anchor (`&a`) or alias (`*a`): parse events only, nothing is built."""
    import yaml

    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _AliasError(event.start_mark.line + 2)  # +1: 1-based, +1: the opening '---'


def _yaml_load(text: str) -> Any:
    """`yaml.safe_load(text)`, by libyaml's parser when pyyaml was built with it.

    libyaml is 14x faster on 2,000 skills; its errors are re-raised by the pure-Python parser so
    that messages and line numbers do not depend on the build. Anchors and aliases are refused
    first (_AliasError): front matter is a few plain fields, and an alias bomb of 1 KB expands
    to gigabytes.
    """
    import yaml

    fast_loader = getattr(yaml, "CSafeLoader", None)
    if "&" in text or "*" in text:  # no anchor or alias without one of these
        try:
            _refuse_aliases(text, fast_loader or yaml.SafeLoader)
        except yaml.YAMLError:
            _refuse_aliases(text, yaml.SafeLoader)  # its own error, with the pure parser's message
    if fast_loader is not None:
        try:
            return yaml.load(text, Loader=fast_loader)  # CSafeLoader: the safe loader, in C
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


# O_NONBLOCK: a FIFO named SKILL.md is opened and then skipped as not a regular file, instead of
# the open waiting for a writer (regular files ignore the flag)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)


DEFAULT_MAX_SKILL_MB = 4


def max_skill_bytes() -> int:
    """The largest SKILL.md (or JSON Lines skill record) read: SKILLAUDIT_MAX_SKILL_MB, default 4 MiB.
    A skill is a page of procedure; a larger file is reported and skipped, never read into memory."""
    try:
        mb = float(os.environ.get("SKILLAUDIT_MAX_SKILL_MB", "") or DEFAULT_MAX_SKILL_MB)
    except ValueError:
        mb = DEFAULT_MAX_SKILL_MB
    return int((mb if mb > 0 else DEFAULT_MAX_SKILL_MB) * 1024 * 1024)


class _TooBig(Exception):
    pass


def _too_big_problem(where: str, cap: int) -> Problem:
    return Problem(where, f"larger than {cap / 1048576:g} MiB: not read (a skill is a page of procedure; "
                          "SKILLAUDIT_MAX_SKILL_MB raises the limit)")


def _read_regular(fd: int, cap: int | None = None) -> bytes | None:
    """The bytes of open file `fd`, None when it is not a regular file; `_TooBig` past `cap` bytes
    (its size is checked first, and at most cap + 1 bytes are read)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return None
    cap = max_skill_bytes() if cap is None else cap
    if st.st_size > cap:
        raise _TooBig
    chunks, total = [], 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:  # grew while being read
            raise _TooBig
    return b"".join(chunks)


def _parse_skill_md(where: str, folder: str | None) -> tuple[Skill | None, list[Problem]] | None:
    """Parse the SKILL.md at `where`; None when it is not a regular file (the folder is skipped).

    One open and fstat per skill instead of pathlib's stat, then open, fstat and seeks; only a
    failed open asks `Path.is_file`, so what is skipped, reported or raised stays pathlib's call.
    """
    try:
        fd = os.open(where, _OPEN_FLAGS)
    except OSError as exc:
        if not Path(where).is_file():
            return None
        return None, [Problem(where, f"cannot read: {exc.strerror or exc}")]
    try:
        raw = _read_regular(fd)
    except _TooBig:
        return None, [_too_big_problem(where, max_skill_bytes())]
    except OSError as exc:
        return None, [Problem(where, f"cannot read: {exc.strerror or exc}")]
    finally:
        os.close(fd)
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Problem(where, f"not UTF-8 text (byte {exc.start})")]
    fm, body, _ = split_front_matter(text)
    if fm is None:
        return None, [Problem(f"{where}:1", "no YAML front matter (a '---' block at the top)")]
    meta: Any = _simple_front_matter(fm)
    if meta is None:
        import yaml  # here, not at the top: 20 ms of imports that plain `key: text` libraries skip

        try:
            meta = _yaml_load(fm) or {}
        except _AliasError as exc:
            return None, [Problem(f"{where}:{exc.line}", "YAML anchors and aliases (&name, *name) are not "
                                  "allowed in front matter")]
        except yaml.YAMLError as exc:
            line = getattr(getattr(exc, "problem_mark", None), "line", 0) + 2
            return None, [Problem(f"{where}:{line}", f"invalid YAML front matter: {getattr(exc, 'problem', exc)}")]
        except RecursionError:
            return None, [Problem(f"{where}:2", "invalid YAML front matter: nested too deeply")]
    if not isinstance(meta, dict):
        return None, [Problem(f"{where}:2", "front matter must be a mapping")]
    problems = _check_fields(meta, where, folder)
    if not body.strip():
        problems.append(Problem(where, "the skill has no body"))
    name, desc = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name or not isinstance(desc, str):
        return None, problems
    md = meta.get("metadata")
    skill = Skill(
        id=name,
        name=name,
        description=desc.strip(),
        body=body.strip("\n"),
        path=where,
        license=meta.get("license") if isinstance(meta.get("license"), str) else None,
        compatibility=meta.get("compatibility") if isinstance(meta.get("compatibility"), str) else None,
        metadata=md if isinstance(md, dict) else {},
        allowed_tools=meta["allowed-tools"] if isinstance(meta.get("allowed-tools"), str) else None,
    )
    return skill, problems


def _skill_folders(root: Path) -> list[str]:
    """Names of the non-hidden subfolders of `root`, in the order sorting their Paths gives."""
    names = []
    with os.scandir(root) as entries:  # the entry type comes with the listing: no stat per folder
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:  # e.g. a symlink loop: pathlib's rules decide
                is_dir = Path(entry.path).is_dir()
            if is_dir:
                names.append(entry.name)
    # siblings' Paths compare by their (case-folded on Windows) names
    return sorted(names, key=os.path.normcase)


def _scan_folder(root: Path) -> Iterator[tuple[Skill | None, list[Problem]]]:
    found = False
    # str(root / name / "SKILL.md") without three Paths per skill: pathlib's spelling of the parent
    prefix = str(root / "_")[:-1]
    for name in _skill_folders(root):
        parsed = _parse_skill_md(f"{prefix}{name}{os.sep}SKILL.md", name)
        if parsed is not None:
            found = True
            yield parsed
    parsed = _parse_skill_md(str(root / "SKILL.md"), root.name)
    if parsed is not None:
        found = True
        yield parsed
    if not found:
        yield None, [Problem(str(root), "no <name>/SKILL.md files found")]


def _scan_jsonl(path: Path) -> Iterator[tuple[Skill | None, list[Problem]]]:
    from skillaudit.util.documents import max_document_bytes

    try:
        fh = path.open("rb")
    except OSError as exc:
        raise LibraryError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    cap, line_cap = max_document_bytes(), max_skill_bytes()
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size > cap:
            raise LibraryError(f"{path}: larger than {cap / 1048576:g} MiB; if it is meant to be read, raise the "
                               "limit with SKILLAUDIT_MAX_DOCUMENT_MB")
        lineno = 0
        while True:
            line = fh.readline(line_cap + 1)  # a line is read at most to the cap: no 6 GB line in memory
            if not line:
                break
            lineno += 1
            where = f"{path}:{lineno}"
            if len(line) > line_cap and not line.endswith(b"\n"):
                yield None, [_too_big_problem(where, line_cap)]
                while line and not line.endswith(b"\n"):  # skip the rest of the line, in bounded reads
                    line = fh.readline(1 << 20)
                continue
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                yield None, [Problem(where, "invalid JSON")]
                continue
            if not isinstance(rec, dict):
                yield None, [Problem(where, "a skill record must be a JSON object")]
                continue
            sid = rec.get("id", rec.get("name"))
            name = rec.get("name", sid)
            meta = {"name": name, "description": rec.get("description")}
            problems = _check_fields(meta, where, None)
            if "id" in rec and rec.get("name") not in (None, rec["id"]):
                problems.append(Problem(where, f"id {rec['id']!r} differs from name {rec.get('name')!r}"))
            body = rec.get("body", "")
            if not isinstance(body, str):
                problems.append(Problem(where, "body must be a string"))
                body = ""
            if not isinstance(sid, str) or not sid or not isinstance(rec.get("description"), str):
                yield None, problems
                continue
            yield (
                Skill(id=sid, name=str(name), description=rec["description"].strip(), body=body, path=where,
                      metadata=rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}),
                problems,
            )


def _scan(path: str | Path) -> Iterator[tuple[Skill | None, list[Problem]]]:
    p = Path(path)
    if not p.exists():
        raise LibraryError(f"{p}: no such skill library (a folder of <name>/SKILL.md or a .jsonl file)")
    if p.is_dir():
        yield from _scan_folder(p)
    else:
        yield from _scan_jsonl(p)


def _dedupe(items: list[tuple[Skill | None, list[Problem]]]) -> tuple[list[Skill], list[Problem]]:
    skills: dict[str, Skill] = {}
    problems: list[Problem] = []
    for skill, probs in items:
        problems.extend(probs)
        if skill is None:
            continue
        if skill.id in skills:
            problems.append(Problem(skill.path, f"duplicate skill id {skill.id!r} (also {skills[skill.id].path})"))
            continue
        skills[skill.id] = skill
    return [skills[k] for k in sorted(skills)], problems


def load_library(path: str | Path) -> Library:
    """Load a library leniently: skills with problems are kept when usable, else skipped with a warning."""
    skills, problems = _dedupe(list(_scan(path)))
    return Library(skills=tuple(skills), source=str(path), warnings=tuple(str(p) for p in problems))


def validate_library(path: str | Path) -> list[Problem]:
    """Every problem in the library (empty list when it is valid)."""
    return _dedupe(list(_scan(path)))[1]


def render_skill(skill: Skill) -> str:
    """A skill in full, as the `search_skills` tool returns it (and what its injection costs)."""
    return f"## Skill: {skill.id}\n{skill.description.strip()}\n\n{skill.body.strip()}\n"
