"""Recipes are data checked by a schema; the registry maps VM sizes and GPU names to them."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from repro.cli import app
from repro.core.errors import RecipeError
from repro.core.recipes import (
    all_recipes,
    by_gpu_name,
    by_system_name,
    by_vm_size,
    get_recipe,
    gpu_is_recipes,
    load_recipe_file,
    recipes_dir,
)

runner = CliRunner()


def test_every_shipped_recipe_validates() -> None:
    names = {r.name for r in all_recipes()}
    assert names == {
        "demo",
        "dgx-h100",
        "nc-h100-v5",
        "nd-gb200-v6",
        "nd-gb200-v6-405b",
        "nd-gb300-v6",
        "nd-h100-v5",
        "nd-h200-v5",
        "nd-gb300-v6-dsr1",
        "nd-gb200-v6-dsr1",
        "nd-gb200-v6-dsr1-x288",
    }
    assert runner.invoke(app, ["recipes", "validate"]).exit_code == 0


def test_published_numbers() -> None:
    gb200, gb300, dgx = get_recipe("nd-gb200-v6"), get_recipe("nd-gb300-v6"), get_recipe("dgx-h100")
    assert (gb200.published.tokens_per_s_per_vm, gb200.published.tokens_per_s_per_gpu, gb200.published.mlperf_id) == (
        52061.6,
        13015.4,
        "5.1-0008",
    )
    assert gb300.published.band() == pytest.approx((14440.0, 15960.0))
    assert gb300.published.rack.total_tokens_per_s == 1100948.3 and gb300.published.mlperf_id == "unknown"
    assert dgx.reference_only and dgx.published.mlperf_id == "unknown"  # the index names v4.1 results by key (#24)


def test_registry_lookups() -> None:
    assert by_vm_size("standard_nd128isr_gb300_v6").name == "nd-gb300-v6"
    assert by_vm_size("Standard_ND96isr_H100_v5").name == "nd-h100-v5"
    assert by_vm_size("Standard_D4s_v5") is None
    assert by_gpu_name("NVIDIA H100 80GB HBM3", 8).name == "nd-h100-v5"
    assert by_gpu_name("NVIDIA GB200").name == "nd-gb200-v6"
    assert by_system_name(" 18xND_GB300_v6").name == "nd-gb300-v6"


@pytest.mark.parametrize("count", [2, 8, None])
def test_the_gpus_identity_wins_over_the_gpu_count(count: int | None) -> None:
    """nd-h100-v5's NVML name 'H100' is inside 'NVIDIA H100 NVL' too: an H100 NVL is nc-h100-v5's GPU whatever the
    count, and an H100 SXM is nd-h100-v5's, never nc-h100-v5's."""
    assert by_gpu_name("NVIDIA H100 NVL", count).name == "nc-h100-v5"  # type: ignore[union-attr]
    assert by_gpu_name("NVIDIA H100 80GB HBM3", count).name == "nd-h100-v5"  # type: ignore[union-attr]
    assert gpu_is_recipes(get_recipe("nc-h100-v5"), "NVIDIA H100 NVL")
    assert not gpu_is_recipes(get_recipe("nd-h100-v5"), "NVIDIA H100 NVL")
    assert not gpu_is_recipes(get_recipe("nc-h100-v5"), "NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize(
    "gpu", ["NVIDIA H100 PCIe", "NVIDIA GH200 480GB", "NVIDIA H200 NVL", "NVIDIA B200", "NVIDIA H100 SXM5 94GB"]
)
def test_a_gpu_no_recipe_runs_gets_none_not_a_near_name(gpu: str) -> None:
    """Detection holds the GPU to the identity verify holds runs to: 'H200' is inside 'GH200' and 'H100' inside
    'H100 PCIe', yet neither is the hardware of an ND recipe, whose runs verify would then refuse."""
    assert by_gpu_name(gpu) is None and by_gpu_name(gpu, 8) is None
    assert not any(gpu_is_recipes(get_recipe(name), gpu) for name in ("nd-h100-v5", "nd-h200-v5", "nc-h100-v5"))


def test_nc_h100_v5_is_runnable_and_found_by_its_vm_size() -> None:
    nc = get_recipe("nc-h100-v5")
    assert not nc.reference_only and nc.backend == "trtllm-serve-pytorch" and nc.trtllm is not None
    assert (nc.trtllm.tp_size * nc.trtllm.servers_per_vm, nc.trtllm.gpu_batch_size) == (nc.system.gpus_per_vm, 1300)
    assert nc.dataset.sha256 == get_recipe("nd-h100-v5").dataset.sha256
    assert by_vm_size("Standard_NC80adis_H100_v5").name == "nc-h100-v5"  # type: ignore[union-attr]
    assert nc.system.accelerator_identity().form_factor == "NVL"


def _broken(tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load((recipes_dir() / "nd-gb300-v6.yaml").read_text())
    mutate(data)
    path = tmp_path / "nd-gb300-v6.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_missing_field_is_named(tmp_path: Path) -> None:
    path = _broken(tmp_path, lambda d: d["loadgen"].pop("offline_expected_qps"))
    res = runner.invoke(app, ["recipes", "validate", str(path)])
    assert res.exit_code == 2 and "loadgen.offline_expected_qps" in res.output


def test_nvfp4_on_hopper_is_refused(tmp_path: Path) -> None:
    path = _broken(tmp_path, lambda d: d["system"].update(gpu_arch="sm_90"))
    with pytest.raises(RecipeError, match="needs a Blackwell GPU"):
        load_recipe_file(path)


def test_unknown_recipe_names_the_list() -> None:
    res = runner.invoke(app, ["recipes", "show", "nd-a100"])
    assert res.exit_code == 2 and "Unknown recipe 'nd-a100'" in res.output and "nd-gb300-v6" in res.output


def test_a_copys_dataset_tables_merge_key_by_key(tmp_path: Path) -> None:
    """A copy that pins one role keeps the benchmark's others: `sha256: {calibration: X}` keeps the published
    sampled pin (a shallow merge dropped it, and setup then refused the sampled set), `urls: {sampled: U}` keeps the
    calibration URL; a field outside the tables still replaces the benchmark's."""
    shipped = get_recipe("nd-gb300-v6")
    pin = "ab" * 32

    def mutate(d: dict) -> None:
        d["dataset"] = {"sha256": {"calibration": pin}, "urls": {"sampled": "https://mirror.example/s.pkl"}}
        d["dataset"]["samples"] = 100

    copy = load_recipe_file(_broken(tmp_path, mutate))
    assert copy.dataset.sha256 == {"sampled": shipped.dataset.sha256["sampled"], "calibration": pin}
    assert copy.dataset.urls == {**shipped.dataset.urls, "sampled": "https://mirror.example/s.pkl"}
    assert copy.dataset.files == shipped.dataset.files and copy.dataset.samples == 100


