"""`repro doctor`: real checks on this machine, a real local hub endpoint, real mounts/ledger files."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from conftest import required
from typer.testing import CliRunner

from repro.cli import app
from repro.core.recipes import get_recipe, recipes_dir
from repro.core.systems import GPU, SystemInfo
from repro.core.workspace import Workspace
from repro.flow.doctor import check_docker, check_hf, check_nvme, nvme_mounts, run_doctor

runner = CliRunner()
TOKEN = "hf_doctorTestToken1234567890"


def _rows(report) -> dict[str, tuple[str, str, str | None]]:
    return {c.name: (c.level, c.detail, c.fix) for c in report.checks}


def test_demo_recipe_passes_on_this_cpu_machine():
    res = runner.invoke(app, ["doctor", "--recipe", "demo", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["recipe"] == "demo" and doc["status"] in ("PASS", "WARN")
    names = {c["name"] for c in doc["checks"]}
    assert {"recipe", "disk", "LoadGen", "host memory", "workspace"} <= names
    assert all(c["status"] != "FAIL" for c in doc["checks"])


def test_gpu_recipe_without_nvml_fails_with_the_fix():
    res = runner.invoke(app, ["doctor", "--recipe", "nd-gb300-v6", "--json"])
    doc = json.loads(res.stdout)
    if doc["system"]["gpus"]:
        pytest.skip("this machine has GPUs")
    assert res.exit_code == 1
    gpu = next(c for c in doc["checks"] if c["name"] == "GPU")
    assert gpu["status"] == "FAIL" and "NVML" in gpu["detail"] and "nvidia-ml-py" in gpu["fix"]
    token = next(c for c in doc["checks"] if c["name"] == "HF token")
    assert token["status"] == "FAIL" and "hf auth login" in token["fix"]


def test_rich_view_matches_json_and_has_no_traceback():
    res = runner.invoke(app, ["doctor", "--recipe", "nd-h100-v5"])
    assert "Traceback" not in res.output
    assert "GPU" in res.output and "FAIL" in res.output and "repro doctor" in res.output


def test_unknown_recipe_is_one_line_naming_the_next_command():
    res = runner.invoke(app, ["doctor", "--recipe", "nd-a100-v4"])
    assert res.exit_code == 2
    assert "Unknown recipe 'nd-a100-v4'" in res.output and "repro recipes list" in res.output
    assert "Traceback" not in res.output


def test_undetectable_system_is_a_fail_row_pointing_to_recipe_option():
    res = runner.invoke(app, ["doctor", "--json"])
    doc = json.loads(res.stdout)
    if doc["recipe"]:
        pytest.skip("this machine maps to a recipe")
    assert res.exit_code == 1
    row = next(c for c in doc["checks"] if c["name"] == "recipe")
    assert row["status"] == "FAIL" and "--recipe" in row["fix"] and "not on Azure" in row["detail"]


def _hopper(n: int = 8) -> SystemInfo:
    return SystemInfo(
        "Standard_ND96isr_H100_v5",
        [GPU(i, "NVIDIA H100 80GB HBM3", f"GPU-{i}", 81559, "9.0") for i in range(n)],
        driver="550.90.07",
        cuda_driver="12.4",
    )


def test_nvfp4_recipe_on_hopper_fails_and_names_fp8_recipe(tmp_path):
    report = run_doctor("nd-gb300-v6", Workspace(tmp_path / "ws"), info=_hopper())
    rows = _rows(report)
    assert rows["GPU model"][0] == "FAIL" and "--recipe nd-h100-v5" in rows["GPU model"][2]
    level, detail, fix = rows["GPU architecture"]
    assert level == "FAIL" and "NVFP4 needs Blackwell" in detail and "FP8" in fix
    assert rows["driver/CUDA"][0] == "FAIL" and "12.8" in rows["driver/CUDA"][1]
    assert report.exit_code == 1


def test_matching_hopper_system_passes_gpu_checks_and_warns_on_count(tmp_path):
    rows = _rows(run_doctor("nd-h100-v5", Workspace(tmp_path / "ws"), info=_hopper()))
    assert rows["GPU model"][0] == rows["GPU architecture"][0] == rows["driver/CUDA"][0] == "PASS"
    assert rows["GPU count"][0] == "PASS"
    rows = _rows(run_doctor("nd-h100-v5", Workspace(tmp_path / "ws"), info=_hopper(4)))
    assert rows["GPU count"][0] == "WARN" and "--gpus 4" in rows["GPU count"][2]


def test_h100_nvl_is_not_the_sxm_recipes_gpu_and_the_other_way_round(tmp_path):
    """'H100' (nd-h100-v5) is inside 'NVIDIA H100 NVL': the model check names the recipe for the GPU it sees."""
    nvl = SystemInfo(
        "Standard_NC80adis_H100_v5", [GPU(i, "NVIDIA H100 NVL", f"GPU-{i}", 95830, "9.0") for i in range(2)]
    )
    rows = _rows(run_doctor("nd-h100-v5", Workspace(tmp_path / "ws"), info=nvl))
    assert rows["GPU model"][0] == "FAIL" and "--recipe nc-h100-v5" in rows["GPU model"][2]
    rows = _rows(run_doctor("nc-h100-v5", Workspace(tmp_path / "ws"), info=nvl))
    assert rows["recipe"][0] == rows["GPU model"][0] == rows["GPU count"][0] == "PASS"
    rows = _rows(run_doctor("nc-h100-v5", Workspace(tmp_path / "ws"), info=_hopper()))
    assert rows["GPU model"][0] == "FAIL" and "--recipe nd-h100-v5" in rows["GPU model"][2]
    rows = _rows(run_doctor("nd-gb300-v6", Workspace(tmp_path / "ws"), info=nvl))
    assert rows["GPU architecture"][0] == "FAIL" and "`--recipe nc-h100-v5`" in rows["GPU architecture"][2]


def test_disk_smaller_than_recipe_needs_fails(tmp_path):
    raw = yaml.safe_load((recipes_dir() / "demo.yaml").read_text())
    raw["name"], raw["disk_needed_gb"] = "huge-demo", 10**9
    path = tmp_path / "huge-demo.yaml"
    path.write_text(yaml.safe_dump(raw))
    res = runner.invoke(app, ["doctor", "--recipe", str(path), "--json"])
    assert res.exit_code == 1
    disk = next(c for c in json.loads(res.stdout)["checks"] if c["name"] == "disk")
    assert disk["status"] == "FAIL" and "1,000,000,000 GB" in disk["detail"]


def test_nvme_mount_detected_from_mounts_never_assumed(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/nvme0n1p1 / ext4 rw 0 0\n/dev/sda1 /mnt ext4 rw 0 0\n"
        "/dev/md127 /mnt/nvme xfs rw 0 0\n/dev/nvme0n1p15 /boot/efi vfat rw 0 0\n"
    )
    assert nvme_mounts(mounts) == [("/dev/md127", "/mnt/nvme")]
    gpu = get_recipe("nd-gb300-v6")
    off = check_nvme(gpu, Workspace(tmp_path / "ws"), mounts)
    assert off.level == "WARN" and "/mnt/nvme" in off.detail and "--workspace /mnt/nvme/repro" in off.fix
    on = check_nvme(gpu, Workspace(Path("/mnt/nvme/repro")), mounts)
    assert on.level == "PASS" and "/dev/md127" in on.detail
    none = tmp_path / "none"
    none.write_text("/dev/sda1 / ext4 rw 0 0\n")
    missing = check_nvme(gpu, Workspace(tmp_path / "ws"), none)
    assert missing.level == "WARN" and "no local NVMe" in missing.detail and "/mnt/nvme" in missing.fix


class _Hub(BaseHTTPRequestHandler):
    mode = "ok"
    auth: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        type(self).auth.append(self.headers.get("Authorization", ""))
        if self.path.endswith("/auth-check") and self.mode == "ok":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")
            return
        code, err = {"gated": (403, "GatedRepo"), "missing": (404, "RepoNotFound")}.get(self.mode, (500, ""))
        self.send_response(code)
        self.send_header("X-Error-Code", err)
        self.send_header("X-Error-Message", f"{err} for test")
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"error": err}).encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    "mode,level,needle",
    [("ok", "PASS", "readable"), ("gated", "FAIL", "request access"), ("missing", "FAIL", "hf auth whoami")],
)
def test_hf_token_and_model_access_against_local_hub(monkeypatch, mode, level, needle):
    handler = type("H", (_Hub,), {"mode": mode, "auth": []})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{srv.server_address[1]}")
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        checks = {c.name: c for c in check_hf(get_recipe("nd-h100-v5"))}
    finally:
        srv.shutdown()
        srv.server_close()
    assert checks["HF token"].level == "PASS"
    access = checks["model access"]
    assert access.level == level
    assert needle in (access.detail + " " + (access.fix or ""))
    assert handler.auth and handler.auth[0] == f"Bearer {TOKEN}"
    assert all(TOKEN not in (c.detail + str(c.fix)) for c in checks.values())


def test_token_never_printed_by_doctor(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    res = runner.invoke(app, ["doctor", "--recipe", "nd-h100-v5", "--json"])
    assert TOKEN not in res.output
    rows = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    assert rows["HF token"]["status"] == "PASS" and rows["model access"]["status"] == "WARN"


def test_docker_unreachable_is_fail_for_container_recipes(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    (engine,) = check_docker(get_recipe("nd-h100-v5"), timeout=1)
    assert engine.level == "FAIL" and "systemctl start docker" in engine.fix
    assert engine.detail == "not reachable: no Docker socket (the engine is not installed or not running)"
    (demo,) = check_docker(get_recipe("demo"), timeout=1)
    assert demo.level == "SKIP" and demo.detail == "not needed by recipe demo"


def test_demo_doctor_skips_what_it_does_not_check_and_shows_no_exception_text(monkeypatch, tmp_path):
    """Unchecked rows say SKIP with the reason, never PASS, and no client exception text leaks into a row."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    res = runner.invoke(app, ["doctor", "--recipe", "demo", "--json"])
    rows = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    skipped = {n for n, c in rows.items() if c["status"] == "SKIP"}
    assert {"GPU", "driver/CUDA", "Docker engine", "local NVMe", "Hugging Face"} <= skipped
    assert all("not needed" in rows[n]["detail"] for n in skipped)
    assert not any("Error" in c["detail"] or "(" in c["detail"] and "Errno" in c["detail"] for c in rows.values())


