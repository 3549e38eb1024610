"""PowerSampler and tokens per joule: the file format, atomic write, energy, and the no-NVML path."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest
from conftest import required

from repro.core.errors import InputError
from repro.run.power import PowerSampler, read_power, tokens_per_joule


def test_sampler_writes_power_csv_and_energy(tmp_path: Path) -> None:
    with PowerSampler(tmp_path, 0.01, reader=lambda: [100.0, 300.0]) as sampler:
        assert not (tmp_path / "power.csv").exists()
        while len(sampler.samples) < 10:
            time.sleep(0.005)
    lines = (tmp_path / "power.csv").read_text().splitlines()
    assert lines[0] == "time_s,gpu_index,watts"
    assert {line.split(",")[1] for line in lines[1:]} == {"0", "1"}
    summary = read_power(tmp_path)
    assert summary is not None and summary.gpus == 2
    assert summary.mean_watts_total == pytest.approx(400.0)
    assert summary.energy_j == pytest.approx(400.0 * summary.window_s)
    assert tokens_per_joule(tmp_path, 1000.0) == pytest.approx(1000.0 / summary.energy_j)
    assert [p.name for p in tmp_path.iterdir()] == ["power.csv"]


def test_trapezoid_energy_from_a_known_file(tmp_path: Path) -> None:
    (tmp_path / "power.csv").write_text("time_s,gpu_index,watts\n0,0,100\n2,0,300\n0,1,50\n2,1,50\n")
    summary = read_power(tmp_path)
    assert summary is not None and summary.energy_j == pytest.approx(400 + 100)
    assert summary.mean_watts_per_gpu == pytest.approx(125.0)


def test_failed_reads_are_counted_not_fatal(tmp_path: Path) -> None:
    calls = itertools.count()

    def flaky() -> list[float]:
        if next(calls) % 2:
            raise RuntimeError("transient")
        return [10.0]

    with PowerSampler(tmp_path, 0.01, reader=flaky) as sampler:
        while sampler.errors < 2:
            time.sleep(0.005)
    assert "failed read" in sampler.note and read_power(tmp_path) is not None


def test_no_power_file_means_none(tmp_path: Path) -> None:
    assert read_power(tmp_path) is None and tokens_per_joule(tmp_path, 5.0) is None


@pytest.mark.parametrize(
    "body,problem",
    [
        ("a,b,c\n1,0,5\n", "header"),
        ("time_s,gpu_index,watts\n0,0,5\n", "fewer than two"),
        ("time_s,gpu_index,watts\n0,0,-5\n1,0,5\n", "negative"),
    ],
)
def test_bad_power_file_names_file_and_problem(tmp_path: Path, body: str, problem: str) -> None:
    (tmp_path / "power.csv").write_text(body)
    with pytest.raises(InputError) as exc:
        read_power(tmp_path)
    assert str(tmp_path / "power.csv") in exc.value.message and problem in exc.value.message


def _nvml_works() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:  # noqa: BLE001 - any failure means no usable NVML
        return False


def test_real_nvml_or_noop_with_note(tmp_path: Path) -> None:
    """With a GPU (REPRO_REQUIRE_NVML=1 on GPU CI) real watts are sampled; without one the sampler is a no-op."""
    if required("REPRO_REQUIRE_NVML") and not _nvml_works():
        pytest.fail("REPRO_REQUIRE_NVML=1 but NVML is not usable")
    with PowerSampler(tmp_path, 0.05) as sampler:
        if sampler.active:
            while len({t for t, _, _ in sampler.samples}) < 3:
                time.sleep(0.005)
    if _nvml_works():
        summary = read_power(tmp_path)
        assert summary is not None and summary.gpus >= 1 and summary.mean_watts_per_gpu > 0
    else:
        assert not sampler.active and "power not measured" in sampler.note
        assert not os.path.exists(tmp_path / "power.csv")
