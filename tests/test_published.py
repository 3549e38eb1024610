"""The shipped index of published results: validation, references, `repro published`, comparisons, self-verification."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from golden_util import check_golden, content, render
from helpers import cli, read_csv_rows, write_csv_rows
from typer.testing import CliRunner

from repro.core.errors import InputError
from repro.core.published import (
    INDEX_CSV,
    SOURCES_JSON,
    Accelerator,
    Filters,
    load_index,
    load_index_file,
    reference_row,
    rule_reference,
)
from repro.core.recipes import all_recipes, get_recipe
from repro.results.compare import verify_against
from repro.results.index_match import match_run
from repro.results.logs import find_runs
from repro.results.verify import verify_dir
from repro.ui.published import ComparisonView, PublishedList, PublishedShow

runner = CliRunner()
GB200 = "azure-nd-gb200-v6-v5.1"


def test_index_loads_with_counts_converted_and_figures_recomputed() -> None:
    idx = load_index()
    assert len(idx.rows) == 957 + 117 + 133 and [f.rows for f in idx.files] == [957, 117, 133]
    l70 = [r for r in idx.rows if r.benchmark_name.startswith("llama2-70b-")]
    by_round = {r: sum(1 for x in l70 if x.round == r) for r in ("v4.0", "v4.1", "v5.0", "v5.1", "v6.0", "v6.1")}
    assert by_round == {"v4.0": 2, "v4.1": 160, "v5.0": 291, "v5.1": 237, "v6.0": 179, "v6.1": 88}
    with INDEX_CSV.open(newline="") as fh:
        raw = list(csv.DictReader(fh))
    assert idx.rows[:957] == tuple(l70)  # the 70B file first, in its own order
    strings = [
        (x, r)
        for x, r in zip(raw, l70, strict=True)
        if not x["accelerators_per_node"].isdigit() or x["number_of_nodes"] != str(r.number_of_nodes)
    ]
    assert not strings  # the CSV keeps digits; the JSON strings ("8") were already read as such
    amd87 = next(r for r in idx.rows if r.system_folder.startswith("87xMI355X") and r.scenario == "Offline")
    assert (amd87.total_accelerators, amd87.tokens_per_second) == (88, 1042110.0)  # JSON 8 x 11, not the folder's 87
    assert amd87.per_accelerator == pytest.approx(11842.159, abs=1e-3)
    for x, r in zip(raw, l70, strict=True):
        assert r.per_accelerator == pytest.approx(float(x["tokens_per_second_per_accelerator"]), abs=5e-6)
        assert r.metrics == {k: float(x[k]) for k in ("rouge1", "rouge2", "rougeL") if x[k]}
    assert len({r.key for r in idx.rows}) == 1207
    v51 = [s.commit for s in idx.provenance.sources if s.round == "v5.1"]
    assert v51[0] == "965182b03376a00fcae415c54e560e1c83937932"


def test_v61_rows_come_from_the_summary_logs_and_name_their_sources() -> None:
    """v6.1 was read file by file (no snapshot): every row read from a summary log cites the fork copy's commit and
    agrees with the table; the two VibeHPC results no stored copy has files for are rows of the table alone."""
    idx = load_index()
    v61 = [r for r in idx.rows if r.round == "v6.1" and r.benchmark_name.startswith("llama2-70b") and not r.table_only]
    assert {s.commit for s in idx.provenance.sources if s.round == "v6.1" and s.file == INDEX_CSV.name} == {
        "5174fca85775b97127da8e3ff07f1bb776880fc4",
        "10ecdffda3bb94d71f0203a6ca8e20c17943f27c",
        "7bf15fd8089655a71fb75c81a744d7ba5a632424",
    }
    assert {r.source_commit for r in v61} == {"5174fca85775b97127da8e3ff07f1bb776880fc4"} and len(v61) == 86
    assert {r.summary_crosscheck for r in v61} == {"ok"} and {r.benchmark for r in v61} == {"99.9"}
    vibe = [r for r in idx.rows if r.round == "v6.1" and r.submitter == "VibeHPC" and r.benchmark == "99.9"]
    assert [(r.scenario, r.tokens_per_second, r.source_kind) for r in vibe] == [
        ("Offline", 14636.8, "results-table-only"),
        ("Server", 14495.6, "results-table-only"),
    ]
    assert {r.source_commit for r in vibe} == {"7bf15fd8089655a71fb75c81a744d7ba5a632424"}
    assert all(r.result_id is None for r in v61)  # the v6.1 table carries no IDs; the key is the reference
    interactive = [r for r in v61 if r.scenario == "Interactive"]
    assert len(interactive) == 9 and {r.log_scenario for r in interactive} == {"Server"}
    gb300 = next(
        r for r in v61 if r.submitter == "CoreWeave" and r.system_folder.startswith("GB300") and r.scenario == "Offline"
    )
    assert (gb300.tokens_per_second, gb300.total_accelerators) == (1136100.0, 72)  # log writes 1.1361e+06
    amd = next(r for r in v61 if r.submitter == "AMD" and r.scenario == "Offline")
    assert (amd.gen_num, amd.min_duration_ms_summary, amd.accelerators_per_node) == (24576, 3600000, 8)  # JSON "8"
    from_table = next(r for r in v61 if r.submitter == "Oracle" and r.scenario == "Offline")
    assert from_table.gen_num is None and "summary-table" in from_table.source_kind


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("tokens_per_second_per_accelerator", "999.0", "tokens_per_second_per_accelerator"),
        ("accelerators_per_node", "eight", "accelerators_per_node"),
        ("result_id", "5.1-8", "result_id"),
    ],
)
def test_a_bad_row_is_named(tmp_path: Path, column: str, value: str, message: str) -> None:
    rows, fields = read_csv_rows(INDEX_CSV)
    rows[10][column] = value
    bad = write_csv_rows(tmp_path / "index.csv", fields, rows)
    with pytest.raises(InputError, match=rf"index.csv: line 12, .*{message}"):
        load_index_file(bad, SOURCES_JSON)


def test_references() -> None:
    idx = load_index()
    # an ID covers every benchmark its system submitted: Azure's ND GB200 v6 ran Llama-2-70B and Llama-3.1-405B
    assert [(r.benchmark, r.scenario) for r in idx.resolve("5.1-0008")] == [
        ("99", "Offline"),
        ("99", "Server"),
        ("llama3.1-405b", "Offline"),
        ("llama3.1-405b", "Server"),
    ]
    assert [r.tokens_per_second for r in idx.resolve("5.1-0008/99/Server")] == [46016.49]
    assert [r.tokens_per_second for r in idx.resolve("5.1-0008/LLAMA3.1-405B/server")] == [584.01]
    assert len(idx.resolve("5.1-0070")) == 6 and len(idx.resolve("5.1-0070/99.9/interactive")) == 1
    one = idx.resolve("4.1/CLOSED/nvidia/dgx-h100_h100-sxm-80gbx8_trt/llama2-70b-99.9/offline")
    assert [r.key for r in one] == ["v4.1/closed/NVIDIA/DGX-H100_H100-SXM-80GBx8_TRT/99.9/Offline"]
    assert idx.resolve(one[0].key) == one and idx.resolve(one[0].ref) == one
    nm = idx.resolve("v4.1/open/NeuralMagic")  # the same system folder is in closed and open
    assert nm and {r.division for r in nm} == {"open"}
    with pytest.raises(InputError, match="no published result has ID 5.1-9999"):
        idx.resolve("5.1-9999")
    with pytest.raises(InputError, match="no published result matches"):
        idx.resolve("v5.1/closed/Azure/ND_GB300_v6")


def test_accelerator_identity() -> None:
    p = Accelerator.parse
    assert p("NVIDIA H100 80GB HBM3").same_as(p("NVIDIA H100-SXM-80GB"))  # NVML name of the SXM part
    assert not p("NVIDIA H100 NVL").same_as(p("NVIDIA H100-SXM-80GB"))
    assert p("NVIDIA H100 NVL").same_as(p("NVIDIA H100-NVL-94GB"))
    assert not p("NVIDIA H200").same_as(p("NVIDIA GH200 Grace Hopper Superchip 144GB"))
    assert not p("NVIDIA GB300").same_as(p("NVIDIA B300-SXM-270GB"))
    assert p("Virtualized NVIDIA H200-SXM-141GB").same_as(p("NVIDIA H200"))
    assert p("AMD Instinct MI300X 192GB HBM3 (x32), AMD Instinct MI325X 256GB HBM3e (x16)").model.startswith("mixed")
    h200 = load_index().select(Filters(accelerator="H200"))
    assert h200 and not any("GH200" in r.accelerator_model_name for r in h200)


def test_published_list_gb200_offline_golden() -> None:
    idx = load_index()
    f = Filters(accelerator="GB200", scenario="Offline")
    rows = idx.select(f)
    assert "5.1-0008" in {r.result_id for r in rows}
    assert [r.per_accelerator for r in rows] == sorted((r.per_accelerator for r in rows), reverse=True)
    assert {r.accelerator_model_name for r in rows} == {"NVIDIA GB200"} and {r.scenario for r in rows} == {"Offline"}
    check_golden("published_gb200_offline.txt", content(PublishedList(idx, rows, f, "per-accelerator")))
    res = cli("published", "--accelerator", "GB200", "--scenario", "Offline")
    assert res.exit_code == 0 and "5.1-0008" in res.output and "965182b03376" in res.output


def test_published_filters_and_json() -> None:
    res = cli(
        "published",
        "--accelerator",
        "H100",
        "--division",
        "closed",
        "--min-nodes",
        "2",
        "--round",
        "5.1",
        "--benchmark",
        "llama2-70b-99",
        "--json",
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["index"]["rows"] == 1207 and doc["index"]["sources"][0]["commit"].startswith("3c4a1cf1")
    assert [(f["file"], f["rows"]) for f in doc["index"]["index_files"]] == [
        ("published-llama2-70b.csv", 957),
        ("published-llama3.1-405b.csv", 117),
        ("published-deepseek-r1.csv", 133),
    ]
    assert {r["submitter"] for r in doc["results"]} == {"Cisco"} and doc["count"] == 4
    assert all(r["number_of_nodes"] >= 2 for r in doc["results"])
    azure = cli("published", "--submitter", "azure", "--json").stdout
    assert azure.count('"submitter": "Azure"') == 6 + 7  # + the seven DeepSeek-R1 results of v6.1
    bad = cli("published", "--scenario", "Batch")
    assert bad.exit_code == 2 and "unknown scenario 'Batch'" in bad.output


def test_published_show_golden() -> None:
    idx = load_index()
    check_golden("published_show_5.1-0008.txt", content(PublishedShow(idx, "5.1-0008", idx.resolve("5.1-0008"))))
    res = cli("published", "show", "v4.0/closed/Azure/NC_H100_v5_TRT/99.9/Server", "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 0 and doc["results"][0]["tokens_per_second"] == 3458.96
    assert doc["results"][0]["source_path"].startswith("closed/Azure/results/NC_H100_v5_TRT/llama2-70b-99.9/Server/")
    assert cli("published", "show", "6.0-9999").exit_code == 2


def _perf_runs(fixtures: Path) -> list:  # type: ignore[type-arg]
    return [r for d in sorted(fixtures.iterdir()) if d.is_dir() for r in find_runs(d) if r.mode == "PerformanceOnly"]


def _entry_points(run_folder: Path) -> list[Path]:
    """performance/run_1, the scenario folder above it, and the bundle (or benchmark) folder above that."""
    scenario = run_folder.parent.parent
    return [run_folder, scenario, scenario.parent if scenario.parent.name.startswith("llama2-70b") else scenario]


def test_every_published_bundle_verifies_against_itself(fixtures: Path) -> None:
    """Issue 24: a submission's performance/run_N log is its published record, +0.0% and the index's per-accelerator
    figure, from run_1, the scenario folder and the bundle folder, with or without a recipe; the checks are the same.

    Logs outside a performance/run_N folder are not published results: the Lenovo ranging run matches its
    system but not its record, and Azure's per-VM GB300 logs (published outside MLCommons) are not in the index.
    """
    runs = _perf_runs(fixtures)
    # 6 of them Llama-3.1-405B (Azure ND GB200 v6: Offline and Server), 7 + 4 DeepSeek-R1 (Azure; Cisco, Crusoe,
    # NVIDIA), 2 Llama-2-70B of Azure's v4.0 NC H100 v5
    assert len(runs) == 42
    seen = 0
    for run in runs:
        published = run.folder.parent.name == "performance" and run.folder.name.startswith("run_")
        match = match_run(run)
        if not published:
            assert match is None or not match.exact, run.folder
            continue
        assert match is not None and match.exact, run.folder
        for where in _entry_points(run.folder):
            several = where.name in ("nvidia-dgx-h100-v4.1", "llama2-70b-99.9")
            v = verify_dir(where, scenario=match.row.scenario if several else None)
            assert v.record is not None and v.record.row.key == match.row.key, where
            assert v.run.folder == run.folder and v.per_gpu == match.row.per_accelerator, where
            assert v.gpus == match.row.total_accelerators, where
            if v.recipe is None and v.run.accuracy:
                assert v.deviation_pct == 0.0 and v.status == "PASS", (where, v.reasons)
            elif v.recipe is None:  # the DGX H100 fixture holds its performance runs only: no evidence, no PASS
                assert v.deviation_pct == 0.0 and v.status == "NOT A REPRODUCTION", (where, v.reasons)
                assert len(v.reasons) == 1 and v.reasons[0].startswith("no accuracy run: "), (where, v.reasons)
            names = {c.name for c in v.checks}
            assert {"LoadGen validity", "min duration"} <= names and any(n.startswith("accuracy") for n in names)
        seen += 1
    assert seen == 24 + 7 + 4 + 2  # + DeepSeek-R1: Azure's 7, Cisco's 2, Crusoe's and NVIDIA's 1; Azure's 2 v4.0


def test_unofficial_and_ranging_logs(fixtures: Path) -> None:
    for vm in ("ND_GB300_v6_1", "ND_GB300_v6_16"):
        (run,) = find_runs(fixtures / "azure-nd-gb300-v6-rack" / vm)
        assert match_run(run) is None
    # a ranging run alone is not the result, and with no round in its path it is not matched to 5.1-0061 either
    ranging_only = fixtures / "v5.1_Lenovo_SR680a_V3_B200SXMx8_TRT_llama2-70b-99.9_Server_ranging"
    (ranging,) = [r for r in find_runs(ranging_only) if r.mode == "PerformanceOnly"]
    assert match_run(ranging) is None
    v = verify_dir(ranging_only, recipe="dgx-h100")
    assert v.status != "PASS" and any("ranging run, context for the result, not the result" in n for n in v.notes)


def test_published_bundle_moved_elsewhere_still_matches(fixtures: Path, tmp_path: Path) -> None:
    """Keys, not folder names: the Cisco bundle laid out as in the results repository, then with no names at all."""
    src = fixtures / "v5.1_Cisco_HGX-H100_H100-SXM-80GBx32_TRT_llama2-70b-99_Offline"
    tree = tmp_path / "closed" / "Cisco" / "results" / "HGX-H100_H100-SXM-80GBx32_TRT" / "llama2-70b-99" / "Offline"
    shutil.copytree(src / "performance", tree / "performance")
    (tmp_path / "closed" / "Cisco" / "systems").mkdir(parents=True)
    shutil.copy(src / "systems" / "HGX-H100_H100-SXM-80GBx32_TRT.json", tmp_path / "closed" / "Cisco" / "systems")
    (run,) = find_runs(tree)
    assert match_run(run).row.ref == "5.1-0016/99/Offline"  # type: ignore[union-attr]
    bare = tmp_path / "x" / "y"
    shutil.copytree(src / "performance" / "run_1", bare)
    (run,) = find_runs(bare)
    m = match_run(run)
    assert m is not None and m.exact and m.row.result_id == "5.1-0016" and "tokens/s" in m.how


def test_cli_verify_recognises_gb200_without_recipe(fixtures: Path) -> None:
    res = cli("verify", str(fixtures / GB200), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    rec = doc["published_record"]
    assert doc["status"] == "PASS" and rec["result_id"] == "5.1-0008" and rec["exact"]
    assert doc["tokens_per_s_per_gpu"] == 13015.4 and doc["reference"] == "recipe nd-gb200-v6"
    text = cli("verify", str(fixtures / GB200)).output
    assert "this is the published log of 5.1-0008/99/Offline" in text


def test_cli_verify_bundle_without_recipe_uses_its_record(fixtures: Path) -> None:
    res = cli("verify", str(fixtures / "v5.1_NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Interactive"), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["status"] == "PASS" and doc["scenario"] == "Interactive" and doc["recipe"] is None
    assert doc["reference"] == "published record 5.1-0069/99/Interactive" and doc["deviation_pct"] == 0.0
    assert doc["accuracy_verdict"] == "PASS" and doc["min_duration"] == "PASS"


def test_against_offline_ranks_among_several(fixtures: Path) -> None:
    cmp = verify_against(fixtures / GB200, ["5.1-0008", "5.1-0070", "5.1-0074", "6.0-0075"])
    devs = {e.row.result_id: round(e.deviation_pct, 2) for e in cmp.entries}  # type: ignore[arg-type]
    assert devs == {"5.1-0008": 0.0, "5.1-0070": 0.63, "5.1-0074": 4.79, "6.0-0075": 5.52}
    assert [e.row.scenario for e in cmp.entries] == ["Offline"] * 4 and {e.row.benchmark for e in cmp.entries} == {"99"}
    assert cmp.rank == (1, 5) and cmp.status == "FAIL" and cmp.exit_code == 1
    assert any("5.5% above 6.0-0075" in r for r in cmp.reasons)
    text = render(ComparisonView(cmp))
    assert "ranks 1 of 5" in text and "outside" in text


def test_against_server_and_interactive(fixtures: Path) -> None:
    server = fixtures / "nvidia-dgx-h100-v4.1" / "llama2-70b-99.9" / "Server"
    res = cli(
        "verify",
        str(server),
        "--against",
        "v4.1/closed/NVIDIA/DGX-H100_H100-SXM-80GBx8_TRT",
        "--against",
        "5.1-0015",
        "--json",
    )
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["run"]["scenario"] == "Server" and doc["run"]["benchmark"] == "llama2-70b-99.9"
    got = {a["ref"]: a["deviation_pct"] for a in doc["against"]}
    assert got == {
        "v4.1/closed/NVIDIA/DGX-H100_H100-SXM-80GBx8_TRT/99.9/Server": 0.0,
        "5.1-0015/99.9/Server": round((2700.72375 / 3818.8325 - 1) * 100, 3),
    }
    assert doc["rank"] == {"position": 2, "of": 3}
    inter = fixtures / "v5.1_NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Interactive"
    ok = cli("verify", str(inter), "--against", "5.1-0069")
    assert ok.exit_code == 0 and "5.1-0069/99/Interactive" in ok.output and "+0.0%" in ok.output
    refused = cli("verify", str(inter), "--against", "5.1-0008", "--json")
    rdoc = json.loads(refused.stdout)
    assert refused.exit_code == 2 and rdoc["status"] == "REFUSED"
    assert "5.1-0008/99/Offline is a Offline result; this run is Interactive" in rdoc["against"][0]["refused"]


def test_against_refuses_another_accelerator(fixtures: Path) -> None:
    cisco = fixtures / "v5.1_Cisco_HGX-H100_H100-SXM-80GBx32_TRT_llama2-70b-99_Offline"
    cmp = verify_against(cisco, ["5.1-0026", "5.1-0015"])
    assert cmp.entries[0].refused and "different accelerator" in cmp.entries[0].refused
    assert cmp.entries[1].in_band and cmp.status == "FAIL" and cmp.rank == (1, 2)


def test_recipe_figures_equal_the_index() -> None:
    """One source of truth: every recipe naming an index result carries exactly that result's figures."""
    named = [r for r in all_recipes() if r.published.result_id]
    assert {r.name for r in named} == {
        "dgx-h100",
        "nc-h100-v5",
        "nd-gb200-v6",
        "nd-gb200-v6-405b",
        "nd-h100-v5",
        "nd-h200-v5",
        "nd-gb300-v6-dsr1",
        "nd-gb200-v6-dsr1",
        "nd-gb200-v6-dsr1-x288",
    }
    for recipe in named:
        pub = recipe.published
        row = reference_row(pub.result_id or "", load_index().benchmark_value(recipe.benchmark), pub.scenario)
        assert row is not None, recipe.name
        assert pub.tokens_per_s_per_gpu == pytest.approx(row.per_accelerator, rel=1e-12), recipe.name
        assert pub.tokens_per_s_per_vm == pytest.approx(row.per_node, rel=1e-12), recipe.name
        assert pub.mlperf_round == row.round and recipe.system.gpus_per_vm == row.accelerators_per_node
        if row.result_id:
            assert pub.mlperf_id == row.result_id
        assert row.source_path.startswith(pub.source.split(" ", 1)[1])
    gb200_server = reference_row("5.1-0008", "99", "Server")
    assert gb200_server is not None and gb200_server.tokens_per_second == 46016.49


