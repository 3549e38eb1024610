"""`repro run offline|server` (issue #3; `--launcher slurm` is issue #7)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Group
from rich.text import Text

from repro.ui.options import DryRunOpt, JsonOpt, RecipeOpt, WorkspaceOpt
from repro.ui.render import renderable
from repro.ui.output import emit
from repro.core.steps import StepOutcome
from repro.core.workspace import Workspace

BackendOpt = Annotated[Optional[str], typer.Option("--backend", "-b", help="sim | hf | trtllm; overrides the recipe's backend.")]
DurationOpt = Annotated[Optional[float], typer.Option("--duration", help="Smoke run: LoadGen min/max duration in seconds (labelled smoke).")]
SamplesOpt = Annotated[Optional[int], typer.Option("--samples", help="Smoke run: exactly this many samples (labelled smoke).")]
AccuracyOpt = Annotated[bool, typer.Option("--accuracy", help="AccuracyOnly mode: log every output and write accuracy.txt.")]
RateOpt = Annotated[Optional[float], typer.Option("--sim-rate", help="sim backend: tokens/s to replay at (default: as fast as possible).")]
NodesOpt = Annotated[int, typer.Option("--nodes", min=1, help="VMs to run on (with --launcher slurm).")]
LauncherOpt = Annotated[str, typer.Option("--launcher", help="local: this VM; slurm: one run per node through sbatch.")]
PartitionOpt = Annotated[Optional[str], typer.Option("--partition", help="Slurm partition (with --launcher slurm).")]
ImageOpt = Annotated[Optional[str], typer.Option("--container-image", help="Container image for the Slurm job (with --launcher slurm).")]
EndpointOpt = Annotated[Optional[list[str]], typer.Option(
    "--endpoint", help="URL of an OpenAI-compatible server you already run (repeatable); repro starts none.")]
ServedModelOpt = Annotated[str | None, typer.Option(
    "--served-model", help="Model name to put in every request to the server (default: the first id of its "
                           "/v1/models, else the recipe's model).")]
KeepServersOpt = Annotated[bool, typer.Option(
    "--keep-servers", help="Leave the trtllm-serve containers running; the next run reuses them.")]
ReadyTimeoutOpt = Annotated[Optional[float], typer.Option(
    "--ready-timeout", help="Seconds to wait for the servers to load the model and answer.")]
RerunOpt = Annotated[Optional[Path], typer.Option("--rerun-failed", help="Re-run only the failed, cancelled or lost VMs of this rack folder (implies --launcher slurm), then re-aggregate.")]


def _sigterm_as_interrupt() -> None:
    """Slurm's scancel and `docker stop` send SIGTERM: stop LoadGen cleanly and keep the partial logs, as for Ctrl-C."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


class RunView:
    """The run's StepOutcome, plus the verdict when one was computed; JSON and Rich from the same data."""

    def __init__(self, outcome: StepOutcome, verdict: Any = None):
        self.outcome = outcome
        self.verdict = verdict

    def to_json(self) -> dict[str, Any]:
        out = self.outcome.to_json()
        if self.verdict is not None:
            out["verdict"] = self.verdict.to_json()
        return out

    def __rich__(self) -> Group:
        parts: list[Any] = [renderable(self.outcome)]
        d = self.outcome.details
        if self.outcome.status == "dry-run":
            parts.extend(_server_lines(d))
            parts.append(Text(f"user.conf:\n{d.get('user_conf', '')}", style="dim"))
        if d.get("label"):
            parts.append(Text(f"label: {d['label']} (never counted as a reproduction)", style="yellow"))
        if self.verdict is not None:
            parts.append(renderable(self.verdict))
        return Group(*parts)


def _server_lines(d: dict[str, Any]) -> list[Text]:
    """Each server container with its GPUs and command, and the readiness wait (or the endpoints given)."""
    out: list[Text] = []
    for s in d.get("servers") or []:
        gpus = ",".join(s["gpus"]) if s["gpus"] else "none"
        out.append(Text(f"server {s['rank']}: container {s['container']}  GPUs {gpus}  {s['url']}", style="bold"))
        out.append(Text(f"  {s['docker_cli']}", style="dim"))
    r = d.get("readiness")
    if r:
        out.append(Text(f"readiness: {r['probe']}; retry {r['retry']}; give up after {r['timeout_s']:.0f} s; "
                        f"fail at once if {r['fails_at_once_if']}"))
    if d.get("endpoints"):
        out.append(Text("endpoints (started by you, not repro): " + ", ".join(d["endpoints"])))
    return out


