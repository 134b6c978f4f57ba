"""The scoring sandbox: runs one program in a separate `python -s -P` process and says what it did.

Each run gets a clean environment, a fresh 0700 folder, a wall-clock timeout and RLIMIT_CPU / AS /
FSIZE / NPROC, in layers (Linux; see docs/sandbox.md):

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
  foreign-ABI syscalls kill), plus an audit hook as a first line (`programs.GUARD`);
- with root and cgroups, a cgroup per run (`cgroups`) bounds memory with page cache and tmpfs,
  processes and CPU of the sandbox as a whole;
- without root or namespaces there is no separate user and no private folders: `isolation_status`
  says why, and `skillaudit run` refuses to score code there unless given `--unsafe-scoring`.

Holds the limits (`Limits`), what a run did (`ExecResult`), the layers and the trusted bootstrap
that sets them up (`BOOTSTRAP`), what is usable here (`isolation_status`, `sandbox_layers`,
`cgroup_status`), `run_python` and the clean-up after a run. The programs that run inside are in
`programs`; the verdicts made of their outputs in `score`.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skillaudit.errors import HarnessError

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


#: what the environment's hard limits made of the limits asked for ({message}), said once per run
FITTED: dict[str, None] = {}


def fit_limits(limits: Limits) -> Limits:
    """`limits` within the process's hard limits: a sandbox cannot raise a limit its parent was
    given (`ulimit -v` below the 4 GiB a canonical MBPP+ run asks for made every run fail to set up:
    "Exception occurred in preexec_fn"). A limit lowered here is said once (`FITTED`, shown among
    the run's warnings)."""
    import resource

    mb = 1024 * 1024
    out = limits
    for res, field_, unit, label in ((resource.RLIMIT_AS, "memory_mb", mb, "address space (ulimit -v)"),
                                     (resource.RLIMIT_CPU, "cpu_s", 1, "CPU seconds (ulimit -t)"),
                                     (resource.RLIMIT_FSIZE, "fsize_mb", mb, "file size (ulimit -f)"),
                                     (resource.RLIMIT_NPROC, "nproc", 1, "processes (ulimit -u)")):
        try:
            _soft, hard = resource.getrlimit(res)
        except (OSError, ValueError):  # pragma: no cover
            continue
        want = getattr(out, field_) * unit + (unit if res == resource.RLIMIT_CPU else 0)
        if hard != resource.RLIM_INFINITY and want > hard:
            got = max(1, (hard - (unit if res == resource.RLIMIT_CPU else 0)) // unit)
            FITTED.setdefault(f"sandbox: the environment's hard limit on {label} is below the {getattr(out, field_)} "
                              f"asked for; sandboxed runs use {got}", None)
            out = replace(out, **{field_: got})
    return out


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
    from skillaudit.sandbox._syscalls import ALLOWED

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
    from skillaudit.sandbox.cgroups import find_hierarchy

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
    from skillaudit.sandbox.cgroups import (
        MEMORY_SLACK_MB,
        PIDS_SLACK,
        SandboxCgroup,
        find_hierarchy,
    )

    found, _ = find_hierarchy() if drop else (None, "")
    if found is None:
        return None
    try:
        return SandboxCgroup(found, limits.memory_mb + limits.disk_mb + MEMORY_SLACK_MB, limits.nproc + PIDS_SLACK)
    except OSError as exc:
        raise HarnessError(f"the sandbox could not be set up: cannot make its cgroup ({exc})") from None


def _prepare(limits: Limits, ns: bool, drop: bool, uid: int) -> tuple[str, str, str | None, bool, Any]:
    """A run's folders (working folder, logs, new root), its private working tmpfs and its cgroup.
    HarnessError if the tmpfs (needed with namespaces) or the cgroup cannot be made, after undoing
    what was made and giving the uid back."""
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
    return work, logs, newroot, mounted, cgroup


def _write_files(work: str, files: dict[str, bytes], drop: bool, uid: int) -> None:
    """Write the run's files into its working folder, owned by the sandbox's uid when root; 0700."""
    for name, data in files.items():
        Path(work, name).write_bytes(data)
    if drop:
        for name in os.listdir(work):
            os.chown(os.path.join(work, name), uid, uid)
        os.chown(work, uid, uid)
    os.chmod(work, 0o700)


def _spawn(python: str, ns: bool, work: str, env: dict[str, str], out, err, limits: Limits,
           newroot: str | None, cgroup) -> subprocess.Popen:
    """Start the bootstrap in the working folder (it reads its settings from stdin)."""
    try:
        return subprocess.Popen(
            # main.py is opened relative to the cwd (/w inside the new root)
            [os.path.realpath(python) if ns else python, "-s", "-P", "-c", BOOTSTRAP], cwd=work,
            env=env, stdin=subprocess.PIPE, stdout=out, stderr=err, start_new_session=True,
            close_fds=True,
            preexec_fn=_preexec(limits, ns, (), newroot, work, _runtime_binds(python) if ns else (),
                                cgroup),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise HarnessError(f"the sandbox could not be set up: {exc}") from None


def _end_processes(proc: subprocess.Popen, ns_fd: int | None, cgroup, drop: bool, uid: int, work: str) -> None:
    """Kill whatever the run started: its process group, its PID namespace, its cgroup, its uid's
    processes and any process whose cwd is in its working folder; then reap the first process."""
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


def _collect(work: str, collect: tuple[str, ...], cap: int) -> tuple[dict[str, bytes], list[str]]:
    """The bytes of each `collect` file of the working folder that is a regular file of at most `cap`
    bytes (never read whole when larger: it is named in the second list instead)."""
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
    return collected, oversized


def _release(work: str, logs: str, newroot: str | None, mounted: bool, cgroup, ns_fd: int | None,
             drop: bool, uid: int) -> None:
    """After a run, whatever happened: kill what is left, unmount the tmpfs, remove the folders and
    the cgroup, give the uid back."""
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
    limits = fit_limits(limits)
    drop = _drop_privileges()
    python = sandbox_python(drop)
    ns = netns_available() and "namespaces" not in disable
    code = seccomp_filter() if "seccomp" not in disable else None
    if code is not None and not _seccomp_works(python):
        code = None
    uid = _take_uid() if drop else NOBODY
    cfg = json.dumps({"drop": drop, "uid": uid, "pidns": ns, "seccomp": code.hex() if code else None,
                      "seccomp_required": code is not None, "argv": list(args)})
    work, logs, newroot, mounted, cgroup = _prepare(limits, ns, drop, uid)
    ns_fd = None
    cap = collect_max if collect_max is not None else limits.fsize_mb * 1024 * 1024
    try:
        _write_files(work, {"main.py": script.encode(), **(files or {})}, drop, uid)
        home = "/w" if ns else work
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        out_path, err_path = os.path.join(logs, "stdout"), os.path.join(logs, "stderr")
        start = time.monotonic()
        timed_out = False
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = _spawn(python, ns, work, env, out, err, limits, newroot, cgroup)
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
                _end_processes(proc, ns_fd, cgroup, drop, uid, work)
        duration = time.monotonic() - start
        log_cap = 200_000

        def read(path: str) -> str:
            with open(path, "rb") as fh:
                return fh.read(log_cap).decode("utf-8", "replace")

        collected, oversized = _collect(work, collect, cap)
        return ExecResult(proc.returncode if not timed_out else None, read(out_path),
                          read(err_path), timed_out, duration, tuple(oversized),
                          cgroup is not None and cgroup.oom_killed()), collected
    finally:
        _release(work, logs, newroot, mounted, cgroup, ns_fd, drop, uid)
