"""build-engine without Docker: golden command lines per recipe, the GPU checks, dry-run and the entrypoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import GOLDEN
from typer.testing import CliRunner

from repro.cli import app
from repro.core.errors import InputError, SystemMismatch
from repro.core.recipes import all_recipes, get_recipe
from repro.core.systems import GPU, SystemInfo
from repro.core.workspace import Workspace
from repro.engine import quantize as q
from repro.engine.container import dockerfile_instructions
from repro.engine.plan import check_gpu, plan_build, run_build

ENTRY = Path(__file__).resolve().parents[1] / "repro" / "engine" / "container_entry.py"
TRT_RECIPES = [r.name for r in all_recipes() if r.trtllm is not None]
# every engine a recipe builds: its base one (`<recipe>.txt`) and each scenario's own (`<recipe>-server.txt`)
TRT_ENGINES = [(r.name, d.scenario) for r in all_recipes() if r.trtllm is not None for d in r.deployments()]
runner = CliRunner()


def _system(name: str, cc: str, n: int) -> SystemInfo:
    return SystemInfo(vm_size=None, gpus=[GPU(i, name, f"GPU-{i}", 80000, cc) for i in range(n)], driver="580.82")


@pytest.mark.parametrize(("name", "scenario"), TRT_ENGINES)
def test_golden_command_lines(name: str, scenario: str) -> None:
    dep = get_recipe(name).deployment(scenario)
    text = golden_text(dep)
    golden = GOLDEN / "commands" / (f"{name}-{scenario.lower()}.txt" if dep.own else f"{name}.txt")
    if os.environ.get("REPRO_UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"missing {golden}; run with REPRO_UPDATE_GOLDEN=1 once and review it"
    assert text == golden.read_text(encoding="utf-8")


def test_gb200_engine_flags_match_the_reference() -> None:
    """Reference 1.3: the GB200 trtllm-build flags, in the harness's order, with fp4 spelled nvfp4."""
    r = get_recipe("nd-gb200-v6")
    argv = q.build_command(r, q.paths_for(r))
    expected = (
        "--max_beam_width=1 --kv_cache_type=paged --remove_input_padding=enable --multiple_profiles=enable "
        "--use_fused_mlp=enable --context_fmha=enable --max_num_tokens=4096 --max_input_len=1024 --max_seq_len=2048 "
        "--use_fp8_context_fmha=enable --use_paged_context_fmha=enable --tokens_per_block=32 --norm_quant_fusion=enable"
    )
    assert argv[0] == "trtllm-build"
    assert " ".join(argv[4:]) == expected
    assert "--max_batch_size=2048" in argv and not any(a.startswith("--workers") for a in argv)


def test_quantize_arguments_match_the_reference() -> None:
    gb200, gb300, h100 = (get_recipe(n) for n in ("nd-gb200-v6", "nd-gb300-v6", "nd-h100-v5"))
    a = q.quantize_command(gb200, q.paths_for(gb200))
    assert a[1].endswith("examples/quantization/quantize.py")
    assert a[2:4] == ["--tp_size=1", "--pp_size=1"]
    assert "--qformat=nvfp4" in a and "--calib_size=1024" in a and "--dtype=float16" in a
    assert not any(x.startswith("--kv_cache_dtype") for x in a), "the Azure GB200 config comments the KV flag out"
    assert any(x.endswith("/llama2-70b-chat-hf-tp1pp1-fp4") for x in a)
    b = q.quantize_command(gb300, q.paths_for(gb300))
    assert b[2] == "hf-quantize" and b[-2:] == ["--qformat=nvfp4", "--kv_cache_dtype=fp8"]
    assert any(x.endswith("/llama2-70b-chat-hf-torch-fp4") for x in b)
    assert any(x.endswith("/mlperf_llama2_openorca_calibration_1k") for x in b)
    c = q.quantize_command(h100, q.paths_for(h100))
    assert c[-2:] == ["--qformat=fp8", "--kv_cache_dtype=fp8"]
    assert q.build_command(gb300, q.paths_for(gb300)) is None


