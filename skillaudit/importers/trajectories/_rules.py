"""The detection rules every trajectory reader shares: which tool call is a use of which skill.

A skill is named by the path part after `skills/` (`.opencode/skill/` for OpenCode), whatever the
agent's skills folder (`.claude/skills/`, `.gemini/skills/`, `.agents/skills/`, `.codex/skills/`,
`.goose/skills/`, `.factory/skills/`, `/runtime/skills/` in Harbor...). A use is

- `activation`: an activation call (`activate_skill`, Claude Code's `Skill`, `load_skill`) naming it;
- `read`: a read tool (`read_file`, `Read`, `view`...) of a file under its folder (SKILL.md: the
  skill is also *opened*);
- `shell read` / `shell run`: a shell command (`run_shell_command`, `Bash`, terminus-2's
  `bash_command` keystrokes, Codex's command executions, OpenHands' `execute_bash`) whose
  arguments name a file under its folder, unless the command only lists, creates or removes paths
  (`ls`, `find`, `mkdir`, `rm`...) or the path is a redirection target or a copy's destination.

Not a use: a path inside content the agent writes (`write_file`, `Edit`, a heredoc), a listing of
the skills folder, a path that names the skills folder without a file under a skill.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

ACTIVATE = {"activate_skill": ("name", "skill"), "skill": ("skill", "name"), "load_skill": ("name", "skill")}
READ_TOOLS = {"read", "read_file", "view", "open_file", "read_many_files", "cat", "view_file", "readfile"}
SHELL_TOOLS = {"bash", "run_shell_command", "shell", "bash_command", "exec_command", "execute_bash",
               "terminal", "run_command", "command_execution", "local_shell", "cmd_run"}
PATH_KEYS = ("file_path", "path", "absolute_path", "filename", "file", "paths", "absolute_paths")
COMMAND_KEYS = ("command", "keystrokes", "cmd", "commands", "script")
# shell commands that only list, create, move or remove paths: naming a skill file is not a read
NOT_READING = {"ls", "find", "tree", "mkdir", "touch", "rm", "rmdir", "echo", "printf", "chmod", "chown",
               "stat", "du", "test", "[", "cd", "pwd", "which", "realpath", "dirname", "basename", "ln"}
RUNNERS = {"python", "python3", "bash", "sh", "node", "npx", "uv", "pip", "bun", "deno", "ruby", "perl",
           "source", ".", "Rscript", "java", "go"}
_SKILL_PATH = re.compile(r"(?:\.opencode/skill|skills)/([A-Za-z0-9][A-Za-z0-9_.\-]*)/([^\s'\"`;|&<>(){}]+)")
_SEGMENTS = re.compile(r"\|\||&&|[;|\n]")
MAX_COMMAND = 100_000  # characters of one command analysed (a longer one: its first part)


_DELIMS = frozenset(" \t\n\r'\"`;|&<>(){}=,")


def skill_files(text: str) -> list[tuple[str, str]]:
    """(skill, path) of every file under a skill folder named in `text` (the path from its start,
    e.g. `/root/.gemini/skills/mesh-analysis/scripts/mesh_tool.py`)."""
    out = []
    for m in _SKILL_PATH.finditer(text):
        name, rest = m.group(1), m.group(2)
        if name in (".", "..") or not rest.strip("/"):
            continue
        start, floor = m.start(), max(0, m.start() - 1024)
        while start > floor and text[start - 1] not in _DELIMS:
            start -= 1
        out.append((name, text[start:m.end()]))
    return out


@dataclass
class Uses:
    """What one run's log shows: skills offered (when the log says), and each use with its rule."""

    offered: dict[str, None] = field(default_factory=dict)
    offered_known: bool = False
    opened: dict[str, None] = field(default_factory=dict)  # activated, or SKILL.md read
    rules: dict[str, str] = field(default_factory=dict)  # skill -> the first rule that saw it used
    files: dict[str, dict[str, None]] = field(default_factory=dict)  # skill -> files read or run

    def use(self, skill: str, rule: str, path: str | None = None) -> None:
        self.rules.setdefault(skill, rule)
        if rule == "activation" or (path is not None and path.rsplit("/", 1)[-1] == "SKILL.md"):
            self.opened.setdefault(skill, None)
        if path is not None:
            self.files.setdefault(skill, {}).setdefault(path, None)

    def offer(self, names: Iterable[str]) -> None:
        self.offered_known = True
        for n in names:
            if isinstance(n, str) and n:
                self.offered.setdefault(n, None)

    # ---- tool calls
    def tool_call(self, name: Any, args: Any) -> None:
        """One tool call of any agent: `name` and its arguments (a dict, or a JSON string of one)."""
        if not isinstance(name, str):
            return
        if isinstance(args, str):
            args = _json_args(args)
        if not isinstance(args, Mapping):
            return
        low = name.lower()
        if low in ACTIVATE:
            for key in ACTIVATE[low]:
                v = args.get(key)
                if isinstance(v, str) and v.strip():
                    self.use(v.strip(), "activation")
                    return
            return
        if low in READ_TOOLS or (low == "str_replace_editor" and args.get("command") == "view"):
            for key in PATH_KEYS:
                v = args.get(key)
                for p in (v if isinstance(v, list) else [v]):
                    if isinstance(p, str):
                        for skill, path in skill_files(p):
                            self.use(skill, "read", path)
            return
        if low in SHELL_TOOLS:
            for key in COMMAND_KEYS:
                v = args.get(key)
                if isinstance(v, list):
                    v = " ".join(x for x in v if isinstance(x, str))
                if isinstance(v, str):
                    self.command(v)
                    return

    def command(self, text: str) -> None:
        """A shell command line (or several): reads and runs of skill files in it."""
        text = text[:MAX_COMMAND]
        if "skills/" not in text and "skill/" not in text:
            return
        for body in _run_heredocs(text):  # a script fed to a runner that imports a skill's code runs it
            for m in _IMPORT_PATH.finditer(body):
                folder = (m.group(1) or m.group(2)).rstrip("/")
                for skill, path in skill_files(folder + "/__init__.py"):  # the folder, as a file in it
                    self.use(skill, "imported", path.rsplit("/", 1)[0])
        for segment in _SEGMENTS.split(_strip_heredocs(text)):
            self._segment(segment)

    def _segment(self, segment: str) -> None:
        try:
            words = shlex.split(segment, comments=False, posix=True)
        except ValueError:  # an unbalanced quote: plain words
            words = segment.split()
        words = [w for w in words if w]
        while words and (("=" in words[0] and not words[0].startswith(("/", "."))) or words[0] in ("sudo", "env",
                                                                                                "timeout", "time")):
            words = words[1:]
        if not words:
            return
        first = words[0].rsplit("/", 1)[-1]
        if first in ("bash", "sh", "zsh", "dash") and len(words) >= 3 and words[1] in ("-c", "-lc", "-lic", "-ic"):
            self.command(words[2])  # Codex runs every command as `bash -lc '...'`: the inner command decides
            return
        if first in NOT_READING:
            return
        targets: set[int] = set()
        for i, w in enumerate(words):
            if w in (">", ">>", "1>", "2>", "&>") and i + 1 < len(words):
                targets.add(i + 1)
            elif w.startswith((">", "2>", "&>")):
                targets.add(i)
        if first in ("cp", "mv", "install", "rsync", "tee"):
            targets.add(len(words) - 1) if first != "tee" else targets.update(range(1, len(words)))
        rule = "shell run" if first in RUNNERS or _runs_directly(words[0]) else "shell read"
        for i, w in enumerate(words):
            if i in targets:
                continue
            for skill, path in skill_files(w):
                self.use(skill, rule, path)


