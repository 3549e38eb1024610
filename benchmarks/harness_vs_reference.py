"""repro's LoadGen harness against a minimal reference SUT, same LoadGen, same Offline query, one process.

(a) repro: `repro.run.sut.LoadGenSUT` driving the `sim` backend at unlimited rate (zero work per sample).
(b) reference: a SUT written like MLCommons' `language/llama2-70b/SUT.py` (mlcommons/inference, commit 0257f68:
    `issue_queries` puts slices of `batch_size` samples on a `queue.Queue`, one worker thread takes them and
    answers each sample with its own `lg.QuerySamplesComplete([lg.QuerySampleResponse(id, ptr, size)])`), with the
    two things a Llama-2-70B Offline run needs today added the way that file's SUTServer does them: a
    `FirstTokenComplete` per sample and the token count (`n_tokens`) on the completion.

Both answer every sample with the dataset's output length of int32 tokens (the same cached arrays), both get the
same settings (Offline, PerformanceOnly, exactly N samples, token latencies on) and write LoadGen logs to a temp
folder; only `StartTestWithLogSettings` is timed. Runs alternate (repro first, then reference first), at 1x, 4x and
16x a base size; the ratio is reference time / repro time, so above 1 means repro is faster.

    python benchmarks/harness_vs_reference.py [--base 6144] [--pairs 5] [--all-cores]
"""

from __future__ import annotations

import argparse
import array
import os
import queue
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _sidebyside import alternate  # noqa: E402

from repro.run.backends.sim import FILL_TOKEN, SimBackend  # noqa: E402
from repro.run.sut import LoadGenSUT  # noqa: E402
from repro.setup.dataset import PreparedDataset  # noqa: E402

DATASET = 24_576
MAX_TOKENS = 1024
BATCH = 512  # the sim backend's chunk; the reference takes the same slices


def make_dataset(tmp: Path, rng: np.random.Generator) -> PreparedDataset:
    input_lens = rng.integers(16, 128, size=DATASET).astype(np.int64)
    input_ids = rng.integers(3, 32000, size=int(input_lens.sum())).astype(np.int32)
    output_lens = np.clip(rng.normal(273, 120, size=DATASET), 1, MAX_TOKENS).astype(np.int64)
    return PreparedDataset(tmp, "synthetic", input_ids, input_lens, output_lens, [])


def settings(n: int) -> Any:
    ts = lg.TestSettings()
    ts.scenario = lg.TestScenario.Offline
    ts.mode = lg.TestMode.PerformanceOnly
    ts.offline_expected_qps = 400
    ts.min_duration_ms = 0
    ts.min_query_count = n
    ts.max_query_count = n
    ts.performance_sample_count_override = min(n, DATASET)
    ts.use_token_latencies = True
    return ts


def log_settings(outdir: str) -> Any:
    out = lg.LogOutputSettings()
    out.outdir = outdir
    out.copy_summary_to_stdout = False
    log = lg.LogSettings()
    log.log_output = out
    log.enable_trace = False
    return log


class ReferenceSUT:
    """SUT.py's shape: a queue of sample slices, one worker, one LoadGen call per sample and response."""

    def __init__(self, output_lens: np.ndarray, tokens: dict[int, np.ndarray], perf_count: int) -> None:
        self.output_lens = output_lens
        self.tokens = tokens
        self.query_queue: queue.Queue[Any] = queue.Queue()
        self.worker = threading.Thread(target=self.process_queries, daemon=True)
        self.worker.start()
        self.sut = lg.ConstructSUT(self.issue_queries, self.flush_queries)
        self.qsl = lg.ConstructQSL(DATASET, perf_count, lambda _: None, lambda _: None)

    def issue_queries(self, query_samples: Any) -> None:
        while len(query_samples) > 0:
            self.query_queue.put(query_samples[:BATCH])
            query_samples = query_samples[BATCH:]

    def flush_queries(self) -> None:
        pass

    def process_queries(self) -> None:
        while True:
            qitem = self.query_queue.get()
            if qitem is None:
                break
            for q in qitem:
                n = int(max(1, min(self.output_lens[q.index], MAX_TOKENS)))
                output = self.tokens[n]
                first = array.array("B", np.array([output[0]], np.int32).tobytes())
                fb = first.buffer_info()
                lg.FirstTokenComplete([lg.QuerySampleResponse(q.id, fb[0], fb[1])])
                response_array = array.array("B", output.tobytes())
                bi = response_array.buffer_info()
                lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, bi[0], bi[1], n)])

    def close(self) -> None:
        self.query_queue.put(None)
        self.worker.join()
        lg.DestroyQSL(self.qsl)
        lg.DestroySUT(self.sut)