def test_serve_commands_give_each_rank_its_gpus_and_port() -> None:
    h100 = get_recipe("nd-h100-v5")
    serve = q.serve_commands(h100, q.paths_for(h100))
    assert [s.cuda_visible_devices for s in serve] == ["0,1", "2,3", "4,5", "6,7"]
    assert [s.port for s in serve] == [30000, 30001, 30002, 30003]
    assert serve[0].argv[serve[0].argv.index("--backend") + 1] == "pytorch"
    gb200 = get_recipe("nd-gb200-v6")
    s0 = q.serve_commands(gb200, q.paths_for(gb200))[0].argv
    assert s0[s0.index("--tokenizer") + 1] == "/workspace/models/Llama-2-70b-chat-hf"
    assert s0[s0.index("--max_num_tokens") + 1] == "3584"


def test_nvfp4_refused_on_hopper_naming_the_fp8_recipe() -> None:
    with pytest.raises(SystemMismatch) as exc:
        check_gpu(get_recipe("nd-gb300-v6"), _system("NVIDIA H100 80GB HBM3", "9.0", 8))
    assert "Blackwell" in exc.value.message and "nd-h100-v5" in exc.value.message
    assert exc.value.next_command == "`repro build-engine --recipe nd-h100-v5`"
    with pytest.raises(SystemMismatch) as exc:
        check_gpu(get_recipe("nd-gb200-v6"), _system("NVIDIA H200", "9.0", 8))
    assert "nd-h200-v5" in exc.value.next_command


def test_gpu_check_accepts_blackwell_and_fp8_on_hopper() -> None:
    check_gpu(get_recipe("nd-gb300-v6"), _system("NVIDIA GB300", "10.3", 4))
    check_gpu(get_recipe("nd-gb200-v6"), _system("NVIDIA GB200", None, 4))
    check_gpu(get_recipe("nd-h100-v5"), _system("NVIDIA H100 80GB HBM3", "9.0", 8))
    with pytest.raises(SystemMismatch, match="No NVIDIA GPU"):
        check_gpu(get_recipe("nd-h100-v5"), SystemInfo(vm_size=None, nvml_error="NVML unavailable"))


