"""Recipes are data checked by a schema; the registry maps VM sizes and GPU names to them."""

from __future__ import annotations

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
    load_recipe_file,
    recipes_dir,
)

runner = CliRunner()


def test_every_shipped_recipe_validates() -> None:
    names = {r.name for r in all_recipes()}
    assert names == {"demo", "dgx-h100", "nc-h100-v5", "nd-gb200-v6", "nd-gb300-v6", "nd-h100-v5", "nd-h200-v5"}
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
