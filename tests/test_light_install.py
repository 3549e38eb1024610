"""README command 1's install is enough to rehearse and to drive an endpoint (#43 item 4).

A fresh venv is made exactly by README command 1 (read from README.md, run with bash in a clean copy of the tree:
the files git tracks or would track, no .venv, no build output), reusing pip's cache and not byte-compiling what
it installs (PIP_COMPILE=0: the same files). In it, `repro rehearse` of the Llama-2 and the Llama-3.1-405B GPU
recipes (real Docker, the stand-in TensorRT-LLM base) and the demo's `repro run offline --endpoint URL --accuracy`
against a text-only server (the stand-in trtllm-serve, which answers text without token ids, as trtllm-serve's
chat route does) run to completion, and `pip list` there holds no torch, transformers, pandas or pyarrow.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REPO

HEAVY = ("torch", "transformers", "pandas", "pyarrow")


def readme_command_1() -> str:
    """The install part of README command 1, as the README writes it (the demo run after it is run below too)."""
    text = (REPO / "README.md").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("python3 -m venv .venv"))
    assert "pip install -e '.[report]'" in line, line
    return line


def clean_copy(dest: Path) -> Path:
    """The tree as a fresh clone of this checkout would hold it, uncommitted edits included."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for rel in (p.decode() for p in listed if p):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.docker
def test_readme_command_1_rehearses_and_drives_an_endpoint(client, tmp_path: Path) -> None:
    tree = clean_copy(tmp_path / "tree")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "REPRO_"))}
    env.update(REPRO_HOME=str(tmp_path / "home"), COLUMNS="120", REPRO_IMDS_URL="http://127.0.0.1:9/metadata/instance")
    # pip installs the same files without byte-compiling every module of every package (matplotlib, numpy, nltk...);
    # Python compiles what the runs import, as it does for any module without a .pyc.
    env["PIP_COMPILE"] = "0"  # pip reads PIP_NO_COMPILE=1 as --compile; this is --no-compile
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    started = time.monotonic()
    made = subprocess.run(
        ["bash", "-c", readme_command_1()], cwd=tree, env=env, capture_output=True, text=True, timeout=1200
    )
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    assert "NOT A REPRODUCTION" in made.stdout  # the demo it ends with ran
    venv = tree / ".venv" / "bin"
    listed = subprocess.run([str(venv / "pip"), "list", "--format=json"], env=env, capture_output=True, text=True)
    names = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    assert not names & set(HEAVY), sorted(names & set(HEAVY))
    assert {"tokenizers", "numpy", "mlcommons-loadgen"} <= names
    install_s = time.monotonic() - started

    started_procs: list[subprocess.Popen[bytes]] = []

    def repro(name: str, *args: str) -> subprocess.Popen[bytes]:
        """Start `repro ARGS`; its stdout and stderr go to files (a full pipe would stall a run left waiting)."""
        with open(tmp_path / f"{name}.out", "wb") as out, open(tmp_path / f"{name}.err", "wb") as err:
            proc = subprocess.Popen([str(venv / "repro"), *args], cwd=tree, env=env, stdout=out, stderr=err)
        started_procs.append(proc)
        return proc

    def finish(name: str, proc: subprocess.Popen[bytes], timeout: float) -> subprocess.CompletedProcess[str]:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out, err = ((tmp_path / f"{name}.{k}").read_text(errors="replace") for k in ("out", "err"))
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    # The two rehearsals and the endpoint run are independent (a workspace each; the endpoint run uses the demo's
    # REPRO_HOME), so they run at once: much of a rehearsal is Docker and its stand-in server's published pace.
    recipes = ("nd-gb300-v6", "nd-gb200-v6-405b")
    model = tmp_path / "home" / "models" / "tiny-llama"  # the demo's, which command 1's demo run set up
    port = free_port()
    server = subprocess.Popen(
        [
            str(venv / "python"),
            str(tree / "repro/rehearse/standin/trtllm_serve.py"),
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--tokenizer",
            str(model),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        rehearsals = {
            r: repro(r, "rehearse", "--recipe", r, "--workspace", str(tmp_path / f"ws-{r}"), "--json") for r in recipes
        }
        endpoint = repro(
            "endpoint",
            "run",
            "offline",
            "--recipe",
            "demo",
            "--endpoint",
            f"http://127.0.0.1:{port}",
            "--accuracy",
            "--json",
        )
        run = finish("endpoint", endpoint, timeout=600)
        server.terminate()
        server.wait(10)
        done = {r: finish(r, proc, timeout=1500) for r, proc in rehearsals.items()}
    finally:
        for proc in [server, *started_procs]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for recipe in recipes:
        assert done[recipe].returncode == 0, f"{recipe}: " + done[recipe].stdout[-4000:] + done[recipe].stderr[-4000:]
        doc = json.loads(done[recipe].stdout)
        assert doc["label"] == "rehearsal" and doc["reproduction"] is False and doc["recipe"] == recipe
        assert [r["validity"] for r in doc["runs"]] == ["VALID", "VALID"], doc["runs"]
        assert doc["setup"]["status"] == "done" and doc["left_containers"] == []

    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    details = json.loads(run.stdout)["details"]
    info = json.loads((Path(details["log_dir"]) / "run.json").read_text())
    assert info["backend_stats"]["tokens"]["ids_from_tokenizer"] > 0  # text answers, re-tokenized by `tokenizers`
    assert re.search(r"'rouge1': [0-9.]+", (Path(details["log_dir"]) / "accuracy.txt").read_text())
    print(f"README command 1: {install_s:.0f} s; the rest: {time.monotonic() - started - install_s:.0f} s")
