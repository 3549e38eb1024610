"""Measured GPU power: an NVML sampler the harness runs around a benchmark, and tokens per joule from its file.

The published efficiency figures are TDP-based; this is what the GPUs actually drew. The sampler writes
`power.csv` (time_s,gpu_index,watts) once, atomically, when it stops, so an interrupted run never leaves
half a file. Without NVML (no driver, CPU demo) it does nothing and says so in `.note`.
"""

from __future__ import annotations

import csv
import io
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.fsutil import atomic_write_text

POWER_CSV = "power.csv"
HEADER = ("time_s", "gpu_index", "watts")

Reader = Callable[[], list[float]]


def _nvml_reader() -> tuple[Reader | None, Callable[[], None] | None, str]:
    """(read watts of every GPU, shutdown, note); reader is None when NVML cannot be used here."""
    try:
        import pynvml
    except ImportError:
        return None, None, "NVML Python bindings (nvidia-ml-py) not installed; power not measured"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return None, None, f"NVML not available ({exc}); power not measured"
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except pynvml.NVMLError as exc:
        pynvml.nvmlShutdown()
        return None, None, f"NVML could not list GPUs ({exc}); power not measured"
    if not handles:
        pynvml.nvmlShutdown()
        return None, None, "NVML sees no GPU; power not measured"

    def read() -> list[float]:
        return [pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0 for h in handles]

    return read, pynvml.nvmlShutdown, f"NVML power of {len(handles)} GPU(s)"


class PowerSampler:
    """`with PowerSampler(run_dir, 1.0) as p:` samples every GPU's power in a thread until the block ends.

    `reader` replaces NVML (returns watts per GPU); it exists for machines without a GPU.
    """

    def __init__(self, run_dir: Path, interval_s: float = 1.0, *, reader: Reader | None = None):
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.run_dir = Path(run_dir)
        self.interval_s = float(interval_s)
        self._reader = reader
        self._shutdown: Callable[[], None] | None = None
        self.note = "not started"
        self.samples: list[tuple[float, int, float]] = []
        self.errors = 0
        self.path: Path | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    @property
    def active(self) -> bool:
        return self._thread is not None

    def start(self) -> PowerSampler:
        if self._reader is None:
            self._reader, self._shutdown, self.note = _nvml_reader()
        else:
            self.note = "power from the given reader"
        if self._reader is None:
            return self
        self._t0 = time.monotonic()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="repro-power", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        assert self._reader is not None
        try:
            watts = self._reader()
        except Exception:  # noqa: BLE001 - one failed read must not end the benchmark
            self.errors += 1
            return
        t = round(time.monotonic() - self._t0, 3)
        self.samples.extend((t, i, round(float(w), 3)) for i, w in enumerate(watts))

    def _loop(self) -> None:
        self._sample()
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> Path | None:
        """Stop sampling and write power.csv; None when nothing was sampled."""
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._sample()
        if self._shutdown is not None:
            self._shutdown()
            self._shutdown = None
        if self.errors:
            self.note += f"; {self.errors} failed read(s) skipped"
        if not self.samples:
            return None
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(HEADER)
        writer.writerows(self.samples)
        self.path = self.run_dir / POWER_CSV
        atomic_write_text(self.path, buf.getvalue())
        return self.path

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@dataclass(frozen=True)
class PowerSummary:
    """Average power over the sampled window: energy by the trapezoid rule per GPU, summed over GPUs."""

    path: Path
    gpus: int
    samples: int
    window_s: float
    energy_j: float
    mean_watts_total: float
    mean_watts_per_gpu: float

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "gpus": self.gpus,
            "samples": self.samples,
            "window_s": self.window_s,
            "energy_j": self.energy_j,
            "mean_watts_total": self.mean_watts_total,
            "mean_watts_per_gpu": self.mean_watts_per_gpu,
        }


def read_power(run_dir: Path) -> PowerSummary | None:
    """The run's power.csv summarised, or None when the run has none."""
    path = Path(run_dir) / POWER_CSV
    if not path.is_file():
        return None
    series: dict[int, list[tuple[float, float]]] = {}
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or tuple(h.strip() for h in header) != HEADER:
                raise InputError(
                    f"{path}: header must be {','.join(HEADER)}.",
                    "delete the file or re-run the benchmark with NVML present",
                )
            for lineno, row in enumerate(reader, start=2):
                if not row:
                    continue
                try:
                    t, gpu, watts = float(row[0]), int(row[1]), float(row[2])
                except (ValueError, IndexError):
                    raise InputError(
                        f"{path}: line {lineno} is not time_s,gpu_index,watts.",
                        "delete the file or re-run the benchmark",
                    ) from None
                if watts < 0 or t < 0:
                    raise InputError(
                        f"{path}: line {lineno} has a negative value.", "delete the file or re-run the benchmark"
                    )
                series.setdefault(gpu, []).append((t, watts))
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}).", "check the run folder") from None
    energy, window, count = 0.0, 0.0, 0
    for points in series.values():
        points.sort()
        count += len(points)
        for (t0, w0), (t1, w1) in zip(points, points[1:], strict=False):
            energy += (w0 + w1) / 2 * (t1 - t0)
        window = max(window, points[-1][0] - points[0][0])
    if window <= 0 or energy <= 0:
        raise InputError(
            f"{path}: fewer than two samples in time per GPU; no energy can be computed.",
            "re-run the benchmark (`repro run offline`)",
        )
    total = energy / window
    return PowerSummary(
        path=path,
        gpus=len(series),
        samples=count,
        window_s=window,
        energy_j=energy,
        mean_watts_total=total,
        mean_watts_per_gpu=total / len(series),
    )


def tokens_per_joule(run_dir: Path, tokens: float) -> float | None:
    """Tokens generated during the sampled window divided by the energy all GPUs used in it."""
    summary = read_power(run_dir)
    if summary is None:
        return None
    return tokens / summary.energy_j
