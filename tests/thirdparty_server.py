"""A real OpenAI-compatible server that someone else wrote, on CPU: `transformers serve` with repro's tiny demo model.

Chosen after trying the candidates here: `transformers serve` (transformers[serving] from PyPI) runs the locally
built tiny Llama on CPU. llama-cpp-python and vLLM publish no CPU wheel on PyPI for this platform (source builds
only) and would need a GGUF conversion or a full vLLM CPU build. The demo tokenizer has no chat template, so the
fixture serves a copy of the model with a plain one (messages' contents, concatenated).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
READY_TIMEOUT_S = 180


@dataclass(frozen=True)
class ThirdPartyServer:
    base_url: str
    model: str
    model_dir: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tiny_model_dir(root: Path) -> Path:
    """repro's own CPU-demo model (deterministic, no download), copied with a chat template added."""
    from repro.core.workspace import Workspace
    from repro.setup.demo import prepare_demo

    built = prepare_demo(Workspace(root / "ws"))["model_dir"]
    served = root / "tiny-llama-chat"
    if not served.exists():
        shutil.copytree(built, served)
        cfg_path = served / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["chat_template"] = CHAT_TEMPLATE
        cfg_path.write_text(json.dumps(cfg, indent=2))
    return served


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"transformers serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"transformers serve not ready after {READY_TIMEOUT_S}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session", name="thirdparty_server")
def thirdparty_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThirdPartyServer]:
    """Start `transformers serve` on 127.0.0.1:<free port> with the tiny model; yield it; stop it."""
    pytest.importorskip("fastapi", reason="needs transformers[serving] (the test extra)")
    pytest.importorskip("uvicorn", reason="needs transformers[serving] (the test extra)")
    root = tmp_path_factory.mktemp("thirdparty")
    model_dir = tiny_model_dir(root)
    port = _free_port()
    log = root / "server.log"
    cmd = [
        sys.executable,
        "-c",
        "import sys; from transformers.cli.transformers import main; sys.exit(main())",
        "serve",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    # one torch thread: the tiny model's matrices are too small to share, and the client needs the other core
    # (2 cores: 382 ms per 32-token answer with torch's default threads, 24 ms with one)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log)
        yield ThirdPartyServer(url, str(model_dir), model_dir, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
