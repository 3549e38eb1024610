"""MLPerf Inference rules for llama2-70b that a verdict applies, as data.

Sources (shared/reference/mlperf-llama2-70b.md): mlcommons/inference loadgen/mlperf.conf (§3.1) and
tools/submission/submission_checker constants (§5.2, §6), identical for v4.1 through v6.1.
"""

from __future__ import annotations

from dataclasses import dataclass

REFERENCE_ROUGE = {"rouge1": 44.4312, "rouge2": 22.0352, "rougeL": 28.6162}
REFERENCE_TOKENS_PER_SAMPLE = 294.45
TOKENS_PER_SAMPLE_BAND = (0.9, 1.1)
DATASET_SAMPLES = 24576
MIN_DURATION_MS = 600_000
OFFLINE_MIN_SAMPLES_PER_QUERY = 24576
TARGETS = ("99", "99.9")
SCENARIOS = ("Offline", "Server", "Interactive")


@dataclass(frozen=True)
class LatencyLimits:
    ttft_ms: float
    tpot_ms: float


# llama2-70b.Server.{ttft,tpot}_latency and llama2-70b-interactive.Server.{ttft,tpot}_latency in mlperf.conf.
LATENCY_LIMITS = {"Server": LatencyLimits(2000, 200), "Interactive": LatencyLimits(450, 40)}


@dataclass(frozen=True)
class AccuracyTarget:
    target: str
    rouge1: float
    rouge2: float
    rougeL: float
    tokens_per_sample_min: float
    tokens_per_sample_max: float


def accuracy_target(target: str) -> AccuracyTarget:
    """The checker's thresholds for llama2-70b-99 or -99.9: ROUGE floors, tokens per sample within 90–110%."""
    factor = {"99": 0.99, "99.9": 0.999}[target]
    low, high = TOKENS_PER_SAMPLE_BAND
    return AccuracyTarget(
        target,
        REFERENCE_ROUGE["rouge1"] * factor,
        REFERENCE_ROUGE["rouge2"] * factor,
        REFERENCE_ROUGE["rougeL"] * factor,
        REFERENCE_TOKENS_PER_SAMPLE * low,
        REFERENCE_TOKENS_PER_SAMPLE * high,
    )
