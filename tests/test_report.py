"""`repro report` on the real published logs: golden numbers, labels, measured power, files and errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repro.cli import app
from repro.report.html import render_html
from repro.report.markdown import render_markdown
from repro.report.model import build_report

runner = CliRunner()


def _sim_run(fixtures: Path, dest: Path, label: str | None = "simulated", watts: float | None = 500.0) -> Path:
    src = fixtures / "azure-nd-gb200-v6-v5.1" / "llama2-70b-99" / "Offline" / "performance" / "run_1"
    dest.mkdir(parents=True)
    shutil.copy(src / "mlperf_log_summary.txt", dest)
    (dest / "run.json").write_text(
        json.dumps(
            {"recipe": "nd-gb200-v6", "label": label, "incomplete": False, "status": "complete", "gpus": {"count": 4}}
        )
    )
    if watts is not None:
        rows = ["time_s,gpu_index,watts"] + [f"{t},{g},{watts}" for t in range(0, 11) for g in range(4)]
        (dest / "power.csv").write_text("\n".join(rows) + "\n")
    return dest


def test_gb300_rack_golden(fixtures: Path) -> None:
    rep = build_report([fixtures / "azure-nd-gb300-v6-rack"])
    doc = rep.to_json()
    assert doc["recipe"] == "nd-gb300-v6" and doc["label"] is None
    assert doc["measured"]["tokens_per_s_total"] == pytest.approx(62690.8 + 59043.8 + 57599.1)
    assert doc["measured"]["tokens_per_s_per_gpu"] == pytest.approx((62690.8 + 59043.8 + 57599.1) / 12)
    assert {v["vm"]: v["status"] for v in doc["vms"]} == {  # published without accuracy runs: never a PASS
        "ND_GB300_v6_1": "NOT A REPRODUCTION",
        "ND_GB300_v6_4": "NOT A REPRODUCTION",
        "ND_GB300_v6_16": "FAIL",
    }
    assert rep.exit_code == 1 and doc["reproduction"] is False
    own = next(c for c in doc["comparisons"] if c["own"])
    assert own["recipe"] == "nd-gb300-v6" and own["in_band"] and own["deviation_pct"] == pytest.approx(-1.68, abs=0.01)
    assert {c["recipe"] for c in doc["comparisons"]} == {
        "nd-gb300-v6",
        "nd-gb200-v6",
        "nd-h100-v5",
        "nd-h200-v5",
        "dgx-h100",
        "nc-h100-v5",
    }
    qa = next(b for b in doc["business"] if b["profile"] == "Q&A")
    assert qa["interactions_per_s_total"] == pytest.approx(179333.7 / 650)
    agentic = next(b for b in doc["business"] if b["profile"] == "agentic")
    assert agentic["interactions_per_s_per_gpu"] == pytest.approx(179333.7 / 12 / 10000)
    assert (
        doc["efficiency"]["measured"] == []
        and doc["efficiency"]["tdp_based"]["label"] == "TDP-based (published report)"
    )
    assert doc["efficiency"]["tdp_based"]["values"][0] == {
        "recipe": "nd-gb300-v6",
        "gpu": "NVIDIA GB300",
        "tokens_per_watt": 10.92,
    }
    assert {v["tokens_per_watt"] for v in doc["efficiency"]["tdp_based"]["values"]} == {10.92, 10.01, 4.39}
    assert 0.1 < doc["roofline"]["fraction"] < 1
    assert doc["rack"]["published_rack"]["total_tokens_per_s"] == 1100948.3
    for vm in ("ND_GB300_v6_1", "ND_GB300_v6_4", "ND_GB300_v6_16"):
        assert any(vm in s and s.endswith("mlperf_log_summary.txt") for s in doc["sources"])


def test_gb200_single_vm_and_markdown(fixtures: Path) -> None:
    rep = build_report([fixtures / "azure-nd-gb200-v6-v5.1"])
    assert rep.per_gpu == pytest.approx(13015.4)
    assert not rep.multi and rep.rack.rows[0].verdict.status == "PASS"
    md = render_markdown(rep)
    assert "| **nd-gb200-v6** | NVIDIA GB200 | 13,015.4 |" in md
    assert "bound = BW / (W / B + C x KV)" in md
    assert "TDP-based (published report): nd-gb200-v6 | 10.01" in md
    assert "accuracy/accuracy.txt" in md


def test_dgx_needs_recipe_then_reports(fixtures: Path) -> None:
    res = runner.invoke(app, ["report", str(fixtures / "nvidia-dgx-h100-v4.1")])
    assert res.exit_code == 2 and "--recipe NAME" in res.output and "Traceback" not in res.output
    rep = build_report([fixtures / "nvidia-dgx-h100-v4.1"], recipe="dgx-h100")
    assert rep.per_gpu == pytest.approx(24524.9 / 8)
    assert rep.roof is not None and rep.roof.weight_bytes == pytest.approx(
        rep.recipe.model.parameters / rep.recipe.trtllm.tp_size
    )
    assert rep.recipe.trtllm.tp_size == 2


def test_labelled_run_is_labelled_everywhere_with_measured_power(fixtures: Path, tmp_path: Path) -> None:
    run = _sim_run(fixtures, tmp_path / "sim")
    rep = build_report([run])
    doc = rep.to_json()
    assert doc["label"] == "simulated" and doc["reproduction"] is False and "never a reproduction" in doc["banner"]
    m = doc["efficiency"]["measured"][0]
    assert m["mean_watts_total"] == pytest.approx(2000.0)
    assert m["tokens_per_joule"] == pytest.approx(52061.6 / 2000.0)
    assert str(run / "power.csv") in doc["sources"]
    assert rep.title.startswith("[SIMULATED, NOT A REPRODUCTION]")
    assert "SIMULATED run(s)" in render_markdown(rep) and "## 4. Efficiency [simulated]" in render_markdown(rep)
    html = render_html(rep)
    assert 'class="banner"' in html and "[simulated]" in html and "26.03" in html


def test_cli_writes_html_and_markdown_atomically(fixtures: Path, tmp_path: Path) -> None:
    out_html, out_md = tmp_path / "o" / "r.html", tmp_path / "o" / "r.md"
    res = runner.invoke(
        app,
        [
            "report",
            str(fixtures / "azure-nd-gb300-v6-rack"),
            "--html",
            str(out_html),
            "--markdown",
            str(out_md),
            "--json",
        ],
    )
    assert res.exit_code == 1, res.output  # the rack's verdict (a FAIL VM), as verify and aggregate exit
    doc = json.loads(res.stdout)
    assert doc["outputs"]["html"] == f"wrote {out_html}"
    html = out_html.read_text()
    assert html.count("data:image/png;base64,") == 4 and "http://" not in html and "https://" not in html
    assert "<script" not in html and "Content-Security-Policy" in html
    assert out_md.read_text().startswith("# repro report: Azure ND GB300 v6")
    assert [p.name for p in out_html.parent.iterdir() if p.name.startswith(".")] == []


def test_cli_dry_run_writes_nothing(fixtures: Path, tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(fixtures / "azure-nd-gb200-v6-v5.1"), "--html", str(target), "--dry-run"])
    assert res.exit_code == 0 and "would write" in res.output and not target.exists()
    assert "Against every published result" in res.output and "tokens/s per GPU" in res.output


def test_cli_bad_inputs(tmp_path: Path) -> None:
    res = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "nope" in res.output and "Next:" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["report", str(tmp_path), "--html", str(tmp_path)])
    assert res.exit_code == 2 and "is a folder" in res.output


@pytest.mark.parametrize("command", ["report", "verify", "explain", "aggregate"])
def test_missing_folder_is_named_not_a_recipe_question(fixtures: Path, tmp_path: Path, command: str) -> None:
    """A mistyped result folder gets the same answer from every command that reads one: it is not there (a
    report used to ask for --recipe); in a rack, beside a real VM folder, too."""
    missing = tmp_path / "nonexistent"
    for args in ([str(missing)], [str(fixtures / "azure-nd-gb300-v6-rack"), str(missing)]):
        if command in ("verify", "explain") and len(args) > 1:
            continue
        res = runner.invoke(app, [command, *args])
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        error, _, next_line = " ".join(res.output.split()).partition(" Next: ")
        want = f"error: {missing}: no such file or folder. Check the path; repro status names the latest run folder."
        assert error == want and next_line == "repro status", res.output


def test_bad_power_csv_names_the_file(fixtures: Path, tmp_path: Path) -> None:
    run = _sim_run(fixtures, tmp_path / "sim", watts=None)
    (run / "power.csv").write_text("time_s,gpu_index,watts\n0,0,abc\n")
    res = runner.invoke(app, ["report", str(run)])
    assert res.exit_code == 2 and "power.csv: line 2" in res.output
