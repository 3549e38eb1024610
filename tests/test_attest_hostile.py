"""`repro attest verify` as a hostile signer or a hostile bundle would try it (issue #44 item 2): a statement signed
with the trusted key still verifies only when every verdict field, re-derived now from files it lists and hashes,
is the attested one; no key from the checked folder is trusted; a --gpus override is shown; relative folders attest
honestly; a huge file is refused by its size, not hashed for hours.

Inputs are real published bundles (tests/fixtures/published) copied into tmp and edited; statements are signed
with securesystemslib through repro's own signing functions, as `repro attest` signs them.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import CLI, cli, copy_bundle, edit, one_line_error

from repro.results.attest import ATTESTATION_NAME

GB200 = "azure-nd-gb200-v6-v5.1"
ACC = "llama2-70b-99/Offline/accuracy/accuracy.txt"


def _failing(fixtures: Path, tmp: Path) -> Path:
    """Azure's GB200 bundle with its rouge1 below the target: `repro verify` says FAIL."""
    b = copy_bundle(fixtures, GB200, tmp / "bundle")
    edit(b / ACC, "'rouge1': 44.7494", "'rouge1': 40.1")
    assert json.loads(cli("verify", str(b), "--json").stdout)["status"] == "FAIL"
    return b


def _statement(path: Path) -> dict[str, Any]:
    return json.loads(base64.b64decode(json.loads(path.read_text())["payload"]))


def _sign(path: Path, statement: dict[str, Any], home: Path) -> None:
    """Sign `statement` with the workspace's own key, as the key's holder can."""
    from repro.core.signing import default_key_path, load_signer, sign_envelope

    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    envelope = sign_envelope(payload, "application/vnd.in-toto+json", load_signer(default_key_path(home)))
    path.write_text(json.dumps(envelope))