def test_hopper_recipes_follow_the_rule() -> None:
    for name in ("nd-h100-v5", "nd-h200-v5"):
        r = get_recipe(name)
        chosen = rule_reference(r.system.gpu_name, r.system.gpus_per_vm, r.bench.accuracy.level, r.published.scenario)
        assert chosen is not None and (chosen.result_id or chosen.system_key) == r.published.result_id, name
        assert "chosen by rule" in r.published.note
    assert rule_reference("NVIDIA H100 NVL", 2, "99.9").system_key == get_recipe("nc-h100-v5").published.result_id  # type: ignore[union-attr]


def test_report_places_the_run_among_published(fixtures: Path) -> None:
    from repro.report.html import render_html
    from repro.report.markdown import render_markdown
    from repro.report.model import build_report

    rep = build_report([fixtures / GB200])
    st = rep.to_json()["published_standing"]
    assert st["rank"] == 1 and st["of"] == 5 and st["accelerator"] == "NVIDIA GB200"
    assert [p["ref"] for p in st["published"]][:2] == ["5.1-0008/99/Offline", "5.1-0070/99/Offline"]
    html = render_html(rep)
    assert 'alt="your run among the published NVIDIA GB200 results"' in html and "would rank 1 of 5" in html
    assert "would rank 1 of 5" in render_markdown(rep)