def _run(scenario: str, recipe: Optional[str], workspace: Any, backend: Optional[str], duration: Optional[float],
         samples: Optional[int], accuracy: bool, sim_rate: Optional[float], dry_run: bool, json: bool,
         endpoint: Optional[list[str]] = None, keep_servers: bool = False,
         ready_timeout: Optional[float] = None, served_model: str | None = None) -> None:
    from repro.core.systems import resolve_recipe
    from repro.run.harness import run_benchmark
    from repro.results.verify import verify_dir
    from repro.run.servers import ServerOptions

    ws = Workspace.open(workspace)
    chosen, _ = resolve_recipe(recipe, ws)
    if not dry_run:
        _sigterm_as_interrupt()
    outcome = run_benchmark(chosen, ws, scenario=scenario, backend=backend, duration_s=duration,
                            samples=samples, accuracy=accuracy, dry_run=dry_run, progress=False if json else None,
                            rate_tokens_per_s=sim_rate, argv=["repro", *sys.argv[1:]], endpoints=endpoint or None,
                            servers=ServerOptions(keep=keep_servers, ready_timeout_s=ready_timeout),
                            served_model=served_model)
    verdict = None
    if outcome.status == "done" and not accuracy:
        verdict = verify_dir(outcome.details["run_dir"], recipe=chosen, scenario=scenario)
    emit(RunView(outcome, verdict), json)
    if verdict is not None and not chosen.demo and outcome.details.get("label") is None and verdict.exit_code:
        raise typer.Exit(verdict.exit_code)


def offline(recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, backend: BackendOpt = None, duration: DurationOpt = None,
            samples: SamplesOpt = None, accuracy: AccuracyOpt = False, sim_rate: RateOpt = None, nodes: NodesOpt = 1,
            launcher: LauncherOpt = "local", partition: PartitionOpt = None, container_image: ImageOpt = None,
            rerun_failed: RerunOpt = None, endpoint: EndpointOpt = None, keep_servers: KeepServersOpt = False,
            ready_timeout: ReadyTimeoutOpt = None, served_model: ServedModelOpt = None, dry_run: DryRunOpt = False,
            json: JsonOpt = False) -> None:
    """Run the Offline scenario through MLCommons LoadGen and write MLPerf logs to a run folder."""
    if launcher not in ("local", "slurm"):
        from repro.core.errors import InputError
        raise InputError(f"--launcher {launcher!r}: use local or slurm.", "`repro run offline --help`")
    if rerun_failed is not None:
        from repro.run.rack import rerun_failed as rerun
        rerun(rerun_failed, dry_run=dry_run, as_json=json)
        return
    if launcher == "slurm":
        from repro.run.rack import launch_offline
        launch_offline(recipe=recipe, workspace=workspace, nodes=nodes, partition=partition, container_image=container_image,
                       backend=backend, duration_s=duration, samples=samples, dry_run=dry_run, as_json=json, sim_rate=sim_rate)
        return
    _run("Offline", recipe, workspace, backend, duration, samples, accuracy, sim_rate, dry_run, json,
         endpoint, keep_servers, ready_timeout, served_model)


def server(recipe: RecipeOpt = None, workspace: WorkspaceOpt = None, backend: BackendOpt = None, duration: DurationOpt = None,
           samples: SamplesOpt = None, sim_rate: RateOpt = None, endpoint: EndpointOpt = None,
           keep_servers: KeepServersOpt = False, ready_timeout: ReadyTimeoutOpt = None,
           served_model: ServedModelOpt = None, dry_run: DryRunOpt = False, json: JsonOpt = False) -> None:
    """Run the Server scenario through MLCommons LoadGen (streaming, so TTFT and TPOT are measured)."""
    _run("Server", recipe, workspace, backend, duration, samples, False, sim_rate, dry_run, json, endpoint,
         keep_servers, ready_timeout, served_model)
