#!/usr/bin/python3
"""A stand-in for `trtllm-llmapi-launch`: one task per rank of a multi-node server, as srun starts them.

Built from the real launcher (NVIDIA/TensorRT-LLM @ 020c89e6 `tensorrt_llm/llmapi/trtllm-llmapi-launch` lines 6-84,
and @ 8f91cff2 `tensorrt_llm/llmapi/mgmn_worker_node.py`): every task takes its rank from SLURM_PROCID (else
OMPI_COMM_WORLD_RANK, else PMI_RANK) and the world size from SLURM_NTASKS (else OMPI_COMM_WORLD_SIZE, PMI_SIZE); rank 0
runs the server command (`trtllm-serve ...`) with the MPI/Slurm variables removed, the other ranks wait as workers.
What the real ranks do over MPI the stand-in does over one TCP rendezvous: rank 0 listens on a free port and writes
it to a file named by the job and step in STANDIN_RENDEZVOUS_DIR (default: the system's temporary folder, which every
task of a rehearsal shares: its nodes are one host), each worker connects and says its rank.

- Readiness as a whole: rank 0 starts the server only when every rank has joined (a real server cannot load the
  model before its world is complete), so its HTTP port answers only then; STANDIN_RANKS_TIMEOUT_S (default 600)
  bounds the wait, after which rank 0 exits 1 naming the ranks that never came.
- One death ends the world: a worker whose rank 0 goes away exits 1; rank 0, when a worker's connection drops (the
  rank died), stops the server and exits 1 naming the rank, as an MPI job aborts.
- STANDIN_RANK_LOSS=503: instead, rank 0 keeps the server up and tells it (SIGUSR1) to answer 503 to everything from
  then on: trtllm-serve staying alive returning 503 forever after a rank dies (NVIDIA/TensorRT-LLM issue 18663).
- Each worker does its work in a child process (the real launcher sets TLLM_SPAWN_PROXY_PROCESS=1: the MPI work runs
  in a spawned proxy), so a rank's work can die while its Slurm task lives on: only the server then knows.
- STANDIN_RANK_PIDS=DIR: each rank writes DIR/<port>-<rank>.pid (the task) and, for a worker, <port>-<rank>.worker.pid,
  so a test can kill one.
SIGTERM (srun forwards scancel's and repro's) stops the server or the worker and exits 0.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MPI_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "PMIX_", "UCX_", "MPI_")
"""What rank 0 removes from the server's environment (the real launcher: `unset` of every MPI/Slurm/UCX variable)."""


def world() -> tuple[int, int]:
    env = os.environ
    rank = env.get("SLURM_PROCID") or env.get("OMPI_COMM_WORLD_RANK") or env.get("PMI_RANK") or "0"
    size = env.get("SLURM_NTASKS") or env.get("OMPI_COMM_WORLD_SIZE") or env.get("PMI_SIZE") or "1"
    return int(rank), int(size)


def say(rank: int, msg: str) -> None:
    print(f"[stand-in launch] rank {rank}: {msg}", flush=True)


def rendezvous_file() -> Path:
    folder = Path(os.environ.get("STANDIN_RENDEZVOUS_DIR") or tempfile.gettempdir())
    job = os.environ.get("SLURM_JOB_ID", "nojob")
    step = os.environ.get("SLURM_STEP_ID", str(os.getppid()))
    return folder / f"repro-standin-rendezvous-{job}.{step}"


def write_pid(port: str, rank: int, suffix: str, pid: int) -> None:
    folder = os.environ.get("STANDIN_RANK_PIDS")
    if folder:
        Path(folder, f"{port}-{rank}{suffix}.pid").write_text(str(pid))


