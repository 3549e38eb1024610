"""Issue 33 item 2: Llama-3.1-405B on ND GB200 v6 through the same commands as Llama-2-70B, judged by its own
benchmark file (tests/fixtures/published/azure-nd-gb200-v6-v5.1-llama3.1-405b is Azure's published bundle)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repro.core.errors import InputError
from repro.core.recipes import by_gpu_name, by_system_name, by_vm_size, get_recipe
from repro.results.verify import verify_dir
from tests.helpers import cli, cli_process, copy_bundle, edit, one_line_error

AZ405 = "azure-nd-gb200-v6-v5.1-llama3.1-405b"
GB200 = "azure-nd-gb200-v6-v5.1"


@pytest.mark.parametrize(
    "scenario,per_gpu,em,rouge",
    [("Offline", 211.81, "90.1191", "21.9537"), ("Server", 146.0, "90.1119", "21.9551")],
)
def test_azures_405b_bundle_passes_as_itself(
    fixtures: Path, scenario: str, per_gpu: float, em: str, rouge: str
) -> None:
    v = verify_dir(fixtures / AZ405 / "llama3.1-405b" / scenario)
    assert v.status == "PASS" and v.exit_code == 0, v.reasons
    assert v.recipe is not None and v.recipe.name == "nd-gb200-v6-405b" and v.gpus == 4
    assert round(v.per_gpu, 2) == pytest.approx(per_gpu, abs=0.01) and v.deviation_pct == pytest.approx(0, abs=0.01)
    acc = {c.name: c for c in v.checks if c.name.startswith("accuracy ")}
    assert acc["accuracy exact_match"].ok and f"{em} ≥ 89.2322" in acc["accuracy exact_match"].detail
    assert acc["accuracy rougeL"].ok and f"{rouge} ≥ 21.4499" in acc["accuracy rougeL"].detail
    assert acc["accuracy tokens_per_sample"].ok and "616.212–753.148" in acc["accuracy tokens_per_sample"].detail
    assert "accuracy rouge1" not in acc and acc["accuracy samples"].detail.startswith("8,313 = 8,313")
    checks = {c.name: c for c in v.checks}
    if scenario == "Offline":
        assert checks["samples per query"].ok and "≥ 8,313" in checks["samples per query"].detail
    else:
        assert checks["TTFT p99"].ok and "≤ 6,000 ms" in checks["TTFT p99"].detail
        assert checks["TPOT p99"].ok and "≤ 175 ms" in checks["TPOT p99"].detail


def test_exact_match_below_its_floor_fails(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, AZ405, tmp_path / "b")
    edit(
        b / "llama3.1-405b" / "Offline" / "accuracy" / "accuracy.txt",
        "'exact_match': 90.11914626075446",
        "'exact_match': 89.2",
    )
    res = cli("verify", str(b / "llama3.1-405b" / "Offline"), "--json")
    doc = json.loads(res.output)
    assert res.exit_code == 1 and doc["status"] == "FAIL" and doc["recipe"] == "nd-gb200-v6-405b"
    assert any(r.startswith("accuracy exact_match: 89.2000 < 89.2322") for r in doc["reasons"]), doc["reasons"]


def test_another_benchmarks_accuracy_txt_is_one_clear_error(fixtures: Path, tmp_path: Path) -> None:
    """A 405B folder holding Llama-2-70B's scores, and the reverse: the wrong file, named, exit 2."""
    b = copy_bundle(fixtures, AZ405, tmp_path / "b405")
    l2 = copy_bundle(fixtures, GB200, tmp_path / "bl2")
    mine, theirs = b / "llama3.1-405b/Offline/accuracy/accuracy.txt", l2 / "llama2-70b-99/Offline/accuracy/accuracy.txt"
    llama2_text, b405_text = theirs.read_text(), mine.read_text()
    mine.write_text(llama2_text)
    theirs.write_text(b405_text)
    err = one_line_error(cli_process("verify", str(b / "llama3.1-405b" / "Offline")))
    assert str(mine) in err.replace("\n", "") or "accuracy.txt" in err
    assert "rouge1, rouge2 belong to another benchmark" in err and "exact_match" in err
    err = one_line_error(cli_process("verify", str(l2 / "llama2-70b-99" / "Offline")))
    assert "exact_match belong to another benchmark" in err and "rouge1" in err