def test_demo_recipe_has_nothing_to_build() -> None:
    res = runner.invoke(app, ["build-engine", "--recipe", "demo", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["status"] == "skipped" and "demo" in out["summary"]


def test_dry_run_prints_image_mounts_and_commands(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    res = runner.invoke(app, ["build-engine", "-r", "nd-gb200-v6", "-w", str(ws), "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    d = out["details"]
    assert out["status"] == "dry-run"
    assert d["image"]["build_args"]["BASE_IMAGE"] == "nvcr.io/nvidia/tensorrt-llm/release:1.0.0"
    assert d["mounts"] == [{"host": str(ws.resolve()), "target": "/workspace", "read_only": False}]
    assert [s["name"] for s in d["steps"]] == ["prepare-calib", "quantize", "engine"]
    assert all("--gpus=all" in s["docker"] for s in d["steps"])
    assert not ws.exists(), "dry-run must not create the workspace"
    text = runner.invoke(app, ["build-engine", "-r", "nd-gb300-v6", "-w", str(ws), "--dry-run"])
    assert text.exit_code == 0 and "hf-quantize" in text.stdout and "trtllm-serve" in text.stdout


def test_reference_only_recipe_is_refused() -> None:
    res = runner.invoke(app, ["build-engine", "-r", "dgx-h100"])
    assert res.exit_code == 2
    assert "reference-only" in res.output and "nd-h100-v5" in res.output and "Traceback" not in res.output


def test_missing_model_names_the_path_and_setup(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws")
    with pytest.raises(InputError) as exc:
        run_build(get_recipe("nd-gb200-v6"), ws, system=_system("NVIDIA GB200", "10.0", 4))
    assert "Llama-2-70b-chat-hf" in exc.value.message and "repro setup --recipe nd-gb200-v6" in exc.value.next_command
    assert not ws.ledger_path.exists()


def test_model_outside_the_workspace_is_mounted_read_only(tmp_path: Path) -> None:
    from repro.core.ledger import Ledger

    ws = Workspace.open(tmp_path / "ws").ensure()
    led = Ledger.load(ws.ledger_path)
    led.start("setup", "x", model_dir=str(tmp_path / "nvme" / "llama"))
    led.finish("setup")
    plan = plan_build(get_recipe("nd-h100-v5"), ws)
    assert [(m.target, m.read_only) for m in plan.mounts] == [("/workspace", False), ("/model", True)]
    assert "--model_dir=/model" in plan.steps[1].argv


def test_dockerfile_instructions_join_continuations(tmp_path: Path) -> None:
    df = tmp_path / "Dockerfile"
    df.write_text("# c\nARG A=1\nFROM x\n\nRUN a \\\n    && b\nCOPY y /z\n", encoding="utf-8")
    assert dockerfile_instructions(df) == [(2, "ARG A=1"), (3, "FROM x"), (5, "RUN a && b"), (7, "COPY y /z")]


@pytest.fixture
def entry(tmp_path: Path) -> Path:
    """The entrypoint alone in a folder, as in the image (/opt/repro), so repro's modules cannot shadow stdlib ones."""
    dest = tmp_path / "opt-repro" / "container_entry.py"
    dest.parent.mkdir()
    dest.write_bytes(ENTRY.read_bytes())
    return dest


def _run(entry: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(entry), *args], capture_output=True, text=True, timeout=60)


def test_entry_exec_returns_the_step_exit_code(entry: Path) -> None:
    res = _run(entry, "exec", "--", sys.executable, "-c", "import sys; print('hi'); sys.exit(7)")
    assert res.returncode == 7 and "hi" in res.stdout and "exited with code 7" in res.stdout
    assert _run(entry, "exec", "--", "no-such-binary-xyz").returncode == 127


def test_entry_prepare_calib_never_unpickles(entry: Path, tmp_path: Path) -> None:
    """`repro setup` writes the calibration parquet from pinned data; the container only checks it is there. A
    calibration pickle beside it (a hostile one here) is never loaded: its payload never runs."""
    import os
    import pickle

    marker = tmp_path / "payload-ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    pkl = tmp_path / "calib.pkl"
    pkl.write_bytes(pickle.dumps(Payload()))
    out = tmp_path / "calib_1k"
    res = _run(entry, "prepare-calib", f"--pkl={pkl}", f"--output_dir={out}")
    assert res.returncode == 2 and "repro setup" in res.stdout and "never unpickled" in res.stdout
    assert not marker.exists() and not out.exists()
    out.mkdir()
    (out / "data.parquet").write_bytes(b"PAR1")
    res = _run(entry, "prepare-calib", f"--pkl={pkl}", f"--output_dir={out}")
    assert res.returncode == 0 and "already prepared" in res.stdout and not marker.exists()


def golden_text(target: Any) -> str:
    """Everything the build would run or write for a recipe's deployment (a recipe: its base one), one block per
    step, for the golden files."""
    import shlex

    from repro.core.recipes import as_deployment

    recipe = as_deployment(target)
    p = q.paths_for(recipe)
    r = recipe.recipe
    own = f"; {recipe.scenario}'s own engine, {recipe.layout.text()}" if recipe.own and recipe.layout else ""
    lines = [
        f"# recipe: {r.name} ({r.backend}, {r.precision}){own}",
        "",
        "## prepare-calib",
        shlex.join(q.prepare_calib_command(recipe, p)),
        "",
        "## quantize",
        shlex.join(q.quantize_command(recipe, p)),
    ]
    build = q.build_command(recipe, p)
    lines += ["", "## engine", shlex.join(build) if build else "(none: PyTorch backend serves the checkpoint)"]
    lines += ["", "## serve"]
    lines += [
        f"CUDA_VISIBLE_DEVICES={s.cuda_visible_devices} {shlex.join(s.argv)}" for s in q.serve_commands(recipe, p)
    ]
    lines += ["", f"## {p.serve_config.name}", q.serve_config(recipe).rstrip()]
    return "\n".join(lines) + "\n"
