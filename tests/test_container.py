"""The real Docker path: build through repro.container on a tiny local base, run the entrypoint, fail, interrupt.

Needs a running Docker engine (`.ci/start-dockerd.sh`); skipped without one unless REPRO_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from conftest import REPO
from container_base import rootfs_key

from repro.core.errors import StepFailed
from repro.core.ledger import Ledger
from repro.core.recipes import get_recipe
from repro.core.systems import GPU, SystemInfo
from repro.core.workspace import Workspace
from repro.engine.container import (
    ImageSpec,
    Mount,
    RunSpec,
    build_image,
    image_spec_for,
    managed_containers,
    run_container,
)
from repro.engine.plan import run_build

pytestmark = pytest.mark.docker


@pytest.fixture(scope="session")
def runtime_image(client, base_image) -> str:
    spec = image_spec_for(get_recipe("nd-gb200-v6"), base_image=base_image, install="none")
    return build_image(spec, client=client).tag


def test_build_streams_log_and_second_build_is_a_noop(client, base_image, tmp_path: Path) -> None:
    recipe_spec = image_spec_for(get_recipe("nd-h100-v5"), base_image=base_image, install="none")
    spec = dataclasses.replace(recipe_spec, tag=f"{recipe_spec.tag}-{uuid.uuid4().hex[:6]}")
    lines: list[str] = []
    first = build_image(spec, on_line=lines.append, log_path=tmp_path / "build.log", client=client)
    assert first.built and first.digest.startswith("sha256:")
    assert any(line.startswith("Step ") and "COPY container_entry.py" in line for line in lines)
    assert "Successfully tagged " + spec.tag in (tmp_path / "build.log").read_text()
    images_before = {i.id for i in client.images.list(all=True)}
    lines.clear()
    second = build_image(spec, on_line=lines.append, client=client)
    assert not second.built and second.digest == first.digest and lines == []
    assert {i.id for i in client.images.list(all=True)} == images_before
    assert client.images.get(spec.tag).labels["org.repro.recipe"] == "nd-h100-v5"
    other = image_spec_for(get_recipe("nd-h200-v5"), base_image=base_image, install="none")
    assert other.tag != recipe_spec.tag
    client.images.remove(spec.tag)


def test_container_runs_the_entrypoint_with_the_workspace_mounted(client, runtime_image, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    lines: list[str] = []
    code = run_container(
        RunSpec(
            runtime_image,
            ["selftest", "--write", "/workspace/out/self.json"],
            [Mount(ws, "/workspace")],
            env={"REPRO_HOME": "/workspace"},
        ),
        step="selftest",
        on_line=lines.append,
        log_path=tmp_path / "run.log",
        client=client,
    )
    assert code == 0
    info = json.loads((ws / "out" / "self.json").read_text())
    assert info["repro_home"] == "/workspace" and info["pid"] == 1
    assert any("[repro-entry] selftest" in line for line in lines)
    assert "[repro-entry] selftest" in (tmp_path / "run.log").read_text()
    assert managed_containers("org.repro.step=selftest", client=client) == []


def test_failing_build_names_the_dockerfile_line(client, base_image, tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    df = ctx / "Dockerfile"
    df.write_text(
        f"FROM {base_image}\n# a comment\nENV A=1\nRUN python3 -c \"import sys; print('about to fail'); sys.exit(3)\"\n"
        'CMD ["python3"]\n',
        encoding="utf-8",
    )
    with pytest.raises(StepFailed) as exc:
        build_image(
            ImageSpec(df, f"repro-test-broken:{uuid.uuid4().hex[:8]}", {}, with_repro_source=False),
            log_path=tmp_path / "b.log",
            client=client,
        )
    msg = exc.value.message
    assert f"{df}:4" in msg and "RUN python3" in msg and "non-zero code: 3" in msg
    assert "about to fail" in msg
    assert "--force" in exc.value.next_command


def test_container_exiting_non_zero_is_a_step_failure(client, runtime_image, tmp_path: Path) -> None:
    argv = ["exec", "--", "python3", "-c", "import sys; print('quantize blew up'); sys.exit(3)"]
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(StepFailed) as exc:
        run_container(
            RunSpec(runtime_image, argv, labels={"org.repro.test": tag}),
            step="quantize",
            log_path=tmp_path / "q.log",
            client=client,
        )
    assert "exited with code 3" in exc.value.message and "quantize blew up" in exc.value.message
    assert str(tmp_path / "q.log") in exc.value.next_command
    assert managed_containers(f"org.repro.test={tag}", client=client) == []


def test_ctrl_c_removes_the_running_container(client, runtime_image, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    script = tmp_path / "runner.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        from repro.engine.container import RunSpec, run_container
        from repro.core.errors import Interrupted
        try:
            code = "import time; print('started', flush=True); time.sleep(120)"
            run_container(RunSpec({runtime_image!r}, ["exec", "--", "python3", "-c", code],
                                  labels={{"org.repro.test": {tag!r}}}), step="sleep", on_line=print)
        except Interrupted as exc:
            print("INTERRUPTED:", exc.message, flush=True)
            sys.exit(130)
    """),
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO
    )
    try:
        for line in proc.stdout:
            if "started" in line:
                break
        running = managed_containers(f"org.repro.test={tag}", client=client)
        assert len(running) == 1 and running[0].status == "running"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "INTERRUPTED" in out and "removed" in out
    assert managed_containers(f"org.repro.test={tag}", client=client) == []


