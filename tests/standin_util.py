"""Helpers for the stand-in trtllm-serve (repro/rehearse/standin/): its tokenizer, a workspace, a local process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

from repro.rehearse.rehearsal import STANDIN, VOCAB, write_tokenizer

__all__ = ["STANDIN", "VOCAB", "write_tokenizer"]


LAUNCH = STANDIN.parent / "trtllm_llmapi_launch.py"


def standin_processes() -> list[str]:
    """Stand-in trtllm-serve or trtllm-llmapi-launch processes still alive anywhere on the machine (pid: command)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(STANDIN) in cmd or str(LAUNCH) in cmd:
            out.append(f"{proc.name}: {cmd[:200]}")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_range(n: int) -> int:
    """The first of n consecutive free ports (the servers of a test take base_port + rank)."""
    rng = np.random.default_rng()
    for _ in range(50):
        base = int(rng.integers(20000, 60000))
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("0.0.0.0", p))
                except OSError:
                    ok = False
        if ok:
            return base
    raise RuntimeError("no free port range")


def prompts(n: int, seed: int = 3) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(3, VOCAB, size=int(rng.integers(4, 30))).tolist() for _ in range(n)]


def standin_workspace(recipe_name: str):
    """A workspace as `repro setup` and `build-engine` leave it: dataset, model tokenizer, checkpoint + tokenizer."""
    from helpers import write_prepared

    from repro.core.recipes import get_recipe
    from repro.core.workspace import Workspace
    from repro.engine.quantize import paths_for

    ws = Workspace.open().ensure()
    recipe = get_recipe(recipe_name)
    write_prepared(
        ws.preprocessed / recipe.dataset.name, name="x", prompts=prompts(16), out_len=10, outputs="r{i}", source=""
    )
    write_tokenizer(ws.models / recipe.model.repo_id.split("/")[-1])
    write_tokenizer(ws.root / paths_for(recipe).checkpoint_dir.relative_to("/workspace"))
    return ws


def standin_ws(root: Path, recipe_name: str = "nd-h100-v5") -> tuple[Any, Path]:
    """A workspace at `root` for runs against a LocalStandin: the recipe's model tokenizer and a prepared data set of
    64 prompts (2-word reference answers). Returns the Workspace and the tokenizer folder the stand-in serves."""
    from repro.core.recipes import get_recipe
    from repro.core.workspace import Workspace
    from repro.setup.dataset import save_prepared

    ws = Workspace.open(root).ensure()
    recipe = get_recipe(recipe_name)
    tok = write_tokenizer(ws.models / recipe.model.repo_id.split("/")[-1])
    ps = prompts(64)
    save_prepared(ws.preprocessed / recipe.dataset.name, "x", ps, [10] * len(ps), [f"w{p[0]} w{p[1]}" for p in ps])
    return ws, tok


class LocalStandin:
    """The stand-in as a process on this host (for backend tests and the client benchmark)."""

    def __init__(
        self,
        tokenizer_dir: Path,
        *,
        port: int | None = None,
        env: dict[str, str] | None = None,
        log: Path | None = None,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(STANDIN),
                str(tokenizer_dir),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--tokenizer",
                str(tokenizer_dir),
            ],
            env={**os.environ, **(env or {})},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_bound(self, timeout: float = 10) -> None:
        """Until the port is taken (bound, maybe not yet listening)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", self.port))
                except OSError:
                    return
            time.sleep(0.05)
        raise TimeoutError("stand-in never bound its port")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.log is not subprocess.DEVNULL:
            self.log.close()

    def __enter__(self) -> LocalStandin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_interruptible_run(tmp_path: Path, recipe: str, ws_root: Path, opts: object) -> subprocess.Popen[str]:
    """A server run (8 samples) in its own process with SIGTERM handled as repro's commands handle it (scancel,
    `docker stop`): stopped, it prints INTERRUPTED and exits 130. `opts` is the run's ServerOptions."""
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from repro.core.errors import Interrupted, sigterm_as_interrupt
        from repro.core.workspace import Workspace
        from repro.run.harness import run_benchmark
        from repro.run.options import RunOptions
        from repro.run.servers import ServerOptions
        sigterm_as_interrupt()
        opts = ServerOptions(**json.loads({json.dumps(vars(opts))!r}))
        try:
            ws = Workspace.open({str(ws_root)!r})
            run_benchmark(RunOptions.build({recipe!r}, ws, samples=8, detect=False, servers=opts))
        except Interrupted as exc:
            print("INTERRUPTED", exc.message, flush=True)
            sys.exit(130)
    """)
    )
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
