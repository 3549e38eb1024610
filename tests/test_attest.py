"""`repro attest` and `repro attest verify` (issue #38): a signed run verifies offline; every tampering is refused
with its reason (exit 1), an unreadable attestation is exit 2, and verifying writes nothing."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from helpers import cli, cli_process, copy_bundle, one_line_error, write_prepared

from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.results.attest import ATTESTATION_NAME
from repro.run.harness import run_benchmark
from repro.run.options import RunOptions

RECIPE = "nd-h100-v5"
CISCO = "v5.1_Cisco_HGX-H100_H100-SXM-80GBx32_TRT_llama2-70b-99_Offline"


def _sim_run(ws: Workspace) -> Path:
    """A real repro run (LoadGen, the sim backend: fast) with its accuracy run: run.json, logs, accuracy.txt."""
    perf = run_benchmark(RunOptions.build(RECIPE, ws, backend="sim", samples=16, detect=False))
    run_benchmark(RunOptions.build(RECIPE, ws, backend="sim", accuracy=True, detect=False))
    return Path(perf.details["run_dir"])


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    home = tmp_path_factory.mktemp("attest-runs")
    old = os.environ.get("REPRO_HOME")
    os.environ["REPRO_HOME"] = str(home)
    try:
        ws = Workspace.open().ensure()
        write_prepared(
            ws.preprocessed / get_recipe(RECIPE).dataset.name,
            16,
            name="mlperf-openorca",
            seed=6,
            prompt_len=(8, 48),
            out_len=(5, 60),
        )
        first = _sim_run(ws)
        second = _sim_run(ws)
    finally:
        if old is None:
            os.environ.pop("REPRO_HOME", None)
        else:
            os.environ["REPRO_HOME"] = old
    assert first != second
    return [first, second]


@pytest.fixture
def run(two_runs: list[Path], tmp_path: Path) -> Path:
    """A writable copy of the first run, attested with the test's workspace key (generated here)."""
    dst = tmp_path / two_runs[0].name
    shutil.copytree(two_runs[0], dst)
    res = cli("attest", str(dst))
    assert res.exit_code == 0, res.output
    return dst


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _verify(run: Path, *extra: str) -> tuple[int, dict]:
    before = _tree(run)
    res = cli("attest", "verify", str(run / ATTESTATION_NAME), *extra, "--json")
    assert _tree(run) == before, "attest verify wrote or changed a file"
    return res.exit_code, json.loads(res.stdout)


