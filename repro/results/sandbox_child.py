"""The confined child that runs one program a model wrote (LiveCodeBench): standard library only, run by path as
`python -I sandbox_child.py --run-id ID` with the job file on standard input (repro/results/sandbox.py starts it).

It is the launcher and the confinement; the harness it runs the program in (repro/results/lcb_harness.py) is the
MLCommons reference's test semantics. Order, each step before any byte of the program is read as code:
  1. the launcher: dies with its parent (PR_SET_PDEATHSIG), adopts every orphan below it (PR_SET_CHILD_SUBREAPER);
  2. new network, PID and IPC namespaces (as root: directly), a user namespace when the kernel allows one (its own
     process count; as a non-root user it is what makes the others possible), then no capability at all;
  3. the runner, PID 1 of the new PID namespace (when there is one: when it exits the kernel kills the namespace):
     RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_CORE; Landlock (reads only of the
     interpreter, the system's libraries and the private folder, writes only inside that folder; TCP bind/connect
     refused from ABI 4; signals and abstract sockets kept inside from ABI 6);
     a seccomp filter refusing sockets of every family, io_uring, ptrace, mounts and namespaces, chmod/chown/xattr/
     utime on anything, and (without a PID namespace or Landlock scoping) signals;
  4. the launcher waits for the runner up to the wall-clock bound, kills it, then kills every process left below
     it (orphans come back to it) until none is left.
It refuses to run the program (a `refused` line) when no means of refusing the network, confining writes or
collecting every process applies. It writes JSON lines to fd 3: `confinement`, then the harness's `result`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import resource
import signal
import stat
import struct
import sys
import time

RESULT_FD = 3

# ---------------------------------------------------------------- kernel interfaces (numbers from the uapi headers)

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP = 0x10000000, 0x20000000, 0x40000000, 0x02000000
NEW_NAMESPACES = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
NEW_NAMESPACES |= CLONE_NEWCGROUP

# Syscall numbers per architecture: x86_64 from arch/x86/entry/syscalls/syscall_64.tbl (the uapi unistd_64.h),
# aarch64 from include/uapi/asm-generic/unistd.h (Linux 6.1 headers; fchmodat2 452 from 6.6, setxattrat 463 and
# removexattrat 466 from 6.13 share one number on both). aarch64 has no chmod/chown/lchown/utime/utimes/futimesat.
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# name, then its number on x86_64 and on aarch64 ("-": the architecture has no such call)
_TABLE = """\
socket                41  198
socketpair            53  199
io_uring_setup       425  425
io_uring_enter       426  426
io_uring_register    427  427
ptrace               101  117
process_vm_readv     310  270
process_vm_writev    311  271
kill                  62  129
tkill                200  130
tgkill               234  131
rt_sigqueueinfo      129  138
rt_tgsigqueueinfo    297  240
pidfd_send_signal    424  424
pidfd_open           434  434
pidfd_getfd          438  438
mount                165   40
umount2              166   39
pivot_root           155   41
chroot               161   51
unshare              272   97
setns                308  268
mount_setattr        442  442
open_tree            428  428
move_mount           429  429
fsopen               430  430
fsconfig             431  431
fsmount              432  432
fspick               433  433
bpf                  321  280
perf_event_open      298  241
userfaultfd          323  282
keyctl               250  219
add_key              248  217
request_key          249  218
chmod                 90    -
fchmod                91   52
fchmodat             268   53
fchmodat2            452  452
chown                 92    -
fchown                93   55
fchownat             260   54
lchown                94    -
setxattr             188    5
lsetxattr            189    6
fsetxattr            190    7
removexattr          197   14
lremovexattr         198   15
fremovexattr         199   16
setxattrat           463  463
removexattrat        466  466
utime                132    -
utimes               235    -
futimesat            261    -
utimensat            280   88
truncate              76   45
clone                 56  220
clone3               435  435
"""
_SYSCALLS: dict[str, dict[str, int]] = {arch: {} for arch in _AUDIT_ARCH}
for _row in _TABLE.splitlines():
    _name, *_numbers = _row.split()
    for _arch, _nr in zip(_AUDIT_ARCH, _numbers, strict=True):
        if _nr != "-":
            _SYSCALLS[_arch][_name] = int(_nr)
_REFUSED_ALWAYS = (
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "mount_setattr",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "fchownat",
    "lchown",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "truncate",
)
_SIGNALS = (
    "kill",
    "tkill",
    "tgkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_send_signal",
    "pidfd_open",
    "pidfd_getfd",
)

# Landlock (include/uapi/linux/landlock.h): filesystem rights by ABI, the TCP rights (ABI 4), scoping (ABI 6).
# WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM
_LL_FS_V1 = sum(1 << bit for bit in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))
_LL_REFER, _LL_TRUNCATE, _LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_LL_READ = _LL_EXECUTE | _LL_READ_FILE | _LL_READ_DIR
# What a confined program may read besides its own folder: the interpreter's prefixes (stdlib, site-packages), the
# system's programs and libraries, the loader's cache, the time zone, its own /proc entry, the CPU count, and the
# harmless devices. Not HOME, not /tmp (other runs' folders), not other processes' /proc (their environments).
_READ_ROOTS = (
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/proc/self",
    "/sys/devices/system/cpu",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/dev/full",
)
_LL_NET_BIND_TCP, _LL_NET_CONNECT_TCP = 1 << 0, 1 << 1
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1 << 0, 1 << 1
_NR_LANDLOCK = (444, 445, 446)  # create_ruleset, add_rule, restrict_self: one number on every architecture

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _prctl(option: int, arg: int = 0) -> None:
    if _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _emit(kind: str, **fields: object) -> None:
    line = json.dumps({"kind": kind, **fields}, separators=(",", ":")) + "\n"
    with contextlib.suppress(OSError):
        os.write(RESULT_FD, line.encode())


# ---------------------------------------------------------------- namespaces and identity


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def drop_capabilities() -> bool:
    """No capability in any set (capset v3): root keeps its uid, so its files stay readable to the interpreter,
    but bypasses nothing: RLIMIT_NPROC holds, and writes are Landlock's to refuse."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()
    return _libc.capset(ctypes.byref(header), data) == 0


