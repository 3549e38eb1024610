"""The projected final tokens/s and its interval (issue 27, item 5), on readings with known noise."""

from __future__ import annotations

import random

from repro.run.progress import RunProgress
from repro.run.projection import MIN_FRACTION, Projector


def _feed(p: Projector, rate: float, total: int, noise: float, seed: int, stop_at: float | None = None) -> float:
    """Feed 0.25 s readings of a run at `rate` samples/s (280 tokens each) until done; the final tokens/s."""
    rng = random.Random(seed)
    t, tokens, samples = 0.0, 0, 0
    while samples < total:
        n = int(rate * 0.25 * rng.uniform(1 - noise, 1 + noise))
        samples = min(total, samples + n)
        tokens += n * 280
        t += 0.25
        p.feed(t, tokens, samples)
        if stop_at is not None and samples >= total * stop_at:
            break
    return tokens / t


def test_projection_at_a_quarter_holds_the_final_figure_in_9_of_10_runs() -> None:
    hits = 0
    for seed in range(10):
        p = Projector(20_000, None)
        final = _feed(Projector(20_000, None), 100.0, 20_000, 0.2, seed)
        _feed(p, 100.0, 20_000, 0.2, seed, stop_at=0.25)
        quarter = p.project()
        assert quarter is not None and 0.24 <= quarter.fraction_done <= 0.27
        hits += quarter.low <= final <= quarter.high
    assert hits >= 9


def test_band_standing_and_stop_decision() -> None:
    band = (95 * 280.0, 105 * 280.0)
    slow = Projector(20_000, band)
    _feed(slow, 70.0, 20_000, 0.1, 1, stop_at=0.2)
    proj = slow.should_stop()
    assert proj is not None and proj.high < band[0] and proj.standing == "below band"
    assert "below band" in proj.text and "band 26,600–29,400" in proj.text
    good = Projector(20_000, band)
    _feed(good, 100.0, 20_000, 0.1, 1, stop_at=0.5)
    assert good.should_stop() is None and good.project() is not None and good.project().standing == "on track"
    early = Projector(20_000, band)
    _feed(early, 70.0, 20_000, 0.1, 1, stop_at=MIN_FRACTION / 2)
    assert early.should_stop() is None  # too early to be sure


class _Counts:
    def __init__(self) -> None:
        self.issued, self.samples_done, self.tokens_done, self.t0 = 1000, 0, 0, 0.0


def test_heartbeat_line_carries_the_projection() -> None:
    clock = [0.0]
    counts = _Counts()
    out: list[str] = []

    class Sink:
        def write(self, s: str) -> None:
            out.append(s)

        def flush(self) -> None:
            pass

    progress = RunProgress(
        "heartbeat",
        "LoadGen Offline",
        1000,
        fixed_total=True,
        interval_s=5.0,
        stream=Sink(),  # type: ignore[arg-type]
        clock=lambda: clock[0],
        projector=Projector(None, (140.0, 180.0)),
    )
    with progress:
        for _ in range(120):
            clock[0] += 0.25
            counts.samples_done += 1
            counts.tokens_done += 40
            progress.update(counts)
    beats = [line for line in out if "samples" in line and "on track" in line]
    assert beats and "; on track: 160 ±" in beats[-1] and "band 140–180" in beats[-1]
