"""The parser on every published log variant in tests/fixtures/published (copies of the real logs), on broken
logs, and on mutated logs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from golden_util import check_golden, stable_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repro.core.errors import InputError
from repro.results.logs import find_runs, parse_run

GB200 = "azure-nd-gb200-v6-v5.1/llama2-70b-99/Offline/performance/run_1"
DGX_OFF = "nvidia-dgx-h100-v4.1/llama2-70b-99.9/Offline/performance/run_1"
DGX_SRV = "nvidia-dgx-h100-v4.1/llama2-70b-99.9/Server/performance/run_1"
GB300_16 = "azure-nd-gb300-v6-rack/ND_GB300_v6_16/llama2-70b-99/Offline"


def test_gb200_summary_accuracy_and_system_json(fixtures: Path) -> None:
    run = parse_run(fixtures / GB200)
    assert (run.scenario, run.mode, run.validity, run.valid) == ("Offline", "PerformanceOnly", "VALID", True)
    assert run.tokens_per_s == 52061.6 and run.samples_per_s == 190.476
    assert run.settings["target_qps"] == 230 and run.settings["min_duration_ms"] == 2400000
    assert run.accuracy["rouge1"] == 44.7494 and run.accuracy["tokens_per_sample"] == 273.4
    assert run.system["accelerators_per_node"] == 4 and run.system_path.name == "ND_GB200_v6.json"
    assert run.latency_ns["p99"] == 3174836518478
    assert any("sample_concatenate_permutation" in w for w in run.warnings)
    assert run.label is None and not run.incomplete


def test_gb300_detail_log_gives_effective_settings(fixtures: Path) -> None:
    run = parse_run(fixtures / GB300_16)
    assert run.tokens_per_s == 57599.1
    assert run.loadgen_version == "5.1.0 @ 47b91b979c"
    # The summary prints target_qps 400, the detail log's effective value is the one LoadGen used.
    assert run.settings["target_qps"] == 395
    assert run.settings["generated_samples_per_query"] == 1056768
    assert run.duration_s == pytest.approx(5003.79, abs=0.01)


def test_server_format_with_ttft_tpot_and_completed_tokens(fixtures: Path) -> None:
    run = parse_run(fixtures / DGX_SRV)
    assert run.scenario == "Server" and run.tokens_per_s == 21605.79 and run.samples_per_s == 74.42
    assert run.ttft_ns["p99"] == 461278089 and run.tpot_ns["p99"] == 175354317 and run.tpot_ns["min"] == 49791668
    assert run.invalid_reasons == [] and run.early_stopping_met is True


def test_parsed_fixtures_match_golden(fixtures: Path) -> None:
    runs = [r.model_dump(mode="json", exclude={"run_info", "system"}) for r in find_runs(fixtures)]
    check_golden("parsed_fixtures.json", stable_json(runs, fixtures))


def _copy(fixtures: Path, rel: str, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(fixtures / rel, dst)
    return dst


def test_missing_tokens_line_falls_back_to_detail(fixtures: Path, tmp_path: Path) -> None:
    run_dir = _copy(fixtures, GB300_16, tmp_path)
    summary = run_dir / "mlperf_log_summary.txt"
    summary.write_text(
        "".join(line for line in summary.read_text().splitlines(True) if not line.startswith("Tokens per second"))
    )
    assert parse_run(run_dir).tokens_per_s == 57599.1


def test_invalid_run_reasons(fixtures: Path, tmp_path: Path) -> None:
    run_dir = _copy(fixtures, GB200, tmp_path)
    summary = run_dir / "mlperf_log_summary.txt"
    text = (
        summary.read_text()
        .replace("Result is : VALID", "Result is : INVALID")
        .replace(
            "Min duration satisfied : Yes",
            "Min duration satisfied : NO\nRecommendations:\n * Increase expected QPS so the loadgen "
            "pre-generates a larger (coalesced) query.",
        )
    )
    summary.write_text(text)
    run = parse_run(run_dir)
    assert not run.valid
    assert run.invalid_reasons[0] == "min duration not met (3,226 s < 2,400 s)"
    assert "Increase expected QPS" in run.invalid_reasons[1]


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"", "no 'Result is' line"),
        (
            b"================\nMLPerf Results Summary\n================\nSUT name : PySUT\nScenario : Offline\n",
            "truncated",
        ),
        (b"\x00\x01\x02binary\xff" * 50, "is binary"),
    ],
)
def test_broken_summary_names_file(tmp_path: Path, content: bytes, needle: str) -> None:
    (tmp_path / "mlperf_log_summary.txt").write_bytes(content)
    with pytest.raises(InputError) as err:
        parse_run(tmp_path)
    assert needle in err.value.message and "mlperf_log_summary.txt" in err.value.message


def test_detail_with_only_malformed_lines(tmp_path: Path) -> None:
    (tmp_path / "mlperf_log_detail.txt").write_text(
        ':::MLLOG {"key": "result_validity", "value": \n:::MLLOG not json\n'
    )
    with pytest.raises(InputError, match="no readable ':::MLLOG' lines"):
        parse_run(tmp_path)


def test_malformed_lines_are_counted_not_fatal(fixtures: Path, tmp_path: Path) -> None:
    run_dir = _copy(fixtures, GB300_16, tmp_path)
    detail = run_dir / "mlperf_log_detail.txt"
    detail.write_text(detail.read_text() + ':::MLLOG {"key": broken\n')
    run = parse_run(run_dir)
    assert any("1 malformed MLLOG line" in w for w in run.warnings)


def test_folder_without_logs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no LoadGen logs"):
        find_runs(tmp_path)


SEEDS = [GB200, DGX_SRV, GB300_16]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.sampled_from(SEEDS),
    cut=st.floats(0, 1),
    flips=st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=8)), max_size=6),
    target=st.sampled_from(["mlperf_log_summary.txt", "mlperf_log_detail.txt"]),
)
def test_mutated_real_logs_never_crash(
    fixtures: Path,
    tmp_path_factory: pytest.TempPathFactory,
    which: str,
    cut: float,
    flips: list[tuple[float, bytes]],
    target: str,
) -> None:
    run_dir = tmp_path_factory.mktemp("mut") / "run"
    shutil.copytree(fixtures / which, run_dir)
    path = run_dir / target
    if not path.exists():
        path = run_dir / "mlperf_log_summary.txt"
    data = bytearray(path.read_bytes())
    data = data[: max(1, int(len(data) * cut))] if cut < 0.98 else data
    for pos, blob in flips:
        i = int(pos * (len(data) - 1))
        data[i : i + len(blob)] = blob
    path.write_bytes(bytes(data))
    try:
        run = parse_run(run_dir)
    except InputError as exc:
        assert str(run_dir) in exc.message or path.name in exc.message
    else:
        assert run.validity and run.scenario