def join_cgroup(group: str | None) -> bool:
    """Enter the pids cgroup repro made for this run (root only): its pids.max bounds every process below."""
    if not group:
        return False
    try:
        _write(os.path.join(group, "cgroup.procs"), str(os.getpid()))
    except OSError:
        return False
    return True


def enter_namespaces(wanted: bool) -> dict[str, object]:
    """New network, PID and IPC namespaces (root: directly), a user namespace of its own where the kernel allows
    one (its own process count; a non-root user needs it for the others), then every capability dropped."""
    got: dict[str, object] = {"netns": False, "pidns": False, "userns": False, "uid": os.getuid()}
    base = CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC
    if not wanted:
        got["capabilities_dropped"] = drop_capabilities()
        return got
    if os.geteuid() == 0:
        if _libc.unshare(base) == 0:
            got["netns"] = got["pidns"] = True
        else:
            got["root_unshare"] = os.strerror(ctypes.get_errno())
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | (0 if got["netns"] else base)
    if _libc.unshare(flags) == 0:
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            got["userns_map"] = exc.strerror
        got["userns"] = True
        got["netns"] = got["pidns"] = True
    else:
        got["userns_error"] = os.strerror(ctypes.get_errno())
    got["capabilities_dropped"] = drop_capabilities()
    return got


# ---------------------------------------------------------------- limits, Landlock, seccomp


