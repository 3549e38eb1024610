"""Can one LoadGen's client carry a rack? repro's client and aiohttp, streamed through LoadGen, against N endpoints.

One LoadGen carries a whole rack's traffic (issue 46 item 6): CoreWeave's v6.1 GB300 NVL72 x72 Llama-2-70B system
completed 1,136,100 tokens/s Offline and 944,902 Server (repro/data/published/published-llama2-70b.csv, the v6.1
CoreWeave GB300-NVL72 rows), and Azure's GB300 x72 DeepSeek-R1 Server 589,391 (shared/reference/deepseek-r1.md, from
Azure's v6.1 summary). Each streamed run here is LoadGen's Server scenario at a target rate, through
  - repro: repro's own SUT (repro.run.sut.LoadGenSUT) over the trtllm backend, as `repro run server` drives it,
    re-tokenizing every text answer, in one process (its event loop thread beside LoadGen's);
  - aiohttp (the `bench` extra): a minimal LoadGen SUT over one aiohttp session, reading the SSE lines and counting
    the server's usage.completion_tokens (no tokenizer: less work than repro does),
against N zero-work endpoints (benchmarks/_sse_zero.py: the stand-in trtllm-serve's exact bytes, one event per token
per engine step). Each client runs in a process of its own; its CPU (the process and every worker, from
/proc/PID/stat) and the servers' CPU (their processes, read the same way) are measured separately, so the servers
sharing this machine are subtracted, not guessed. The figures: streamed tokens/s and samples/s reached and whether
LoadGen found the run VALID, client CPU-seconds per 1M tokens, and from that the client cores a rack needs.

    python benchmarks/rack_client.py [--endpoints 72] [--qps 100,200,400] [--duration-s 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

RACK_LLAMA2 = 1_136_100  # CoreWeave v6.1 GB300-NVL72 x72 Llama-2-70B Offline (published index row, tokens/s)
RACK_LLAMA2_SERVER = 944_902.14  # the same system's Server row
RACK_DSR1 = 589_391  # Azure v6.1 GB300 x72 DeepSeek-R1 Server (shared/reference/deepseek-r1.md)
GRACE_CORES = 72  # cores in one Grace CPU (Neoverse-V2); a GB300 node has two for its four GPUs
CLK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK


# ---------------------------------------------------------------- the child: one client, one LoadGen run


def _dataset(folder: Path, n: int, isl: int) -> Any:
    import numpy as np

    from repro.setup.dataset import load_prepared, save_prepared

    rng = np.random.default_rng(7)
    prompts = [rng.integers(3, 299, size=isl).tolist() for _ in range(n)]
    save_prepared(folder, "rack-client-bench", prompts, [1] * n, [""] * n)
    return load_prepared(folder)


def _settings(lg: Any, qps: float, duration_s: float) -> Any:
    ts = lg.TestSettings()
    ts.scenario = lg.TestScenario.Server
    ts.mode = lg.TestMode.PerformanceOnly
    ts.server_target_qps = qps
    ts.min_duration_ms = int(duration_s * 1000)
    ts.min_query_count = max(1, int(qps * duration_s))
    ts.use_token_latencies = True
    ts.ttft_latency = 2_000_000_000  # llama2-70b Server in mlperf.conf: 2,000 ms TTFT, 200 ms TPOT
    ts.tpot_latency = 200_000_000
    return ts


def _log(lg: Any, outdir: Path) -> Any:
    out = lg.LogOutputSettings()
    out.outdir = str(outdir)
    out.copy_summary_to_stdout = False
    log = lg.LogSettings()
    log.log_output = out
    log.enable_trace = False
    return log


def child(args: argparse.Namespace) -> int:
    import mlperf_loadgen as lg

    from repro.results.logfiles import parse_summary

    work = Path(args.workdir)
    ds = _dataset(work / "data", 1024, args.isl)
    urls = args.urls.split(",")
    if args.client.startswith("repro"):
        from repro.run.backends.spread import SpreadBackend
        from repro.run.backends.trtllm import TokenStats, TrtllmBackend
        from repro.run.sut import LoadGenSUT
        from repro.run.tokens import load_tokenizer

        tok = load_tokenizer([args.tokenizer])
        kwargs = {"stream": True, "tokenizer": tok, "model": "bench", "max_concurrency": 1 << 16}
        if args.client == "repro":
            be: Any = TrtllmBackend(urls, **kwargs)
        else:  # repro-xK: the client in K worker processes, as --client-processes K runs it
            k = int(args.client.split("x")[1])
            be = SpreadBackend(
                TrtllmBackend, {"endpoints": urls, **kwargs}, k, merge_tokens=TokenStats.merged, ready_s=60
            )
        sut = LoadGenSUT(be, ds, args.max_tokens, len(ds))
        be.start(sut)
        run = sut.start_test
        target: Any = (sut.sut, sut.qsl)
    else:
        ref = AiohttpSUT(lg, urls, ds, args.max_tokens)
        run = None
        target = ref

    outdir = work / "logs"
    outdir.mkdir(parents=True, exist_ok=True)
    ts, log = _settings(lg, args.qps, args.duration_s), _log(lg, outdir)
    worker0 = [cpu_s(pid) for pid in getattr(be, "pids", [])] if args.client.startswith("repro") else []
    c0, t0 = time.process_time(), time.perf_counter()
    if run is not None:
        run(ts, log, str(outdir / "no-audit.config"))
    else:
        lg.StartTestWithLogSettings(target.sut, target.qsl, ts, log, str(outdir / "no-audit.config"))
    wall = time.perf_counter() - t0
    parent = time.process_time() - c0  # every thread of this process: LoadGen's, the client's loop
    extra: dict[str, Any] = {}
    if args.client.startswith("repro"):
        workers = [cpu_s(pid) - w0 for pid, w0 in zip(getattr(be, "pids", []), worker0, strict=True)]
        st = be.stats()
        extra = {"tokens": st["tokens"], "spread": st.get("spread"), "loadgen_cpu_s": parent}
        extra["worker_cpu_s"] = workers
        parent += sum(workers)
        be.close()
    else:
        target.close()
    s = parse_summary(outdir / "mlperf_log_summary.txt")
    doc = {
        "client": args.client,
        "qps": args.qps,
        "wall_s": wall,
        "client_cpu_s": parent,
        "summary": {k: v for k, v in s.items() if isinstance(v, (int, float, str, bool)) or k in ("ttft", "tpot")},
        **extra,
    }
    Path(args.result).write_text(json.dumps(doc, default=str))
    return 0


class AiohttpSUT:
    """The reference: LoadGen's Server queries sent through one aiohttp session on its own event loop thread;
    FirstTokenComplete at the first content event, QuerySamplesComplete with the server's usage count."""

    def __init__(self, lg: Any, urls: list[str], ds: Any, max_tokens: int) -> None:
        import threading

        import aiohttp
        import numpy as np

        from repro.run.backends.http_client import build_payload

        self.lg, self.urls, self.ds, self.max_tokens = lg, urls, ds, max_tokens
        self.np, self.build = np, build_payload
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def session() -> Any:
            conn = aiohttp.TCPConnector(limit=0)
            return aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None))

        self.session = asyncio.run_coroutine_threadsafe(session(), self.loop).result()
        self.rr = 0
        self.one = np.zeros(1, dtype=np.int32)
        self.sut = lg.ConstructSUT(self.issue, lambda: None)
        self.qsl = lg.ConstructQSL(len(ds), len(ds), lambda _: None, lambda _: None)

    def issue(self, samples: Any) -> None:
        work = [(q.id, self.ds.prompt(q.index)) for q in samples]
        self.loop.call_soon_threadsafe(self._spawn, work)

    def _spawn(self, work: list[tuple[int, Any]]) -> None:
        for qid, prompt in work:
            url = self.urls[self.rr % len(self.urls)]
            self.rr += 1
            body = self.build("chat", prompt.tolist(), self.max_tokens, stream=True, model="bench")
            self.loop.create_task(self._one(url, qid, body))

    async def _one(self, url: str, qid: int, body: dict[str, Any]) -> None:
        lg, QSR = self.lg, self.lg.QuerySampleResponse
        count, first = 0, False
        async with self.session.post(url + "/v1/chat/completions", json=body) as resp:
            async for line in resp.content:
                if not line.startswith(b"data: {"):
                    continue
                doc = json.loads(line[6:])
                if doc.get("usage"):
                    count = int(doc["usage"]["completion_tokens"])
                choices = doc.get("choices") or []
                if not first and choices and choices[0].get("delta", {}).get("content"):
                    first = True
                    lg.FirstTokenComplete([QSR(qid, self.one.ctypes.data, 4)])
        out = self.np.zeros(max(count, 1), dtype=self.np.int32)
        lg.QuerySamplesComplete([QSR(qid, out.ctypes.data, out.nbytes, len(out))])

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.session.close(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.lg.DestroyQSL(self.qsl)
        self.lg.DestroySUT(self.sut)


# ---------------------------------------------------------------- the parent: servers, then each client in turn


def _free_ports(n: int) -> list[int]:
    from standin_util import free_port_range

    base = free_port_range(n)
    return list(range(base, base + n))


def start_servers(tok: Path, ports: list[int], procs: int, out_len: int, step_s: float, cores: list[int]) -> list[Any]:
    servers = []
    for i in range(procs):
        mine = ports[i::procs]
        p = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "_sse_zero.py"), str(tok), "--ports", ",".join(map(str, mine))]
            + ["--out-len", str(out_len), "--step-s", str(step_s)],
            stdout=subprocess.DEVNULL,
        )
        if cores:
            os.sched_setaffinity(p.pid, set(cores))
        servers.append(p)
    import socket

    deadline = time.monotonic() + 30
    for port in ports:
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"zero-work server on {port} did not listen")
            time.sleep(0.05)
    return servers