def run_repro(dataset: PreparedDataset, n: int, tmp: Path) -> tuple[float, int]:
    backend = SimBackend(dataset.output_lens)
    sut = LoadGenSUT(backend, dataset, MAX_TOKENS, min(n, DATASET))
    backend.start(sut)
    with tempfile.TemporaryDirectory(dir=tmp) as out:
        t0 = _now()
        sut.start_test(settings(n), log_settings(out), os.path.join(out, "audit.config"))
        elapsed = _now() - t0
    backend.close()
    sut.destroy()
    assert sut.error is None, sut.error
    return elapsed, sut.samples_done


def run_reference(dataset: PreparedDataset, tokens: dict[int, np.ndarray], n: int, tmp: Path) -> float:
    ref = ReferenceSUT(dataset.output_lens, tokens, min(n, DATASET))
    with tempfile.TemporaryDirectory(dir=tmp) as out:
        t0 = _now()
        lg.StartTestWithLogSettings(ref.sut, ref.qsl, settings(n), log_settings(out), os.path.join(out, "audit.config"))
        elapsed = _now() - t0
    ref.close()
    return elapsed


def _now() -> float:
    import time

    return time.perf_counter()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=int, default=6144, help="samples at 1x (4x and 16x follow)")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--all-cores", action="store_true", help="do not pin to one core")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.base, args.pairs = 64, 1
    if not args.all_cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    print(f"LoadGen {lg.__version__ if hasattr(lg, '__version__') else '?'}; {cores} core(s); batch {BATCH}")
    rng = np.random.default_rng(0)
    per_sample: list[tuple[int, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="repro-harness-bench-") as tmp_s:
        tmp = Path(tmp_s)
        dataset = make_dataset(tmp, rng)
        probe = SimBackend(dataset.output_lens)
        tokens = {n: probe._tokens(n) for n in range(1, MAX_TOKENS + 1)}  # the sim backend's own arrays
        assert int(tokens[5][0]) == FILL_TOKEN
        for mult in (1, 4, 16):
            n = args.base * mult
            done: list[int] = []

            def ours(n: int = n, done: list[int] = done) -> None:
                _, samples = run_repro(dataset, n, tmp)
                done.append(samples)

            pair = alternate(
                f"Offline {n:,} samples",
                ours,
                lambda n=n: run_reference(dataset, tokens, n, tmp),
                args.pairs,
            )
            assert set(done) == {n}, f"repro answered {set(done)} samples, expected {n}"
            ours_sps = n / statistics.median(pair.repro_s)
            ref_sps = n / statistics.median(pair.reference_s)
            lo, hi = pair.spread
            print(
                f"{n:>7,} samples: repro {ours_sps:,.0f} samples/s, reference {ref_sps:,.0f} samples/s, "
                f"ratio {pair.ratio:.2f}x (spread {lo:.2f}-{hi:.2f}, {args.pairs} pairs); goal >= 1.0x: "
                f"{'reached' if pair.ratio >= 1.0 else 'not reached'}"
            )
            per_sample.append(
                (n, statistics.median(pair.repro_s) / n * 1e6, statistics.median(pair.reference_s) / n * 1e6)
            )
    (n0, r0, f0) = per_sample[0]
    for n, r, f in per_sample[1:]:
        print(
            f"cost per sample at {n // n0}x vs 1x: repro {r:.2f} us ({r / r0:.2f}x of 1x), "
            f"reference {f:.2f} us ({f / f0:.2f}x of 1x); linear = 1.00x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
