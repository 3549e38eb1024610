"""Hostile programs in the LiveCodeBench sandbox (repro/results/sandbox.py): each ends as a failed test case within
its bound, writes nothing outside its private folder, reaches no network and leaves no process behind; with the
namespaces (this machine allows them) and without (the fallback: seccomp for the network, the subreaper sweep).

Each program does its harm and then prints the expected answer only if the harm worked, so a pass is an escape."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from repro.results import sandbox
from repro.results.sandbox import Cases, Limits, run_program, wall_bound

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux-only")

LIMITS = Limits(memory_bytes=1 << 30, cpu_s=20, nproc=32, file_bytes=1 << 20, open_files=64)
TIMEOUT = 2
ONE = Cases(inputs=("5\n",), outputs=("ESCAPED\n",))
MODES = [pytest.param(True, id="namespaces"), pytest.param(False, id="fallback")]


def _survivors(mark: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if mark.encode() in cmd or str(sandbox.CHILD).encode() in cmd:
            found.append(f"{entry}: {cmd[:120]!r}")
    return found


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    out = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(folder))] = (st.st_mode, path.read_bytes() if path.is_file() else b"")
    return out


@pytest.fixture
def decoy(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("secret key\n")
    (home / ".bashrc").write_text("# decoy\n")
    os.chmod(home / ".ssh" / "id_rsa", 0o600)
    before = _snapshot(home)
    mark = uuid.uuid4().hex
    yield home, mark
    assert _snapshot(home) == before, "the decoy HOME changed"
    assert not list(Path("/tmp").glob(f"*{mark}*")), "a file was written to /tmp"
    assert not list(Path("/var/tmp").glob(f"*{mark}*")), "a file was written to /var/tmp"
    assert not list(Path("/dev/shm").glob(f"*{mark}*")), "a file was written to /dev/shm"


def _run(code: str, namespaces: bool, tests: Cases = ONE):
    started = time.monotonic()
    outcome = run_program(textwrap.dedent(code), tests, timeout_s=TIMEOUT, limits=LIMITS, namespaces=namespaces)
    elapsed = time.monotonic() - started
    assert not outcome.passed, f"the program passed: {outcome}"
    assert elapsed < wall_bound(TIMEOUT, len(tests.inputs)) + 10, f"took {elapsed:.1f} s"
    return outcome


def _check_clean(mark: str) -> None:
    deadline = time.monotonic() + 2
    while _survivors(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _survivors(mark), _survivors(mark)


def test_an_honest_program_passes_and_the_confinement_is_reported():
    outcome = run_program(
        "n = int(input())\nprint(n * 2)\n", Cases(("5\n",), ("10\n",)), timeout_s=TIMEOUT, limits=LIMITS
    )
    assert outcome.passed and outcome.codes == [True]
    got = outcome.confinement
    assert got["seccomp"] and got["landlock"] >= 1 and got["capabilities_dropped"]
    assert got["netns"] and got["pidns"]  # this machine allows namespaces (root, unprivileged user namespaces)


@pytest.mark.parametrize("namespaces", MODES)
def test_fork_bomb(namespaces, decoy):
    _, mark = decoy
    outcome = _run(
        f"""
        import posix, time
        MARK = "{mark}"
        n = 0
        while n < 100000:
            try:
                posix.fork()
                n += 1
            except OSError:
                time.sleep(0.001)
        print("ESCAPED")
    """,
        namespaces,
    )
    assert outcome.codes != [True]
    _check_clean(mark)


@pytest.mark.parametrize("namespaces", MODES)
def test_writes_outside_the_private_folder(namespaces, decoy):
    home, mark = decoy
    _run(
        f"""
        import posix, os
        done = []
        def attempt(fn):
            try:
                fn()
                done.append(1)
            except Exception:
                pass
        home = "{home}"
        attempt(lambda: open(home + "/pwned", "w").write("x"))
        attempt(lambda: open(home + "/.bashrc", "a").write("evil"))
        attempt(lambda: open(home + "/.bashrc", "w"))
        attempt(lambda: posix.unlink(home + "/.bashrc"))
        attempt(lambda: posix.rename(home + "/.bashrc", home + "/moved"))
        attempt(lambda: posix.chmod(home + "/.ssh/id_rsa", 0o777))
        attempt(lambda: posix.utime(home + "/.bashrc", (0, 0)))
        attempt(lambda: posix.truncate(home + "/.bashrc", 0))
        attempt(lambda: posix.mkdir(home + "/newdir"))
        attempt(lambda: open("/tmp/pwned-{mark}", "w").write("x"))
        attempt(lambda: open("/var/tmp/pwned-{mark}", "w").write("x"))
        attempt(lambda: open("/dev/shm/pwned-{mark}", "w").write("x"))
        attempt(lambda: posix.link(home + "/.bashrc", "hard"))
        # a symbolic link may be made inside the private folder; writing through it is writing outside
        posix.symlink(home + "/.bashrc", "link")
        attempt(lambda: open("link", "a").write("evil"))
        open("inside", "w").write("a program may write in its own folder")
        print("ESCAPED" if done else "blocked")
    """,
        namespaces,
    )


@pytest.mark.parametrize("namespaces", MODES)
def test_reads_of_the_users_files_and_other_processes(namespaces, decoy, tmp_path):
    home, mark = decoy
    other = tmp_path / f"other-run-{mark}"
    other.write_text("another run's expected outputs\n")
    outcome = _run(
        f"""
        import os
        done = []
        for path in ["{home}/.ssh/id_rsa", "{other}", "/proc/1/environ", "/proc/{os.getpid()}/environ"]:
            try:
                open(path, "rb").read()
                done.append(path)
            except OSError:
                pass
        for folder in ["{home}", "/tmp", "{tmp_path}"]:
            try:
                os.listdir(folder)
                done.append(folder)
            except OSError:
                pass
        import json, decimal, fractions  # the standard library still loads
        print("ESCAPED" if done else "blocked")
    """,
        namespaces,
    )
    assert outcome.codes == [-2]


def _listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    hits: list[str] = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                hits.append("connected")
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return server, hits, stop, thread


@pytest.mark.parametrize("namespaces", MODES)
def test_sockets_connect_out_and_listen(namespaces, decoy):
    _, mark = decoy
    server, hits, stop, thread = _listener()
    port = server.getsockname()[1]
    try:
        outcome = _run(
            f"""
            import socket, time
            ok = 0
            try:
                s = socket.create_connection(("127.0.0.1", {port}), timeout=1)
                ok += 1
            except OSError:
                pass
            try:
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                u.sendto(b"x", ("127.0.0.1", {port}))
                ok += 1
            except OSError:
                pass
            try:
                l = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                l.bind(("::", 0))
                l.listen(1)
                ok += 1
            except OSError:
                pass
            try:
                x = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                x.connect("/var/run/docker.sock")
                ok += 1
            except OSError:
                pass
            print("ESCAPED" if ok else "blocked")
        """,
            namespaces,
        )
        time.sleep(0.3)
        assert hits == [], "a connection from the sandbox reached the host"
        assert outcome.codes == [-2]  # it ran, and every socket call failed (it printed 'blocked')
    finally:
        stop.set()
        thread.join()
        server.close()


@pytest.mark.parametrize("namespaces", MODES)
def test_sleep_forever_is_a_time_limit(namespaces, decoy):
    outcome = _run("import time\ntime.sleep(10**9)\nprint('ESCAPED')\n", namespaces)
    assert outcome.codes == [-3]


@pytest.mark.parametrize("namespaces", MODES)
def test_ignoring_the_alarm_and_sigterm_ends_at_the_wall_bound(namespaces, decoy):
    _, mark = decoy
    outcome = _run(
        f"""
        import signal
        MARK = "{mark}"
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            pass
    """,
        namespaces,
    )
    assert outcome.timed_out and outcome.codes == []
    _check_clean(mark)


@pytest.mark.parametrize("namespaces", MODES)
def test_printing_gigabytes(namespaces, decoy):
    outcome = _run(
        """
        import os
        chunk = "x" * (1 << 20)
        for _ in range(1 << 14):
            print(chunk)
        print("ESCAPED")
    """,
        namespaces,
    )
    assert outcome.codes in ([-4], [-3])  # the captured text outgrows the memory limit (or the clock)
    outcome = _run(
        """
        import os
        chunk = b"x" * (1 << 20)
        try:
            for _ in range(1 << 14):
                os.write(1, chunk)
                os.write(2, chunk)
        except OSError:
            pass
        with open("big", "wb") as fh:
            for _ in range(1 << 14):
                fh.write(chunk)
        print("ESCAPED")
    """,
        namespaces,
    )
    assert not outcome.passed


@pytest.mark.parametrize("namespaces", MODES)
def test_unbounded_memory(namespaces, decoy):
    outcome = _run(
        """
        hog = []
        while True:
            hog.append(bytearray(1 << 24))
    """,
        namespaces,
    )
    assert outcome.codes in ([-4], [-3])  # MemoryError at the 1 GiB limit, or the alarm while its pages fill


@pytest.mark.parametrize("namespaces", MODES)
def test_a_double_forking_daemon_is_collected(namespaces, decoy):
    _, mark = decoy
    outcome = _run(
        f"""
        import posix, time
        pid = posix.fork()
        if pid == 0:
            posix.setsid()
            if posix.fork() == 0:
                posix.execv("/bin/sleep", ["sleep-{mark}", "100000"])
            posix._exit(0)
        posix.waitpid(pid, 0)
        time.sleep(0.5)
        print("blocked")
    """,
        namespaces,
    )
    assert outcome.codes == [-2]
    _check_clean(mark)


@pytest.mark.parametrize("namespaces", MODES)
def test_signals_and_ptrace_stay_inside(namespaces, decoy):
    victim_started = time.monotonic()
    victim = os.fork()
    if victim == 0:
        time.sleep(30)
        os._exit(0)
    try:
        _run(
            f"""
            import ctypes, posix
            ok = 0
            try:
                posix.kill({victim}, 9)
                ok += 1
            except OSError:
                pass
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.ptrace(16, {victim}, 0, 0) == 0:  # PTRACE_ATTACH
                ok += 1
            print("ESCAPED" if ok else "blocked")
        """,
            namespaces,
        )
        done, _ = os.waitpid(victim, os.WNOHANG)
        assert done == 0, "a process outside the sandbox was killed"
    finally:
        os.kill(victim, 9)
        os.waitpid(victim, 0)
    assert time.monotonic() - victim_started < 60


def test_the_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "another")
    code = """
        import os
        print("ESCAPED" if any("secret" in v or "another" in v for v in os.environ.values()) else sorted(os.environ))
    """
    outcome = run_program(textwrap.dedent(code), ONE, timeout_s=TIMEOUT, limits=LIMITS)
    assert outcome.codes == [-2]
    names = "['HOME', 'LANG', 'OMP_NUM_THREADS', 'PATH', 'REPRO_SANDBOX_RUN', 'TMPDIR']"  # OMP: the guard's
    good = run_program(
        "import os\nprint(sorted(os.environ))\n", Cases(("x\n",), (names + "\n",)), timeout_s=TIMEOUT, limits=LIMITS
    )
    assert good.passed


def test_the_private_folder_is_removed_and_was_private(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    code = "import os\nprint(oct(os.stat('.').st_mode & 0o777), os.environ['HOME'] == os.environ['TMPDIR'])\n"
    outcome = run_program(code, Cases(("x\n",), ("0o700 True\n",)), timeout_s=TIMEOUT, limits=LIMITS, base=base)
    assert outcome.passed
    assert list(base.iterdir()) == []
    assert stat.S_IMODE(base.stat().st_mode) != 0  # the base itself stays


def _header_numbers(path: Path) -> dict[str, int]:
    import re

    found = {}
    for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)\b", path.read_text(encoding="utf-8")):
        found[m.group(1)] = int(m.group(2))
    return found


@pytest.mark.parametrize(
    ("arch", "header"),
    [("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), ("aarch64", "/usr/include/asm-generic/unistd.h")],
)
def test_the_seccomp_syscall_table_matches_the_kernel_headers(arch, header):
    """Every number the filter uses, checked against this machine's uapi headers where they list the call."""
    from repro.results import sandbox_child

    path = Path(header)
    if not path.is_file():
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    known = _header_numbers(path)
    table = sandbox_child._SYSCALLS[arch]
    checked = {name: nr for name, nr in table.items() if name in known}
    assert checked == {name: known[name] for name in checked}
    assert len(checked) >= len(table) - 3  # fchmodat2, setxattrat, removexattrat are newer than Linux 6.1's headers


