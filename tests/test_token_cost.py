"""The cost of a token (issue #38): $ per million output and total tokens from a price per VM-hour, the shipped
Azure price table (schema-checked, no guessed price), bad prices refused, tokens per joule beside it, and the
report carrying an attestation's digest."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from helpers import cli, cli_process, copy_bundle, one_line_error, write_prepared

from repro.core.errors import InputError
from repro.core.prices import load_price_table, price_table
from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.results.attest import ATTESTATION_NAME
from repro.run.harness import run_benchmark
from repro.run.options import RunOptions

GB200 = "azure-nd-gb200-v6-v5.1"


def test_published_gb200_offline_costs_0_577_per_million_output_tokens(fixtures: Path) -> None:
    """The issue's done-when: 108.16 / 3600 / 52061.6 * 1e6 = 0.5771 at the shipped westus3 list price."""
    res = cli("report", str(fixtures / GB200), "--json")
    assert res.exit_code == 0, res.output
    cost = json.loads(res.stdout)["cost"]
    assert cost["price"]["usd_per_hour"] == 108.16 and cost["price"]["region"] == "westus3"
    assert cost["price"]["source"] == "Azure Retail Prices API"
    assert math.isclose(cost["usd_per_million_output_tokens"], 108.16 / 3600 / 52061.6 * 1e6, rel_tol=1e-5)
    # the published log counts no input tokens: no total-token figure is made up
    assert cost["usd_per_million_total_tokens"] is None and cost["input_basis"].startswith("not measured")
    text = cli("report", str(fixtures / GB200)).stdout
    assert "$0.577" in text and "Azure Retail Prices API" in text and "MLPerf's basis" in text


def test_verify_shows_the_cost_and_price_per_hour_overrides(fixtures: Path) -> None:
    res = cli("verify", str(fixtures / GB200), "--price-per-hour", "54.08", "--json")
    cost = json.loads(res.stdout)["cost"]
    assert math.isclose(cost["usd_per_million_output_tokens"], 0.5771 / 2, rel_tol=1e-3)
    assert "--price-per-hour" in cost["price"]["basis"]
    assert "$0.577 " in " ".join(cli("verify", str(fixtures / GB200)).stdout.split())


def test_gb300_has_no_price_known_never_a_guess(fixtures: Path) -> None:
    res = cli("verify", str(fixtures / "azure-nd-gb300-v6-rack" / "ND_GB300_v6_1"), "--json")
    cost = json.loads(res.stdout)["cost"]
    assert cost["price"] is None and cost["usd_per_million_output_tokens"] is None
    note = "Azure ND GB300 v6 has no price in the shipped Azure price table; pass --price-per-hour"
    assert cost["price_note"] == note
    text = " ".join(cli("verify", str(fixtures / "azure-nd-gb300-v6-rack" / "ND_GB300_v6_1")).stdout.split())
    assert "$ per million output tokens: no price known (Azure ND GB300 v6 has no price" in text
    assert not any("GB300" in row.name for row in price_table().prices)


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "-inf", "1e400"])
def test_bad_prices_are_refused_with_one_line_and_nothing_written(fixtures: Path, tmp_path: Path, bad: str) -> None:
    out = tmp_path / "report.html"
    err = one_line_error(cli_process("report", str(fixtures / GB200), "--html", str(out), "--price-per-hour", bad))
    assert "--price-per-hour" in err and "finite number of USD above 0" in err
    assert not out.exists()
    one_line_error(cli_process("verify", str(fixtures / GB200), "--price-per-hour", bad))


def test_the_price_table_is_validated(tmp_path: Path) -> None:
    table = load_price_table()
    assert {r.vm_size for r in table.prices} >= {"Standard_ND128isr_NDR_GB200_v6", "Standard_ND96isr_H100_v5"}
    good = (
        "prices:\n  - {vm_size: X, name: X, region: eastus, usd_per_hour: 1.5, date: 2026-01-01, "
        "source: Azure Retail Prices API}\n"
    )
    path = tmp_path / "p.yaml"
    path.write_text(good)
    assert load_price_table(path).prices[0].usd_per_hour == 1.5
    for bad in (
        good.replace("1.5", "0"),
        good.replace("1.5", ".nan"),
        good.replace("Azure Retail Prices API", "a guess"),
        good.replace("date: 2026-01-01, ", ""),
        good + good.split("\n", 1)[1],  # the same VM size twice
    ):
        path.write_text(bad)
        with pytest.raises(InputError, match="not a valid price table"):
            load_price_table(path)


@pytest.fixture
def sim_run(_isolated_home: Path) -> Path:
    ws = Workspace.open().ensure()
    write_prepared(
        ws.preprocessed / get_recipe("nd-h100-v5").dataset.name,
        16,
        name="mlperf-openorca",
        seed=6,
        prompt_len=(8, 48),
        out_len=(5, 60),
    )
    outcome = run_benchmark(RunOptions.build("nd-h100-v5", ws, backend="sim", samples=16, detect=False))
    return Path(outcome.details["run_dir"])


def test_total_tokens_and_tokens_per_joule_from_the_runs_own_data(sim_run: Path) -> None:
    """Input tokens are measured on the dataset the run read; tokens per joule from power.csv (NVML's format)."""
    from repro.run.power import HEADER, POWER_CSV

    perf = sim_run / "performance" / "run_1"
    rows = [",".join(HEADER)] + [f"{t},{g},{w}" for t in range(5) for g, w in enumerate([700.0] * 8)]
    (perf / POWER_CSV).write_text("\n".join(rows) + "\n")
    res = cli("verify", str(sim_run), "--json")
    doc = json.loads(res.stdout)
    cost = doc["cost"]
    # nd-h100-v5's list price, since run.json names no VM size (detection off) and the recipe does
    assert cost["price"]["vm_size"] == "Standard_ND96isr_H100_v5" and cost["price"]["usd_per_hour"] == 98.32
    assert cost["input_basis"].startswith("measured: mean of 16 prompts")
    out, inp = cost["output_tokens_per_sample"], cost["input_tokens_per_sample"]
    expected_total = cost["usd_per_million_output_tokens"] * out / (inp + out)
    assert math.isclose(cost["usd_per_million_total_tokens"], expected_total, rel_tol=1e-4)
    assert math.isclose(cost["tokens_per_joule"], doc["tokens_per_s"] / 5600.0, rel_tol=1e-6)


def test_the_html_report_carries_the_attestation_digest(sim_run: Path, tmp_path: Path) -> None:
    assert cli("attest", str(sim_run)).exit_code == 0
    html = tmp_path / "report.html"
    res = cli("report", str(sim_run), "--html", str(html), "--json")
    assert res.exit_code == 1, res.output  # written; a simulated run is never a reproduction, as verify says
    import hashlib

    digest = hashlib.sha256((sim_run / ATTESTATION_NAME).read_bytes()).hexdigest()
    page = html.read_text()
    assert digest in page and f"repro attest verify {sim_run / ATTESTATION_NAME} --key " in page
    verify = json.loads(res.stdout)["attestations"][0]["verify"]
    moved = tmp_path / "moved"
    shutil.copytree(sim_run, moved)
    proc = cli_process(*verify.split()[1:3], str(moved / ATTESTATION_NAME), *verify.split()[4:])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_attestation_no_section(fixtures: Path, tmp_path: Path) -> None:
    run = copy_bundle(fixtures, GB200, tmp_path / "gb200")
    doc = json.loads(cli("report", str(run), "--json").stdout)
    assert doc["attestations"] == []