def test_build_script_reads_a_round_as_the_index_does(tmp_path: Path) -> None:
    """scripts/build_published_index.py: scenario from the folder, tokens/s from the log (scientific notation too),
    string counts, numpy accuracy reprs, table fallback for a missing system JSON, and the cross-check."""
    spec = importlib.util.spec_from_file_location(
        "bpi", Path(__file__).parents[1] / "scripts" / "build_published_index.py"
    )
    assert spec and spec.loader
    bpi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bpi)
    res = tmp_path / "closed/Acme/results/Box/llama2-70b-99.9"
    for scen, body in {
        "Offline": "Scenario : Offline\nSamples per second: 4160.83\nTokens per second: 1.1361e+06\n"
        "Result is : VALID\n",
        "interactive": "Scenario : Server\nCompleted samples per second    : 2.5\nCompleted tokens per second: 700.5\n"
        "Result is : INVALID\nmin_duration (ms): 600000\nCompleted tokens per second                 : 9.0\n",
    }.items():
        (res / scen / "performance/run_1").mkdir(parents=True)
        (res / scen / "performance/run_1/mlperf_log_summary.txt").write_text(body)
    (res / "TEST06/performance/run_1").mkdir(parents=True)  # compliance folder: not a scenario
    (res / "TEST06/performance/run_1/mlperf_log_summary.txt").write_text("Tokens per second: 1\n")
    (res / "Offline/accuracy").mkdir()
    (res / "Offline/accuracy/accuracy.txt").write_text(
        "{'rouge1': 44.8, 'gen_num': np.int64(24576), 'tokens_per_sample': 272.4}"
    )
    (tmp_path / "closed/Acme/systems").mkdir(parents=True)
    (tmp_path / "closed/Acme/systems/Box.json").write_text(
        json.dumps(
            {"system_name": "Box", "accelerator_model_name": "X", "accelerators_per_node": "4", "number_of_nodes": "18"}
        )
    )
    table = [
        {
            "Location": "./closed/Acme/results/Box/llama2-70b-99.9/Offline/performance/run_1",
            "Result": 1136100.0,
            "total_accelerators": 72,
            "number_of_nodes": 18,
        }
    ]
    rows = {r["scenario"]: r for r in bpi.build_rows(tmp_path, "v9.9", "o/r", "0" * 40, "git-snapshot", table)}
    assert set(rows) == {"Offline", "Interactive"}
    off, inter = rows["Offline"], rows["Interactive"]
    assert (off["tokens_per_second"], off["total_accelerators"], off["tokens_per_second_per_accelerator"]) == (
        "1136100",
        "72",
        "15779.166667",
    )
    assert (off["gen_num"], off["rouge1"], off["summary_crosscheck"], off["summary_accelerators"]) == (
        "24576",
        "44.8",
        "ok",
        "72",
    )
    assert (inter["log_scenario"], inter["tokens_per_second"], inter["result_validity"]) == (
        "Server",
        "700.5",
        "INVALID",
    )
    assert inter["summary_crosscheck"] == "not_in_table" and inter["scenario_folder"] == "interactive"
    table[0]["Result"] = 1100000.0
    off = next(
        r
        for r in bpi.build_rows(tmp_path, "v9.9", "o/r", "0" * 40, "git-snapshot", table)
        if r["scenario"] == "Offline"
    )
    assert off["summary_crosscheck"] == "tokens/s 1.1361e+06 != table 1.1e+06"