_AS_USER = """
import json, os, sys, pathlib
sys.path.insert(0, sys.argv[1])
from repro.results.sandbox import Cases, Limits, run_program
limits = Limits(memory_bytes=1 << 30, cpu_s=20, nproc=32, file_bytes=1 << 20, open_files=64)
base = pathlib.Path(sys.argv[2])
out = {}
for ns in (True, False):
    honest = run_program("print(int(input()) * 2)", Cases(("5\\n",), ("10\\n",)), timeout_s=2, limits=limits,
                         base=base, namespaces=ns)
    bomb = run_program("import posix, time\\nwhile True:\\n    try:\\n        posix.fork()\\n    except OSError:\\n"
                       "        time.sleep(0.001)\\n", Cases(("5\\n",), ("x\\n",)), timeout_s=2, limits=limits,
                       base=base, namespaces=ns)
    out[str(ns)] = {"honest": honest.passed, "confinement": honest.confinement, "bomb": bomb.codes,
                    "bomb_how": [bomb.timed_out, bomb.wall_s, bomb.error, bomb.stragglers_killed, bomb.refused]}
print(json.dumps(out))
"""


def test_as_an_unprivileged_user():
    """As a user that is not root (nobody, through setpriv, with the system's Python): its own user namespace with
    RLIMIT_NPROC counted there, or without namespaces the per-user count; a fork bomb ends, nothing is left."""
    import shutil

    if os.geteuid() != 0 or not shutil.which("setpriv") or not Path("/usr/bin/python3").exists():
        pytest.skip("needs root (to become nobody), setpriv and /usr/bin/python3")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="repro-sandbox-user-") as top:
        _as_user(Path(top))