def leader(size: int, argv: list[str]) -> int:
    """Rank 0: wait for every worker, then run the server; watch the workers while it runs."""
    path = rendezvous_file()
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("0.0.0.0", 0))
    lsock.listen(max(size, 8))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{socket.gethostname()} {lsock.getsockname()[1]}\n")
    tmp.replace(path)
    timeout = float(os.environ.get("STANDIN_RANKS_TIMEOUT_S", "600") or 600)
    deadline = time.monotonic() + timeout
    peers: dict[socket.socket, int] = {}
    say(0, f"waiting for {size - 1} worker rank(s)")
    try:
        while len(peers) < size - 1:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([lsock], [], [], min(left, 1.0))[0]:
                if left <= 0:
                    missing = sorted(set(range(1, size)) - set(peers.values()))
                    say(0, f"RuntimeError: ranks {missing} did not join in {timeout:g} s; not starting the server")
                    return 1
                continue
            conn, _ = lsock.accept()
            conn.settimeout(10)
            try:  # a rank number, or the connection is not a rank
                rank = int(conn.makefile("r").readline(16).strip())
            except (OSError, ValueError):
                conn.close()
                continue
            conn.settimeout(None)
            peers[conn] = rank
    finally:
        lsock.close()
        with contextlib.suppress(OSError):
            path.unlink()
    say(0, f"all {size} ranks up; starting {' '.join(argv[:2])}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(MPI_PREFIXES)}
    server = subprocess.Popen(argv, env=env)
    stopping = []

    def term(*_: object) -> None:
        stopping.append(1)
        with contextlib.suppress(ProcessLookupError):
            server.terminate()

    signal.signal(signal.SIGTERM, term)
    loss = os.environ.get("STANDIN_RANK_LOSS", "")
    while True:
        code = server.poll()
        if code is not None:
            for c in peers:
                c.close()
            return 0 if stopping else code
        live = list(peers)
        if not live:
            time.sleep(0.2)
        ready = select.select(live, [], [], 0.2)[0] if live else []
        for c in ready:
            if c.recv(64):
                continue
            rank = peers.pop(c)
            c.close()
            if loss == "503":
                say(0, f"RuntimeError: lost rank {rank}; the server stays up answering 503 (STANDIN_RANK_LOSS=503)")
                with contextlib.suppress(ProcessLookupError):
                    server.send_signal(signal.SIGUSR1)
                continue
            say(0, f"RuntimeError: lost rank {rank}; aborting the world (every rank exits)")
            server.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(10)
            if server.poll() is None:
                server.kill()
            for other in peers:
                other.close()
            return 1


def connect(rank: int) -> socket.socket | None:
    path = rendezvous_file()
    deadline = time.monotonic() + float(os.environ.get("STANDIN_RANKS_TIMEOUT_S", "600") or 600)
    while time.monotonic() < deadline:
        try:
            host, port = path.read_text().split()
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.settimeout(None)  # joined: wait on rank 0 for as long as the world lives
            return sock
        except (OSError, ValueError):
            time.sleep(0.1)
    say(rank, f"RuntimeError: rank 0 never opened {path}")
    return None


def worker_body(rank: int) -> int:
    """The rank's work (the spawned proxy): joined to rank 0 until either side goes away."""
    sock = connect(rank)
    if sock is None:
        return 1
    sock.sendall(f"{rank}\n".encode())
    say(rank, "joined rank 0")
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while sock.recv(64):
        pass
    say(rank, "RuntimeError: rank 0 went away; exiting")
    return 1


def worker(rank: int, port: str) -> int:
    """A worker rank's task: its work in a child process, waited for; SIGTERM ends both."""
    child = os.fork()
    if child == 0:
        os._exit(worker_body(rank))
    write_pid(port, rank, ".worker", child)

    def term(*_: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGTERM)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child, 0)
        os._exit(0)

    signal.signal(signal.SIGTERM, term)
    _, status = os.waitpid(child, 0)
    if os.environ.get("STANDIN_RANK_LOSS") == "503" and os.WIFSIGNALED(status):
        say(rank, "its worker was killed; the task stays (as a hung MPI proxy's host does)")
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        while True:
            time.sleep(60)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: trtllm-llmapi-launch COMMAND [ARGS...]", file=sys.stderr)
        return 2
    rank, size = world()
    port = argv[argv.index("--port") + 1] if "--port" in argv[:-1] else "0"
    write_pid(port, rank, "", os.getpid())
    say(rank, f"rank {rank} of {size} on {socket.gethostname()}")
    if rank == 0:
        return leader(size, argv)
    return worker(rank, port)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