@pytest.mark.parametrize("vanish", [0, 1, 2])
def test_a_container_removed_while_listing_is_skipped(client, base_image, vanish: int) -> None:
    """The SDK lists ids, then inspects each; the daemon really removes one in between (as a server's own stop, or
    a second cleanup after Ctrl-C, does): managed_containers lists the rest, no NotFound (404) escapes."""
    from repro.engine.container import LABEL

    tag = uuid.uuid4().hex[:8]
    made = [
        client.containers.create(base_image, ["python3"], labels={LABEL: "1", "org.repro.test": tag}) for _ in range(3)
    ]
    real_list = client.api.containers

    def list_then_remove(*args, **kwargs):
        found = real_list(*args, **kwargs)
        client.api.remove_container(made[vanish].id, force=True)  # the real daemon, between list and inspect
        return found

    client.api.containers = list_then_remove
    try:
        left = managed_containers(f"org.repro.test={tag}", client=client)
    finally:
        client.api.containers = real_list
        for c in made:
            with contextlib.suppress(Exception):
                c.remove(force=True)
    assert sorted(c.id for c in left) == sorted(c.id for i, c in enumerate(made) if i != vanish)


def test_run_build_records_steps_and_skips_what_is_done(client, base_image, tmp_path: Path, monkeypatch) -> None:
    """The whole step on the tiny base: prepare-calib succeeds, quantize fails (no TensorRT-LLM there)."""
    ws = Workspace.open(tmp_path / "ws").ensure()
    recipe = get_recipe("nd-gb200-v6")
    (ws.models / "Llama-2-70b-chat-hf").mkdir(parents=True)
    calib = ws.data / recipe.dataset.name / recipe.dataset.files["calibration"]
    calib.parent.mkdir(parents=True)
    calib.write_bytes(b"not read: the parquet below already exists")
    parquet = ws.preprocessed / recipe.dataset.name / "mlperf_llama2_openorca_calibration_1k" / "data.parquet"
    parquet.parent.mkdir(parents=True)
    parquet.write_bytes(b"PAR1")
    system = SystemInfo(vm_size=None, gpus=[GPU(i, "NVIDIA GB200", f"GPU-{i}", 189471, "10.0") for i in range(4)])
    kw = dict(system=system, base_image=base_image, install="none", gpus=False)
    with pytest.raises(StepFailed) as exc:
        run_build(recipe, ws, **kw)
    assert "quantize" in exc.value.message and "exited with code 2" in exc.value.message
    ledger = Ledger.load(ws.ledger_path)
    assert ledger.steps["build-engine.prepare-calib"].status == "done"
    assert ledger.steps["build-engine.quantize"].status == "failed"
    assert ledger.steps["build-engine"].status == "failed"
    assert ledger.steps["build-engine"].details["image_digest"].startswith("sha256:")
    assert "quantize.py" in (ws.root / "logs" / "build-engine-quantize.log").read_text()
    digest = ledger.steps["build-engine"].details["image_digest"]
    assert any(a.endswith("/quantize.py") for a in ledger.steps["build-engine.quantize"].details["command"])
    assert digest == client.images.get(ledger.steps["build-engine"].details["image"]).id
    first_prep = ledger.steps["build-engine.prepare-calib"].finished
    with pytest.raises(StepFailed):
        run_build(recipe, ws, **kw)
    again = Ledger.load(ws.ledger_path)
    assert again.steps["build-engine.prepare-calib"].finished == first_prep, "a fresh step must be skipped"
    assert managed_containers("org.repro.step=quantize", client=client) == []


