"""Measured GPU power: an NVML sampler the harness runs around a benchmark, and tokens per joule from its file.

The published efficiency figures are TDP-based; this is what the GPUs actually drew. The sampler writes
`power.csv` (time_s,gpu_index,watts) once, atomically, when it stops, so an interrupted run never leaves
half a file. Without NVML (no driver, CPU demo) it does nothing and says so in `.note`.
"""

from __future__ import annotations

import csv
import io
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.fsutil import atomic_write_text
from repro.core.safeio import open_regular

POWER_CSV = "power.csv"
HEADER = ("time_s", "gpu_index", "watts")
GPU_CSV = "gpu.csv"
GPU_HEADER = ("time_s", "gpu_index", "sm_clock_mhz", "mem_clock_mhz", "temp_c", "throttle_reasons")
# NVML clocks-event (throttle) reason bits that slow a GPU down (nvml.h, nvidia-ml-py's nvmlClocksThrottleReason*
# constants); idle (0x1) and application clocks (0x2) are not slowdowns.
SLOWDOWN_BITS = {
    0x4: "SW power cap",
    0x8: "HW slowdown",
    0x20: "SW thermal",
    0x40: "HW thermal",
    0x80: "HW power brake",
}

Reader = Callable[[], list[float]]
StateReader = Callable[[], list[tuple[float, float, float, int]]]


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

    def state() -> list[tuple[float, float, float, int]]:
        return [
            (
                float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
                float(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
                int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
            )
            for h in handles
        ]

    read.state = state  # type: ignore[attr-defined]
    return read, pynvml.nvmlShutdown, f"NVML power, clocks, temperature and throttle reasons of {len(handles)} GPU(s)"


class PowerSampler:
    """`with PowerSampler(run_dir, 1.0) as p:` samples every GPU's power in a thread until the block ends.

    `reader` replaces NVML (returns watts per GPU); it exists for machines without a GPU.
    """

    def __init__(
        self,
        run_dir: Path,
        interval_s: float = 1.0,
        *,
        reader: Reader | None = None,
        state_reader: StateReader | None = None,
    ):
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.run_dir = Path(run_dir)
        self.interval_s = float(interval_s)
        self._reader = reader
        self._state_reader = state_reader
        self.states: list[tuple[float, int, float, float, float, int]] = []
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
        if self._state_reader is None:
            self._state_reader = getattr(self._reader, "state", None)
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
        if self._state_reader is not None:
            try:
                states = self._state_reader()
            except Exception:  # noqa: BLE001 - clocks are a diagnosis, never a reason to stop
                return
            self.states.extend((t, i, sm, mem, temp, int(r)) for i, (sm, mem, temp, r) in enumerate(states))

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
        if self.states:
            buf = io.StringIO()
            writer = csv.writer(buf, lineterminator="\n")
            writer.writerow(GPU_HEADER)
            writer.writerows(self.states)
            atomic_write_text(self.run_dir / GPU_CSV, buf.getvalue())
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
    file_bytes: int | None = None
    """Set when the file is larger than MAX_POWER_BYTES: only its first MAX_POWER_BYTES were read."""

    @property
    def note(self) -> str | None:
        if self.file_bytes is None:
            return None
        return (
            f"{self.path}: {self.file_bytes / 2**20:,.0f} MiB; only its first {MAX_POWER_BYTES // 2**20} MiB "
            f"({self.window_s:,.0f} s of samples) were read, so the power is that window's mean"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "read_first_bytes_of": self.file_bytes,
            "path": str(self.path),
            "gpus": self.gpus,
            "samples": self.samples,
            "window_s": self.window_s,
            "energy_j": self.energy_j,
            "mean_watts_total": self.mean_watts_total,
            "mean_watts_per_gpu": self.mean_watts_per_gpu,
        }


# A sampler line is ~30 bytes; a longer one is not ours. More GPUs than this is not one VM.
MAX_LINE_BYTES = 256
MAX_GPUS = 1024
MAX_POWER_BYTES = 16 * 2**20
"""A day of 1 Hz samples from 8 GPUs is ~20 MiB, 16 MiB read in a few seconds; a larger file is read up to this
(its first samples' window, said so) instead of for minutes."""


@dataclass
class _Series:
    """One GPU's running integral: the file is read once, line by line, so memory does not grow with its size."""

    first_t: float
    last_t: float
    last_w: float
    count: int = 1
    energy: float = 0.0


def _bad(path: Path, problem: str) -> InputError:
    return InputError(f"{path}: {problem}", "re-run the benchmark (`repro run offline`) or delete the file")


def _parse_row(path: Path, lineno: int, raw: bytes) -> tuple[float, int, float] | None:
    if len(raw) > MAX_LINE_BYTES:
        raise _bad(path, f"line {lineno} is longer than {MAX_LINE_BYTES} bytes; not time_s,gpu_index,watts.")
    try:
        line = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise _bad(path, f"line {lineno} is not ASCII text; not time_s,gpu_index,watts.") from None
    if not line:
        return None
    try:
        t, gpu, watts = line.split(",")
        row = float(t), int(gpu), float(watts)
    except ValueError:
        raise _bad(path, f"line {lineno} is not time_s,gpu_index,watts.") from None
    if not all(math.isfinite(v) for v in (row[0], row[2])):
        raise _bad(path, f"line {lineno} has a value that is not a finite number.")
    if row[0] < 0 or row[1] < 0 or row[2] < 0:
        raise _bad(path, f"line {lineno} has a negative value.")
    return row


def read_power(run_dir: Path) -> PowerSummary | None:
    """The run's power.csv summarised, or None when the run has none."""
    path = Path(run_dir) / POWER_CSV
    if not path.is_file():
        return None
    series: dict[int, _Series] = {}
    size: int | None = None
    try:
        with open_regular(path) as fh:
            on_disk = os.fstat(fh.fileno()).st_size
            size = on_disk if on_disk > MAX_POWER_BYTES else None
            budget = MAX_POWER_BYTES
            header = fh.readline(MAX_LINE_BYTES + 1)
            if tuple(h.strip() for h in header.decode("ascii", "replace").split(",")) != HEADER:
                raise InputError(
                    f"{path}: header must be {','.join(HEADER)}.",
                    "delete the file or re-run the benchmark with NVML present",
                )
            lineno = 1
            while budget > 0 and (raw := fh.readline(MAX_LINE_BYTES + 1)):
                budget -= len(raw)
                lineno += 1
                if budget <= 0 and not raw.endswith(b"\n"):
                    break  # the cut fell inside this line
                row = _parse_row(path, lineno, raw)
                if row is None:
                    continue
                t, gpu, watts = row
                s = series.get(gpu)
                if s is None:
                    if len(series) >= MAX_GPUS:
                        raise _bad(path, f"line {lineno} names more than {MAX_GPUS} GPUs.")
                    series[gpu] = _Series(t, t, watts)
                    continue
                if t < s.last_t:
                    raise _bad(path, f"line {lineno}: GPU {gpu}'s time goes backwards.")
                s.energy += (s.last_w + watts) / 2 * (t - s.last_t)
                s.last_t, s.last_w, s.count = t, watts, s.count + 1
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}).", "check the run folder") from None
    energy = sum(s.energy for s in series.values())
    window = max((s.last_t - s.first_t for s in series.values()), default=0.0)
    if window <= 0 or energy <= 0 or not math.isfinite(energy):
        raise InputError(
            f"{path}: fewer than two samples in time per GPU; no energy can be computed.",
            "re-run the benchmark (`repro run offline`)",
        )
    total = energy / window
    return PowerSummary(
        path=path,
        gpus=len(series),
        samples=sum(s.count for s in series.values()),
        window_s=window,
        energy_j=energy,
        mean_watts_total=total,
        mean_watts_per_gpu=total / len(series),
        file_bytes=size,
    )


