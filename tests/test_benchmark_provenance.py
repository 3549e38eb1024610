"""Issue #44 item 4: a benchmark file in $REPRO_BENCHMARKS_PATH that shadows a shipped one changes the targets, so
it is part of what a result was judged by: verify, explain and attest name the file, its sha256 and the shipped
file it shadows, and attest hashes the file actually used (it recorded the shipped file's hash). A multi-node
system is priced per node (an NVL72 rack is 18 VMs, not one)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from helpers import cli, copy_bundle

from repro.core.benchmarks import SHIPPED
from repro.results.attest import ATTESTATION_NAME

GB200 = "azure-nd-gb200-v6-v5.1"


@pytest.fixture
def shadow(tmp_path: Path) -> Path:
    """llama2-70b-99.yaml with its accuracy factor lowered from 0.99 to 0.5: other targets, the same name."""
    folder = tmp_path / "my-benchmarks"
    folder.mkdir()
    text = (SHIPPED / "llama2-70b-99.yaml").read_text(encoding="utf-8")
    assert "  factor: 0.99\n" in text
    path = folder / "llama2-70b-99.yaml"
    path.write_text(text.replace("  factor: 0.99\n", "  factor: 0.5\n", 1), encoding="utf-8")
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_verify_names_the_shadowing_file_and_its_hash(fixtures: Path, shadow: Path, tmp_path: Path) -> None:
    run = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    plain = json.loads(cli("verify", str(run), "--json").stdout)
    assert plain["status"] == "PASS" and plain["benchmark_file"] is None  # the shipped file's targets
    assert not [n for n in plain["notes"] if "shadows" in n]
    env = {"REPRO_BENCHMARKS_PATH": str(shadow.parent)}
    res = cli("verify", str(run), "--json", env=env)
    doc = json.loads(res.stdout)
    assert doc["benchmark_file"] == {
        "name": "llama2-70b-99",
        "path": str(shadow),
        "sha256": _sha(shadow),
        "shipped": False,
        "shadows": str(SHIPPED / "llama2-70b-99.yaml"),
        "module": None,
        "module_sha256": None,
    }
    note = (
        f"benchmark llama2-70b-99: targets from {shadow} (sha256 {_sha(shadow)[:12]}…, via $REPRO_BENCHMARKS_PATH), "
        f"which shadows the shipped {SHIPPED / 'llama2-70b-99.yaml'}"
    )
    assert note in doc["notes"]
    text = cli("verify", str(run), env={**env, "COLUMNS": "300"}).stdout
    assert "which shadows the shipped" in text and str(shadow) in text


def test_a_new_benchmark_file_is_named_as_not_shipped(fixtures: Path, tmp_path: Path) -> None:
    """A recipe naming a benchmark repro does not ship: the note says so (no shipped file is shadowed)."""
    import yaml

    folder = tmp_path / "b"
    folder.mkdir()
    data = yaml.safe_load((SHIPPED / "llama2-70b-99.yaml").read_text(encoding="utf-8"))
    data["name"] = "my-llama2"
    (folder / "my-llama2.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    recipe = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes" / "nd-gb200-v6.yaml").read_text())
    recipe["benchmark"] = "my-llama2"
    path = tmp_path / "nd-gb200-v6.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    run = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    res = cli("verify", str(run), "--recipe", str(path), "--json", env={"REPRO_BENCHMARKS_PATH": str(folder)})
    doc = json.loads(res.stdout)
    assert any(
        n.startswith(f"benchmark my-llama2: targets from {folder / 'my-llama2.yaml'}") and "not a shipped" in n
        for n in doc["notes"]
    ), doc["notes"]


def test_explain_names_the_shadowing_file(fixtures: Path, shadow: Path, tmp_path: Path) -> None:
    run = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    doc = json.loads(cli("explain", str(run), "--json", env={"REPRO_BENCHMARKS_PATH": str(shadow.parent)}).stdout)
    assert any("which shadows the shipped" in n and str(shadow) in n for n in doc["notes"]), doc["notes"]
    plain = json.loads(cli("explain", str(run), "--json").stdout)
    assert not any("shadows" in n for n in plain["notes"])


def test_attest_hashes_the_benchmark_file_it_used(
    fixtures: Path, shadow: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    run = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    res = cli("attest", str(run), env={"REPRO_BENCHMARKS_PATH": str(shadow.parent)})
    assert res.exit_code == 0, res.output
    envelope = json.loads((run / ATTESTATION_NAME).read_text())
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    used = predicate["files"]["benchmark"]
    assert used["sha256"] == _sha(shadow) != _sha(SHIPPED / "llama2-70b-99.yaml")
    assert used["shipped"] is False and used["file"] == str(shadow)
    assert used["shadows"] == str(SHIPPED / "llama2-70b-99.yaml")
    assert any("which shadows the shipped" in n for n in predicate["verdict"]["notes"])


def test_a_rack_of_18_nodes_is_priced_as_18_vms(fixtures: Path, tmp_path: Path) -> None:
    """The same run, its system JSON stating 18 nodes (an NVL72 rack of ND GB200 v6 VMs): 18 x the VM-hour."""
    run = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    one = json.loads(cli("verify", str(run), "--json").stdout)["cost"]
    system = run / "ND_GB200_v6.json"
    doc = json.loads(system.read_text())
    assert doc["number_of_nodes"] == 1 and doc["accelerators_per_node"] == 4
    for nodes in (2, 18, "18"):
        doc["number_of_nodes"] = nodes
        system.write_text(json.dumps(doc))
        cost = json.loads(cli("verify", str(run), "--json").stdout)["cost"]
        n = int(nodes)
        assert cost["vms"] == n and f"{n} VMs: number_of_nodes in the system JSON (" in cost["vms_basis"]
        assert cost["usd_per_million_output_tokens"] == pytest.approx(one["usd_per_million_output_tokens"] * n)
        assert cost["usd_per_million_output_tokens"] == pytest.approx(108.16 * n / 3600 / 52061.6 * 1e6, rel=1e-6)


def test_a_system_repro_ran_over_nodes_is_priced_per_node(_isolated_home: Path) -> None:
    """repro's own run of one system over many nodes states its nodes in run.json (`system.number_of_nodes`, as
    the srun launcher writes it): 2 nodes are 2 VM-hours an hour, not one."""
    from helpers import write_prepared

    from repro.core.recipes import get_recipe
    from repro.core.workspace import Workspace
    from repro.run.harness import run_benchmark
    from repro.run.options import RunOptions

    ws = Workspace.open().ensure()
    recipe = get_recipe("nd-h100-v5")
    write_prepared(ws.preprocessed / recipe.dataset.name, 8, name="mlperf-openorca", seed=3, out_len=(5, 30))
    outcome = run_benchmark(RunOptions.build("nd-h100-v5", ws, backend="sim", samples=8, detect=False))
    run = Path(outcome.details["run_dir"])
    one = json.loads(cli("verify", str(run), "--json").stdout)["cost"]
    assert one["vms"] == 1 and one["vms_basis"] == "1 VM, one per run"
    info = run / "performance" / "run_1" / "run.json"
    record = json.loads(info.read_text())
    record["system"] = {"number_of_nodes": 2, "accelerators_per_node": 8}
    info.write_text(json.dumps(record))
    two = json.loads(cli("verify", str(run), "--json").stdout)["cost"]
    assert two["vms"] == 2 and two["vms_basis"] == "2 VMs: number_of_nodes in run.json (2)", two
    # the JSON rounds to 6 decimals: twice one rounded figure is within 1.5e-6 of the other
    assert two["usd_per_million_output_tokens"] == pytest.approx(2 * one["usd_per_million_output_tokens"], abs=2e-6)


def test_a_module_beside_a_shadowing_file_is_named_and_hashed(
    fixtures: Path, shadow: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    """The benchmark's `module:` found beside the shadowing file scores its accuracy: verify and attest name it."""
    module = shadow.parent / "llama2_70b.py"
    module.write_text("from repro.core.families.llama2_70b import FAMILY  # the user's copy\n")
    run = copy_bundle(fixtures, GB200, tmp_path / "bundle")
    env = {"REPRO_BENCHMARKS_PATH": str(shadow.parent)}
    doc = json.loads(cli("verify", str(run), "--json", env=env).stdout)
    assert doc["benchmark_file"]["module"] == str(module) and doc["benchmark_file"]["module_sha256"] == _sha(module)
    assert any(f"scored by {module} (sha256 {_sha(module)[:12]}…)" in n for n in doc["notes"]), doc["notes"]
    assert cli("attest", str(run), env=env).exit_code == 0
    predicate = json.loads(base64.b64decode(json.loads((run / ATTESTATION_NAME).read_text())["payload"]))["predicate"]
    assert predicate["files"]["benchmark"]["module"] == str(module)
    assert predicate["files"]["benchmark"]["module_sha256"] == _sha(module)