STUB_QUANTIZE = """
import json, sys, pathlib
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
out = pathlib.Path(args["output_dir"]); out.mkdir(parents=True, exist_ok=True)
(out / "config.json").write_text(json.dumps({"stub": "quantize", "argv": sys.argv[1:]}))
(out / "rank0.safetensors").write_bytes(b"weights")
print("stub quantize wrote", out)
"""

STUB_BUILD = """#!/usr/bin/python3
import json, sys, pathlib
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
assert pathlib.Path(args["checkpoint_dir"], "rank0.safetensors").exists(), "no checkpoint"
out = pathlib.Path(args["output_dir"]); out.mkdir(parents=True, exist_ok=True)
(out / "config.json").write_text(json.dumps({"stub": "trtllm-build", "argv": sys.argv[1:]}))
(out / "rank0.engine").write_bytes(b"engine")
print("stub trtllm-build wrote", out)
"""


@pytest.fixture(scope="session")
def stub_trtllm_base(client, base_image, tmp_path_factory) -> str:
    """The tiny base plus stand-ins for TensorRT-LLM's quantize.py and trtllm-build (they need a GPU), which only
    write the files the real tools write, so the full step, its output checks and its skipping can run here."""
    ctx = tmp_path_factory.mktemp("stubbase")
    (ctx / "quantize.py").write_text(STUB_QUANTIZE, encoding="utf-8")
    (ctx / "trtllm-build").write_text(STUB_BUILD, encoding="utf-8")
    (ctx / "trtllm-build").chmod(0o755)
    (ctx / "Dockerfile").write_text(
        f"FROM {base_image}\nCOPY quantize.py /app/tensorrt_llm/examples/quantization/quantize.py\n"
        "COPY trtllm-build /usr/local/bin/trtllm-build\n",
        encoding="utf-8",
    )
    return build_image(
        ImageSpec(ctx / "Dockerfile", f"repro-teststub:{rootfs_key()}", {}, with_repro_source=False), client=client
    ).tag


def test_run_build_completes_then_is_skipped(client, stub_trtllm_base, tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws").ensure()
    recipe = get_recipe("nd-gb200-v6")
    (ws.models / "Llama-2-70b-chat-hf").mkdir(parents=True)
    calib = ws.data / recipe.dataset.name / recipe.dataset.files["calibration"]
    calib.parent.mkdir(parents=True)
    calib.write_bytes(b"x")
    parquet = ws.preprocessed / recipe.dataset.name / "mlperf_llama2_openorca_calibration_1k" / "data.parquet"
    parquet.parent.mkdir(parents=True)
    parquet.write_bytes(b"PAR1")
    system = SystemInfo(vm_size=None, gpus=[GPU(i, "NVIDIA GB200", f"GPU-{i}", 189471, "10.0") for i in range(4)])
    kw = dict(system=system, base_image=stub_trtllm_base, install="none", gpus=False)
    first = run_build(recipe, ws, **kw)
    assert first.status == "done" and first.details["ran"] == ["prepare-calib", "quantize", "engine"]
    engine = ws.engines / "nd-gb200-v6" / "Offline" / "llama2-70b" / "gpu-fp4-b2048-tp1-pp1"
    built = json.loads((engine / "config.json").read_text())
    assert "--use_fp8_context_fmha=enable" in built["argv"] and "--max_batch_size=2048" in built["argv"]
    serve_yaml = ws.engines / "nd-gb200-v6" / "trtllm_serve_extra_conf.yaml"
    assert "free_gpu_memory_fraction: 0.95" in serve_yaml.read_text()
    ledger = Ledger.load(ws.ledger_path)
    assert ledger.steps["build-engine"].status == "done"
    assert ledger.steps["build-engine"].details["image_digest"] == first.details["image_digest"]

    second = run_build(recipe, ws, **kw)
    assert second.status == "skipped" and second.details["ran"] == []

    (engine / "rank0.engine").write_bytes(b"truncated")
    third = run_build(recipe, ws, **kw)
    assert third.status == "done" and third.details["ran"] == ["engine"], "only the step whose output broke reruns"