def test_docker_engine_reachable_reports_runtime():
    docker = pytest.importorskip("docker")
    try:
        docker.from_env(timeout=3).ping()
    except (docker.errors.DockerException, OSError):
        if required("REPRO_REQUIRE_DOCKER"):
            pytest.fail("REPRO_REQUIRE_DOCKER=1 but the Docker engine is not reachable")
        pytest.skip("Docker engine not running")
    checks = {c.name: c for c in check_docker(get_recipe("nd-h100-v5"))}
    assert checks["Docker engine"].level == "PASS"
    runtime = checks["NVIDIA container runtime"]
    assert runtime.level in ("PASS", "FAIL")
    if runtime.level == "FAIL":
        assert "nvidia-ctk" in runtime.fix


def test_corrupt_or_newer_ledger_is_fail_and_left_in_place(tmp_path):
    ws = Workspace(tmp_path / "ws")
    ws.root.mkdir(parents=True)
    ws.ledger_path.write_text("{not json")
    rows = _rows(run_doctor("demo", ws))
    assert rows["workspace"][0] == "FAIL" and "corrupt" in rows["workspace"][1]
    assert ws.ledger_path.read_text() == "{not json"
    ws.ledger_path.write_text(json.dumps({"schema_version": 99, "steps": {}}))
    rows = _rows(run_doctor("demo", ws))
    assert rows["workspace"][0] == "FAIL" and "newer repro" in rows["workspace"][1]