def _runs_directly(word: str) -> bool:
    return bool(skill_files(word))  # `skills/x/scripts/run.sh args`


_HEREDOC_START = re.compile(r"<<-?[ \t]*['\"]?([A-Za-z_]\w*)['\"]?")


#: a script putting a folder on its import path: sys.path.append/insert('...') or PYTHONPATH=...
_IMPORT_PATH = re.compile(r"""sys\.path\.(?:append|insert)\([^()'"]{0,20}['"]([^'"\n]{1,300})['"]\s*\)"""
                          r"""|PYTHONPATH=['"]?([^'"\s:]{1,300})""")


def _heredocs(text: str) -> Iterator[tuple[re.Match[str], int, int, int]]:
    """Each here-document of a command: (its `<<DELIM` match, where its body starts, where it ends,
    where scanning resumes past its closing line). The closing line is the delimiter alone (leading
    tabs allowed for <<-); a here-document without one takes the rest of the text. Linear."""
    pos = 0
    while True:
        m = _HEREDOC_START.search(text, pos)
        if m is None:
            return
        line_end = text.find("\n", m.end())
        if line_end < 0:
            return
        delim = m.group(1)
        at = line_end
        while True:
            nxt = text.find("\n" + delim, at)
            if nxt < 0:
                yield m, line_end, len(text), len(text)
                return
            end = nxt + 1 + len(delim)
            if end == len(text) or text[end] == "\n":
                yield m, line_end, nxt, end
                pos = end
                break
            at = nxt + 1


def _run_heredocs(text: str) -> list[str]:
    """The bodies of the here-documents fed to a runner (`python - <<'PY'`, `bash <<EOF`): scripts
    that run (with a PYTHONPATH=... set before the runner in front). Those fed to `cat > file` and
    the like are written, not run."""
    if "<<" not in text:
        return []
    out = []
    for m, start, stop, _ in _heredocs(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        head = text[line_start:m.start()].replace('"', " ").replace("'", " ").split()
        env = []  # PYTHONPATH=... before the runner puts a folder on its import path too
        while head and ("=" in head[0] or head[0] in ("sudo", "env", "timeout", "time", "-lc", "-c")):
            env += [head[0]] if head[0].startswith("PYTHONPATH=") else []
            head = head[1:]
        if head and head[0].rsplit("/", 1)[-1] in RUNNERS:
            out.append(" ".join(env) + text[start:stop])
    return out


def _strip_heredocs(text: str) -> str:
    """A command with its here-documents' bodies removed (content written, not read)."""
    if "<<" not in text:
        return text
    out, pos = [], 0
    for _, start, _, resume in _heredocs(text):
        out.append(text[pos:start])
        pos = resume
    out.append(text[pos:])
    return "".join(out)


def _json_args(text: str) -> Any:
    import orjson

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
