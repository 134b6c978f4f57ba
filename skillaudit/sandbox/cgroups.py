"""Per-sandbox cgroup limits: memory (with page cache, tmpfs and shmem), processes and CPU.

One cgroup per sandboxed run, made under the scorer's own cgroup in each controller's hierarchy
(cgroup v2 when its memory, pids and cpu controllers can be enabled there, else cgroup v1 when the
three are mounted writable, as on hybrid hosts), joined by the sandbox's first process before it
execs, killed and removed when the run ends. Root only; elsewhere `find_hierarchy` says why not and
the sandbox keeps its per-process limits (RLIMIT_AS, RLIMIT_NPROC of its own uid, tmpfs sizes).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from functools import lru_cache

CONTROLLERS = ("memory", "pids", "cpu")
# Beyond the candidate's own limits: the sandbox's bootstrap, PID 1 and runner processes (~15 MB each)
# and their tasks. The memory limit also covers the private tmpfs, whose pages are charged to the cgroup.
MEMORY_SLACK_MB = 128
PIDS_SLACK = 8
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class Hierarchy:
    """Where sandboxes' cgroups are made: v2 (one folder for all controllers) or v1 (one per controller)."""

    version: int
    dirs: tuple[tuple[str, str], ...]  # (controller, parent folder); v2: one ("", folder)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, super options) of every cgroup mount, from /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            pre, _, post = line.partition(" - ")
            fields, tail = pre.split(), post.split()
            if len(fields) > 4 and len(tail) > 2 and tail[0] in ("cgroup", "cgroup2"):
                out.append((fields[4].replace("\\040", " "), tail[0], set(tail[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """{controller (or "" for v2): this process's cgroup path}, from /proc/self/cgroup."""
    paths = {}
    with open("/proc/self/cgroup", encoding="utf-8") as fh:
        for line in fh:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) == 3:
                for c in parts[1].split(",") if parts[1] else [""]:
                    paths[c] = parts[2]
    return paths


def _probe(folder: str) -> bool:
    """Can a cgroup be made (and removed) in `folder`?"""
    probe = os.path.join(folder, f"skillaudit-probe-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.rmdir(probe)
    return True


def _v2(mounts, own) -> tuple[Hierarchy | None, str]:
    for point, fstype, _ in mounts:
        if fstype != "cgroup2" or "" not in own:
            continue
        folder = os.path.normpath(point + own[""])
        try:
            with open(os.path.join(point, "cgroup.controllers"), encoding="ascii") as fh:
                have = set(fh.read().split())
        except OSError:
            continue
        missing = set(CONTROLLERS) - have
        if missing:
            return None, f"cgroup v2 at {point} lacks the {', '.join(sorted(missing))} controller(s)"
        try:  # enabling controllers for children fails (EBUSY) where the cgroup itself holds processes
            with open(os.path.join(folder, "cgroup.subtree_control"), "w", encoding="ascii") as fh:
                fh.write(" ".join("+" + c for c in CONTROLLERS))
        except OSError as exc:
            return None, (f"cgroup v2: cannot enable {', '.join(CONTROLLERS)} for children of {folder} "
                          f"({exc.strerror}; run the scorer in a delegated cgroup with no processes of its own)")
        if not _probe(folder):
            return None, f"cgroup v2: cannot make a cgroup in {folder}"
        return Hierarchy(2, (("", folder),)), f"cgroup v2 under {folder}"
    return None, "no usable cgroup v2 hierarchy"


def _v1(mounts, own) -> tuple[Hierarchy | None, str]:
    dirs = []
    for c in CONTROLLERS:
        point = next((p for p, fstype, opts in mounts if fstype == "cgroup" and c in opts), None)
        if point is None or c not in own:
            return None, f"no cgroup v1 {c} hierarchy"
        folder = os.path.normpath(point + own[c])
        if not _probe(folder):
            return None, f"cgroup v1: cannot make a cgroup in {folder}"
        dirs.append((c, folder))
    return Hierarchy(1, tuple(dirs)), "cgroup v1 under " + ", ".join(f for _, f in dirs)


@lru_cache(maxsize=1)
def find_hierarchy() -> tuple[Hierarchy | None, str]:
    """(where to make sandboxes' cgroups, or None; what was found or why none)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None, "not running as root: no per-sandbox cgroups"
    try:
        mounts, own = _mounts(), _own_paths()
    except OSError as exc:
        return None, f"cannot read this process's cgroups ({exc.strerror})"
    found, why2 = _v2(mounts, own)
    if found:
        return found, why2
    found, why1 = _v1(mounts, own)
    return (found, why1) if found else (None, f"{why2}; {why1}")


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(value)


class SandboxCgroup:
    """One sandboxed run's cgroup in every controller: made with its limits, joined by the run's first
    process (`join`, called between fork and exec), then `kill`ed and `remove`d."""

    def __init__(self, hierarchy: Hierarchy, memory_mb: int, pids: int, cpus: float = 1.0) -> None:
        self.hierarchy = hierarchy
        name = f"skillaudit-sbx-{os.getpid()}-{secrets.token_hex(4)}"
        self.dirs = {c: os.path.join(folder, name) for c, folder in hierarchy.dirs}
        self.memory_bytes = memory_mb << 20
        quota = str(int(CPU_PERIOD_US * cpus))
        try:
            for d in self.dirs.values():
                os.mkdir(d, 0o700)
            if hierarchy.version == 2:
                d = self.dirs[""]
                _write(os.path.join(d, "memory.max"), str(self.memory_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(os.path.join(d, "memory.swap.max"), "0")
                _write(os.path.join(d, "pids.max"), str(pids))
                _write(os.path.join(d, "cpu.max"), f"{quota} {CPU_PERIOD_US}")
            else:
                mem = self.dirs["memory"]
                _write(os.path.join(mem, "memory.limit_in_bytes"), str(self.memory_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), str(self.memory_bytes))
                _write(os.path.join(self.dirs["pids"], "pids.max"), str(pids))
                _write(os.path.join(self.dirs["cpu"], "cpu.cfs_period_us"), str(CPU_PERIOD_US))
                _write(os.path.join(self.dirs["cpu"], "cpu.cfs_quota_us"), quota)
        except OSError:
            self.remove()
            raise
        # opened now, written in the child: no allocation or path work between fork and exec
        self._procs = [os.path.join(d, "cgroup.procs") for d in self.dirs.values()]

    def join(self) -> None:
        """Move the calling process (the sandbox's first, before it execs) into this cgroup."""
        pid = str(os.getpid()).encode()
        for path in self._procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def members(self) -> set[int]:
        out: set[int] = set()
        for d in self.dirs.values():
            with contextlib.suppress(OSError), open(os.path.join(d, "cgroup.procs"), encoding="ascii") as fh:
                out.update(int(x) for x in fh.read().split())
        return out

    def kill(self) -> None:
        """SIGKILL every process in the cgroup (cgroup.kill where the kernel has it), until none is left."""
        if self.hierarchy.version == 2:
            with contextlib.suppress(OSError):
                _write(os.path.join(self.dirs[""], "cgroup.kill"), "1")
        for _ in range(200):
            left = self.members()
            if not left:
                return
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def oom_killed(self) -> bool:
        """Did the kernel kill a process of this cgroup for going over its memory limit?"""
        d = self.dirs.get("", self.dirs.get("memory")) or ""
        for name in ("memory.events", "memory.oom_control"):
            with contextlib.suppress(OSError), open(os.path.join(d, name), encoding="ascii") as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip().isdigit():
                        return int(value) > 0
        return False

    def remove(self) -> None:
        """Remove the cgroup folders (empty once their processes are gone; retried while they exit)."""
        for d in self.dirs.values():
            for _ in range(100):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