# ------------------------------------------------------------------ feasibility: servers x tp, weights + KV cache
def _standin_doctor(recipe: str, gpus: dict, tmp_path: Path) -> dict:
    """`repro doctor` in its own process over the rehearsal's stand-in NVML (repro/rehearse/standin/nvml)."""
    from helpers import cli_process

    from repro.rehearse.rehearsal import doctor_env, standin_gpus

    env = doctor_env(get_recipe(recipe))
    env["STANDIN_GPUS"] = json.dumps({**standin_gpus(get_recipe(recipe)), **gpus})
    proc = cli_process("doctor", "--recipe", recipe, "-w", str(tmp_path / "ws"), "--json", env=env)
    doc = json.loads(proc.stdout)
    assert proc.returncode == (1 if doc["status"] == "FAIL" else 0)
    return doc


def test_one_h100_for_the_tp2_x4_recipe_fails_with_the_server_arithmetic(tmp_path):
    """What a real 1 x H100 box got as a WARN: the recipe's 4 servers of tp_size 2 cannot start even one."""
    doc = _standin_doctor("nd-h100-v5", {"name": "NVIDIA H100 80GB HBM3", "count": 1, "memory_mib": 81559}, tmp_path)
    rows = {c["name"]: c for c in doc["checks"]}
    count = rows["GPU count"]
    assert doc["status"] == "FAIL" and count["status"] == "FAIL"
    assert count["detail"].startswith("1 GPU: each of the recipe's 4 servers needs tp_size 2 x pp_size 1 = 2 GPUs")
    assert "8 in all; not even one server fits" in count["detail"] and "1 GPUs" not in json.dumps(doc)
    assert "at least 2 of these GPUs" in count["fix"]
    mem = rows["GPU memory"]
    # 68,976,648,192 parameters (the llama2-70b benchmark file): the layers at 1 byte (fp8) over tp 2, the 32,000 x
    # 8,192 embedding at 2 bytes whole on each GPU and the lm_head at 2 bytes split over both: 34.23 + 0.52 + 0.26
    emb = 32000 * 8192
    want = ((68_976_648_192 - 2 * emb) / 2 + emb * 2 + emb) / 1e9
    assert f"weights {want:.1f} of 85.5 GB" in mem["detail"] and mem["data"]["weights_gb"] == round(want, 2)
    assert any(a.startswith("model: benchmark llama2-70b-99 ") for a in mem["data"]["assumptions"])