def test_attest_then_verify_passes_and_the_key_is_private(run: Path, _isolated_home: Path) -> None:
    key = _isolated_home / "keys" / "attest-ed25519.pem"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and (key.parent / (key.name + ".pub")).is_file()
    code, doc = _verify(run)
    assert code == 0 and doc["verified"] is True and doc["differences"] == [], doc
    assert doc["subjects_checked"] == len(_tree(run)) - 1  # every file but the attestation itself
    envelope = json.loads((run / ATTESTATION_NAME).read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    predicate = statement["predicate"]
    assert predicate["verdict"]["status"] == doc["attested_verdict"]
    assert predicate["software"]["container_image"]["digest"] == "unknown"  # a sim run names no image digest
    assert predicate["files"]["recipe"]["name"] == RECIPE and len(predicate["files"]["recipe"]["sha256"]) == 64
    secret = key.read_text().split("-----")[2].strip()
    again = cli("attest", str(run))
    assert secret not in again.output and "PRIVATE KEY" not in again.output


def test_verify_from_another_folder_with_logs(run: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(run, moved)
    attestation = tmp_path / "att.json"
    shutil.copy(run / ATTESTATION_NAME, attestation)
    (moved / ATTESTATION_NAME).unlink()
    res = cli("attest", "verify", str(attestation), "--logs", str(moved), "--json")
    assert res.exit_code == 0, res.output


def _failed(run: Path, *extra: str) -> list[str]:
    code, doc = _verify(run, *extra)
    assert code == 1 and doc["verified"] is False, doc
    return doc["differences"]


def test_one_byte_of_a_log_edited(run: Path) -> None:
    log = run / "performance" / "run_1" / "mlperf_log_detail.txt"
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0x01
    log.write_bytes(bytes(data))
    diffs = _failed(run)
    assert any(d.startswith("performance/run_1/mlperf_log_detail.txt: changed since it was attested") for d in diffs)


def test_tokens_edited_in_the_summary_names_the_verdict_fields(run: Path) -> None:
    summary = run / "performance" / "run_1" / "mlperf_log_summary.txt"
    text = summary.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("Tokens per second"))
    summary.write_text(text.replace(line, "Tokens per second: 99999999.0"))
    diffs = _failed(run)
    assert any("mlperf_log_summary.txt: changed" in d for d in diffs)
    assert any(d.startswith("verdict.tokens_per_s: attested ") and d.endswith("now 99999999.0") for d in diffs), diffs


def test_accuracy_txt_swapped_for_another_runs(fixtures: Path, tmp_path: Path) -> None:
    """Published logs with their accuracy.txt: another submission's accuracy.txt put in its place."""
    run = copy_bundle(fixtures, CISCO, tmp_path / "cisco")
    assert cli("attest", str(run)).exit_code == 0
    other = fixtures / "azure-nd-gb200-v6-v5.1" / "llama2-70b-99" / "Offline" / "accuracy" / "accuracy.txt"
    shutil.copy(other, run / "accuracy" / "accuracy.txt")
    diffs = _failed(run)
    assert any(d.startswith("accuracy/accuracy.txt: changed") for d in diffs), diffs
    assert any(d.startswith("verdict.accuracy") or d.startswith("verdict.checks") for d in diffs), diffs


def test_run_json_edited(run: Path) -> None:
    path = run / "performance" / "run_1" / "run.json"
    doc = json.loads(path.read_text())
    doc["vm_size"] = "Standard_ND96isr_H100_v5"
    path.write_text(json.dumps(doc))
    assert any(d.startswith("performance/run_1/run.json: changed") for d in _failed(run))


def test_a_file_removed(run: Path) -> None:
    (run / "accuracy" / "mlperf_log_detail.txt").unlink()
    diffs = _failed(run)
    assert "accuracy/mlperf_log_detail.txt: attested, now missing" in diffs


def test_a_file_added(run: Path) -> None:
    (run / "performance" / "run_1" / "notes.txt").write_text("added later\n")
    assert "performance/run_1/notes.txt: not in the attestation (added after it was signed)" in _failed(run)


def _other_key(tmp_path: Path) -> Path:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    path = tmp_path / "other.pem"
    key = Ed25519PrivateKey.generate()
    path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    return path


def test_verified_against_another_key(run: Path, tmp_path: Path) -> None:
    diffs = _failed(run, "--key", str(_other_key(tmp_path)))
    assert len(diffs) == 1 and diffs[0].startswith("signature: signed by key ") and "not by the trusted key" in diffs[0]


def test_re_signed_by_another_key(run: Path, tmp_path: Path) -> None:
    """Someone edits the verdict and signs it with their own key: the workspace's key does not accept it."""
    other = _other_key(tmp_path)
    envelope = json.loads((run / ATTESTATION_NAME).read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["verdict"]["status"] = "PASS"
    from repro.core.signing import load_signer, sign_envelope

    forged = sign_envelope(json.dumps(statement).encode(), envelope["payloadType"], load_signer(other))
    (run / ATTESTATION_NAME).write_text(json.dumps(forged))
    diffs = _failed(run)
    assert diffs[0].startswith("signature: signed by key ") and len(diffs) == 1


def test_payload_edited_under_the_same_signature(run: Path) -> None:
    envelope = json.loads((run / ATTESTATION_NAME).read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["verdict"]["status"] = "PASS"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    (run / ATTESTATION_NAME).write_text(json.dumps(envelope))
    diffs = _failed(run)
    assert diffs == [diffs[0]] and "does not match the content: the attestation was edited" in diffs[0]


def test_another_runs_attestation(run: Path, two_runs: list[Path], tmp_path: Path) -> None:
    second = tmp_path / two_runs[1].name
    shutil.copytree(two_runs[1], second)
    shutil.copy(run / ATTESTATION_NAME, second / ATTESTATION_NAME)
    diffs = _failed(second)
    started = [json.loads((r / "performance/run_1/run.json").read_text())["started"] for r in (run, second)]
    assert diffs[0] == (
        f"this attestation is of another run ({run.name}, started {started[0]}), not of {second.name} "
        f"(started {started[1]})"
    )
    assert any("run.json: changed" in d for d in diffs)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "truncated"),
        (b"", "not a readable attestation"),
        (b"[1, 2]", "not a DSSE envelope"),
        (b'{"payload": "!!", "payloadType": "x", "signatures": []}', "malformed DSSE envelope"),
    ],
)
def test_unreadable_attestation_is_exit_2(run: Path, content: bytes | None, why: str) -> None:
    path = run / ATTESTATION_NAME
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if content is None else content)
    before = _tree(run)
    proc = cli_process("attest", "verify", str(path))
    err = one_line_error(proc, 2)
    assert why in err and str(path) in err
    assert _tree(run) == before


