"""What one `repro tune` was asked to do, validated once: `TuneOptions` (from the command's flags, the rehearsal, or a
test), and the search settings resolved from it and the recipe (`TuneOptions.search`).

As `RunOptions` (run/options.py) does for a run: every refusal of a bad combination happens here, before a server
starts or a folder is written, and the search never re-checks an option or re-derives a default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from repro.core.errors import InputError
from repro.core.recipes import Recipe, get_recipe
from repro.core.timescale import REAL_TIME, TimeScale
from repro.core.workspace import Workspace
from repro.run.servers import ServerOptions

TUNE_SCENARIOS = ("Server", "Interactive")
MARGIN = 0.0
"""No fixed margin off a GPU server: the upper bounds of the p99s and the confirming probe decide (issue 34: a 20%
margin off 200-query probes still failed its run)."""
DEMO_MARGIN = 0.2
"""The CPU demo shares its cores with everything else on the machine: run-to-run TTFT varies far more than on a GPU."""
DEMO_INTERACTIVE_MARGIN = 0.6
"""The demo batches statically (up to 64 a batch), so its capacity is a cliff: below it TTFT is about one batch
(150-260 ms), above it the queue grows without bound, and the 450 ms limit leaves a 2 s run ~10% of overload and early
stopping at 662 queries one slow query. A busy loop beside it on this 2-core machine cut the capacity 2.2x (380 ->
~170 q/s), which a 20% margin does not cover (2 of 3 runs VALID); 0.4x the highest passing rate holds up to 2.5x."""
RESOLUTION = 0.03
"""The search stops when the failing rate is within 3% of the passing one."""
DEMO_RESOLUTION = 0.1
"""Beside the demo's margins, a 3% bracket buys nothing but probes."""
PROBE_S = 60.0
PROBE_QUERIES = 1001
"""LoadGen's early stopping passes with up to three queries over a limit from 1,001 queries."""
WARMUP_S = 10.0
"""Before the first probe, this long at the start rate (at least WARMUP_QUERIES queries), not judged: the issue-34
H100's first probe was cold (p99 TTFT 1,157 ms at 10 q/s, 604 ms at 20 q/s)."""


def default_margin(recipe: Recipe, scenario: str) -> float:
    if not recipe.demo:
        return MARGIN
    return DEMO_INTERACTIVE_MARGIN if scenario == "Interactive" else DEMO_MARGIN


@dataclass(frozen=True)
class SearchSettings:
    """The search's numbers, resolved once from the options and the recipe."""

    margin: float
    resolution: float
    limits_ms: tuple[float, float]
    """The benchmark's TTFT and TPOT limits for the scenario, in ms."""
    full_min_s: float
    full_queries: int
    """The run that follows: its min_duration and min_query_count (the recipe's, or what `run_settings` says)."""
    probe_s: float
    probe_queries: int
    """Each probe's min_duration and min_query_count."""

    @property
    def probe_overrides(self) -> dict[str, int]:
        """The user.conf keys a probe changes (the rate apart)."""
        return {"min_duration": int(self.probe_s * 1000), "min_query_count": self.probe_queries}