def test_two_of_four_servers_fit_is_a_warn_naming_the_per_gpu_comparison(tmp_path):
    doc = _standin_doctor("nd-h100-v5", {"count": 5}, tmp_path)
    count = next(c for c in doc["checks"] if c["name"] == "GPU count")
    assert count["status"] == "WARN" and "2 of 4 fit, on 4 GPUs" in count["detail"]
    assert "the per-GPU figure is what will be compared" in count["detail"] and "--gpus 4" in count["fix"]


def test_gpu_memory_sizes_the_kv_cache_from_the_benchmarks_model(tmp_path):
    """The llama2-70b benchmark file's architecture (80 layers, 8 KV heads, head dim 128): the KV cache per token is
    2 x 80 x 8 x 128 x 1 byte (FP8) / tp 2 = 81,920 bytes per GPU, shown with the pool and the full batch."""
    rows = _rows(run_doctor("nd-h100-v5", Workspace(tmp_path / "ws"), info=_hopper()))
    level, detail, fix = rows["GPU memory"]
    assert "KV 81.9 kB/token" in detail and "batch 896 at full length: 150 GB" in detail
    # Before setup a sequence is the benchmark file's mean prompt of the published set, 222 tokens, + the 294-token
    # reference output: 521,940 tokens of pool hold 1,010 of them, so the whole batch of 896 fits (624, the old
    # unsourced figure, held 568: a WARN that was not so).
    assert "mean prompt 222 from the benchmark file's mean of the published set" in detail, detail
    assert level == "PASS" and "the full batch of 896 fits" in detail, detail


