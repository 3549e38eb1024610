"""The server lifecycle on the real Docker engine: `repro run` starts the recipe's trtllm-serve containers, waits,
drives LoadGen through them and removes them, on success, failure, a dying server and SIGTERM.

The image is the recipe's own Dockerfile (its entrypoint runs `exec -- trtllm-serve ...`) built on a FROM-scratch
base that carries the stand-in trtllm-serve (repro/rehearse/standin/), so the command line is the one a GPU VM runs.
Docker gives no GPUs here, so the tests start the servers without device requests (ServerOptions.gpus=False).
"""

from __future__ import annotations

import importlib.util
import json
import signal
import socket
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from container_base import SERVE_RECIPE
from standin_util import STANDIN, free_port_range, standin_workspace, start_interruptible_run

from repro.core.errors import InputError, StepFailed
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.engine.container import managed_containers
from repro.run.backends.http_client import BackendError
from repro.run.harness import run_benchmark
from repro.run.options import RunOptions
from repro.run.servers import ServerDied, ServerOptions

pytestmark = pytest.mark.docker
RECIPE = SERVE_RECIPE


@pytest.fixture
def ws() -> Workspace:
    return standin_workspace(RECIPE)


def _options(serve_image: str, tag: str, **kw) -> ServerOptions:
    base = dict(
        image=serve_image,
        gpus=False,
        base_port=free_port_range(4),
        name_prefix=f"repro-test-{tag}",
        ready_timeout_s=60,
        labels={"org.repro.test": tag},
    )
    base.update(kw)
    return ServerOptions(**base)


def _left(client, tag: str) -> list:
    return managed_containers(f"org.repro.test={tag}", client=client)


def _standin_module():
    spec = importlib.util.spec_from_file_location("standin_serve", STANDIN)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_run_starts_waits_drives_and_removes_the_servers(client, serve_image, ws: Workspace) -> None:
    """start -> wait (the servers bind, then load for 8 s) -> LoadGen AccuracyOnly -> stop; real ids in the log."""
    tag = uuid.uuid4().hex[:8]
    opts = _options(serve_image, tag, env={"STANDIN_LOAD_S": "8"})
    out = run_benchmark(RunOptions.build(RECIPE, ws, accuracy=True, detect=False, servers=opts))
    run_dir, folder = Path(out.details["log_dir"]), Path(out.details["run_dir"])
    info = json.loads((run_dir / "run.json").read_text())
    assert _left(client, tag) == []
    assert info["status"] == "complete" and len(info["servers"]["removed"]) == 4
    assert [s["gpus"] for s in info["servers"]["servers"]] == [[], [], [], []]
    for rank in range(4):
        log = (folder / "servers" / f"trtllm_serve_{rank}.log").read_text()
        assert "--tp_size 2" in log and "Uvicorn running" in log
    stats = info["backend_stats"]
    assert stats["server_returns_ids"] is False and stats["ready_retries"] > 0
    # Every logged output is the stand-in's generation re-tokenized from its text (EOS is not in the text).
    gen = _standin_module()
    vocab = gen.Vocab(ws.models / get_recipe(RECIPE).model.repo_id.split("/")[-1])
    from repro.setup.dataset import load_prepared

    data = load_prepared(ws.preprocessed / get_recipe(RECIPE).dataset.name)
    logged = json.loads((run_dir / "mlperf_log_accuracy.json").read_text())
    assert len(logged) == len(data)
    for entry in logged:
        ids = np.frombuffer(bytes.fromhex(entry["data"]), dtype=np.int32).tolist()
        want, _ = gen.generate(data.prompt(entry["qsl_idx"]).tolist(), 1024, vocab)
        assert ids == [t for t in want if t != vocab.eos]
    tokens = stats["tokens"]
    # LoadGen counts the ids it logs (TEST06 checks that); the server's usage (EOS included) is the other count.
    count = tokens["loadgen_count"]
    assert count["source"] == "re-tokenized text"
    assert tokens["logged_tokens"] == count["tokens"] == info["measured_by_harness"]["tokens"]
    assert count["other_source"] == "server usage.completion_tokens"
    assert count["other_tokens"] == tokens["server_completion_tokens"]
    assert tokens["server_completion_tokens"] - tokens["logged_tokens"] == tokens["count_disagreements"] > 0


def test_server_crashing_while_loading_is_one_clear_error(client, serve_image, ws: Workspace) -> None:
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(ServerDied) as err:
        run_benchmark(
            RunOptions.build(
                RECIPE, ws, samples=8, detect=False, servers=_options(serve_image, tag, env={"STANDIN_CRASH": "load"})
            )
        )
    assert "exited with code 1" in err.value.message and "simulated CUDA out of memory" in err.value.message
    assert _left(client, tag) == []