def run_client(
    args: argparse.Namespace, client: str, qps: float, urls: list[str], tok: Path, servers: list[Any], cores: list[int]
) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"repro-rack-{client}-"))
    result = work / "result.json"
    argv = [sys.executable, __file__, "--child", client, "--qps", str(qps)]
    argv += ["--urls", ",".join(urls), "--tokenizer", str(tok), "--workdir", str(work), "--result", str(result)]
    argv += ["--duration-s", str(args.duration_s), "--isl", str(args.isl), "--max-tokens", str(args.max_tokens)]
    s0 = sum(cpu_s(p.pid) for p in servers)
    pre = (lambda: os.sched_setaffinity(0, set(cores))) if cores else None
    proc = subprocess.run(argv, preexec_fn=pre, capture_output=True, text=True, timeout=args.duration_s * 4 + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"{client} child failed: {proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    doc = json.loads(result.read_text())
    doc["server_cpu_s"] = sum(cpu_s(p.pid) for p in servers) - s0
    return doc


def _figures(doc: dict[str, Any]) -> dict[str, Any]:
    s = doc["summary"]
    tokens_s, samples_s = float(s.get("tokens_per_s") or 0.0), float(s.get("samples_per_s") or 0.0)
    tokens = tokens_s * doc["wall_s"]
    client = doc["client_cpu_s"]
    per_m = client / max(tokens, 1) * 1e6
    loadgen = doc.get("loadgen_cpu_s", client)
    return {
        "loadgen_cpu_per_m": loadgen / max(tokens, 1) * 1e6,
        "tokens_s": tokens_s,
        "samples_s": samples_s,
        "valid": str(s.get("validity") or "?"),
        "ttft_p99_ms": (s.get("ttft") or {}).get("p99", 0) / 1e6,
        "tpot_p99_ms": (s.get("tpot") or {}).get("p99", 0) / 1e6,
        "client_cpu_s": client,
        "cpu_per_m": per_m,
        "server_cpu_s": doc["server_cpu_s"],
        "wall_s": doc["wall_s"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoints", type=int, default=72, help="zero-work endpoints (72: one per GPU of an NVL72)")
    ap.add_argument("--server-procs", type=int, default=1)
    ap.add_argument("--qps", default="100,200,400", help="LoadGen Server target rates (samples/s), comma-separated")
    ap.add_argument(
        "--clients", default="repro,repro-x2,aiohttp", help="repro, repro-xK (the client in K processes), aiohttp"
    )
    ap.add_argument("--duration-s", type=float, default=20.0)
    ap.add_argument("--out-len", type=int, default=272, help="tokens per answer (CoreWeave's run: 272.4 per sample)")
    ap.add_argument("--isl", type=int, default=700, help="prompt tokens per request")
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--step-s", type=float, default=0.02, help="the zero-work engine's step: one token per stream")
    ap.add_argument("--out", type=Path, default=Path("rack_client.json"))
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    for hidden in ("--urls", "--tokenizer", "--workdir", "--result"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.client, args.qps = args.child, float(args.qps)
        return child(args)
    if args.smoke:
        args.endpoints, args.qps, args.duration_s = 4, "20", 1.0
        args.out_len, args.isl = 16, 16
        args.out = Path(tempfile.gettempdir()) / "rack_client.smoke.json"
    from standin_util import write_tokenizer

    cores = sorted(os.sched_getaffinity(0))
    server_cores, client_cores = ([cores[-1]], cores[:-1]) if len(cores) > 1 else ([], [])
    tok = write_tokenizer(Path(tempfile.mkdtemp(prefix="repro-rack-tok-")) / "tok")
    ports = _free_ports(args.endpoints)
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    servers = start_servers(tok, ports, args.server_procs, args.out_len, args.step_s, server_cores)
    clients = args.clients.split(",")
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        print("aiohttp not installed (pip install -e '.[bench]'): the reference is skipped")
        clients = [c for c in clients if c != "aiohttp"]
    runs: list[dict[str, Any]] = []
    print(
        f"machine: {len(cores)} cores; servers on {server_cores or 'any'}, clients on {client_cores or 'any'}; "
        f"{args.endpoints} endpoints, {args.out_len} tokens/answer, step {args.step_s * 1000:.0f} ms, ISL {args.isl}",
        flush=True,
    )
    try:
        for qps in [float(q) for q in args.qps.split(",")]:
            for client in clients:
                doc = run_client(args, client, qps, urls, tok, servers, client_cores)
                f = _figures(doc)
                runs.append({**doc, "figures": f})
                print(
                    f"qps {qps:6.0f} {client:8s} {f['tokens_s']:>9,.0f} tok/s {f['samples_s']:7.1f} samples/s "
                    f"{f['valid']:8s} TTFT p99 {f['ttft_p99_ms']:7.1f} ms TPOT p99 {f['tpot_p99_ms']:6.1f} ms  "
                    f"client CPU {f['client_cpu_s']:6.2f} s ({f['cpu_per_m']:6.2f} s/1M tok)  "
                    f"servers {f['server_cpu_s']:6.2f} s (not counted)",
                    flush=True,
                )
    finally:
        for p in servers:
            p.terminate()
            p.wait(10)
    report(runs)
    args.out.write_text(json.dumps({"cores": len(cores), "args": vars(args), "runs": runs}, indent=2, default=str))
    return 0


def report(runs: list[dict[str, Any]]) -> None:
    """Per client: the best VALID rate, its CPU per 1M tokens (median over its runs), the cores for each rack."""
    import statistics

    by: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by.setdefault(r["client"], []).append(r["figures"])
    costs: dict[str, float] = {}
    for name, fs in by.items():
        valid = [f for f in fs if f["valid"] == "VALID"]
        best = max(valid or fs, key=lambda f: f["tokens_s"])
        costs[name] = cost = statistics.median(f["cpu_per_m"] for f in fs)
        lg_cost = statistics.median(f["loadgen_cpu_per_m"] for f in fs)
        if name.startswith("repro-x"):
            print(
                f"{name}: the run's own process (LoadGen, the SUT, the pipes) {lg_cost:.2f} CPU-s per 1M tokens: one "
                f"LoadGen process carries at most {1e6 / lg_cost:,.0f} tokens/s with the client spread; "
                f"{RACK_LLAMA2:,} tokens/s needs {RACK_LLAMA2 * (cost - lg_cost) / 1e6:.1f} worker cores "
                f"beside it ({RACK_DSR1:,}: {RACK_DSR1 * (cost - lg_cost) / 1e6:.1f})"
            )
        print(
            f"{name}: best {'VALID' if valid else 'INVALID'} streamed rate {best['tokens_s']:,.0f} tokens/s "
            f"({best['samples_s']:,.1f} samples/s) from one client process; {cost:.2f} client CPU-s per 1M tokens "
            f"= {1e6 / cost:,.0f} tokens/s per client core; cores for "
            f"{RACK_LLAMA2:,} tokens/s: {RACK_LLAMA2 * cost / 1e6:.1f}, for {RACK_DSR1:,}: {RACK_DSR1 * cost / 1e6:.1f}"
        )
    if "aiohttp" in costs:
        for name, cost in costs.items():
            if name != "aiohttp":
                print(f"{name} vs aiohttp: CPU per token ratio {cost / costs['aiohttp']:.2f} (below 1: repro cheaper)")


if __name__ == "__main__":
    sys.exit(main())