def tokens_per_joule(run_dir: Path, tokens: float) -> float | None:
    """Tokens generated during the sampled window divided by the energy all GPUs used in it."""
    summary = read_power(run_dir)
    if summary is None:
        return None
    return tokens / summary.energy_j


def read_gpu_samples(run_dir: Path) -> dict[str, Any] | None:
    """gpu.csv summarised for `repro explain`: mean clocks and temperature, and the share of samples throttled."""
    path = Path(run_dir) / GPU_CSV
    if not path.is_file():
        return None
    rows: list[tuple[float, float, float, int]] = []
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or tuple(h.strip() for h in header) != GPU_HEADER:
                raise InputError(f"{path}: header must be {','.join(GPU_HEADER)}.", "delete the file or re-run")
            for lineno, row in enumerate(reader, start=2):
                if not row:
                    continue
                try:
                    rows.append((float(row[2]), float(row[3]), float(row[4]), int(row[5])))
                except (ValueError, IndexError):
                    raise InputError(
                        f"{path}: line {lineno} is not {','.join(GPU_HEADER)}.", "delete the file or re-run"
                    ) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}).", "check the run folder") from None
    if not rows:
        return None
    slowed = [r for r in rows if r[3] & sum(SLOWDOWN_BITS)]
    reasons = sorted({name for r in slowed for bit, name in SLOWDOWN_BITS.items() if r[3] & bit})
    return {
        "gpu_samples": len(rows),
        "sm_clock_mhz_mean": sum(r[0] for r in rows) / len(rows),
        "mem_clock_mhz_mean": sum(r[1] for r in rows) / len(rows),
        "temp_c_mean": sum(r[2] for r in rows) / len(rows),
        "temp_c_max": max(r[2] for r in rows),
        "throttle_share": len(slowed) / len(rows),
        "throttle_reasons": ", ".join(reasons),
        "gpu_csv": str(path),
    }