def test_the_405b_recipe_is_listed_with_its_published_figure_and_is_never_the_detected_default() -> None:
    recipe = get_recipe("nd-gb200-v6-405b")
    assert (recipe.benchmark, recipe.model.repo_id, recipe.dataset.samples) == (
        "llama3.1-405b",
        "meta-llama/Llama-3.1-405B-Instruct",
        8313,
    )
    assert recipe.loadgen.max_tokens == 2000 and recipe.loadgen.performance_sample_count == 8313
    assert recipe.published.tokens_per_s_per_vm == 847.233 and round(recipe.published.tokens_per_s_per_gpu, 2) == 211.81
    assert round(recipe.published_for("Server").tokens_per_s_per_gpu, 1) == 146.0  # type: ignore[union-attr,arg-type]
    proc = cli_process("recipes", "list", "--json")
    rows = {r["name"]: r for r in json.loads(proc.stdout)["recipes"]}
    assert rows["nd-gb200-v6-405b"]["published_tokens_per_s_per_vm"] == 847.233
    assert rows["nd-gb200-v6-405b"]["benchmark"] == "llama3.1-405b"
    assert "847.233" in cli_process("recipes", "list", env={"COLUMNS": "250"}).stdout
    # one VM size, two recipes: detection keeps the Llama-2-70B one; a 405B result finds the 405B one
    assert by_vm_size("Standard_ND128isr_NDR_GB200_v6").name == "nd-gb200-v6"  # type: ignore[union-attr]
    assert by_gpu_name("NVIDIA GB200", 4).name == "nd-gb200-v6"  # type: ignore[union-attr]
    assert by_system_name("ND_GB200_v6").name == "nd-gb200-v6"  # type: ignore[union-attr]
    assert by_system_name("ND_GB200_v6", "llama3.1-405b").name == "nd-gb200-v6-405b"  # type: ignore[union-attr]


def test_a_405b_run_against_the_llama2_recipe_is_not_a_reproduction(fixtures: Path, tmp_path: Path) -> None:
    b = copy_bundle(fixtures, AZ405, tmp_path / "b")
    shutil.rmtree(b / "llama3.1-405b" / "Offline" / "accuracy")
    doc = json.loads(cli("verify", str(b / "llama3.1-405b" / "Offline"), "--recipe", "nd-gb200-v6", "--json").output)
    assert doc["status"] == "NOT A REPRODUCTION"
    assert any("llama3.1-405b run" in r and "llama2-70b-99 result" in r for r in doc["reasons"]), doc["reasons"]


