"""What a rehearsal is scaled by and what it reports: `Scaling` (how LoadGen shrinks, printed) and
`RehearsalResult` (its steps' rows, whether it held, the next command, its JSON), apart from the steps that run it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.recipes import Recipe

LABEL = "rehearsal"
PROMPTS = 64
DEFAULT_TIME_SCALE = 1 / 400  # 2,400 s of LoadGen -> 6 s
SERVER_QPS = 30.0  # the Server arrival rate a rehearsal runs at: what two CPU cores drive through LoadGen
EARLY_STOPPING_QUERIES = 460  # LoadGen's early stopping needs ~459 Server queries even when none is over latency


@dataclass
class Scaling:
    """How a rehearsal shrinks LoadGen: time (durations, query counts) by `time`, rates by `rate`, both printed.

    The stand-in serves `capacity_qps` (the recipe's Offline rate x `rate`, at least twice the Server arrivals, so a
    few CPU slots keep the recipe's TTFT/TPOT limits); the Offline run expects that rate, so it lasts min_duration."""

    time: float
    rate: float
    capacity_qps: float
    pace: dict[str, Any] | None = None
    """--pace published: each scenario's RunPace (rehearse/pace.py); None: the fixed-speed stand-in."""

    @classmethod
    def for_recipe(
        cls, recipe: Recipe, time: float = DEFAULT_TIME_SCALE, pace: dict[str, Any] | None = None
    ) -> Scaling:
        from repro.run.settings import recipe_target_qps

        server = recipe_target_qps(recipe, "Server") or recipe.loadgen.offline_expected_qps
        rate = SERVER_QPS / server
        return cls(time, rate, max(recipe.loadgen.offline_expected_qps * rate, 2 * SERVER_QPS), pace)

    def settings(self, recipe: Recipe, scenario: str) -> dict[str, Any]:
        from repro.run.settings import loadgen_settings

        s = loadgen_settings(recipe, scenario, dataset_size=PROMPTS)
        queries = max(1, int(int(s["min_query_count"]) * self.time))
        if scenario != "Offline":
            queries = max(queries, EARLY_STOPPING_QUERIES)
        return {
            "min_duration": max(1000, int(int(s["min_duration"]) * self.time)),
            "min_query_count": queries,
            "target_qps": self.capacity_qps if scenario == "Offline" else float(s["target_qps"]) * self.rate,
            "performance_sample_count_override": PROMPTS,
        }

    def text(self, scenarios: tuple[str, ...] | list[str] | None = None) -> str:
        """`scenarios`: the ones this rehearsal runs; an Offline-only one never speaks of Server rates."""
        if self.pace:
            return "the published pace, against the recipe's server twin: " + "; ".join(
                f"{s} time x {p.time_scale.text}, {p.width:.3g} of the published load" for s, p in self.pace.items()
            )
        server = scenarios is None or any(s != "Offline" for s in scenarios)
        if not server:
            return (
                f"time x {self.time:g} (durations, query counts); the stand-in serves {self.capacity_qps:.3g} "
                "queries/s, the rate Offline runs at"
            )
        return (
            f"time x {self.time:g} (durations, query counts; Server at least {EARLY_STOPPING_QUERIES} queries for "
            f"LoadGen's early stopping), rates x {self.rate:.3g} (Server {SERVER_QPS:g} queries/s); the stand-in "
            f"serves {self.capacity_qps:.3g} queries/s; latency limits are the recipe's"
        )


@dataclass
class RehearsalResult:
    recipe: str
    workspace: Path
    scaling: Scaling
    image: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    left_containers: list[str] = field(default_factory=list)
    dry_run: bool = False
    label: str = LABEL
    nodes: int = 1
    image_source: str | None = None
    """With --nodes: how the image reaches the nodes (--image-source; default as for `repro run --launcher slurm`)."""
    steps: list[str] = field(default_factory=list)
    """The steps run, in order (their names from `default_steps`)."""
    build: dict[str, Any] | None = None
    """The build plan's TensorRT-LLM steps run through the stand-in tools: each command and the files it wrote."""
    setup: dict[str, Any] | None = None
    """`repro setup` against the stand-in gated hub: each attempt's HTTP status and message, the files it fetched."""
    doctor: dict[str, Any] | None = None
    """`repro doctor` against the stand-in GPUs: its status, the GPUs it saw and its checks (labelled stand-in)."""
    device_requests: list[dict[str, Any]] = field(default_factory=list)
    """What Docker would be asked for per server on the VM (this machine has no NVIDIA runtime, so none is sent)."""
    rack: dict[str, Any] | None = None
    """With --nodes: the rack folder, its Slurm jobs, the summed total and the jobs Slurm still runs."""
    system: dict[str, Any] | None = None
    """With --nodes for a one-system recipe: the shrunk recipe file, each scenario's Slurm job, and the jobs and
    stand-in processes still there after the last one (none, or the rehearsal failed)."""
    tune: dict[str, Any] | None = None
    """`repro tune server` against the stand-in servers: the rate chosen, the search, where it was saved."""
    verify: list[dict[str, Any]] = field(default_factory=list)
    """`repro verify RUN` per run (with --nodes, `repro aggregate RACK_DIR`) as a user runs it: the verdict it
    printed, its exit code and its Next line."""
    report: list[dict[str, Any]] = field(default_factory=list)
    """`repro report RUN --html FILE` per run (with --nodes, of the rack folder): the file it wrote, its label."""
    node_of: str | None = None
    """A rack node's result: the rack folder it is a node of (the login node verifies and reports the rack)."""

    @property
    def scenarios(self) -> tuple[str, ...] | None:
        """The scenarios run: a rack rehearsal is Offline only; None before any run (the plan names Server too)."""
        if self.nodes > 1 and not self.system and "run server" not in self.steps:  # a per-VM rack: Offline only
            return ("Offline",)
        return tuple(dict.fromkeys(r["scenario"] for r in self.runs)) or None

    @property
    def next_command(self) -> str:
        """After a rehearsal that held: the rack rehearsal, then the real flow on the GPU VMs; else the command that
        shows what did not hold (the verdict of its run or rack), else the rehearsal again."""
        import shlex

        pace = ["--pace", "published"] if self.scaling.pace else []
        again = shlex.join(["repro", "rehearse", "--recipe", self.recipe, *pace, *self._nodes_args])
        if self.dry_run:
            return again
        if self.node_of:
            return shlex.join(["repro", "aggregate", self.node_of, "--recipe", self.recipe])
        if self.ok:
            if self.nodes == 1:
                rack = shlex.join(["repro", "rehearse", "--recipe", self.recipe, "--nodes", "2"])
                return f"the rack next, through the local Slurm: `{rack}`"
            return (
                f"on the GPU VMs, the same flow for real: `{shlex.join(['repro', 'guide', '--recipe', self.recipe])}`"
            )
        if self.rack:
            return shlex.join(["repro", "aggregate", self.rack["rack_dir"], "--recipe", self.recipe])
        bad = [r for r in self.runs if not r["valid"] and r.get("run_dir")]
        bad += [v for v in self.verify if not v["as_rehearsal"]]
        if bad:
            return shlex.join(["repro", "verify", bad[0]["run_dir"], "--recipe", self.recipe])
        return again

    def _twin(self) -> dict[str, Any] | None:
        """The server twin's calibration (each parameter with the log line or arithmetic it came from)."""
        if not self.scaling.pace:
            return None
        from repro.rehearse.twin import calibrate

        return calibrate(self.recipe, None if self.dry_run else self.workspace / "twin").to_json()

    @property
    def _nodes_args(self) -> list[str]:
        if self.nodes == 1:
            return []
        source = ["--image-source", self.image_source] if self.image_source else []
        return ["--nodes", str(self.nodes), *source]

    @property
    def exit_code(self) -> int:
        return 0 if self.dry_run or self.ok else 1

    @property
    def ok(self) -> bool:
        steps_ok = self.doctor is None or self.doctor["gpus_as_recipe"]
        steps_ok = steps_ok and (self.setup is None or self.setup["gate_as_hub"])
        steps_ok = steps_ok and (self.build is None or self.build["ok"])
        steps_ok = steps_ok and all(v["as_rehearsal"] for v in self.verify)
        steps_ok = steps_ok and all(r["written"] for r in self.report)
        rack_ok = self.rack is None or (self.rack["counted"] == self.nodes and not self.rack["left_jobs"])
        rack_ok = rack_ok and (self.system is None or not (self.system["left_jobs"] or self.system["left_processes"]))
        return (
            bool(self.runs) and all(r["valid"] for r in self.runs) and not self.left_containers and rack_ok and steps_ok
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "reproduction": False,
            "recipe": self.recipe,
            "workspace": str(self.workspace),
            "scaling": {
                "pace": "published" if self.scaling.pace else "fixed",
                "time": self.scaling.time,
                "rate": self.scaling.rate,
                "capacity_qps": self.scaling.capacity_qps,
                "text": self.scaling.text(self.scenarios),
                "runs": {s: p.to_json() for s, p in (self.scaling.pace or {}).items()},
            },
            "twin": self._twin(),
            "image": self.image,
            "nodes": self.nodes,
            "steps": self.steps,
            "doctor": self.doctor,
            "setup": self.setup,
            "build": self.build,
            "device_requests": self.device_requests,
            "runs": self.runs,
            "rack": self.rack,
            "system": self.system,
            "tune": self.tune,
            "verify": self.verify,
            "report": self.report,
            "left_containers": self.left_containers,
            "dry_run": self.dry_run,
            "node_of": self.node_of,
            "ok": self.ok,
            "next_command": self.next_command,
        }


def run_row(
    scenario: str, run_dir: str | Path, verdict: Any, no_verdict: str = "ERROR", **extra: Any
) -> dict[str, Any]:
    """One run of a rehearsal as its result lists it (a rack node without a verdict: `no_verdict` as its status)."""
    run = verdict.run if verdict is not None else None
    return {
        "scenario": scenario,
        "run_dir": str(run_dir),
        "valid": bool(run and run.valid),
        "validity": run.validity if run else "ERROR",
        "verdict": verdict.status if verdict is not None else no_verdict,
        "label": run.label if run else None,
        "samples_per_s": run.samples_per_s if run else None,
        "tokens_per_s": run.tokens_per_s if run else None,
        **extra,
    }


OUT_LEN = 8  # answer length of the stand-in (STANDIN_OUT_LEN): 9 ids with EOS


def standin_env(scaling: Scaling, servers: int) -> dict[str, str]:
    """A fixed speed (one slot per server) whose total capacity is `scaling.capacity_qps`."""
    per_server = scaling.capacity_qps / max(1, servers)
    return {
        "STANDIN_OUT_LEN": str(OUT_LEN),
        "STANDIN_MAX_BATCH": "1",
        "STANDIN_TOKENS_PER_S": f"{per_server * (OUT_LEN + 1):.6g}",
    }


PORT_SPAN = 2000
"""How far above the recipe's base port a rehearsal looks for its servers' ports."""


def free_ports(base: int, n: int) -> int:
    """n consecutive ports at or above `base` (the recipe's) that nothing on this host holds, the scan starting at
    a random place in PORT_SPAN: the stand-in servers share this machine with other rehearsals and tests, where a
    VM's servers have theirs to themselves. A scan from `base` itself gave every rehearsal 30000, and one that
    another took between the scan and its servers' start (setup and build-engine lie between) ended the run with
    "Port 30000 (server 0) is already in use by another program"."""
    import random
    import socket

    slots = max(1, PORT_SPAN // max(1, n))
    first = random.SystemRandom().randrange(slots)
    for slot in (*range(first, slots), *range(first)):
        start = base + slot * n
        try:
            for port in range(start, start + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return start
    return base
