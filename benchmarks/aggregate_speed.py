"""`repro aggregate` and `repro verify` over a rack against a plain parse of the same logs, whole processes.

The plain parse is the floor: one Python process that reads every VM's mlperf_log_summary.txt and sums the
`Tokens per second` lines. Goal (issue 17): repro within 1.5x of that floor at 18 and at 288 VMs, and cost that
grows linearly (run at 1x, 4x and 16x of 18 VMs).

The rack is made from the three published Azure GB300 VM logs in tests/fixtures, copied and given distinct
throughput figures so no two VM folders hold the same log.

In-process too: `repro.results.aggregate.aggregate` on the rack against a plain function reading each summary's
`Tokens per second` line (no interpreter start, no imports), and a count of how often each log file was parsed.

    python benchmarks/aggregate_speed.py [--pairs 5] [--sizes 18,72,288] [--in-process-only]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sidebyside import alternate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "fixtures" / "published" / "azure-nd-gb300-v6-rack"
PLAIN = r"""
import re, sys
from pathlib import Path
total = 0.0
for p in sorted(Path(sys.argv[1]).rglob("mlperf_log_summary.txt")):
    m = re.search(r"^Tokens per second\s*:\s*([0-9.eE+]+)", p.read_text(), re.M)
    total += float(m.group(1))
print(total)
"""
GOAL = 1.5
_TOKENS = re.compile(r"^Tokens per second\s*:\s*([0-9.eE+]+)", re.M)


def plain_parse(rack: Path) -> float:
    """The floor in-process: every summary's tokens line, summed."""
    total = 0.0
    for p in sorted(rack.rglob("mlperf_log_summary.txt")):
        m = _TOKENS.search(p.read_text())
        assert m is not None
        total += float(m.group(1))
    return total


def parses_per_log(rack: Path) -> int:
    """The most times aggregate parsed any one log file (1 = each log parsed once)."""
    from collections import Counter

    from repro.results import logs
    from repro.results.aggregate import aggregate

    seen: Counter[str] = Counter()
    originals = logs.parse_summary, logs.parse_detail

    def counting(fn):  # type: ignore[no-untyped-def]
        def wrapped(path, *a, **kw):  # type: ignore[no-untyped-def]
            seen[str(path)] += 1
            return fn(path, *a, **kw)

        return wrapped

    logs.parse_summary, logs.parse_detail = counting(originals[0]), counting(originals[1])
    try:
        aggregate([rack])
    finally:
        logs.parse_summary, logs.parse_detail = originals
    return max(seen.values())


def in_process(rack: Path, vms: int, pairs: int) -> float:
    from repro.results.aggregate import aggregate

    report = aggregate([rack])
    assert len(report.counted) == vms, (len(report.counted), vms)
    assert abs(report.stats["total"] - plain_parse(rack)) < 1e-6 * report.stats["total"]
    agg = alternate(f"in-process aggregate {vms} VMs", lambda: aggregate([rack]), lambda: plain_parse(rack), pairs)
    slower = 1 / agg.ratio
    per_vm = statistics.median(agg.repro_s) / vms * 1000
    print(
        agg.line() + f"; repro is {slower:.1f}x the plain parse, {per_vm:.2f} ms per VM; "
        f"each log parsed at most {parses_per_log(rack)}x"
    )
    return statistics.median(agg.repro_s)


def make_rack(dest: Path, vms: int) -> Path:
    sources = sorted(p for p in SOURCE.iterdir() if p.is_dir())
    rack = dest / f"rack-{vms}"
    for i in range(vms):
        vm = rack / f"ND_GB300_v6_{i + 1}"
        shutil.copytree(sources[i % len(sources)], vm)
        shutil.copy2(SOURCE / "ND_GB300_v6.json", vm / "ND_GB300_v6.json")
        for log in vm.rglob("mlperf_log_*.txt"):
            text = log.read_text()
            text = re.sub(
                r"(Tokens per second\s*:\s*)([0-9.]+)",
                lambda m, i=i: f"{m.group(1)}{float(m.group(2)) + i / 10:.1f}",
                text,
            )
            # Another run, not a copy of one (repro counts a run once however it is named): its minimum latency
            # i ns longer in the summary and the detail log alike.
            text = re.sub(
                r"(Min latency \(ns\)\s*: |\"key\": \"result_min_latency_ns\", \"value\": )(\d+)",
                lambda m, i=i: f"{m.group(1)}{int(m.group(2)) + i}",
                text,
            )
            log.write_text(text)
    return rack


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--sizes", default="18,72,288")
    ap.add_argument("--in-process-only", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    args = ap.parse_args()
    if args.smoke:
        args.pairs, args.sizes = 1, "2,4"
    sys.path.insert(0, str(REPO))
    repro = [sys.executable, "-c", "from repro.cli import main; main()"]
    medians = []
    inproc = []
    with tempfile.TemporaryDirectory(prefix="repro-agg-bench-") as tmp:
        for vms in (int(s) for s in args.sizes.split(",")):
            rack = make_rack(Path(tmp), vms)
            inproc.append((vms, in_process(rack, vms, max(args.pairs, 5))))
            if args.in_process_only:
                continue
            agg = alternate(
                f"aggregate {vms} VMs",
                lambda r=rack: subprocess.run(
                    [*repro, "aggregate", str(r), "--json"], capture_output=True, check=False
                ),
                lambda r=rack: subprocess.run([sys.executable, "-c", PLAIN, str(r)], capture_output=True, check=True),
                args.pairs,
            )
            slower = 1 / agg.ratio
            print(
                agg.line() + f"; repro is {slower:.2f}x the plain-parse floor (goal <= {GOAL}x: "
                f"{'reached' if slower <= GOAL else 'not reached'})"
            )
            medians.append((vms, sorted(agg.repro_s)[len(agg.repro_s) // 2]))
        for what, series in (("whole process", medians), ("in-process", inproc)):
            if len(series) > 1:
                (n0, t0), (n1, t1) = series[0], series[-1]
                print(
                    f"growth ({what}): {n1 / n0:.0f}x the VMs took {t1 / t0:.2f}x the time "
                    f"(linear would be {n1 / n0:.0f}x)"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
