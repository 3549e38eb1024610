"""One time scale (repro/core/timescale.py): the HTTP client's stall deadline, the readiness wait and the heartbeat
shrink by the factor a rehearsal sets, and every message names the deadline at both paces.

The stall test runs the real client against a real socket that accepts and never answers (a server thinking)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from repro.core.timescale import REAL_TIME, TimeScale
from repro.run.backends.http_client import BackendError, Endpoint, HttpClient


def test_the_factor_scales_seconds_rates_and_reads_back() -> None:
    ts = TimeScale(1 / 400, "test")
    assert ts.s(600) == pytest.approx(1.5) and ts.real(1.5) == pytest.approx(600) and ts.rate(1.3) == 520
    assert ts.text == "1/400" and TimeScale(0.3).text == "0.3" and REAL_TIME.text == "1"
    assert ts.describe(1.5) == "1.5 s here (600 s at the real machine's pace, time x 1/400)"
    assert REAL_TIME.describe(1800) == "1,800 s" and not REAL_TIME.scaled
    assert ts.deadline(1800, floor_s=60) == 60 and ts.deadline(8120 * 10, floor_s=60) == pytest.approx(203)
    assert REAL_TIME.deadline(5, floor_s=60) == 5  # real time: as given, no floor
    assert TimeScale.from_json(ts.to_json()) == TimeScale(1 / 400, "test")
    stretched = TimeScale(2, "a latency run whose TTFT margin is under this host's delay")  # slower than real
    assert stretched.s(0.45) == 0.9 and stretched.text == "2" and stretched.rate(30) == 15
    assert TimeScale(1 / 2.9).text == "1/2.9" and TimeScale(1.6).text == "1.6"
    for bad in (0, -1, 10.5, float("nan"), True, 1e-9):
        with pytest.raises(ValueError):
            TimeScale(bad)


def test_a_run_takes_the_slowest_scale_it_needs_in_tenths_never_faster() -> None:
    """pace.round_pace: 405B Server needs 1/2.94 of real time for its TTFT margin; a whole 1/n ran it at 1/2, a
    third longer than it needed. Never faster than needed, never past MAX_FACTOR."""
    from repro.rehearse.pace import round_pace

    assert round_pace(0.34) == pytest.approx(1 / 2.9) and round_pace(1 / 400) == pytest.approx(1 / 400)
    assert round_pace(1.587) == 1.6 and round_pace(2.0) == 2.0 and round_pace(0.99) == 1.0 and round_pace(50) == 10
    for need in (0.0026, 0.018, 0.18, 0.265, 0.5, 0.7, 1.01, 3.33, 9.9):
        k = round_pace(need)
        assert need - 1e-12 <= k <= need * 1.1 + 1e-12, (need, k)


def _silent_listener() -> tuple[socket.socket, int]:
    """Accepts connections and reads the request, answers nothing: a server generating a long unstreamed answer."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return srv, srv.getsockname()[1]


def test_a_scaled_stall_deadline_fires_at_its_scaled_time_and_names_both_paces() -> None:
    """600 s of no first byte at 1/400 ends the request after 1.5 s, not 600 s, and says which 600 s it was."""
    srv, port = _silent_listener()
    try:
        ts = TimeScale(1 / 400, "test")
        client = HttpClient(stall_s=ts.s(600), time_scale=ts)
        ep = Endpoint(f"http://127.0.0.1:{port}", "127.0.0.1", port)
        t0 = time.monotonic()
        with pytest.raises(BackendError) as err:
            asyncio.run(client.json(ep, "POST", "/v1/chat/completions", {"model": "m"}))
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert err.value.kind == "stall" and 1.4 < took < 3.0, took
    assert "sent nothing for 1.5 s here (600 s at the real machine's pace, time x 1/400)" in err.value.message


def test_the_backend_scales_its_deadlines_once() -> None:
    """TrtllmBackend takes the real machine's seconds and the run's scale: the client's stall is scaled once, the
    readiness wait too, never below the host's own start allowance."""
    from repro.run.backends.trtllm import LOCAL_START_S, TrtllmBackend

    ts = TimeScale(1 / 400, "test")
    be = TrtllmBackend(["http://127.0.0.1:1"], stall_timeout_s=3500, health_timeout_s=8120 * 10, time_scale=ts)
    try:
        assert be.client.stall_s == pytest.approx(8.75) and be.health_timeout_s == pytest.approx(203)
        low = TrtllmBackend(["http://127.0.0.1:1"], health_timeout_s=1800, time_scale=ts)
        assert low.health_timeout_s == LOCAL_START_S
        low.close()
        real = TrtllmBackend(["http://127.0.0.1:1"], stall_timeout_s=600, health_timeout_s=30)
        assert real.client.stall_s == 600 and real.health_timeout_s == 30
        real.close()
    finally:
        be.close()


def test_tune_judges_scaled_limits_and_probes_for_scaled_time(tmp_path) -> None:
    """`repro tune` under a time scale: the limits it judges (and sends LoadGen, in ns) and its default probe are the
    real machine's x the factor; real time leaves them as the benchmark's."""
    from repro.core.workspace import Workspace
    from repro.run.tune import _scaled_limits
    from repro.run.tune_options import PROBE_S, TuneOptions

    ws = Workspace.open(tmp_path)
    real = TuneOptions.build("nd-gb200-v6-405b", ws, scenario="Server")
    fast = TuneOptions.build("nd-gb200-v6-405b", ws, scenario="Server", time_scale=TimeScale(1 / 8, "test"))
    assert real.search.limits_ms == (6000.0, 175.0) and _scaled_limits(real) == {}
    assert fast.search.limits_ms == (750.0, 21.875)
    assert _scaled_limits(fast) == {"ttft_latency_ns": 750_000_000, "tpot_latency_ns": 21_875_000}
    assert real.search.probe_s == PROBE_S and fast.search.probe_s == PROBE_S / 8
