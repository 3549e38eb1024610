"""The stand-in's fixed-speed mode keeps the queueing model its docstring promises (tests for `repro tune` rely on it).

Real HTTP against the stand-in process on 127.0.0.1; times are measured by this test's own client.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import threading
import time
from pathlib import Path

import pytest
from standin_util import STANDIN, LocalStandin, write_tokenizer


def _module():
    spec = importlib.util.spec_from_file_location("standin_pace", STANDIN)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _stream(port: int, prompt: list[int], t0: float) -> list[float]:
    """Seconds after t0 at which each content piece arrived (the role event is not a token)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = {"model": "m", "prompt_token_ids": prompt, "max_tokens": 64, "stream": True}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    times: list[float] = []
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        doc = json.loads(line[6:])
        if doc["choices"] and "content" in doc["choices"][0].get("delta", {}):
            times.append(time.monotonic() - t0)
    conn.close()
    return times


def _burst(port: int, n: int, prompt_len: int = 4) -> list[list[float]]:
    t0 = time.monotonic()
    out: list[list[float]] = [[] for _ in range(n)]

    def one(i: int) -> None:
        out[i] = _stream(port, list(range(3, 3 + prompt_len)), t0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
        time.sleep(0.002)  # arrival order = queue order
    for t in threads:
        t.join()
    return out


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tokenizer(tmp_path_factory.mktemp("tok"))


def test_fixed_speed_slots_queue_fifo_at_the_stated_token_rate(tok: Path) -> None:
    """2 slots, 50 tokens/s, 9-token answers (+EOS = 10 ids = 0.2 s): 6 requests finish in 3 waves of 2."""
    env = {"STANDIN_TOKENS_PER_S": "50", "STANDIN_MAX_BATCH": "2", "STANDIN_OUT_LEN": "9"}
    with LocalStandin(tok, env=env) as srv:
        srv.wait_bound()
        time.sleep(0.5)
        runs = _burst(srv.port, 6)
    assert all(len(r) == 10 for r in runs)
    for i, r in enumerate(runs):
        wave = i // 2
        assert r[0] == pytest.approx(wave * 0.2 + 0.02, abs=0.04), (i, r[0])  # TTFT = queue wait + 1/rate
        assert r[-1] == pytest.approx((wave + 1) * 0.2, abs=0.04), (i, r[-1])
        tpot = (r[-1] - r[0]) / (len(r) - 1)
        assert tpot == pytest.approx(0.02, abs=0.004)
    mod = _module()
    assert mod.capacity_qps(2, 50, 10) == pytest.approx(10.0)


def test_prefill_time_scales_with_the_prompt(tok: Path) -> None:
    env = {"STANDIN_TOKENS_PER_S": "100", "STANDIN_PREFILL_S_PER_TOKEN": "0.01", "STANDIN_OUT_LEN": "4"}
    with LocalStandin(tok, env=env) as srv:
        srv.wait_bound()
        time.sleep(0.5)
        short, long = _burst(srv.port, 1, prompt_len=5)[0], _burst(srv.port, 1, prompt_len=25)[0]
    assert short[0] == pytest.approx(0.05 + 0.01, abs=0.03)
    assert long[0] == pytest.approx(0.25 + 0.01, abs=0.03)
    assert _module().service_time_s(25, 5, 100, 0.01) == pytest.approx(0.30)


def test_without_the_knobs_answers_come_at_once(tok: Path) -> None:
    with LocalStandin(tok, env={"STANDIN_OUT_LEN": "30"}) as srv:
        srv.wait_bound()
        time.sleep(0.5)
        r = _burst(srv.port, 4)
    assert all(len(x) == 31 and x[-1] < 0.5 for x in r)


def test_bad_fixed_speed_settings_fail_at_start(tok: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    srv = LocalStandin(tok, env={"STANDIN_TOKENS_PER_S": "0"}, log=log)
    try:
        assert srv.proc.wait(10) == 1
    finally:
        srv.stop()
    assert "bad fixed-speed settings" in log.read_text()
