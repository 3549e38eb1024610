"""Can repro's HTTP client keep up? Beside a plain asyncio client and aiohttp, each on one core, against the stand-in.

Offline: every request in flight at once (8,192 = 4 servers x 2,048 on GB300), non-streaming answers.
Server: streaming, one token per SSE event. The stand-in trtllm-serve (repro/rehearse/standin/, from TensorRT-LLM's
source) runs as its own process on the other core. Two figures per client: tokens/s over wall time (bounded by
the one-core server here) and tokens per client CPU-second (what one client core could sustain). repro's client
also re-tokenizes every answer with a tokenizer, as a run against trtllm-serve does; the plain client only parses
JSON and reads usage.completion_tokens; aiohttp (a maintained client, measured when installed) does the same.

Goals (issue 12): streaming >= 3 x 46,016.49 tokens/s (best published Server per VM, Azure GB200 v5.1);
Offline >= 10 x 62,804 tokens/s (best published Offline VM).

    python benchmarks/http_client.py [--offline-requests 8192] [--server-requests 2048] [--out-len 273]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from standin_util import LocalStandin, prompts, write_tokenizer  # noqa: E402

from repro.run.backends.base import Request  # noqa: E402
from repro.run.backends.http_client import build_payload  # noqa: E402
from repro.run.backends.trtllm import TrtllmBackend  # noqa: E402
from repro.run.tokens import load_tokenizer  # noqa: E402

SERVER_GOAL = 3 * 46_016.49
OFFLINE_GOAL = 10 * 62_804


class Count:
    def __init__(self, n: int) -> None:
        self.n, self.done, self.tokens, self.errors = n, 0, 0, []
        self.lock = threading.Lock()
        self.all = threading.Event()

    def first_tokens(self, events) -> None:
        pass

    def completed(self, events) -> None:
        with self.lock:
            self.done += len(events)
            self.tokens += sum(e[2] if len(e) > 2 else len(e[1]) for e in events)
            if self.done >= self.n:
                self.all.set()

    def failed(self, exc: BaseException) -> None:
        self.errors.append(exc)
        self.all.set()


def run_repro(url: str, tok, reqs: list[list[int]], out_len: int, stream: bool) -> dict[str, float]:
    be = TrtllmBackend([url], stream=stream, tokenizer=tok, max_concurrency=len(reqs), model="bench")
    sink = Count(len(reqs))
    be.start(sink)
    work = [Request(i, i, np.asarray(p, dtype=np.int32), out_len) for i, p in enumerate(reqs)]
    c0, t0 = time.process_time(), time.perf_counter()
    be.submit(work)
    sink.all.wait()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    be.close()
    if sink.errors:
        raise sink.errors[0]
    server_tokens = be.stats()["tokens"]["server_completion_tokens"]
    return {"tokens": server_tokens, "wall_s": wall, "cpu_s": cpu}


async def _plain_one(host: str, port: int, body: bytes, stream: bool) -> int:
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    if not stream:
        return int(json.loads(rest)["usage"]["completion_tokens"])
    count = 0
    for line in rest.split(b"\n"):
        if line.startswith(b"data: {"):
            doc = json.loads(line[6:])
            if doc.get("usage"):
                count = int(doc["usage"]["completion_tokens"])
    return count


def run_plain(url: str, reqs: list[list[int]], out_len: int, stream: bool) -> dict[str, float]:
    """The simplest correct asyncio client: one connection per request, read to EOF, parse JSON."""
    host, port = url.split("//")[1].split(":")
    bodies = [json.dumps(build_payload("chat", p, out_len, stream=stream, model="bench")).encode() for p in reqs]

    async def go() -> int:
        return sum(await asyncio.gather(*(_plain_one(host, int(port), b, stream) for b in bodies)))

    c0, t0 = time.process_time(), time.perf_counter()
    tokens = asyncio.run(go())
    return {"tokens": tokens, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}


def run_aiohttp(url: str, reqs: list[list[int]], out_len: int, stream: bool) -> dict[str, float] | None:
    """A maintained client (aiohttp, if installed): one pooled session, JSON bodies, SSE read line by line."""
    try:
        import aiohttp
    except ImportError:
        return None
    bodies = [build_payload("chat", p, out_len, stream=stream, model="bench") for p in reqs]

    async def go() -> int:
        conn = aiohttp.TCPConnector(limit=len(reqs))
        async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None)) as session:

            async def one(body: dict) -> int:
                async with session.post(url + "/v1/chat/completions", json=body) as resp:
                    if not stream:
                        return int((await resp.json())["usage"]["completion_tokens"])
                    count = 0
                    async for line in resp.content:
                        if line.startswith(b"data: {"):
                            doc = json.loads(line[6:])
                            if doc.get("usage"):
                                count = int(doc["usage"]["completion_tokens"])
                    return count

            return sum(await asyncio.gather(*(one(b) for b in bodies)))

    c0, t0 = time.process_time(), time.perf_counter()
    tokens = asyncio.run(go())
    return {"tokens": tokens, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--offline-requests", type=int, default=8192)
    ap.add_argument("--server-requests", type=int, default=2048)
    ap.add_argument("--out-len", type=int, default=273, help="tokens per answer (published runs average ~273)")
    ap.add_argument("--out", type=Path, default=Path("http_client.json"))
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.offline_requests, args.server_requests, args.out_len = 16, 8, 8
        args.out = Path(tempfile.gettempdir()) / "http_client.smoke.json"
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.offline_requests * 2 + 1024)), hard))
    cores = sorted(os.sched_getaffinity(0))
    tmp = Path(tempfile.mkdtemp(prefix="repro-bench-http-"))
    tok_dir = write_tokenizer(tmp / "tok")
    tok = load_tokenizer([tok_dir])
    results: dict[str, dict[str, float]] = {}
    with LocalStandin(tok_dir, env={"STANDIN_OUT_LEN": str(args.out_len)}) as srv:
        srv.wait_bound()
        if len(cores) > 1:
            os.sched_setaffinity(srv.proc.pid, {cores[-1]})
            os.sched_setaffinity(0, {cores[0]})
        time.sleep(0.5)
        for mode, n, stream in (
            ("offline", args.offline_requests, False),
            ("server-stream", args.server_requests, True),
        ):
            reqs = prompts(n, seed=11)
            for name, fn in (
                ("repro", lambda reqs=reqs, stream=stream: run_repro(srv.url, tok, reqs, args.out_len, stream)),
                ("plain-asyncio", lambda reqs=reqs, stream=stream: run_plain(srv.url, reqs, args.out_len, stream)),
                ("aiohttp", lambda reqs=reqs, stream=stream: run_aiohttp(srv.url, reqs, args.out_len, stream)),
            ):
                r = fn()
                if r is None:
                    print(f"{mode:14s} {name:14s} not installed, skipped")
                    continue
                r["tokens_per_s_wall"] = r["tokens"] / r["wall_s"]
                r["tokens_per_client_cpu_s"] = r["tokens"] / max(r["cpu_s"], 1e-9)
                results[f"{mode}/{name}"] = r
                print(
                    f"{mode:14s} {name:14s} {n:6d} req  {r['tokens']:>9,d} tokens  wall {r['wall_s']:6.2f} s "
                    f"{r['tokens_per_s_wall']:>11,.0f} tok/s  client CPU {r['cpu_s']:6.2f} s "
                    f"{r['tokens_per_client_cpu_s']:>11,.0f} tok/CPU-s",
                    flush=True,
                )
    for mode, goal in (("offline", OFFLINE_GOAL), ("server-stream", SERVER_GOAL)):
        a, b = results[f"{mode}/repro"], results[f"{mode}/plain-asyncio"]
        print(
            f"{mode}: repro/plain CPU cost ratio {a['cpu_s'] / b['cpu_s']:.2f}; repro capacity "
            f"{a['tokens_per_client_cpu_s']:,.0f} tok/CPU-s = {a['tokens_per_client_cpu_s'] / goal:.2f}x the goal "
            f"({goal:,.0f}); wall rate {a['tokens_per_s_wall'] / goal:.2f}x the goal"
        )
    args.out.write_text(json.dumps({"cores": len(cores), "out_len": args.out_len, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