def test_setup_plans_the_pinned_model_and_the_published_405b_pins(tmp_path: Path) -> None:
    """`repro setup`: the gated model at MLCommons' pinned revision, the disk it needs, and the 8,313-sample set from
    MLCommons' R2 downloader, checked against AMD's published MD5 and MLCommons' .md5 list (no recipe copy); the
    dry run says once that the calibration file has no independent checksum; a rebuild is refused (exit 2)."""
    env = {"REPRO_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "COLUMNS": "250"}
    dry = cli_process("setup", "--recipe", "nd-gb200-v6-405b", "--dry-run", env=env)
    assert dry.returncode in (0, 1), dry.stderr  # 1: this machine lacks the 1.87 TB the plan needs
    out = " ".join(dry.stdout.split())
    assert "meta-llama/Llama-3.1-405B-Instruct/tree/be673f326cab4cd22ccfef76109faf68e41aa5f1" in out
    assert "1,870.0 GB needed" in out and "would fetch 812.00 GB" in out and "llama3-1-405b-dataset-8313.uri" in out
    assert "│ place │ https://inference.mlcommons-storage.org/metadata/llama3-1-405b-dataset-8313.uri" in out
    assert "nothing was downloaded" not in out
    assert "MD5 25d9f2085bbc… published by amd-resource-checker" in out and "llama3-1-405b-dataset-8313.md5" in out
    assert out.count("no checksum of the 512-row calibration pickle is published") == 1
    assert not (tmp_path / "home" / "data").exists()
    from repro.setup.download import check_pins

    check_pins(get_recipe("nd-gb200-v6-405b"), "fetch")
    with pytest.raises(InputError, match="publishes no raw data to rebuild"):
        check_pins(get_recipe("nd-gb200-v6-405b"), "rebuild")


def test_an_unpinned_file_is_told_the_whole_copy_to_write(tmp_path: Path) -> None:
    """A benchmark with no pin for its 405B files (a file in $REPRO_BENCHMARKS_PATH without the md5 table): the
    refusal names both files, where the copy goes, the name line to change and the one YAML line with every role."""
    import yaml

    from repro.core.benchmarks import SHIPPED

    doc = yaml.safe_load((SHIPPED / "llama3.1-405b.yaml").read_text())
    del doc["dataset"]["md5"]
    (tmp_path / "llama3.1-405b.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    code = (
        "import json\nfrom repro.core.errors import InputError\nfrom repro.core.recipes import get_recipe\n"
        "from repro.setup.download import check_pins\n"
        "try:\n    check_pins(get_recipe('nd-gb200-v6-405b'), 'fetch')\n"
        "except InputError as e:\n    print(json.dumps([e.message, e.next_command]))\n"
    )
    import os
    import subprocess
    import sys

    env = {**os.environ, "REPRO_BENCHMARKS_PATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    message, hint = json.loads(proc.stdout)
    files = "mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl, mlperf_llama3.1_405b_calibration_dataset_512"
    assert f"no checksum of {files}" in message and "nothing was downloaded" in message
    assert (
        "to nd-gb200-v6-405b-pinned.yaml, change its line 'name: nd-gb200-v6-405b' to 'name: nd-gb200-v6-405b-pinned'"
        in hint
    )
    assert (
        "'dataset: {sha256: {sampled: <sha256sum of mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl>, "
        "calibration: <sha256sum of mlperf_llama3.1_405b_calibration_dataset_512_processed_fp16_eval.pkl>}}'"
    ) in hint
    assert hint.endswith("then `repro setup --recipe nd-gb200-v6-405b-pinned.yaml`")


def test_report_and_explain_of_the_405b_bundle_stay_within_its_benchmark(fixtures: Path) -> None:
    """report: the 405B published table (its GB200 results only, llama3.1-405b), compared with the 405B recipe only,
    and the roofline says what it lacks; explain: the 405B reference tokens/sample, not Llama-2's."""
    run = fixtures / AZ405 / "llama3.1-405b" / "Offline"
    doc = json.loads(cli("report", str(run), "--json").output)
    standing = doc["published_standing"]
    assert standing["benchmark"] == "llama3.1-405b" and standing["accelerator"] == "NVIDIA GB200"
    refs = [r["ref"] for r in standing["published"]]
    assert "5.1-0008/llama3.1-405b/Offline" in refs and all("llama3.1-405b" in r for r in refs)
    assert [c["recipe"] for c in doc["comparisons"]] == ["nd-gb200-v6-405b"]
    text = cli("report", str(run), env={"COLUMNS": "200"}).output
    assert "no input length measured" in " ".join(text.split())
    exp = json.loads(cli("explain", str(run), "--json").output)
    assert exp["tokens"]["reference_output_tokens_per_sample"] == 684.68


@pytest.mark.parametrize(
    "scenario,key,limits",
    [
        ("Offline", "llama3_1-405b.Offline", None),
        ("Server", "llama3_1-405b.Server", (6000, 175)),
        ("Interactive", "llama3_1-405b-interactive.Server", (4500, 80)),
    ],
)
def test_a_405b_run_is_configured_by_its_benchmark(scenario: str, key: str, limits: tuple[int, int] | None) -> None:
    """`repro run offline|server|interactive` and tune: LoadGen's user.conf under the 405B model keys, its counts
    (8,313), its TTFT/TPOT limits and Azure's rates; every sample asks for at most 2,000 new tokens."""
    from repro.run.settings import loadgen_settings, user_conf_text

    recipe = get_recipe("nd-gb200-v6-405b")
    settings = loadgen_settings(recipe, scenario)
    conf = user_conf_text(settings, scenario, recipe.bench)
    assert f"{key}.performance_sample_count_override = 8313" in conf
    # Offline: one query of the benchmark's 8,313; Server and Interactive: LoadGen's default 100, as published
    assert f"{key}.min_query_count = {8313 if scenario == 'Offline' else 100}\n" in conf
    assert f"{key}.target_qps = {1.17 if scenario == 'Offline' else 0.89}" in conf
    if limits:
        assert f"{key}.ttft_latency = {limits[0]}" in conf and f"{key}.tpot_latency = {limits[1]}" in conf
    assert recipe.loadgen.max_tokens == 2000