def test_a_renamed_copy_is_told_the_line_to_change(tmp_path: Path) -> None:
    """A copy saved as mine405.yaml still says `name: nd-gb200-v6-405b`: the one error line says which line to change
    to what (`recipes validate` shows it too), and Next validates that file; a file name no recipe may have is told
    the rename instead, and Next validates the renamed file."""
    text = (recipes_dir() / "nd-gb200-v6-405b.yaml").read_text()
    for stem, fix, then in (
        ("mine405", "change its line 'name: nd-gb200-v6-405b' to 'name: mine405'.", "mine405"),
        ("My Copy", "rename it to nd-gb200-v6-405b.yaml (a name is", "nd-gb200-v6-405b"),
    ):
        path = tmp_path / f"{stem}.yaml"
        path.write_text(text)
        with pytest.raises(RecipeError) as err:
            load_recipe_file(path)
        assert f"the file is named '{stem}' (a recipe is known by its file's name): {fix}" in err.value.message
        assert err.value.next_command == f"`repro recipes validate {shlex.quote(str(tmp_path / then))}.yaml`"
        res = runner.invoke(app, ["recipes", "validate", str(path)], env={"COLUMNS": "400"})
        assert res.exit_code == 2 and fix in res.output, res.output


def test_a_benchmark_pin_follows_its_file_name(tmp_path: Path) -> None:
    """The benchmark's SHA-256 and MD5 of open_orca_..._24576.pkl pin that file: a copy naming another sampled file
    does not inherit them (its own pins stay), and one keeping the file keeps both."""
    shipped = get_recipe("nd-gb300-v6")

    def rename(d: dict) -> None:
        d["dataset"] = {"files": {"sampled": "mine.pkl"}, "sha256": {"calibration": "cd" * 32}}

    copy = load_recipe_file(_broken(tmp_path, rename))
    assert copy.dataset.sha256 == {"sampled": "unknown", "calibration": "cd" * 32} and "sampled" not in copy.dataset.md5
    keep = load_recipe_file(_broken(tmp_path, lambda d: d.update(dataset={"samples": 10})))
    assert keep.dataset.sha256 == shipped.dataset.sha256 and keep.dataset.md5 == shipped.dataset.md5
