"""`repro build-engine`: the recipe container, the quantized checkpoint, the engine (TRT path) and the serve config.

Each sub-step is skipped when its inputs (model revision, recipe hash, container digest, command line)
are unchanged and its outputs still verify; `force` redoes everything. `dry_run` returns the plan:
the image, the mounts and every command line, without touching Docker or the workspace.
A recipe builds its base deployment (the Offline engine, ledger step `build-engine`); a scenario with its own engine
(`scenarios:` in the recipe, e.g. 405B Server's TP4xPP1) is its own deployment, checkpoint, engine and step
(`build-engine-server`), built by `repro build-engine --scenario Server`; a sub-step that runs the very command
another build of the recipe ran, still fresh (DeepSeek-R1 Server's quantize into the base's checkpoint), is taken
from it (`shared_step`).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from repro.core.errors import InputError, Interrupted, RecipeError, StepFailed, SystemMismatch
from repro.core.fsutil import atomic_write_text, confined
from repro.core.ledger import Artifact, Ledger
from repro.core.recipes import Deployment, Recipe, all_recipes, as_deployment, by_gpu_name
from repro.core.serving import serving_text
from repro.core.steps import StepOutcome
from repro.core.systems import SystemInfo, detect_system
from repro.core.workspace import Workspace
from repro.engine import quantize as q
from repro.engine.container import ImageSpec, Mount, RunSpec, build_image, image_env, image_spec_for, run_container

STEP = "build-engine"
ViewFactory = Callable[[str], Any]
"""Makes a context manager with a `line(text)` method that shows a build log live (the CLI passes a Rich one)."""


def fp8_recipe_for(system: SystemInfo) -> Recipe | None:
    """The FP8 recipe for the detected GPU, else the first runnable FP8 recipe."""
    if system.gpus:
        match = by_gpu_name(system.gpus[0].name, len(system.gpus))
        if match and match.precision == "fp8":
            return match
    return next((r for r in all_recipes() if r.precision == "fp8" and not r.reference_only and not r.demo), None)


def check_gpu(recipe: Recipe, system: SystemInfo) -> None:
    """NVFP4 runs only on Blackwell; on older GPUs name the FP8 recipe instead of failing hours later."""
    if not system.gpus:
        raise SystemMismatch(
            f"No NVIDIA GPU detected ({system.nvml_error or 'NVML lists none'}); "
            f"recipe '{recipe.name}' needs {recipe.system.gpus_per_vm} x {recipe.system.gpu_name}.",
            "`repro doctor`, or `repro build-engine --dry-run` to see the plan",
        )
    if recipe.precision in ("nvfp4", "fp4"):
        old = [g for g in system.gpus if not g.blackwell]
        if old:
            alt = fp8_recipe_for(system)
            cc = f" (compute capability {old[0].compute_capability})" if old[0].compute_capability else ""
            raise SystemMismatch(
                f"Recipe '{recipe.name}' quantizes to NVFP4, which needs a Blackwell GPU (sm_100 or newer); "
                f"this machine has {old[0].name}{cc}. Use the FP8 recipe{f' {alt.name!r}' if alt else ''}.",
                f"`repro build-engine --recipe {alt.name}`" if alt else "`repro recipes list`",
            )


@dataclass
class PlannedStep:
    name: str
    run: RunSpec
    outputs: list[Path]
    checksum: list[Path] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        return self.run.command

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "command": self.argv,
            "docker": self.run.docker_cli(),
            "outputs": [str(p) for p in self.outputs],
        }


@dataclass
class BuildPlan:
    deployment: Deployment
    image: ImageSpec
    mounts: list[Mount]
    steps: list[PlannedStep]
    serve_config_path: Path
    serve_config_text: str
    serve: list[q.ServeInstance]
    paths: q.Paths
    host_model_dir: Path
    host_calib_parquet: Path

    @property
    def recipe(self) -> Recipe:
        return self.deployment.recipe

    @property
    def step(self) -> str:
        return self.deployment.build_step

    def to_json(self) -> dict[str, Any]:
        layout = self.deployment.layout
        return {
            "recipe": self.recipe.name,
            "recipe_hash": self.recipe.hash(),
            "scenario": self.deployment.engine_scenario,
            "ledger_step": self.step,
            "engine_layout": layout.text() if layout else None,
            "engine_source": self.deployment.source,
            "backend": self.recipe.backend,
            "image": self.image.to_json(),
            "mounts": [m.to_json() for m in self.mounts],
            "steps": [s.to_json() for s in self.steps],
            "serve_config": {"path": str(self.serve_config_path), "yaml": self.serve_config_text},
            "serve": [s.to_json() for s in self.serve],
            "container_paths": self.paths.to_json(),
        }

    def _scenario_lines(self) -> list[str]:
        """Every scenario the recipe serves, with its layout and which build it serves from: the whole plan, not
        only the deployment this command builds."""
        recipe = self.deployment.recipe
        served = [s for s in ("Offline", "Server", "Interactive") if s in recipe.bench.scenarios]
        if len(served) < 2 and not recipe.scenarios:
            return []
        out = ["# every scenario of this recipe, and what it serves from:"]
        for scenario in served:
            dep = recipe.deployment(scenario)
            if dep.engine_scenario == self.deployment.engine_scenario:
                built = "this build"
            else:
                built = f"{'its own' if dep.own else 'the base'} build (`{dep.build_command()}`)"
            out.append(f"#   {scenario}: {serving_text(dep)} [{built}]")
        return out

    def lines(self) -> list[str]:
        """The plan as shell lines: what `--dry-run` prints."""
        b = self.image
        args = " ".join(f"--build-arg {shlex.quote(f'{k}={v}')}" for k, v in b.build_args.items())
        from repro.engine.container import context_shell

        dep = self.deployment
        layout = dep.layout
        for_what = f"{dep.scenario}'s own engine" if dep.own else "the base engine (every scenario without its own)"
        system = dep.trtllm.system if dep.trtllm is not None else None
        roles = system is not None and system.context is not None and system.generation is not None
        shape = layout.text() if layout else "-"
        if roles:  # disaggregated: each role has its own parallelism and options; the checkpoint is the one
            shape = f"the checkpoint its context and generation servers load ({serving_text(dep).split(':')[0]})"
        out = [f"# {for_what}: {shape}" + (f" ({dep.source})" if dep.source else "")]
        out += self._scenario_lines()
        out += [f"# image {b.tag} (built only if missing), from a staged build context"]
        out += context_shell(b)
        out += [f'docker build -f "$ctx/{b.dockerfile.name}" {args} -t {shlex.quote(b.tag)} "$ctx"']
        for s in self.steps:
            out += [f"# {s.name}", s.run.docker_cli()]
        write = f"# write {self.serve_config_path}"
        if roles:
            write += " (the options both roles start from; `repro run` writes each role's own into the run folder)"
        out += [write] + [f"#   {ln}" for ln in self.serve_config_text.splitlines()]
        run = dep.scenario.lower() if dep.own else "offline"
        if roles:
            out += [
                f"# serve: {serving_text(dep)}; each role's command, options, nodes and srun step in "
                f"`repro run {run} --recipe {dep.recipe.name} --launcher slurm --dry-run`"
            ]
            return out
        if system is not None:
            out += [
                f"# serve: {serving_text(dep)}; one instance's command below, every node, instance and srun step "
                f"in `repro run {run} --recipe {dep.recipe.name} --launcher slurm --dry-run`"
            ]
        else:
            out += [f"# serve (started by `repro run {run}`)"]
        out += [f"CUDA_VISIBLE_DEVICES={s.cuda_visible_devices} {shlex.join(s.argv)}" for s in self.serve]
        return out


def _model_dir(recipe: Recipe, ws: Workspace) -> Path:
    """Where `repro setup` put the weights: its ledger says so; else the default folder under models/."""
    try:
        rec = Ledger.load(ws.ledger_path).get("setup")
    except Exception:  # noqa: BLE001 - a bad ledger is reported by the step that loads it for real
        rec = None
    for key in ("model_dir", "model_path"):
        if rec is not None and rec.details.get(key):
            return Path(rec.details[key])
    return ws.models / recipe.model.repo_id.split("/")[-1]


def _host(ws: Workspace, p: PurePosixPath) -> Path:
    """The host side of a container path under the workspace mount; a link on the way out of it is refused."""
    return confined(ws.root, ws.root / p.relative_to(q.CONTAINER_WORKSPACE), step="repro build-engine")


def plan_build(
    target: Recipe | Deployment,
    ws: Workspace,
    *,
    base_image: str | None = None,
    install: str = "full",
    gpus: bool = True,
) -> BuildPlan:
    dep = as_deployment(target)
    recipe = dep.recipe
    if dep.trtllm is None:
        raise RecipeError(f"Recipe '{recipe.name}' has no trtllm section.", f"`repro recipes show {recipe.name}`")
    model = _model_dir(recipe, ws)
    mounts = [Mount(ws.root, str(q.CONTAINER_WORKSPACE))]
    try:
        model_c = q.CONTAINER_WORKSPACE / model.resolve().relative_to(ws.root.resolve()).as_posix()
    except ValueError:
        model_c = PurePosixPath("/model")
        mounts.append(Mount(model, str(model_c), read_only=True))
    p = q.paths_for(dep, model_dir=model_c)
    image = image_spec_for(recipe, base_image=base_image, install=install)
    env = {"REPRO_HOME": str(q.CONTAINER_WORKSPACE)}

    def spec(argv: list[str]) -> RunSpec:
        return RunSpec(image.tag, ["exec", "--", *argv], mounts, gpus=gpus, env=env, shm_size="32g" if gpus else None)

    ckpt = _host(ws, p.checkpoint_dir)
    ckpt_files = [ckpt / "config.json"] + (
        [ckpt / "rank0.safetensors"] if dep.quantization.tool == "trtllm_quantize" else [ckpt / "hf_quant_config.json"]
    )
    steps = [
        PlannedStep("prepare-calib", spec(q.prepare_calib_command(dep, p)), [_host(ws, p.calib_dir) / "data.parquet"]),
        PlannedStep("quantize", spec(q.quantize_command(dep, p)), ckpt_files, [ckpt / "config.json"]),
    ]
    build = q.build_command(dep, p)
    if build is not None and p.engine_dir is not None:
        eng = _host(ws, p.engine_dir)
        steps.append(
            PlannedStep("engine", spec(build), [eng / "config.json", eng / "rank0.engine"], [eng / "config.json"])
        )
    return BuildPlan(
        dep,
        image,
        mounts,
        steps,
        _host(ws, p.serve_config),
        q.serve_config(dep),
        q.serve_commands(dep, p),
        p,
        model,
        _host(ws, p.calib_dir) / "data.parquet",
    )


SCENARIO_NAMES = {"offline": "Offline", "server": "Server", "interactive": "Interactive"}


def deployment_for(recipe: Recipe, scenario: str | None) -> Deployment:
    """`--scenario`: what that scenario runs (its own engine where the recipe gives it one, else the base engine it
    shares); without it, the base engine."""
    if scenario is None:
        return recipe.deployment("Offline")
    name = SCENARIO_NAMES.get(scenario.strip().lower())
    if name is None:
        shown = scenario if len(scenario) <= 40 and scenario.isprintable() else ascii(scenario[:40])
        own = [s for s in recipe.scenarios]
        raise InputError(
            f"--scenario {shown}: not a scenario (Offline, Server or Interactive).",
            f"`repro build-engine --recipe {recipe.name}" + (f" --scenario {own[0]}`" if own else "`"),
        )
    return recipe.deployment(name)


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _artifacts(step: PlannedStep) -> list[Artifact]:
    missing = [p for p in step.outputs if not p.exists()]
    if missing:
        raise StepFailed(
            f"Step {step.name} exited 0 but did not write {missing[0]}.",
            "see the step log under logs/, then `repro build-engine --force`",
        )
    return [Artifact.of(p, checksum=p in step.checksum) for p in step.outputs]


def run_build(
    target: Recipe | Deployment,
    ws: Workspace,
    *,
    force: bool = False,
    dry_run: bool = False,
    system: SystemInfo | None = None,
    base_image: str | None = None,
    install: str = "full",
    gpus: bool | None = None,
    view: ViewFactory | None = None,
) -> StepOutcome:
    """Image, quantization, engine and serve config for a recipe's deployment; see the module docstring for
    skipping."""
    dep = as_deployment(target)
    recipe = dep.recipe
    if recipe.demo or recipe.backend in ("hf", "numpy", "sim"):
        return StepOutcome(
            step=STEP,
            status="skipped",
            summary=f"recipe '{recipe.name}' uses the {recipe.backend} backend: nothing to build "
            "(its runs are labelled demo, never a reproduction).",
            details={"recipe": recipe.name, "backend": recipe.backend},
        )
    if recipe.reference_only:
        alt = by_gpu_name(recipe.system.gpu_name, recipe.system.gpus_per_vm)
        raise RecipeError(
            f"Recipe '{recipe.name}' is reference-only (a published system repro compares against, not one it runs).",
            f"`repro build-engine --recipe {alt.name}`" if alt else "`repro recipes list`",
        )
    plan = plan_build(dep, ws, base_image=base_image, install=install, gpus=True if gpus is None else gpus)
    what = _what(dep)
    if dry_run:
        return StepOutcome(
            step=plan.step,
            status="dry-run",
            summary=f"would build {plan.image.tag} and run {', '.join(s.name for s in plan.steps)} for {what}",
            details={**plan.to_json(), "plan": plan.lines()},
        )
    system = system if system is not None else detect_system()
    check_gpu(recipe, system)
    if gpus is None:
        plan = plan_build(dep, ws, base_image=base_image, install=install, gpus=True)
    for path, missing in ((plan.host_model_dir, "model"), (plan.host_calib_parquet, "calibration set")):
        if not path.exists():
            raise InputError(
                f"The {missing} is missing: {path} does not exist.", f"`repro setup --recipe {recipe.name}`"
            )
    ws.ensure()
    logs = ws.root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ledger = Ledger.load(ws.ledger_path)
    return _execute(plan, ledger, logs, force=force, view=view)


def _what(dep: Deployment) -> str:
    """'nd-gb200-v6-405b' for the base engine, "nd-gb200-v6-405b's Server engine (TP4xPP1, ...)" for its own."""
    if not dep.own:
        return f"'{dep.recipe.name}'"
    layout = dep.layout
    system = dep.trtllm.system if dep.trtllm is not None else None
    if system is not None and system.context is not None and system.generation is not None:
        c, g = system.context, system.generation
        roles = f"context servers TP{c.tp_size}, generation TP{g.tp_size}"
        return f"'{dep.recipe.name}' {dep.scenario} checkpoint ({roles})"
    return f"'{dep.recipe.name}' {dep.scenario} engine" + (f" ({layout.text()})" if layout else "")


def _fresh(ledger: Ledger, key: str, dep: Deployment, digest: str, argv: list[str], force: bool) -> tuple[bool, str]:
    """A sub-step is fresh when what its output depends on is unchanged (`Deployment.build_hash`: model, dataset,
    quantization, engine flags; not the serve options, LoadGen settings or notes), so an edit elsewhere in the recipe
    never rebuilds an engine for hours."""
    h = _hash(dep.build_hash(), dep.recipe.model.revision, digest, argv)
    return (not force and ledger.is_fresh(key, h)), h


def shared_step(plan: BuildPlan, ledger: Ledger, step: PlannedStep, digest: str) -> list[Artifact] | None:
    """The outputs of the same sub-step of another build of this recipe, where it ran this very command (the same
    output folder) and is fresh: a PyTorch-backend scenario's own build (DeepSeek-R1 Server and Interactive) loads
    the base's checkpoint with other serve options, so its prepare-calib and quantize are the base's, not hours of
    quantizing into the same folder again. None where no other build ran it."""
    dep = plan.deployment
    for other in dep.recipe.deployments():
        if other.build_step == plan.step:
            continue
        key = f"{other.build_step}.{step.name}"
        rec = ledger.steps.get(key)
        if rec is None or rec.details.get("command") != list(step.argv):
            continue
        if ledger.is_fresh(key, _hash(other.build_hash(), other.recipe.model.revision, digest, step.argv)):
            return list(rec.outputs)
    return None


def _execute(plan: BuildPlan, ledger: Ledger, logs: Path, *, force: bool, view: ViewFactory | None) -> StepOutcome:
    """Build the image, then each sub-step not already fresh, then write the serve config; the ledger follows."""
    dep, recipe, step_name = plan.deployment, plan.recipe, plan.step
    what = _what(dep)
    try:
        with _view(f"image {plan.image.tag}", view) as live:
            image = build_image(plan.image, force=force, on_line=live.line, log_path=logs / "build-engine-image.log")
    except BaseException as exc:
        ledger.fail(step_name, getattr(exc, "message", str(exc)), interrupted=_interrupted(exc))
        raise
    for step in plan.steps:
        step.run.env.update(image_env(image))
    overall = _hash(
        recipe.hash(), recipe.model.revision, image.digest, [s.argv for s in plan.steps], plan.serve_config_text
    )
    if not force and ledger.is_fresh(step_name, overall):
        return StepOutcome(
            step=step_name,
            status="skipped",
            summary=f"up to date for {what} (image {image.tag})",
            details={**plan.to_json(), "image_digest": image.digest, "ran": []},
        )
    ledger.start(step_name, overall, recipe=recipe.name, image=image.tag, image_digest=image.digest)
    ran: list[str] = []
    outputs: list[Artifact] = []
    try:
        for step in plan.steps:
            key = f"{step_name}.{step.name}"
            fresh, h = _fresh(ledger, key, dep, image.digest, step.argv, force)
            if fresh:
                outputs += ledger.steps[key].outputs
                continue
            shared = None if force else shared_step(plan, ledger, step, image.digest)
            if shared is not None:
                outputs += shared
                continue
            ledger.start(key, h, command=step.argv)
            try:
                with _view(step.name, view) as live:
                    run_container(
                        step.run, step=step.name, on_line=live.line, log_path=logs / f"{step_name}-{step.name}.log"
                    )
                arts = _artifacts(step)
            except BaseException as exc:
                ledger.fail(key, getattr(exc, "message", str(exc)), interrupted=_interrupted(exc))
                raise
            ledger.finish(key, arts)
            outputs += arts
            ran.append(step.name)
        atomic_write_text(plan.serve_config_path, plan.serve_config_text)
        outputs.append(Artifact.of(plan.serve_config_path))
    except BaseException as exc:
        ledger.fail(step_name, getattr(exc, "message", str(exc)), interrupted=_interrupted(exc))
        raise
    ledger.finish(step_name, outputs, serve=[s.to_json() for s in plan.serve], serve_config=str(plan.serve_config_path))
    return StepOutcome(
        step=step_name,
        status="done",
        summary=f"built for {what}: ran {', '.join(ran) or 'nothing new'} (image {image.tag})",
        details={**plan.to_json(), "image_digest": image.digest, "ran": ran},
    )


def _interrupted(exc: BaseException) -> bool:
    return isinstance(exc, (KeyboardInterrupt, Interrupted))


class _Quiet:
    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def line(self, text: str) -> None:
        return None


def _view(title: str, view: ViewFactory | None) -> Any:
    return view(title) if view is not None else _Quiet()