def test_no_trusted_key_is_exit_2(run: Path, _isolated_home: Path) -> None:
    shutil.rmtree(_isolated_home / "keys")
    err = one_line_error(cli_process("attest", "verify", str(run / ATTESTATION_NAME)), 2)
    assert "no key to check the signature with" in err and "--key" in err


def test_dry_run_and_a_bad_folder_write_nothing(two_runs: list[Path], tmp_path: Path, _isolated_home: Path) -> None:
    dst = tmp_path / "copy"
    shutil.copytree(two_runs[0], dst)
    res = cli("attest", str(dst), "--dry-run", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["written"] is False
    assert not (dst / ATTESTATION_NAME).exists() and not (_isolated_home / "keys").exists()
    err = one_line_error(cli_process("attest", str(tmp_path / "nope")), 2)
    assert "no such file or folder" in err and not (_isolated_home / "keys").exists()


def test_published_run_and_rack(fixtures: Path, tmp_path: Path) -> None:
    """Real published logs: a single run verifies; a rack attests each VM and the aggregate, and an edited VM
    log fails both that VM's attestation and the rack's."""
    single = copy_bundle(fixtures, CISCO, tmp_path / "cisco")
    assert cli("attest", str(single)).exit_code == 0
    assert cli("attest", "verify", str(single / ATTESTATION_NAME)).exit_code == 0
    rack = copy_bundle(fixtures, "azure-nd-gb300-v6-rack", tmp_path / "rack")
    res = cli("attest", str(rack), "--json")
    doc = json.loads(res.stdout)
    assert doc["kind"] == "rack" and len(doc["vms"]) == 3 and all(Path(v["attestation"]).is_file() for v in doc["vms"])
    code, ok = _verify(rack)
    assert code == 0 and [v["verified"] for v in ok["vms"]] == [True, True, True], ok
    log = next(rack.glob("ND_GB300_v6_4/**/mlperf_log_summary.txt"))
    log.write_text(log.read_text().replace("Result is : VALID", "Result is : INVALID"))
    code, bad = _verify(rack)
    assert code == 1
    assert any(
        d.startswith("ND_GB300_v6_4/llama2-70b-99/Offline/mlperf_log_summary.txt: changed") for d in bad["differences"]
    )
    assert [v["verified"] for v in bad["vms"]].count(False) == 1


@pytest.mark.slow
def test_the_demo_run_attests_and_verifies(tmp_path: Path) -> None:
    """The issue's done-when: `repro run offline --recipe demo`, `repro attest`, `repro attest verify`."""
    run = cli_process("run", "offline", "--recipe", "demo", "--json", timeout=600)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    run_dir = Path(json.loads(run.stdout)["details"]["run_dir"])
    made = cli("attest", str(run_dir))  # the run is the whole process; attest and verify run in this one
    assert made.exit_code == 0 and "generated an Ed25519 key" in made.stdout, made.output
    checked = cli("attest", "verify", str(run_dir / ATTESTATION_NAME), "--json")
    doc = json.loads(checked.stdout)
    assert checked.exit_code == 0 and doc["verified"] and doc["label"] == "demo", doc


class _StandInNvml:
    """pynvml's functions as NVML answers them for one GPU (this machine has no NVML; the names are the real
    module's, checked below): ECC on, MIG off with a change to on pending, no application clocks (not supported)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def __init__(self) -> None:
        import pynvml

        for name in ("nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetEccMode", "nvmlDeviceGetMigMode"):
            assert hasattr(pynvml, name), name
        self.NVMLError = pynvml.NVMLError

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return 700000

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return 650000

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        return {1: 1980, 2: 2619}[clock]

    def nvmlDeviceGetApplicationsClock(self, h: int, clock: int) -> int:
        raise self.NVMLError(3)  # NVML_ERROR_NOT_SUPPORTED

    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]:
        return 1, 1

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        return 0, 1


def test_nvml_details_reach_run_json_provenance_and_the_predicate(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from repro.core.provenance import nvml_gpu_details
    from repro.core.record import RunRecord
    from repro.results.attest import _gpus

    monkeypatch.setitem(sys.modules, "pynvml", _StandInNvml())
    details = nvml_gpu_details()
    assert details == [
        {
            "index": 0,
            "power_limit_w": 700.0,
            "enforced_power_limit_w": 650.0,
            "sm_clock_max_mhz": 1980,
            "mem_clock_max_mhz": 2619,
            "app_sm_clock_mhz": "unknown",
            "app_mem_clock_mhz": "unknown",
            "ecc_mode": "enabled",
            "mig_mode": "disabled (pending enabled)",
        }
    ]
    record = RunRecord.parse(
        {
            "provenance": {
                "gpus": {"count": 1, "names": ["NVIDIA H100 80GB HBM3"], "uuids": ["GPU-1"], "details": details}
            },
            "probe": {"hbm_gb_s": 3000.5},
        }
    )
    pred = _gpus(record)
    assert pred["devices"][0]["uuid"] == "GPU-1" and pred["devices"][0]["power_limit_w"] == 700.0
    assert pred["devices"][0]["app_sm_clock_mhz"] == "unknown" and pred["devices"][0]["mig_mode"].startswith("disabled")
    from repro.results.attest import _gpu_probe

    assert _gpu_probe(record) == {"hbm_gb_s": 3000.5}


def test_compare_fails_on_a_changed_value_and_notes_what_only_one_side_reports() -> None:
    """A newer repro's verify may report more: a key or a check only one side has is a note, never a failure;
    a value both hold that differs is a difference, checks matched by name (an added check shifts no index)."""
    from repro.results.attest_verify import compare

    attested = {"status": "PASS", "checks": [{"name": "a", "ok": True}, {"name": "b", "ok": True}], "old": 1}
    now = {
        "status": "PASS",
        "checks": [{"name": "new", "ok": None}, {"name": "a", "ok": True}, {"name": "b", "ok": True}],
        "extra": "met",
    }
    diffs, notes = compare(attested, now)
    assert diffs == [] and len(notes) == 3
    assert any(n.startswith("verdict.checks.new: not attested") for n in notes)
    assert any(n.startswith("verdict.extra: not attested") for n in notes)
    assert any(n.startswith("verdict.old: attested 1; this repro's verify does not report it") for n in notes)
    strict, none = compare(attested, now, strict=True)  # the same repro signed: every field must match (#44 item 2)
    assert none == [] and len(strict) == 3 and all("attested" in d for d in strict)
    now["checks"][2]["ok"] = False
    now["status"] = "FAIL"
    diffs, _ = compare(attested, now)
    assert diffs == ["verdict.checks.b.ok: attested true, now false", 'verdict.status: attested "PASS", now "FAIL"']


def test_a_link_is_refused_by_attest_and_a_difference_for_verify(run: Path, tmp_path: Path) -> None:
    log = run / "performance" / "run_1" / "mlperf_log_detail.txt"
    outside = tmp_path / "outside.txt"
    shutil.copy(log, outside)
    log.unlink()
    log.symlink_to(outside)  # same bytes, but through a link out of the folder
    diffs = _failed(run)
    assert "performance/run_1/mlperf_log_detail.txt: not a regular file (a link, FIFO or device)" in diffs
    assert "performance/run_1/mlperf_log_detail.txt: attested, now missing" in diffs
    err = one_line_error(cli_process("attest", str(run)), 2)
    assert "mlperf_log_detail.txt: not a regular file" in err


def test_verify_refuses_the_options_that_only_attesting_takes(run: Path) -> None:
    err = one_line_error(cli_process("attest", "verify", str(run / ATTESTATION_NAME), "--recipe", "demo"), 2)
    assert "--recipe is for `repro attest RUN_DIR`" in err