def test_the_guided_flow_stops_at_the_one_gpu_fail_before_any_download(tmp_path):
    """`repro guide` on a 1 x H100 box (stand-in NVML) for nd-h100-v5: doctor FAILs on the server arithmetic and the
    flow stops there, before the 130 GB download and the engine build, naming doctor as the next command."""
    from helpers import cli_process

    from repro.rehearse.rehearsal import doctor_env, standin_gpus

    env = doctor_env(get_recipe("nd-h100-v5"))
    env["STANDIN_GPUS"] = json.dumps({**standin_gpus(get_recipe("nd-h100-v5")), "count": 1, "memory_mib": 81559})
    ws = tmp_path / "ws"
    proc = cli_process("guide", "--recipe", "nd-h100-v5", "--yes", "--workspace", str(ws), env=env)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 1, out[-2000:]
    assert "not even one server fits" in out and "repro doctor" in out
    assert not any((ws / "models").glob("*")) and not any((ws / "engines").glob("*"))


@pytest.mark.parametrize("tp,servers,level", [(8, 1, "PASS"), (4, 2, "FAIL")])
def test_405b_recipe_memory_from_its_benchmark(tmp_path, tp, servers, level):
    """A recipe file naming the llama3.1-405b benchmark on H100s (a user may write one): 405.85e9 FP8 parameters
    over tp 8 are 54.9 GB per 80 GB H100 with the 16-bit embedding and lm_head, with KV room; over tp 4 105.7 GB,
    which cannot load."""
    raw = yaml.safe_load((recipes_dir() / "nd-h100-v5.yaml").read_text())
    raw.update(name="h100-405b", benchmark="llama3.1-405b")
    raw["trtllm"].update(tp_size=tp, servers_per_vm=servers, gpu_batch_size=512)
    raw["trtllm"]["runtime_flags"]["max_seq_len"] = 20000
    path = tmp_path / "h100-405b.yaml"
    path.write_text(yaml.safe_dump(raw))
    rows = _rows(run_doctor(str(path), Workspace(tmp_path / "ws"), info=_hopper()))
    assert rows["GPU count"][0] == "PASS"
    mem_level, detail, fix = rows["GPU memory"]
    assert mem_level == level, detail
    emb = 128256 * 16384 / 1e9  # billions of embedding (and of lm_head) parameters, at 2 bytes each
    assert f"weights {(405.853388800 - 2 * emb) / tp + 2 * emb + 2 * emb / tp:,.1f} of 85.5 GB" in detail
    if level == "FAIL":
        assert "the weights alone do not fit" in detail and "tp_size" in fix


def test_doctor_counts_the_prepared_prompts_in_the_kv_arithmetic(tmp_path):
    """Before setup the prompts are not counted and doctor says so; once the dataset is prepared its input_lens.npy
    gives the mean prompt (synthetic ~10k-token prompts here) and doctor says how many sequences fit, per engine."""
    from helpers import write_prepared

    home = tmp_path / "repro-home"
    before = json.loads(runner.invoke(app, ["doctor", "--recipe", "nd-gb200-v6-405b", "--json"]).stdout)
    rows = {c["name"]: c for c in before["checks"]}
    assert "prompts not counted" in rows["GPU memory"]["detail"]
    assert set(rows) >= {"GPU memory", "GPU memory (Server engine)"}
    write_prepared(home / "preprocessed" / "mlperf-llama3.1-405b", 16, name="x", prompt_len=(9500, 10500), vocab=900)
    after = json.loads(runner.invoke(app, ["doctor", "--recipe", "nd-gb200-v6-405b", "--json"]).stdout)
    rows = {c["name"]: c for c in after["checks"]}
    for name in ("GPU memory", "GPU memory (Server engine)"):
        row = rows[name]
        assert row["status"] == "WARN" and "input_lens.npy" in row["detail"], row
        assert 150 < row["data"]["sequences_at_once"] < 190 and row["data"]["client_in_flight"] == 256
        assert "the published system had the same limit" in row["fix"]
    assert "TP4xPP1" in rows["GPU memory (Server engine)"]["detail"]
