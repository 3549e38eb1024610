"""`plan_run(options)`: everything one run will do, decided before anything is started or written.

The plan names the backend, the LoadGen settings (the user.conf text), the run folder and the run it pairs
with, the dataset and model folders, and the servers repro will start (or the endpoints it will use).
`--dry-run` prints it and `--json` emits it; `repro.run.harness.execute` carries it out. Planning reads the
workspace (the ledger, earlier run folders) and writes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.backends import BackendSpec
from repro.core.errors import InputError, ReproError
from repro.core.fsutil import confined
from repro.core.recipes import Deployment, Recipe
from repro.core.steps import StepOutcome
from repro.core.workspace import Workspace
from repro.results.compliance import audit_config_text, compliance_settings
from repro.results.logs import NON_COMPLIANT
from repro.run.launchers import Launcher, for_plan
from repro.run.launchers.plan import LaunchPlan
from repro.run.layout import choose_run_dir, kind_dir
from repro.run.options import RunOptions
from repro.run.servers import check_engine_built, dry_run_details
from repro.run.settings import expected_samples, loadgen_settings, user_conf_text

DEMO_MODEL = "tiny-llama"


def ledger_step(scenario: str, compliance: str | None = None, accuracy: bool = False) -> str:
    """An accuracy run is its own step: it must not mark the performance run done and send status to a verify
    that finds only AccuracyOnly logs."""
    return f"run-{scenario.lower()}" + (f"-{compliance.lower()}" if compliance else "-accuracy" if accuracy else "")


def run_label(options: RunOptions) -> str | None:
    """Anything that is not a full-length run of a real recipe on a real backend says so."""
    if options.probe:
        return "tune probe"
    if options.rehearsal:
        return "rehearsal"
    if options.spec.label:
        return options.spec.label
    if options.recipe.demo:
        return "demo"
    if options.recipe.waive_rules:
        return NON_COMPLIANT
    if options.smoke:
        return "smoke"
    return None


def resolve_model_dir(recipe: Recipe, ws: Workspace, model_dir: Path | None) -> Path:
    """An explicit folder, else where `repro setup` recorded the weights, else the default folder under models/."""
    if model_dir is not None:
        return Path(model_dir)
    if recipe.demo:
        return ws.models / DEMO_MODEL
    try:
        from repro.core.ledger import Ledger

        rec = Ledger.load(ws.ledger_path).get("setup")
    except ReproError:
        rec = None
    for key in ("model_dir", "model_path"):
        if rec is not None and rec.details.get(key):
            return Path(rec.details[key])
    return ws.models / recipe.model.repo_id.split("/")[-1]


def manages_servers(options: RunOptions) -> bool:
    """repro starts the servers itself unless the user points it at running ones (--endpoint or the env)."""
    external = bool(options.endpoints) or bool(os.environ.get("REPRO_TRTLLM_ENDPOINTS"))
    return options.spec.starts_servers and options.recipe.trtllm is not None and not external


@dataclass
class RunPlan:
    options: RunOptions
    label: str | None
    settings: dict[str, Any]
    """The user.conf keys (the demo's performance run measures its target_qps when it executes)."""
    run_dir: Path
    """The folder a run started now would write (execute picks it again when it creates it)."""
    paired_with: str | None
    data_dir: Path
    model_dir: Path
    managed: bool
    """repro starts and stops the servers (False: endpoints the user runs, or no servers at all)."""
    serving: dict[str, Any]
    """The servers to start and their readiness wait, or the endpoints to use (empty without servers)."""
    rate_source: dict[str, Any] | None = None
    """Where target_qps came from when not the recipe (--target-qps, or the rate `repro tune` saved)."""
    launch: LaunchPlan | None = None
    """What runs where (repro/run/launchers/plan.py), when repro starts the servers: resolved once, started by
    execute through the launcher that takes it."""

    def launcher(self) -> Launcher:
        """The launcher that starts this plan's servers where the run executes (--launcher, else by its shape)."""
        assert self.launch is not None
        return for_plan(self.launch, self.options.launcher)

    @property
    def recipe(self) -> Recipe:
        return self.options.recipe

    @property
    def scenario(self) -> str:
        return self.options.scenario

    @property
    def deployment(self) -> Deployment:
        return self.options.deployment

    @property
    def backend(self) -> BackendSpec:
        return self.options.spec

    @property
    def step(self) -> str:
        return ledger_step(self.scenario, self.options.compliance, self.options.accuracy)

    @property
    def log_dir(self) -> Path:
        return kind_dir(self.run_dir, self.options.kind)

    @property
    def loadgen_settings(self) -> dict[str, Any]:
        """The settings LoadGen runs with: user.conf, and the compliance test's audit.config on top."""
        return {**self.settings, **compliance_settings(self.options.compliance)}

    def expected_samples(self) -> int:
        return expected_samples(self.loadgen_settings, self.scenario)

    def to_json(self) -> dict[str, Any]:
        o = self.options
        doc: dict[str, Any] = {
            "recipe": self.recipe.name,
            "scenario": self.scenario,
            "mode": o.mode,
            "backend": self.backend.name,
            "label": self.label,
            "run_dir": str(self.run_dir),
            "log_dir": str(self.log_dir),
            "paired_with": self.paired_with,
            "kind": o.kind,
            "dataset": str(self.data_dir),
            "user_conf": user_conf_text(self.settings, self.scenario, self.recipe.bench),
            "expected_samples": self.expected_samples(),
            "target_qps_source": self.rate_source,
        }
        if o.compliance:
            doc["audit_config"] = audit_config_text()
        if self.backend.needs_model or self.recipe.demo:
            doc["model_dir"] = str(self.model_dir)
        return {**doc, **self.serving}

    def dry_run_outcome(self) -> StepOutcome:
        """What `--dry-run` shows: one sentence, then the plan's details."""
        doc = self.to_json()
        demo = "demo: build the tiny model and sample if missing, then " if self.recipe.demo else ""
        what = f"{demo}run LoadGen {self.scenario} {self.options.mode}"
        if doc.get("servers"):
            after = "leave them running" if doc.get("keep_servers") else "remove them"
            what = (
                f"start {len(doc['servers'])} trtllm-serve container(s), wait up to "
                f"{doc['readiness']['timeout_s']:.0f} s for them to answer, {what}, then {after},"
            )
        tag = f" [{self.label}]" if self.label else ""
        return StepOutcome(
            step=self.step,
            status="dry-run",
            summary=f"would {what} with backend {self.backend.name}{tag}, writing {doc['run_dir']}",
            details=doc,
        )


def plan_run(options: RunOptions) -> RunPlan:
    """The plan of one run; raises InputError for a run folder (--into) that cannot take it, or a scenario's own
    engine that is not built (a dry run shows the plan regardless)."""
    recipe, ws, spec = options.recipe, options.workspace, options.spec
    settings = loadgen_settings(
        recipe,
        options.scenario,
        duration_s=options.duration_s,
        samples=options.samples,
        dataset_size=recipe.dataset.samples,
        accuracy=options.accuracy,
        official_min_duration=options.official_min_duration,
    )
    settings.update(options.settings_override or {})
    rate_source = _rate_source(options)
    if rate_source is not None:
        settings["target_qps"] = rate_source["target_qps"]
    run_dir, paired = choose_run_dir(ws, recipe, options.scenario, options.kind, spec.name, options.into, create=False)
    managed = manages_servers(options)
    if managed and not options.dry_run:  # a scenario's own engine that is not built: before anything is written
        check_engine_built(options.deployment, ws)
    serving: dict[str, Any] = {}
    launch = None
    if managed:
        launch = launch_plan(options)
        serving = serving_details(options, launch)
    elif spec.starts_servers:
        from repro.run.backends.trtllm import endpoints_for

        serving = {"endpoints": list(options.endpoints) or endpoints_for(recipe), "servers": []}
    if spec.starts_servers:
        from repro.run.backends.trtllm import client_plan

        n = len(serving.get("endpoints") or serving.get("servers") or []) or 1
        serving["client"] = client_plan(
            recipe, options.servers.stall_timeout_s, endpoints=n, processes=options.servers.client_processes
        )
    return RunPlan(
        options=options,
        label=run_label(options),
        settings=settings,
        run_dir=run_dir,
        paired_with=paired,
        data_dir=confined(ws.preprocessed, ws.preprocessed / recipe.dataset.name, step="repro setup"),
        model_dir=resolve_model_dir(recipe, ws, options.model_dir),
        managed=managed,
        serving=serving,
        rate_source=rate_source,
        launch=launch,
    )


def launch_plan(options: RunOptions) -> LaunchPlan:
    """What runs where, resolved once: this VM's servers, or (--inside-job) the job's nodes."""
    from repro.run.launchers.layout import Allocation, resolve, serving_layout

    gpus = options.recipe.system.gpus_per_vm
    if not options.inside_job:
        layout = serving_layout(options.deployment)
        if layout.shape == "one-system":
            cmd = f"repro run {options.scenario.lower()} --recipe {options.recipe.name} --launcher slurm"
            raise InputError(
                f"{options.recipe.name} {options.scenario} is one system of {layout.nodes} nodes ({layout.text()}, "
                f"{layout.gpus} GPUs), one LoadGen over them all: it runs through Slurm, not on this VM.",
                f"`{cmd}` from the login node (`--dry-run` shows every node's servers first)",
            )
        return resolve(options.deployment, options.workspace, Allocation.this_vm(gpus), options.servers, layout=layout)
    job = Allocation.of_job(gpus)
    hosts = job.hosts
    want = options.nodes or len(hosts)
    if want > len(hosts):
        if not options.rehearsal:
            raise InputError(
                f"--nodes {want}: the Slurm job has {len(hosts)} node(s) ({', '.join(h or '?' for h in hosts)}).",
                f"submit it with `--nodes {want}`",
            )
        hosts = tuple(hosts[i % len(hosts)] for i in range(want))  # a rehearsal's nodes share this machine
    allocation = Allocation(hosts, gpus, job.job_id)
    return resolve(
        options.deployment,
        options.workspace,
        allocation,
        options.servers,
        shape="one-system",
        image=options.servers.image,
    )


def serving_details(options: RunOptions, launch: LaunchPlan) -> dict[str, Any]:
    """The dry run's servers: on one VM each container with its command and the readiness wait, as always; a
    system's plan adds every node's instances and ranks and the exact commands its launcher would run."""
    from repro.run.launchers import FleetContext

    if launch.shape == "one-vm":
        from repro.run.launchers.local import server_plans

        return dry_run_details(options.deployment, options.workspace, options.servers, plans=server_plans(launch))
    out = dry_run_details(options.deployment, options.workspace, options.servers, plans=[])
    launcher = for_plan(launch, options.launcher)
    out["servers"] = launch.to_json()["instances"]
    out["launch"] = launch.to_json()
    out["launch_lines"] = launch.lines()
    out["launcher"] = launcher.describe(launch, FleetContext(options.workspace, options.servers))
    return out


def _rate_source(options: RunOptions) -> dict[str, Any] | None:
    """Where a run's target_qps comes from when not the recipe: --target-qps (a number, or the record of the probe
    that measured it), else the rate `repro tune` saved."""
    if isinstance(options.target_qps, dict):
        return options.target_qps
    if options.target_qps is not None:
        return {"from": "--target-qps", "target_qps": float(options.target_qps)}
    if not options.scenario_spec.latency_bound or options.probe or options.accuracy:
        return None
    from repro.run.tuned import read_tuned

    return read_tuned(options.workspace, options.recipe, options.scenario)
