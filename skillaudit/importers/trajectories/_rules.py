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

Seen, not used: the skills a listing shows (`ls`/`find`/`tree` of a skills folder, or a list tool
such as Gemini CLI's `list_directory`, with its output), and skills the agent failed to load (a log
line "failed to load skill .../threejs/SKILL.md: invalid YAML": shipped, not loadable, with the
log's reason). They prove skills were present, never that one was used or what the whole offered
list was.
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
LIST_TOOLS = {"list_directory", "ls", "list_dir", "list_files", "glob"}
LISTERS = {"ls", "find", "tree"}
#: a path naming a skills folder itself (`/root/.codex/skills`, `.agents/skills/`), or one skill's folder
_SKILLS_DIR = re.compile(r"(?:^|/)(?:skills|\.opencode/skill)(?:/([A-Za-z0-9][A-Za-z0-9_.\-]*))?/?$")
_LISTED_PATH = re.compile(r"(?:skills|\.opencode/skill)/([A-Za-z0-9][A-Za-z0-9_.\-]*)(?:/|$)")
_LONG_LS = re.compile(r"^[dl-][rwxsStT-]{9}[.+@]?\s")
_FILE_LIKE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")
_NOISE = ("total ", "Directory listing", "Command:", "Directory:", "Error:", "Exit Code", "Signal:",
          "Background PIDs", "Process Group", "ls:", "find:", "tree:")
_FAILED_LOAD = re.compile(r"failed to load skill\s+['\"`]?([^\s'\"`]*?(?:skills|\.opencode/skill)/"
                          r"([A-Za-z0-9][A-Za-z0-9_.\-]*)/SKILL\.md)['\"`]?:?\s*([^\n\"]{0,200})", re.I)


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
    seen: dict[str, None] = field(default_factory=dict)  # shown by a listing of a skills folder
    unloadable: dict[str, str] = field(default_factory=dict)  # skill -> why the agent failed to load it

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

    # ---- skills seen in passing
    def listing(self, target: str, output: Any) -> None:
        """A listing of `target` (a path) whose output the log kept: a skills folder's listing shows
        the skills in it; a listing of one skill's folder that printed something shows that skill."""
        m = _SKILLS_DIR.search(target.rstrip())
        if m is None or not isinstance(output, str) or not output.strip():
            return
        text = output[:MAX_COMMAND]
        if m.group(1):  # one skill's own folder
            if "No such file" not in text and "cannot access" not in text and "does not exist" not in text:
                self.seen.setdefault(m.group(1), None)
            return
        for name in listed_skills(text):
            self.seen.setdefault(name, None)

    def shell_output(self, command: str, output: Any) -> None:
        """A shell command and its output: when it only lists (ls, find, tree) and names a skills
        folder, the skills its output shows are seen (`listing`)."""
        if not isinstance(output, str) or ("skills" not in command and "skill" not in command):
            return
        segments = [s for s in _SEGMENTS.split(command[:MAX_COMMAND]) if s.strip()]
        if len(segments) != 1:  # several commands' output together: whose lines are whose is unknown
            return
        words = _words(segments[0])
        inner = _shell_c(words)
        if inner is not None:  # `bash -lc '...'`: the inner command decides
            self.shell_output(inner, output)
            return
        if not words or words[0].rsplit("/", 1)[-1] not in LISTERS:
            return
        targets = [w for w in words[1:] if not w.startswith("-") and _SKILLS_DIR.search(w.rstrip())]
        if len(targets) == 1:
            self.listing(targets[0], output)

    def log_line(self, text: str) -> None:
        """A line of the agent's own output (stderr included): a failed skill load names the skill
        and the reason ("failed to load skill /root/.codex/skills/threejs/SKILL.md: invalid YAML")."""
        for m in _FAILED_LOAD.finditer(text[:MAX_COMMAND]):
            reason = m.group(3).strip().rstrip("\\").strip() or "no reason given"
            self.unloadable.setdefault(m.group(2), reason[:120])

    # ---- tool calls
    def tool_call(self, name: Any, args: Any, output: Any = None) -> None:
        """One tool call of any agent: `name` and its arguments (a dict, or a JSON string of one)."""
        if not isinstance(name, str):
            return
        if isinstance(args, str):
            args = _json_args(args)
        if not isinstance(args, Mapping):
            return
        low = name.lower()
        if output is not None and low in LIST_TOOLS:
            for key in ("dir_path", "path", "directory", "absolute_path"):
                if isinstance(args.get(key), str):
                    self.listing(args[key], output)
                    break
            return
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
                    if output is not None:
                        self.shell_output(v, output)
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
        words = _words(segment)
        while words and (("=" in words[0] and not words[0].startswith(("/", "."))) or words[0] in ("sudo", "env",
                                                                                                "timeout", "time")):
            words = words[1:]
        if not words:
            return
        first = words[0].rsplit("/", 1)[-1]
        inner = _shell_c(words)
        if inner is not None:
            self.command(inner)  # Codex runs every command as `bash -lc '...'`: the inner command decides
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


def _shell_c(words: list[str]) -> str | None:
    """The command a `bash -c '...'` (sh, zsh, dash; -lc, -ic, -lic) runs, or None."""
    if len(words) >= 3 and words[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh", "dash") and \
            words[1] in ("-c", "-lc", "-lic", "-ic"):
        return words[2]
    return None


def _words(segment: str) -> list[str]:
    try:
        words = shlex.split(segment, comments=False, posix=True)
    except ValueError:  # an unbalanced quote: plain words
        words = segment.split()
    return [w for w in words if w]


def listed_skills(output: str) -> list[str]:
    """The skill names a listing of a skills folder printed: `ls` (one per line or in columns, and
    `ls -l`), `find`/`ls -R` paths under the folder, `tree` lines, Gemini CLI's `[DIR] name`. Files
    (a name with an extension: README.md) and hidden entries are not skills."""
    names: dict[str, None] = {}
    body = output
    if "\nOutput: " in output or output.startswith("Output: "):  # Gemini CLI's shell tool framing
        body = output.split("Output: ", 1)[1].split("\nError: ", 1)[0]
    for line in body.splitlines():
        line = line.strip().lstrip("│├└─` ").strip()
        if not line or line.startswith(_NOISE) or line.endswith(":") or line == "(empty)":
            continue
        found = _LISTED_PATH.findall(line)
        if found:
            names.update(dict.fromkeys(found))
            continue
        if line.startswith(("[DIR]", "[FILE]")):
            if line.startswith("[DIR]"):
                names.setdefault(line[5:].strip().rstrip("/"), None)
            continue
        tokens = [line.split()[-1]] if _LONG_LS.match(line) else line.split()
        for tok in tokens:
            tok = tok.rstrip("/")
            if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", tok) and not _FILE_LIKE.search(tok):
                names.setdefault(tok, None)
    return [n for n in names if n and n not in (".", "..")]


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
