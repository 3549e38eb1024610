"""System detection against a real local HTTP server standing in for Azure IMDS."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from repro.core.errors import RecipeError
from repro.core.systems import GPU, SystemInfo, detect_system, imds_vm_size, match_recipe, nvml_gpus, select_recipe


class _IMDS(BaseHTTPRequestHandler):
    body: bytes = b""
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802
        type(self).seen.append({"path": self.path, "metadata": self.headers.get("Metadata", "")})
        if self.headers.get("Metadata") != "true":
            self.send_response(400)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def imds():
    servers = []

    def start(doc: dict | str) -> str:
        handler = type("H", (_IMDS,), {"body": (doc if isinstance(doc, str) else json.dumps(doc)).encode(), "seen": []})
        srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        start.handler = handler
        return f"http://127.0.0.1:{srv.server_address[1]}/metadata/instance?api-version=2021-02-01"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_imds_reads_vm_size_with_metadata_header(imds):
    url = imds({"compute": {"vmSize": "Standard_ND128isr_GB300_v6", "location": "eastus"}})
    assert imds_vm_size(url) == ("Standard_ND128isr_GB300_v6", None)
    assert imds.handler.seen[0]["metadata"] == "true"
    assert imds.handler.seen[0]["path"].startswith("/metadata/instance")


def test_imds_env_url_is_used_by_detect_system(imds, monkeypatch):
    monkeypatch.setenv("REPRO_IMDS_URL", imds({"compute": {"vmSize": "Standard_ND96isr_H100_v5"}}))
    info = detect_system()
    assert info.vm_size == "Standard_ND96isr_H100_v5"
    recipe, why = select_recipe(info)
    assert recipe.name == "nd-h100-v5" and "Standard_ND96isr_H100_v5" in why


def test_imds_answer_without_vm_size_is_an_error_not_a_crash(imds):
    vm, err = imds_vm_size(imds({"compute": {}}))
    assert vm is None and "KeyError" in err
    vm, err = imds_vm_size(imds("<html>captive portal</html>"))
    assert vm is None and err


def test_imds_that_hangs_times_out_quickly():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    try:
        t0 = time.monotonic()
        vm, err = imds_vm_size(f"http://127.0.0.1:{listener.getsockname()[1]}/metadata/instance", timeout=0.5)
        elapsed = time.monotonic() - t0
        assert vm is None and "timed out" in err.lower()
        assert elapsed < 5, "the default flow must not wait long on a silent endpoint"
    finally:
        for conn, _ in accepted:
            conn.close()
        listener.close()


def test_nvml_missing_is_reported_not_raised():
    gpus, driver, cuda, err = nvml_gpus()
    if gpus:
        pytest.skip("this machine has NVIDIA GPUs")
    assert driver is None and cuda is None and err.startswith("NVML")


def test_gpu_arch_from_compute_capability():
    assert GPU(0, "NVIDIA GB300", "u", 1, "10.3").arch == "sm_103"
    assert GPU(0, "NVIDIA H100 80GB HBM3", "u", 1, "9.0").arch == "sm_90"
    assert GPU(0, "x", "u", 1, None).arch is None
    assert SystemInfo(None, [GPU(0, "NVIDIA GB200", "u", 1, "10.0")]).to_json()["gpus"][0]["arch"] == "sm_100"


def test_gpu_names_map_through_the_registry_off_azure():
    info = SystemInfo(None, [GPU(i, "NVIDIA H200", f"u{i}", 143771, "9.0") for i in range(8)], imds_error="timed out")
    recipe, why = select_recipe(info)
    assert recipe.name == "nd-h200-v5"
    assert "not on Azure" in why and "NVIDIA H200" in why


@pytest.mark.parametrize(
    "name,count,recipe",
    [("NVIDIA H100 NVL", 2, "nc-h100-v5"), ("NVIDIA H100 80GB HBM3", 8, "nd-h100-v5")],
)
def test_h100_nvl_and_h100_sxm_resolve_to_their_own_recipes_off_azure(name: str, count: int, recipe: str) -> None:
    info = SystemInfo(None, [GPU(i, name, f"u{i}", 95830, "9.0") for i in range(count)], imds_error="timed out")
    assert select_recipe(info)[0].name == recipe
    assert select_recipe(SystemInfo("Standard_NC80adis_H100_v5", info.gpus))[0].name == "nc-h100-v5"


def test_unknown_vm_size_falls_back_to_gpu_name():
    info = SystemInfo("Standard_ND96amsr_A100_v4", [GPU(0, "NVIDIA GB200", "u", 1, "10.0")] * 4)
    recipe, why = select_recipe(info)
    assert recipe.name == "nd-gb200-v6" and "unknown VM size" in why


def test_unknown_hardware_says_so_and_points_to_recipe_option():
    info = SystemInfo("Standard_D2s_v5", [GPU(0, "NVIDIA A10", "u", 1, "8.6")])
    assert match_recipe(info)[0] is None
    with pytest.raises(RecipeError) as exc:
        select_recipe(info)
    assert "Standard_D2s_v5" in exc.value.message and "NVIDIA A10" in exc.value.message
    assert "--recipe NAME" in exc.value.message and exc.value.next_command == "repro recipes list"


def test_off_azure_without_gpu_names_both_reasons():
    with pytest.raises(RecipeError) as exc:
        select_recipe(SystemInfo(None, imds_error="URLError: refused", nvml_error="NVML unavailable: no lib"))
    assert "not on Azure" in exc.value.message and "NVML unavailable" in exc.value.message


def test_explicit_recipe_wins_and_unknown_name_is_rejected():
    info = SystemInfo("Standard_ND96isr_H100_v5")
    assert select_recipe(info, "demo")[0].name == "demo"
    with pytest.raises(RecipeError) as exc:
        select_recipe(info, "nd-a100")
    assert "Unknown recipe 'nd-a100'" in exc.value.message


def test_a_demo_in_the_ledger_does_not_outrank_detected_gpus(imds, monkeypatch: pytest.MonkeyPatch) -> None:
    """README command 1 records the demo; on the GPU VM, `repro setup` and `run` must plan the VM's recipe."""
    from typer.testing import CliRunner

    from repro.cli import app
    from repro.core.ledger import Ledger
    from repro.core.recipes import get_recipe
    from repro.core.systems import DEMO_OUTRANKED, resolve_recipe
    from repro.core.workspace import Workspace

    ws = Workspace.open()
    ws.ensure()
    led = Ledger.load(ws.ledger_path)
    led.start("run-offline", get_recipe("demo").hash(), recipe="demo")
    led.finish("run-offline", [])
    assert resolve_recipe(None, ws, info=SystemInfo(None))[0].name == "demo"  # no GPU here: the demo it is
    chosen, why = resolve_recipe(None, ws, info=SystemInfo("Standard_ND128isr_NDR_GB200_v6"))
    assert chosen.name == "nd-gb200-v6" and DEMO_OUTRANKED in why and "Standard_ND128isr_NDR_GB200_v6" in why
    monkeypatch.setenv("REPRO_IMDS_URL", imds({"compute": {"vmSize": "Standard_ND128isr_GB300_v6"}}))
    res = CliRunner().invoke(app, ["setup", "--dry-run", "--json"])
    assert json.loads(res.stdout)["details"]["recipe"] == "nd-gb300-v6", res.output
    assert "Recipe nd-gb300-v6: detected Azure VM size Standard_ND128isr_GB300_v6" in res.stderr