def test_server_that_never_gets_ready_times_out_with_its_log(client, serve_image, ws: Workspace) -> None:
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(BackendError) as err:
        run_benchmark(
            RunOptions.build(
                RECIPE,
                ws,
                samples=8,
                detect=False,
                # Long enough for a container to start and print its first line on a loaded 2-core machine.
                servers=_options(serve_image, tag, env={"STANDIN_HANG": "load"}, ready_timeout_s=12),
            )
        )
    assert "did not become ready within 12 s" in err.value.message and "loading model" in err.value.message
    assert "--ready-timeout" in err.value.next_command and "servers" in err.value.next_command
    assert _left(client, tag) == []


def test_server_dying_mid_run_marks_the_run_incomplete(client, serve_image, ws: Workspace) -> None:
    tag = uuid.uuid4().hex[:8]
    # Each server first answers NVIDIA's warm-up burst (10 queries), so the crash after 13 answers is mid-run.
    with pytest.raises(StepFailed) as err:
        run_benchmark(
            RunOptions.build(
                RECIPE,
                ws,
                samples=16,
                detect=False,
                servers=_options(serve_image, tag, env={"STANDIN_CRASH": "after:13"}),
            )
        )
    assert "exited with code 3" in err.value.message and "simulated engine failure" in err.value.message
    run_dir = next((ws.runs / RECIPE / "Offline").iterdir()) / "performance" / "run_1"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["incomplete"] is True and info["status"] == "failed"
    assert _left(client, tag) == []


def test_server_dying_in_the_warm_up_names_its_exit_and_log(client, serve_image, ws: Workspace) -> None:
    """A server that dies while answering the warm-up burst is reported as the server's death (exit code, last log
    lines, when), not as a connection the client saw closed."""
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(ServerDied) as err:
        run_benchmark(
            RunOptions.build(
                RECIPE,
                ws,
                samples=16,
                detect=False,
                servers=_options(serve_image, tag, env={"STANDIN_CRASH": "after:3"}),
            )
        )
    msg = err.value.message
    assert "exited with code 3" in msg and "simulated engine failure" in msg and "warm-up burst" in msg
    run_dir = next((ws.runs / RECIPE / "Offline").iterdir()) / "performance" / "run_1"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    assert _left(client, tag) == []


def test_keep_servers_then_a_later_run_reuses_them(client, serve_image, ws: Workspace) -> None:
    tag = uuid.uuid4().hex[:8]
    opts = _options(serve_image, tag, keep=True)
    first = run_benchmark(RunOptions.build(RECIPE, ws, samples=8, detect=False, servers=opts))
    kept = _left(client, tag)
    assert len(kept) == 4 and all(c.status == "running" for c in kept)
    opts.keep = False
    second = run_benchmark(RunOptions.build(RECIPE, ws, samples=8, detect=False, servers=opts))
    info = json.loads((Path(second.details["log_dir"]) / "run.json").read_text())
    assert sorted(info["servers"]["reused"]) == sorted(c.name for c in kept)
    assert first.details["run_dir"] != second.details["run_dir"] and _left(client, tag) == []


def test_missing_image_port_in_use_and_no_gpu_runtime(client, serve_image, ws: Workspace) -> None:
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(InputError, match="not built on this machine") as err:
        run_benchmark(
            RunOptions.build(RECIPE, ws, samples=8, detect=False, servers=_options(f"repro-missing:{tag}", tag))
        )
    assert "repro build-engine --recipe nd-h100-v5" in err.value.next_command
    opts = _options(serve_image, tag)
    with socket.socket() as held:
        held.bind(("127.0.0.1", opts.base_port + 1))
        held.listen()
        with pytest.raises(InputError, match=f"Port {opts.base_port + 1} .* already in use"):
            run_benchmark(RunOptions.build(RECIPE, ws, samples=8, detect=False, servers=opts))
    assert _left(client, tag) == []
    if any(r == "nvidia" for r in client.info().get("Runtimes", {})):
        return
    with pytest.raises(StepFailed, match="NVIDIA container runtime") as err:
        run_benchmark(
            RunOptions.build(RECIPE, ws, samples=8, detect=False, servers=_options(serve_image, tag, gpus=True))
        )
    assert "nvidia-ctk" in err.value.next_command
    assert _left(client, tag) == []


def test_sigterm_removes_every_server_container(client, serve_image, ws: Workspace, tmp_path: Path) -> None:
    """`docker stop`/scancel send SIGTERM: the run stops as for Ctrl-C and no server container is left."""
    tag = uuid.uuid4().hex[:8]
    opts = _options(serve_image, tag, env={"STANDIN_HANG": "load"}, ready_timeout_s=300)
    proc = start_interruptible_run(tmp_path, RECIPE, ws.root, opts)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len([c for c in _left(client, tag) if c.status == "running"]) < 4:
        time.sleep(0.5)
    assert len(_left(client, tag)) == 4, proc.stdout.read() if proc.poll() is not None else "servers did not start"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "INTERRUPTED" in out, out
    assert _left(client, tag) == []