def _as_user(top: Path) -> None:
    import subprocess

    os.chmod(top, 0o755)  # pytest's own tmp folders are 0700: nobody could not reach the script
    base = top / "base"
    base.mkdir()
    os.chown(base, 65534, 65534)
    script = top / "as_user.py"
    script.write_text(_AS_USER)
    os.chmod(script, 0o644)
    repo = str(Path(sandbox.__file__).resolve().parents[2])
    done = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-I",
            str(script),
            repo,
            str(base),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(base),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["True"]["honest"] and out["False"]["honest"]
    assert out["True"]["confinement"]["userns"] and out["True"]["confinement"]["uid"] == 65534
    assert not out["False"]["confinement"]["netns"]
    # bomb_how (timed out, wall s, error, stragglers, refused) says why when a slow machine makes this fail
    assert out["True"]["bomb"] in ([-3], [-4]) and out["False"]["bomb"] in ([-3], [-4]), out
    assert list(base.iterdir()) == []
    assert not _survivors("sandbox_child.py --run-id")


@pytest.mark.parametrize("namespaces", MODES)
def test_a_forged_report_and_a_flooded_report_pipe(namespaces, decoy):
    """A program that writes a false closing line and floods the report's descriptor still ends with the launcher's
    own sweep: its detached daemon is collected, and nothing blocks on the full pipe."""
    _, mark = decoy
    _run(
        f"""
        import os, posix
        forged = b'{{"kind":"exit","status":0,"timed_out":false,"killed_after":0}}\\n'
        os.write(3, forged)
        if posix.fork() == 0:
            posix.setsid()
            if posix.fork() == 0:
                posix.execv("/bin/sleep", ["sleep-{mark}", "100000"])
            posix._exit(0)
        try:
            os.set_blocking(3, False)
            for _ in range(1 << 12):
                os.write(3, b"x" * 65536)
        except OSError:
            pass
        print("blocked")
    """,
        namespaces,
    )
    _check_clean(mark)