@dataclass(frozen=True)
class TuneOptions:
    recipe: Recipe
    workspace: Workspace
    scenario: str = "Server"
    endpoints: tuple[str, ...] = ()
    backend: str | None = None
    """--backend; None: trtllm for --endpoint, else the recipe's."""
    servers: ServerOptions = field(default_factory=ServerOptions)
    served_model: str | None = None
    start_qps: float | None = None
    """--start-qps; None: the recipe's published rate (the CPU demo measures its own)."""
    margin: float | None = None
    """--margin; None: 0 on a GPU server, the demo's own (`default_margin`)."""
    resolution: float | None = None
    max_minutes: float = 60.0
    probe_s: float | None = None
    """--probe-seconds; None: 60 s, or the full run's min_duration if shorter."""
    probe_queries: int | None = None
    """--probe-queries; None: 1,001, or the full run's min_query_count if fewer."""
    run_settings: Mapping[str, Any] | None = None
    """The full run's min_duration/min_query_count when not the recipe's (--run-samples; a rehearsal scales them), so
    early stopping is judged for the run that follows."""
    rehearsal: bool = False
    """Probes against a rehearsal's stand-ins: labelled so."""
    warmup_s: float = WARMUP_S
    """How long the warm-up probe lasts (at least WARMUP_QUERIES queries); a rehearsal scales it with its probes."""
    time_scale: TimeScale = REAL_TIME
    """The search's one time scale (a rehearsal's, core/timescale.py): the latency limits judged and sent to LoadGen,
    the default probe length, the warm-up's wait for a first answer, --max-minutes and every probe's own deadlines
    shrink by it (the caller's probe_s and warmup_s are taken as given, in this machine's seconds)."""
    dry_run: bool = False
    detect: bool = True
    argv: tuple[str, ...] | None = None
    search: SearchSettings = field(init=False, repr=False, compare=False)
    """The numbers the search uses, resolved once here."""

    @classmethod
    def build(cls, recipe: Recipe | str, workspace: Workspace, **kw: Any) -> TuneOptions:
        """Options from a recipe name or object; endpoints and argv may be any sequence, None means the default."""
        for key in ("endpoints", "argv", "servers"):
            if kw.get(key) is None:
                kw.pop(key, None)
            elif key != "servers":
                kw[key] = tuple(kw[key])
        return cls(get_recipe(recipe) if isinstance(recipe, str) else recipe, workspace, **kw)

    def __post_init__(self) -> None:
        """Refuse what no search can use before any server starts; resolve the defaults."""
        from repro.run.settings import loadgen_settings, server_latency_keys

        recipe, scenario = self.recipe, self.scenario
        if scenario not in TUNE_SCENARIOS:
            raise InputError(f"repro tune searches Server or Interactive, not {scenario}.", "`repro tune server`")
        margin = default_margin(recipe, scenario) if self.margin is None else self.margin
        if not 0 <= margin < 0.9:
            raise InputError(
                f"--margin must be between 0 and 0.9 (got {margin:g}).", "`repro tune server --margin 0.05`"
            )
        resolution = (DEMO_RESOLUTION if recipe.demo else RESOLUTION) if self.resolution is None else self.resolution
        bad_probe = (self.probe_s is not None and self.probe_s <= 0) or (
            self.probe_queries is not None and self.probe_queries < 1
        )
        if self.max_minutes <= 0 or bad_probe:
            raise InputError(
                "--max-minutes, --probe-seconds and --probe-queries must be positive.", "`repro tune server --help`"
            )
        if recipe.reference_only:
            raise InputError(
                f"Recipe '{recipe.name}' is reference-only (a published system repro does not run).",
                "`repro recipes list`",
            )
        if self.start_qps is not None and self.start_qps <= 0:
            raise InputError(
                f"--start-qps must be positive (got {self.start_qps:g}).", "`repro tune server --start-qps 10`"
            )
        run_queries = (self.run_settings or {}).get("min_query_count")
        if isinstance(run_queries, int) and run_queries < 1:
            raise InputError(f"--run-samples must be positive (got {run_queries}).", "`repro tune server --help`")
        keys = server_latency_keys(recipe, scenario)
        full = {**loadgen_settings(recipe, scenario, dataset_size=recipe.dataset.samples), **(self.run_settings or {})}
        full_min_s, full_queries = int(full["min_duration"]) / 1000, int(full["min_query_count"])
        settings = SearchSettings(
            margin=margin,
            resolution=resolution,
            limits_ms=(self.time_scale.ms(keys["ttft_latency"]), self.time_scale.ms(keys["tpot_latency"])),
            full_min_s=full_min_s,
            full_queries=full_queries,
            probe_s=min(self.time_scale.s(PROBE_S), full_min_s) if self.probe_s is None else self.probe_s,
            # a full run this short (the demo's 662 queries) is its own probe: the same count, the same early stopping
            probe_queries=min(full_queries, PROBE_QUERIES) if self.probe_queries is None else self.probe_queries,
        )
        object.__setattr__(self, "search", settings)

    @property
    def local_demo(self) -> bool:
        """The CPU demo on this machine (not a dry run): its start rate is measured here."""
        own = not self.endpoints and self.backend in (None, self.recipe.backend)
        return self.recipe.demo and own and not self.dry_run

    @property
    def backend_name(self) -> str:
        """The backend the probes drive, as the result names it."""
        return "trtllm" if self.endpoints else (self.backend or self.recipe.backend)

    @property
    def probe_servers(self) -> ServerOptions:
        """The probes keep managed servers up between them; the search releases them at its end."""
        return dataclasses.replace(self.servers, keep=True)

    @property
    def label(self) -> str | None:
        return "rehearsal" if self.rehearsal else "demo" if self.recipe.demo else None