def set_limits(limits: dict[str, int], own_count: bool) -> None:
    """The rlimits; RLIMIT_NPROC counts the user's tasks everywhere unless this is its own user namespace."""
    nproc = int(limits["nproc"])
    if not own_count:
        nproc += _tasks_of(os.getuid())
    for name, value in (
        ("RLIMIT_AS", int(limits["memory_bytes"])),
        ("RLIMIT_CPU", int(limits["cpu_s"])),
        ("RLIMIT_NPROC", nproc),
        ("RLIMIT_FSIZE", int(limits["file_bytes"])),
        ("RLIMIT_NOFILE", int(limits["open_files"])),
        ("RLIMIT_CORE", 0),
    ):
        what = getattr(resource, name)
        hard = value + 1 if name == "RLIMIT_CPU" else value
        resource.setrlimit(what, (value, hard))


def _tasks_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid:
                count += len(os.listdir(f"/proc/{entry}/task"))
        except OSError:
            continue
    return count


def _read_roots(harness: str) -> list[str]:
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return [*_READ_ROOTS, *sorted(prefixes), harness]


def landlock(private_dir: str, harness: str) -> dict[str, object]:
    """Reads only of the interpreter, the system's libraries and its own folder; writes only in that folder (and
    to /dev/null); from ABI 4 no TCP; from ABI 6 signals and abstract sockets stay inside."""
    abi = _libc.syscall(_NR_LANDLOCK[0], None, 0, 1)
    if abi < 1:
        return {"landlock": 0, "landlock_error": os.strerror(ctypes.get_errno())}
    fs = _LL_READ | _LL_FS_V1 | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)
    fs |= _LL_IOCTL_DEV if abi >= 5 else 0
    file_rights = _LL_READ_FILE | _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0)
    net = (_LL_NET_BIND_TCP | _LL_NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_LL_SCOPE_ABSTRACT_UNIX | _LL_SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("=QQQ", fs, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    buf = ctypes.create_string_buffer(attr[:size], size)
    ruleset = _libc.syscall(_NR_LANDLOCK[0], buf, ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return {"landlock": 0, "landlock_error": os.strerror(ctypes.get_errno())}
    try:
        rules = [(private_dir, fs), ("/dev/null", file_rights)]
        rules += [(root, _LL_READ) for root in _read_roots(harness)]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= _LL_EXECUTE | _LL_READ_FILE | _LL_WRITE_FILE | _LL_TRUNCATE
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
                if _libc.syscall(_NR_LANDLOCK[1], ruleset, 1, rule, 0) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if _libc.syscall(_NR_LANDLOCK[2], ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return {"landlock": abi, "landlock_tcp": bool(net), "landlock_scoped": bool(scoped)}


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def seccomp(refuse_signals: bool) -> dict[str, object]:
    """A BPF filter: another architecture (or x86's x32 numbers) kills the process; the listed calls fail."""
    arch = platform.machine()
    if arch not in _SYSCALLS:
        return {"seccomp": False, "seccomp_error": f"no syscall table for {arch}"}
    table = _SYSCALLS[arch]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000
    deny = {table[n]: errno.EPERM for n in _REFUSED_ALWAYS if n in table}
    deny.update({table["socket"]: errno.EACCES, table["socketpair"]: errno.EACCES, table["clone3"]: errno.ENOSYS})
    if refuse_signals:
        deny.update({table[n]: errno.EPERM for n in _SIGNALS})
    prog = [_bpf(ld, 4), _bpf(jeq, _AUDIT_ARCH[arch], 1, 0), _bpf(ret, kill), _bpf(ld, 0)]
    if arch == "x86_64":
        prog += [_bpf(jge, 0x40000000, 0, 1), _bpf(ret, kill)]
    for nr, err in deny.items():
        prog += [_bpf(jeq, nr, 0, 1), _bpf(ret, 0x00050000 | err)]
    # clone(flags, ...): a flag asking for any new namespace fails; the rest (fork, threads) is allowed.
    prog += [
        _bpf(jeq, table["clone"], 0, 4),
        _bpf(ld, 16),
        _bpf(jset, NEW_NAMESPACES, 0, 1),
        _bpf(ret, 0x00050000 | errno.EPERM),
        _bpf(ret, allow),
        _bpf(ret, allow),
    ]
    blob = b"".join(prog)
    filt = ctypes.create_string_buffer(blob, len(blob))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(filt))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return {"seccomp": False, "seccomp_error": os.strerror(ctypes.get_errno())}
    return {"seccomp": True, "seccomp_rules": len(deny) + 1}


# ---------------------------------------------------------------- the launcher and the runner


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process this one can see (one /proc scan)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read(4096)
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            out[int(entry)] = int(fields[1])
    return out


def descendants(root: int) -> set[int]:
    parents = _parents()
    below: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in below}
        below |= frontier
    return below


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep() -> int:
    """Stop every process below this one (orphans are reparented here) until no new one appears, so none can
    fork again, then kill them all; repeat until none is left. How many were killed."""
    killed, me = 0, os.getpid()
    for _ in range(1000):
        stopped: set[int] = set()
        while True:
            found = descendants(me) - stopped
            if not found:
                break
            _signal_all(found, signal.SIGSTOP)
            stopped |= found
        if not stopped:
            _reap()
            if not descendants(me):
                return killed
            continue
        _signal_all(stopped, signal.SIGKILL)
        killed += len(stopped)
        time.sleep(0.005)
        _reap()
    return killed


def _wait(pid: int, deadline: float) -> tuple[int | None, bool]:
    """The runner's wait status, or None and True when the wall-clock bound passed first (then it is killed)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status, False
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None, True
        time.sleep(0.005)


def _runner(job: dict, got: dict[str, object]) -> None:
    """PID 1 of the sandbox: the rest of the confinement, then the harness. Never returns."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.chdir(job["dir"])
        set_limits(job["limits"], own_count=bool(got["userns"]))
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        got.update(landlock(job["dir"], job["harness"]))
        got.update(seccomp(refuse_signals=not (got["pidns"] or got.get("landlock_scoped"))))
        missing = []
        if not (got["netns"] or got.get("seccomp")):
            missing.append("no network namespace and no seccomp filter to refuse sockets")
        if not got.get("landlock"):
            missing.append("no Landlock to keep writes inside the private folder")
        if not got.get("seccomp"):
            missing.append("no seccomp filter")
        if not got.get("capabilities_dropped"):
            missing.append("its capabilities could not be dropped")
        if got["uid"] == 0 and not got["pids_cgroup"]:
            missing.append("no pids cgroup (RLIMIT_NPROC does not bind root)")
        _emit("confinement", **got)
        if missing:
            _emit("refused", reasons=missing)
            os._exit(2)
        import importlib.util

        spec = importlib.util.spec_from_file_location("_repro_lcb_harness", job["harness"])
        assert spec is not None and spec.loader is not None
        harness = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(harness)
        result = harness.run_job(job)
        _emit("result", **result)
    except BaseException as exc:  # noqa: BLE001 - the program may raise anything; the runner reports and exits
        _emit("crashed", error=type(exc).__name__)
        os._exit(1)
    os._exit(0)


def main(argv: list[str]) -> int:
    result_fd = int(argv[argv.index("--result-fd") + 1])
    if result_fd != RESULT_FD:
        os.dup2(result_fd, RESULT_FD)
        os.close(result_fd)
    job = json.loads(sys.stdin.buffer.read())
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0 is /dev/null, as a multiprocessing child's is
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    in_cgroup = join_cgroup(job.get("cgroup"))
    got = enter_namespaces(bool(job.get("namespaces", True)))
    got["pids_cgroup"] = in_cgroup
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the credential change, which clears it
    deadline = time.monotonic() + float(job["wall_s"])
    pid = os.fork()
    if pid == 0:
        _runner(job, got)
    status, timed_out = _wait(pid, deadline)
    leftovers = sweep()
    _emit("exit", status=status, timed_out=timed_out, killed_after=leftovers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
