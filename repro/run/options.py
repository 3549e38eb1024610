"""What one `repro run` was asked to do, validated once: `RunOptions` (from the command's flags, or a test)
and `RunHooks` (the callbacks a caller lends the run: a progress bar, a backend factory, a started hook).

Every refusal of a bad combination happens here, before anything is planned or written, so the plan and the
execution never re-check an option.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro.core.backends import BackendSpec, backend_spec, recipe_backend
from repro.core.errors import InputError
from repro.core.recipes import Deployment, Recipe, get_recipe
from repro.core.scenarios import ScenarioSpec, scenario_spec
from repro.core.timescale import REAL_TIME, TimeScale
from repro.core.workspace import Workspace
from repro.results.compliance import check_compliance_options
from repro.run.servers import ServerOptions

if TYPE_CHECKING:
    from repro.run.backends.base import Backend, BackendContext
    from repro.run.sut import LoadGenSUT


@dataclass(frozen=True)
class RunOptions:
    recipe: Recipe
    workspace: Workspace
    scenario: str = "Offline"
    backend: str | None = None
    """--backend; None runs the recipe's own (or trtllm when endpoints are given)."""
    duration_s: float | None = None
    samples: int | None = None
    accuracy: bool = False
    compliance: str | None = None
    into: Path | None = None
    sim_rate: float | None = None
    endpoints: tuple[str, ...] = ()
    served_model: str | None = None
    servers: ServerOptions = field(default_factory=ServerOptions)
    official_min_duration: bool = False
    """MLPerf's own 600 s minimum duration instead of the recipe's."""
    target_qps: float | dict[str, Any] | None = None
    """LoadGen's rate instead of the recipe's: a number, or the record of the probe that measured it."""
    settings_override: dict[str, Any] | None = None
    """user.conf keys replaced after the recipe's (a `repro tune` probe's shorter run)."""
    probe: bool = False
    """One of `repro tune`'s short runs: labelled, kept out of the ledger."""
    rehearsal: bool = False
    """`repro rehearse` on stand-ins: labelled, so verify never calls it a reproduction."""
    stop_if_below_band: bool = False
    """End the run once its projected tokens/s cannot reach the published band."""
    model_dir: Path | None = None
    inputs_from: Workspace | None = None
    """The workspace whose model and dataset `workspace` holds links to (a rehearsal node's home, removed when its
    task ends): run.json names the files there, which outlive the home."""
    argv: tuple[str, ...] | None = None
    """The command line recorded in run.json (None: this process's)."""
    detect: bool = True
    """Ask NVML and IMDS for the machine's facts (tests and benchmarks turn it off)."""
    time_scale: TimeScale = REAL_TIME
    """The run's one time scale (a rehearsal's): the backend's stall and readiness deadlines and the heartbeat are
    multiplied by it, as the rehearsal's LoadGen settings and its server twin's clock are (core/timescale.py)."""
    dry_run: bool = False
    launcher: str | None = None
    """--launcher: which registered launcher starts the servers (repro/run/launchers); None: the one that takes the
    plan's shape where this process runs (local on one VM)."""
    inside_job: bool = False
    """--inside-job: this process is the first node of a Slurm allocation; the plan is placed on the job's nodes."""
    nodes: int | None = None
    """With --inside-job: the nodes the plan is placed on (None: the job's). More than the job has only in a
    rehearsal, whose nodes are tasks sharing one machine."""
    scenario_spec: ScenarioSpec = field(init=False, repr=False, compare=False)
    """The scenario resolved once (core/scenarios.py): LoadGen's scenario, whether first tokens stream."""

    @classmethod
    def build(cls, recipe: Recipe | str, workspace: Workspace, **kw: Any) -> RunOptions:
        """Options from a recipe name or object; endpoints and argv may be any sequence."""
        for key in ("endpoints", "argv"):
            if kw.get(key) is not None:
                kw[key] = tuple(kw[key])
            elif key == "endpoints":
                kw.pop(key, None)
        if kw.get("servers") is None:
            kw.pop("servers", None)
        return cls(get_recipe(recipe) if isinstance(recipe, str) else recipe, workspace, **kw)

    def __post_init__(self) -> None:
        cmd = f"repro run {self.scenario.lower()}"
        object.__setattr__(self, "scenario_spec", scenario_spec(self.scenario))
        if self.endpoints and self.backend not in (None, "trtllm"):
            raise InputError(
                "--endpoint sends requests to an OpenAI-compatible server; it cannot be combined with "
                f"--backend {self.backend}.",
                f"`{cmd} --endpoint URL` without --backend",
            )
        spec = self.spec
        if self.served_model and "served_model" not in spec.options:
            raise InputError(
                f"--served-model names the model of an OpenAI-compatible server; backend {spec.name} sends no "
                "requests to one.",
                f"`{cmd} --endpoint URL --served-model {self.served_model}`",
            )
        if self.samples is not None and self.samples <= 0:
            raise InputError(
                f"--samples must be at least 1 (got {self.samples}): a run with zero samples measures nothing.",
                f"`{cmd} --samples 64`",
            )
        if self.duration_s is not None and self.duration_s <= 0:
            raise InputError(f"--duration must be positive (got {self.duration_s}).", f"`{cmd} --duration 60`")
        if self.recipe.reference_only:
            raise InputError(
                f"Recipe '{self.recipe.name}' is reference-only (a published system repro does not run).",
                "`repro recipes list`",
            )
        if self.accuracy and self.scenario != "Offline":
            raise InputError("--accuracy runs in the Offline scenario only.", "`repro run offline --accuracy`")
        if isinstance(self.target_qps, (int, float)) and not 0 < self.target_qps < float("inf"):
            raise InputError(
                f"--target-qps must be a finite positive number (got {self.target_qps:g}).", f"`{cmd} --target-qps 10`"
            )
        check_compliance_options(
            self.compliance, self.scenario, accuracy=self.accuracy, duration_s=self.duration_s, samples=self.samples
        )
        if self.launcher is not None:
            from repro.core.launchers import launcher_spec

            where = launcher_spec(self.launcher)
            if self.inside_job and not where.spans_nodes:
                raise InputError(
                    f"--inside-job places the servers on a Slurm job's nodes; --launcher {where.name} starts them on "
                    "this VM only.",
                    f"`{cmd} --launcher slurm --inside-job`",
                )

    @cached_property
    def deployment(self) -> Deployment:
        """What this scenario builds and serves (its own engine where the recipe gives it one, else the base one),
        resolved once: the plan, the servers and run.json take it from here."""
        return self.recipe.deployment(self.scenario)

    @property
    def spec(self) -> BackendSpec:
        """The backend this run drives: --backend, else trtllm for --endpoint, else the recipe's."""
        if self.backend is not None:
            return backend_spec(self.backend)
        if self.endpoints:
            return backend_spec("trtllm")
        return recipe_backend(self.recipe.backend)

    @property
    def smoke(self) -> bool:
        return self.duration_s is not None or self.samples is not None

    @property
    def mode(self) -> str:
        return "AccuracyOnly" if self.accuracy else "PerformanceOnly"

    @property
    def kind(self) -> str:
        """Which run of a run folder this is: performance, accuracy or the compliance test."""
        return self.compliance or ("accuracy" if self.accuracy else "performance")


@dataclass
class RunHooks:
    """What the caller lends a run; every field has a default that works without a terminal."""

    bar: Callable[[str], Any] | None = None
    """Makes the progress bar (the CLI passes a Rich one); None: the plain heartbeat."""
    progress: bool | None = None
    """True: bar, False: heartbeat lines, None: a bar when the output is a terminal."""
    backend_factory: Callable[[str, BackendContext], Backend] | None = None
    """Builds the backend instead of the registry, from its name and context (tests plant a failing one)."""
    on_started: Callable[[LoadGenSUT], None] | None = None
    """Called once LoadGen is running (tests interrupt the run from here)."""