def _verify(att: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    res = cli("attest", "verify", str(att), *extra, "--json")
    text = cli("attest", "verify", str(att), *extra).output
    return res.exit_code, json.loads(res.stdout), text


FORGERIES = {
    "all_pass only": lambda st: {**st, "predicate": {**st["predicate"], "verdict": {"all_pass": True}}},
    "all_pass only, as a rack": lambda st: {
        **st,
        "predicate": {**st["predicate"], "kind": "rack", "verdict": {"all_pass": True}},
    },
    "status PASS": lambda st: {
        **st,
        "predicate": {**st["predicate"], "verdict": {**st["predicate"]["verdict"], "status": "PASS"}},
    },
    "PASS with no reasons": lambda st: {
        **st,
        "predicate": {
            **st["predicate"],
            "verdict": {**st["predicate"]["verdict"], "status": "PASS", "reasons": [], "reproduction": True},
        },
    },
    "no file listed": lambda st: {**st, "subject": []},
    "the accuracy file not listed": lambda st: {
        **st,
        "subject": [s for s in st["subject"] if "accuracy" not in s["name"]],
    },
    "everything excluded": lambda st: {**st, "predicate": {**st["predicate"], "excluded": ["llama2-70b-99"]}},
    "core fields dropped": lambda st: {
        **st,
        "predicate": {
            **st["predicate"],
            "verdict": {k: v for k, v in st["predicate"]["verdict"].items() if k not in ("status", "checks")},
        },
    },
    "an older repro's name": lambda st: {
        **st,
        "predicate": {**st["predicate"], "repro_version": "0.0.1", "verdict": {"status": "PASS"}},
    },
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_statement_signed_with_the_trusted_key_is_verified_only_by_the_files(
    fixtures: Path, tmp_path: Path, _isolated_home: Path, forgery: str
) -> None:
    bundle = _failing(fixtures, tmp_path)
    assert cli("attest", str(bundle)).exit_code == 0
    att = bundle / ATTESTATION_NAME
    _sign(att, FORGERIES[forgery](_statement(att)), _isolated_home)
    code, doc, text = _verify(att)
    assert code == 1 and doc["verified"] is False and doc["differences"], doc
    assert doc["verdict_now"] == "FAIL" and "Verified" not in text.replace("Not verified", ""), text


def test_files_changed_after_signing_and_re_signed_over_a_pass(
    fixtures: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    """A genuine PASS attestation; then the accuracy is edited to fail and the statement re-signed with the new
    hashes but the old verdict: the files are "unchanged", the verdict re-derived from them is FAIL."""
    bundle = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    assert cli("attest", str(bundle)).exit_code == 0
    att = bundle / ATTESTATION_NAME
    assert _verify(att)[0] == 0
    edit(bundle / ACC, "'rouge1': 44.7494", "'rouge1': 40.1")
    import hashlib

    st = _statement(att)
    for s in st["subject"]:
        s["digest"]["sha256"] = hashlib.sha256((bundle / s["name"]).read_bytes()).hexdigest()
    _sign(att, st, _isolated_home)
    code, doc, _ = _verify(att)
    assert code == 1 and doc["verdict_now"] == "FAIL" and doc["attested_verdict"] == "PASS"
    assert any(d.startswith('verdict.status: attested "PASS", now "FAIL"') for d in doc["differences"]), doc


def test_a_key_shipped_in_the_checked_folder_is_never_trusted(fixtures: Path, tmp_path: Path) -> None:
    """A bundle that carries its own repro-workspace/keys (the signer's key beside the logs): run inside it without
    --key, verify refuses to call anything verified; with --key the same file is the user's choice, and named."""
    bundle = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    env = {**os.environ, "REPRO_HOME": "", "COLUMNS": "200"}
    env.pop("REPRO_HOME")
    made = subprocess.run([*CLI, "attest", "."], cwd=bundle, env=env, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    assert (bundle / "repro-workspace" / "keys" / "attest-ed25519.pem.pub").is_file()
    for where in (bundle, bundle / "llama2-70b-99"):
        proc = subprocess.run(
            [*CLI, "attest", "verify", str(bundle / ATTESTATION_NAME)],
            cwd=bundle if where == bundle else where,
            env={**env, "REPRO_HOME": str(bundle / "repro-workspace")} if where != bundle else env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        err = one_line_error(proc, 2)
        assert "inside the folder being checked" in err and "proves nothing" in err, err
        assert "Verified" not in proc.stdout
    pub = bundle / "repro-workspace" / "keys" / "attest-ed25519.pem.pub"
    res = cli("attest", "verify", str(bundle / ATTESTATION_NAME), "--key", str(pub), "--json")
    doc = json.loads(res.stdout)
    assert doc["trusted_key"] == str(pub) and doc["trusted_key_origin"] == "given with --key"


def test_verified_names_the_key_it_trusted(fixtures: Path, tmp_path: Path, _isolated_home: Path) -> None:
    bundle = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    assert cli("attest", str(bundle)).exit_code == 0
    code, doc, text = _verify(bundle / ATTESTATION_NAME)
    pub = _isolated_home / "keys" / "attest-ed25519.pem.pub"
    assert code == 0 and doc["verified"] and doc["trusted_key"] == str(pub)
    assert doc["trusted_key_origin"] == "this workspace's own key" and doc["verdict_now"] == "PASS"
    flat = " ".join(text.split())
    assert f"signed by key {doc['signed_by'][:16]} ({pub}, trusted as this workspace's own key)" in flat, flat
    assert "gives PASS again, as attested" in flat


@pytest.mark.parametrize("gpus", ["2", "8"])
def test_a_gpus_override_is_in_the_statement_and_in_what_verify_prints(
    fixtures: Path, tmp_path: Path, gpus: str
) -> None:
    bundle = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    made = cli("attest", str(bundle), "--gpus", gpus, "--json")
    assert made.exit_code == 0 and json.loads(made.stdout)["status"] != "PASS"
    verdict = _statement(bundle / ATTESTATION_NAME)["predicate"]["verdict"]
    assert verdict["gpus_override"] == {
        "gpus": int(gpus),
        "files_give": 4,
        "contradicts": ["system JSON ND_GB200_v6.json: 4 per node gives 4"],
    }
    assert verdict["reasons"][0].startswith(f"--gpus {gpus} contradicts the run's own files")
    code, doc, text = _verify(bundle / ATTESTATION_NAME)
    assert code == 0 and doc["verify_inputs"]["gpus"] == int(gpus) and doc["verdict_now"] != "PASS"
    flat = " ".join(text.split())
    assert f"repro verify --gpus {gpus}" in flat and f"--gpus {gpus} was given when attesting" in flat
    assert "the run's files contradict it (system JSON ND_GB200_v6.json: 4 per node gives 4)" in flat


@pytest.mark.parametrize(
    ("inside", "name"),
    [("llama2-70b-99", "Offline"), ("llama2-70b-99/Offline", "."), ("", "run"), ("llama2-70b-99/Offline", "..")],
)
def test_a_relative_folder_attests_honestly(fixtures: Path, tmp_path: Path, inside: str, name: str) -> None:
    """Attested from a relative name (`Offline`, `.`, `run`, `..`): the statement names no part of the folder's
    path as a word, and attest verify accepts it from any folder."""
    root = tmp_path / "w"
    bundle = copy_bundle(fixtures, GB200, root / "run")
    cwd = bundle / inside if inside else root
    env = {**os.environ, "COLUMNS": "200"}
    made = subprocess.run([*CLI, "attest", name], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    target = (cwd / name).resolve()
    att = target / ATTESTATION_NAME
    verdict = _statement(att)["predicate"]["verdict"]
    assert verdict["scenario"] == "Offline" and "RUN_DIR" not in json.dumps(verdict["scenario"])
    assert str(tmp_path) not in json.dumps(verdict), "an absolute path of the attesting machine in the statement"
    verifies = [  # independent processes, one per folder, started at once
        subprocess.Popen(
            [*CLI, "attest", "verify", str(att), "--json"],
            cwd=where,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for where in (cwd, tmp_path, target)
    ]
    for proc in verifies:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-2000:] + err[-2000:]
    moved = tmp_path / "moved" / "elsewhere"  # the whole bundle elsewhere: a VM's system JSON may sit above it
    shutil.copytree(bundle, moved)
    again = moved / target.relative_to(bundle.resolve()) / ATTESTATION_NAME if target != bundle.resolve() else None
    assert cli("attest", "verify", str(again or moved / ATTESTATION_NAME)).exit_code == 0


@pytest.mark.parametrize("size_gib", [5, 40])
def test_a_huge_sparse_file_is_refused_by_its_size(
    fixtures: Path, tmp_path: Path, _isolated_home: Path, size_gib: int
) -> None:
    bundle = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    assert cli("attest", str(bundle)).exit_code == 0
    huge = bundle / "llama2-70b-99" / "Offline" / "performance" / "run_1" / "mlperf_log_trace.json"
    with huge.open("wb") as fh:
        fh.truncate(size_gib << 30)  # sparse: no block written
    for argv in (["attest", str(bundle)], ["attest", "verify", str(bundle / ATTESTATION_NAME)]):
        proc = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=120, env={**os.environ})
        err = one_line_error(proc, 2)
        assert str(huge) in err and f"{size_gib:,.1f} GiB, more than the 4 GiB" in err, err
