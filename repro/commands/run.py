"""`repro run offline|server|interactive` (issue #3; `--launcher slurm` is issue #7; interactive, --target-qps: #28)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from repro.core.backends import NAMES
from repro.ui.options import DryRunOpt, JsonOpt, RecipeOpt, WorkspaceOpt, endpoint_urls, finite_in, workspace_flag

# LoadGen takes durations in whole milliseconds; a week is longer than any run and far from overflow.
MAX_DURATION_S = 7 * 86400

if TYPE_CHECKING:  # imported where used, so `repro --help` does not load the run stack
    from rich.console import Group
    from rich.text import Text

    from repro.core.steps import StepOutcome

BackendOpt = Annotated[
    str | None, typer.Option("--backend", "-b", help=f"{' | '.join(NAMES)}; overrides the recipe's backend.")
]
DurationOpt = Annotated[
    float | None,
    typer.Option(
        "--duration",
        callback=finite_in(0, MAX_DURATION_S),
        help="Smoke run: LoadGen min/max duration in seconds (labelled smoke).",
    ),
]
OfficialOpt = Annotated[
    bool,
    typer.Option(
        "--official-min-duration",
        help="MLPerf's own 600 s minimum (mlperf.conf) instead of the recipe's 2,400 s (Azure's choice): still a "
        "valid run, with about a quarter of the samples and time (GB200 Offline ~152k samples, ~13 min, instead "
        "of ~607k, ~54 min).",
    ),
]
StopBelowOpt = Annotated[
    bool,
    typer.Option(
        "--stop-if-below-band",
        help="End the run early once its projected tokens/s cannot reach the published band (99% confidence, "
        "after at least 10% of it); the heartbeat shows the projection either way.",
    ),
]
SamplesOpt = Annotated[
    int | None, typer.Option("--samples", help="Smoke run: exactly this many samples (labelled smoke).")
]
AccuracyOpt = Annotated[
    bool,
    typer.Option(
        "--accuracy",
        help="AccuracyOnly mode: log every output, write accuracy.txt into the latest performance run's "
        "folder (RUN_DIR/accuracy/) and print the scores.",
    ),
]
ComplianceOpt = Annotated[
    str | None,
    typer.Option(
        "--compliance",
        metavar="TEST06",
        help="Run MLPerf compliance TEST06 (LoadGen reads its audit.config), write "
        "RUN_DIR/TEST06/ beside the latest performance run and print its checks.",
    ),
]
IntoOpt = Annotated[
    Path | None,
    typer.Option(
        "--into",
        metavar="RUN_DIR",
        help="Write into this run folder (pair an --accuracy or --compliance run with its "
        "performance run) instead of the latest one.",
    ),
]
RateOpt = Annotated[
    float | None,
    typer.Option(
        "--sim-rate",
        callback=finite_in(0, 1e9),
        help="sim backend: tokens/s to replay at (default: as fast as possible).",
    ),
]
NodesOpt = Annotated[int, typer.Option("--nodes", min=1, help="VMs to run on (with --launcher slurm).")]
LauncherOpt = Annotated[
    str,
    typer.Option(
        "--launcher",
        help="What starts the servers: local (this VM), slurm (sbatch/srun: a rack of VMs, one run each, or one "
        "system's servers across nodes).",
    ),
]
PartitionOpt = Annotated[str | None, typer.Option("--partition", help="Slurm partition (with --launcher slurm).")]
InsideJobOpt = Annotated[
    bool,
    typer.Option(
        "--inside-job",
        help="This process is node 0 of a Slurm job (what the job repro submits runs; also under salloc): place "
        "the recipe's system on the job's nodes, start its servers as srun steps, LoadGen here.",
    ),
]
TimeLimitOpt = Annotated[
    str | None,
    typer.Option("--time-limit", help="Slurm time limit of a system's job (--time: MINUTES, HH:MM:SS or D-HH)."),
]
SystemNodesOpt = Annotated[
    int | None,
    typer.Option(
        "--nodes",
        min=1,
        help="Nodes (with --launcher slurm; a one-system recipe: default its published count).",
    ),
]
ImageOpt = Annotated[
    str | None,
    typer.Option(
        "--container-image",
        help="Server image each node starts trtllm-serve from (with --launcher slurm; default: the one "
        "build-engine builds).",
    ),
]
RegistryOpt = Annotated[
    str | None,
    typer.Option(
        "--image-registry",
        help="Push the server image here and have each node pull it (with --launcher slurm; default: docker save "
        "into the shared rack folder, docker load on each node).",
    ),
]
ImageSourceOpt = Annotated[
    str | None,
    typer.Option(
        "--image-source",
        help="How the server image reaches each node (with --launcher slurm): archive (docker save/load through the "
        "rack folder), registry (docker pull), enroot (enroot import into the rack folder, each node runs it with "
        "enroot); host (a system's servers on each node's host: TensorRT-LLM installed there, no container). "
        "Default: registry if the image is in one, enroot where enroot is and Docker is not, else archive "
        "(a system: enroot).",
    ),
]
ServerImageOpt = Annotated[
    str | None,
    typer.Option("--server-image", help="Image to start trtllm-serve from (default: the one build-engine built)."),
]
EndpointOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--endpoint",
        callback=endpoint_urls,
        help="URL of an OpenAI-compatible server you already run (repeatable); repro starts none.",
    ),
]
ServedModelOpt = Annotated[
    str | None,
    typer.Option(
        "--served-model",
        help="Model name to put in every request to the server (default: the first id of its "
        "/v1/models, else the recipe's model).",
    ),
]
KeepServersOpt = Annotated[
    bool, typer.Option("--keep-servers", help="Leave the trtllm-serve containers running; the next run reuses them.")
]


def _address(value: str) -> str:
    import ipaddress

    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not an IP address (127.0.0.1, 0.0.0.0, or this VM's own).") from None


ListenOpt = Annotated[
    str,
    typer.Option(
        "--listen",
        metavar="ADDRESS",
        callback=_address,
        help="Address the trtllm-serve containers listen on (default 127.0.0.1: this VM only). The endpoints "
        "have no authentication: 0.0.0.0 opens them to every network the VM is on.",
    ),
]
ReadyTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--ready-timeout",
        callback=finite_in(0, 7 * 86400),
        help="Seconds to wait for the servers to load the model and answer.",
    ),
]
StallTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--stall-timeout",
        callback=finite_in(0, 7 * 86400),
        help="Seconds a server may send nothing before the run ends as failed (default: derived from the recipe's "
        "requests in flight and Offline rate, at least 600; --dry-run shows it; a whole request gets three times "
        "that).",
    ),
]
ClientProcessesOpt = Annotated[
    int | None,
    typer.Option(
        "--client-processes",
        min=1,
        max=512,
        help="Processes the HTTP client runs in, each over its share of the servers (default: from the recipe's "
        "expected tokens/s, about 25,000 a process, and this host's cores; --dry-run shows it).",
    ),
]
MAX_TARGET_QPS = 1_000_000
"""Far above any rack's rate; LoadGen turns the rate into a sample count, which a larger one overflows."""
TargetQpsOpt = Annotated[
    str | None,
    typer.Option(
        "--target-qps",
        metavar="QPS|auto",
        help="LoadGen's rate: a number, or auto (Offline: a short probe measures it). Server/Interactive otherwise "
        "use the rate `repro tune` saved, else the recipe's.",
    ),
]
RepeatOpt = Annotated[
    int | None,
    typer.Option(
        "--repeat",
        min=2,
        max=100,
        metavar="N",
        help="Run N times (each in its own process), then verify the runs together: mean, CV and a 95% "
        "confidence interval of tokens/s per GPU (`repro verify RUN [RUN ...]`).",
    ),
]
RerunOpt = Annotated[
    Path | None,
    typer.Option(
        "--rerun-failed",
        help="Re-run only the failed, cancelled or lost VMs of this rack folder (implies --launcher slurm), "
        "then re-aggregate.",
    ),
]


class RunView:
    """The run's StepOutcome, plus the verdict when one was computed; JSON and Rich from the same data."""

    def __init__(
        self,
        outcome: StepOutcome,
        verdict: Any = None,
        again: list[str] | None = None,
        recipe: Any = None,
        workspace: str | None = None,
    ):
        self.outcome = outcome
        self.verdict = verdict
        self.again = again or []
        self.recipe, self.workspace = recipe, workspace

    @property
    def next_command(self) -> str | None:
        """What to do with a finished run: the report (a verdict was shown) or the verdict (accuracy/TEST06)."""
        run_dir = self.outcome.details.get("run_dir")
        if self.outcome.status != "done" or not run_dir:
            return None
        if self.verdict is not None and self.verdict.accuracy_command is not None:
            return str(self.verdict.accuracy_command)  # only the accuracy run keeps it from a PASS: that run next
        if self.verdict is not None:
            from repro.flow.status import step_command

            # the command `repro status` and the guided flow name after this run, word for word
            return step_command("report", self.recipe, str(run_dir), self.workspace)
        if self.outcome.details.get("kind") != "performance" and not self.outcome.details.get("paired_with"):
            # an accuracy or TEST06 folder alone gives verify nothing to judge: the performance run comes first
            scenario = str(self.outcome.details.get("scenario", "Offline")).lower()
            return shlex.join(["repro", "run", scenario, *self.again])
        return f"repro verify {shlex.quote(str(run_dir))}"

    def to_json(self) -> dict[str, Any]:
        out = self.outcome.to_json()
        if self.verdict is not None:
            out["verdict"] = self.verdict.to_json()
        out["next_command"] = self.next_command
        return out

    def __rich__(self) -> Group:
        from rich.console import Group
        from rich.text import Text

        from repro.ui.render import renderable

        parts: list[Any] = [renderable(self.outcome)]
        d = self.outcome.details
        if self.outcome.status == "dry-run":
            parts.extend(_server_lines(d))
            parts.append(Text(f"user.conf:\n{d.get('user_conf', '')}", style="dim"))
        if d.get("label"):
            parts.append(Text(f"label: {d['label']} (never counted as a reproduction)", style="yellow"))
        parts.extend(Text(f"warning: {w}", style="yellow") for w in d.get("warnings") or [])
        if d.get("paired_with"):
            parts.append(
                Text(
                    f"paired with the performance run in {d['paired_with']}; `repro verify {d['run_dir']}` "
                    "checks them together"
                )
            )
        if isinstance(d.get("accuracy"), dict):
            parts.append(_accuracy_text(d["accuracy"]))
        if isinstance(d.get("compliance"), dict):
            parts.append(_compliance_text(d["compliance"]))
        if self.verdict is not None:
            parts.append(renderable(self.verdict))
        return Group(*parts)


def _server_lines(d: dict[str, Any]) -> list[Text]:
    """Each server container with its GPUs and command, and the readiness wait (or the endpoints given)."""
    from rich.text import Text

    out: list[Text] = []
    engine = d.get("engine")
    if isinstance(engine, dict) and engine.get("layout"):
        which = f"{engine['scenario']}'s own engine" if engine.get("source") else "the base (Offline) engine"
        out.append(Text(f"engine: {which}, {engine['layout']} (built by `{engine['build']}`)", style="bold"))
    for s in d.get("servers") or []:
        gpus = ",".join(s["gpus"]) if s["gpus"] else "none"
        out.append(Text(f"server {s['rank']}: container {s['container']}  GPUs {gpus}  {s['url']}", style="bold"))
        out.append(Text(f"  {s.get('docker_cli') or s.get('enroot_cli')}", style="dim"))
    r = d.get("readiness")
    if r:
        out.append(
            Text(
                f"readiness: {r['probe']}; retry {r['retry']}; give up after {r['timeout_s']:.0f} s; "
                f"fail at once if {r['fails_at_once_if']}"
            )
        )
    if d.get("endpoints"):
        out.append(Text("endpoints (started by you, not repro): " + ", ".join(d["endpoints"])))
    c = d.get("client")
    if c:
        out.append(
            Text(
                f"client: {c['requests_in_flight_per_server']:,} requests in flight per server "
                f"({c['requests_in_flight_source']}); a server that sends nothing for {c['stall_timeout_s']:,.0f} s "
                f"ends the run ({c['stall_timeout_source']})"
            )
        )
        out.append(Text(f"client processes: {c['processes']} ({c['processes_source']})"))
    return out


def _accuracy_text(scores: dict[str, Any]) -> Text:
    """The scores the run computed (issue 15 item 4), as accuracy.txt states them: its benchmark's metrics, in their
    order (rouge1 ... for Llama-2-70B, rougeL and exact_match for Llama-3.1-405B), then the totals."""
    from rich.text import Text

    from repro.results.accuracy import TOTALS

    keys = [k for k, v in scores.items() if k not in TOTALS and isinstance(v, (int, float)) and not isinstance(v, bool)]
    line = ", ".join(f"{k} {scores[k]:.4f}" for k in keys)
    tps = scores.get("tokens_per_sample")
    extra = f"; tokens per sample {tps:,.1f}" if isinstance(tps, (int, float)) else ""
    n = scores.get("gen_num")
    return Text(f"accuracy: {line}{extra}{f' over {n} samples' if n is not None else ''}")


def _compliance_text(doc: dict[str, Any]) -> Text:
    """The three TEST06 checks as verify_accuracy.txt states them, then why it failed."""
    from rich.text import Text

    text = Text()
    for raw in str(doc.get("verify_text", "")).splitlines():
        style = "green" if raw.endswith(("True", "Skipped", "complete")) else "red"
        text.append(raw + "\n", style=style)
    for problem in doc.get("problems", []):
        text.append(f"  - {problem}\n", style="red")
    for check in doc.get("checks", []):
        if check.get("status") == "False" and check.get("example"):
            text.append(
                f"  - {check['failures']} sample(s) fail the {check['name'].replace('_', ' ')} check, "
                f"e.g. {check['example']}\n",
                style="red",
            )
    if doc.get("verify_accuracy"):
        text.append(f"written to {doc['verify_accuracy']}", style="dim")
    return text


def _run(scenario: str, flags: dict[str, Any]) -> None:
    """Every scenario command: its flags become RunOptions (validated there), then plan/execute, then verify."""
    from repro.core.errors import Interrupted
    from repro.core.workspace import Workspace
    from repro.results.verify import verify_dir
    from repro.run.harness import run_benchmark
    from repro.run.options import RunHooks, RunOptions
    from repro.run.progress import heartbeat_interval
    from repro.run.servers import ServerOptions
    from repro.ui.options import recipe_flag
    from repro.ui.output import emit
    from repro.ui.progress_bar import RunBar

    heartbeat_interval()  # a bad REPRO_HEARTBEAT_S is an input error now, not a traceback an hour into the run
    ws = Workspace.open(flags["workspace"])
    chosen = recipe_flag(flags["recipe"], ws)
    dry_run, endpoint = flags["dry_run"], flags["endpoint"]
    servers = ServerOptions(
        image=flags["server_image"],
        keep=flags["keep_servers"],
        ready_timeout_s=flags["ready_timeout"],
        stall_timeout_s=flags["stall_timeout"],
        client_processes=flags["client_processes"],
        listen=flags["listen"],
    )
    rate = _target_qps(
        flags["target_qps"],
        scenario,
        chosen,
        ws,
        endpoint,
        servers,
        flags["served_model"],
        flags["backend"],
        dry_run,
        sim_rate=flags["sim_rate"],
        duration_s=flags["duration"],
    )
    options = RunOptions(
        chosen,
        ws,
        scenario=scenario,
        backend=flags["backend"],
        duration_s=flags["duration"],
        samples=flags["samples"],
        accuracy=flags.get("accuracy", False),
        compliance=flags.get("compliance"),
        into=flags["into"],
        sim_rate=flags["sim_rate"],
        endpoints=tuple(endpoint or ()),
        served_model=flags["served_model"],
        servers=servers,
        official_min_duration=flags.get("official_min_duration", False),
        target_qps=rate,
        stop_if_below_band=flags["stop_if_below_band"],
        argv=("repro", *sys.argv[1:]),
        dry_run=dry_run,
        launcher=flags.get("launcher"),
        inside_job=bool(flags.get("inside_job")),
        nodes=flags.get("nodes") if flags.get("inside_job") else None,
    )
    if flags.get("repeat") and not dry_run:
        _repeat(options, chosen, scenario, flags)
        return
    from repro.flow.status import record_resume, record_verify

    if not flags["json"] and not dry_run:
        from repro.run.plan import manages_servers
        from repro.run.servers import check_engine_built
        from repro.ui.output import info

        if manages_servers(options):  # a scenario's own engine not built: one error, before "loading"
            check_engine_built(options.deployment, ws)
        # said at once: loading the model and LoadGen takes seconds before the bar can show a count
        info(f"run: LoadGen {scenario} for recipe {chosen.name}: loading the model and LoadGen; the bar follows.")
    try:
        outcome = run_benchmark(options, RunHooks(bar=RunBar))
    except Interrupted as stop:
        # the hint is the command the user typed, every flag kept (--duration, --workspace, ...); status says it too
        stop.next_command = shlex.join(["repro", *sys.argv[1:]])
        if not dry_run:
            record_resume(ws, stop.next_command)
        raise
    verdict = None
    if outcome.status == "done" and not options.accuracy and not options.compliance:
        verdict = verify_dir(outcome.details["log_dir"], recipe=chosen, scenario=scenario)
        if outcome.details.get("run_dir"):
            # the verdict printed here is verify's: status and the guided flow move on to the report, as this run does
            record_verify(ws, Path(outcome.details["run_dir"]), chosen, verdict.status, verdict.exit_code)
    flag = workspace_flag(flags["workspace"])
    again = ["--recipe", chosen.name] + (["--workspace", flag] if flag else [])
    emit(RunView(outcome, verdict, again, chosen, flag), flags["json"])
    test = outcome.details.get("compliance")
    if isinstance(test, dict) and not test.get("passed"):
        raise typer.Exit(1)
    if verdict is not None and not chosen.demo and outcome.details.get("label") is None and verdict.exit_code:
        raise typer.Exit(verdict.exit_code)


def _repeat(options: Any, recipe: Any, scenario: str, flags: dict[str, Any]) -> None:
    """--repeat N: N runs, each in its own process, then one verdict over them (results/series.py)."""
    from repro.core.errors import InputError
    from repro.results.series import verify_series
    from repro.run.repeat import run_repeated
    from repro.ui.output import emit, info
    from repro.ui.progress_bar import RunBar

    if options.accuracy or options.compliance or options.into is not None:
        raise InputError(
            "--repeat repeats performance runs; --accuracy, --compliance and --into run once.",
            f"`repro run {scenario.lower()} --repeat {flags['repeat']}` without them",
        )
    folders = run_repeated(options, int(flags["repeat"]), announce=info, bar=RunBar)
    series = verify_series(folders, recipe=recipe, scenario=scenario)
    emit(series, flags["json"])
    if not recipe.demo and all(v.run.label is None for v in series.verdicts) and series.exit_code:
        raise typer.Exit(series.exit_code)


def _target_qps(
    value: str | None,
    scenario: str,
    recipe: Any,
    ws: Any,
    endpoint: list[str] | None,
    servers: Any,
    served_model: str | None,
    backend: str | None,
    dry_run: bool,
    *,
    sim_rate: float | None = None,
    duration_s: float | None = None,
) -> float | dict[str, Any] | None:
    """--target-qps: a number as given; auto (Offline) runs the probe now and hands the run its record."""
    from repro.core.errors import InputError

    if value is None:
        return None
    if value.strip().lower() == "auto":
        if scenario != "Offline":
            raise InputError(
                f"--target-qps auto is for Offline; {scenario} finds its rate with `repro tune`.",
                f"repro tune {scenario.lower()}",
            )
        if dry_run:
            return None
        from repro.run.offline_auto import offline_auto_qps

        return offline_auto_qps(
            recipe,
            ws,
            endpoints=endpoint or None,
            backend=backend,
            servers=servers,
            served_model=served_model,
            sim_rate=sim_rate,
            min_duration_s=duration_s,
        )
    import math

    try:
        rate = float(value)
    except ValueError:
        rate = math.nan
    if not math.isfinite(rate) or rate <= 0 or rate > MAX_TARGET_QPS:
        raise InputError(
            f"--target-qps {value!r}: give a finite number of queries per second above 0 and at most "
            f"{MAX_TARGET_QPS:,}, or auto (Offline).",
            f"repro run {scenario.lower()} --target-qps auto"
            if scenario == "Offline"
            else f"repro tune {scenario.lower()}",
        )
    return rate


def _rack_ui(json: bool) -> Any:
    from repro.run.rack import QuietRack
    from repro.ui.rack import ConsoleRack

    return QuietRack() if json else ConsoleRack()


def _submitted(scenario: str, flags: dict[str, Any], spec: Any) -> bool:
    """A launcher that submits (--launcher slurm on a login node, or --rerun-failed): it submits the job, follows it
    and collects the result, shown first, then its exit code through the error table (True). False: this process
    runs the scenario itself (one VM, or --inside-job, node 0 of a system's job)."""
    rerun = flags.get("rerun_failed")
    if (not spec.submits and rerun is None) or flags.get("inside_job"):
        return False
    from repro.run.launchers import Submission, launcher
    from repro.ui.output import emit

    if flags.get("client_processes"):
        from repro.core.errors import InputError

        raise InputError(
            "--client-processes sizes the client of a run on this VM; in a Slurm job each run sizes its own from "
            "its node's cores and the recipe's rate (`--dry-run` shows it).",
            f"`repro run {scenario.lower()} --launcher slurm ...` without --client-processes",
        )

    chosen = launcher(spec.name if spec.submits else "slurm")
    request = Submission(
        flags["recipe"],
        flags["workspace"],
        scenario,
        nodes=flags.get("nodes"),
        partition=flags.get("partition"),
        container_image=flags.get("container_image"),
        image_registry=flags.get("image_registry"),
        image_source=flags.get("image_source"),
        backend=flags.get("backend"),
        duration_s=flags.get("duration"),
        samples=flags.get("samples"),
        sim_rate=flags.get("sim_rate"),
        time_limit=flags.get("time_limit"),
        rerun=rerun,
        dry_run=flags["dry_run"],
    )
    result = chosen.submit(request, _rack_ui(flags["json"]))
    emit(result, flags["json"])
    chosen.check(result)
    return True


def offline(
    recipe: RecipeOpt = None,
    workspace: WorkspaceOpt = None,
    backend: BackendOpt = None,
    duration: DurationOpt = None,
    official_min_duration: OfficialOpt = False,
    samples: SamplesOpt = None,
    accuracy: AccuracyOpt = False,
    compliance: ComplianceOpt = None,
    into: IntoOpt = None,
    sim_rate: RateOpt = None,
    nodes: NodesOpt = 1,
    launcher: LauncherOpt = "local",
    partition: PartitionOpt = None,
    container_image: ImageOpt = None,
    image_registry: RegistryOpt = None,
    image_source: ImageSourceOpt = None,
    server_image: ServerImageOpt = None,
    rerun_failed: RerunOpt = None,
    inside_job: InsideJobOpt = False,
    time_limit: TimeLimitOpt = None,
    endpoint: EndpointOpt = None,
    keep_servers: KeepServersOpt = False,
    listen: ListenOpt = "127.0.0.1",
    ready_timeout: ReadyTimeoutOpt = None,
    stall_timeout: StallTimeoutOpt = None,
    client_processes: ClientProcessesOpt = None,
    served_model: ServedModelOpt = None,
    target_qps: TargetQpsOpt = None,
    stop_if_below_band: StopBelowOpt = False,
    repeat: RepeatOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Run the Offline scenario through MLCommons LoadGen and write MLPerf logs to a run folder."""
    from repro.core.launchers import launcher_spec

    spec = launcher_spec(launcher)
    if spec.submits and repeat and not inside_job:
        from repro.core.errors import InputError

        raise InputError("--repeat runs on this VM (--launcher local).", "`repro run offline --repeat N`")
    if spec.submits and not inside_job and (compliance or into):
        from repro.core.errors import InputError

        raise InputError(
            "--compliance and --into run on this VM only (--launcher local).",
            "`repro run offline --compliance TEST06` on each VM",
        )
    if _submitted("Offline", locals(), spec):
        return
    _run("Offline", locals())


def server(
    recipe: RecipeOpt = None,
    workspace: WorkspaceOpt = None,
    backend: BackendOpt = None,
    duration: DurationOpt = None,
    official_min_duration: OfficialOpt = False,
    samples: SamplesOpt = None,
    compliance: ComplianceOpt = None,
    into: IntoOpt = None,
    sim_rate: RateOpt = None,
    endpoint: EndpointOpt = None,
    keep_servers: KeepServersOpt = False,
    listen: ListenOpt = "127.0.0.1",
    ready_timeout: ReadyTimeoutOpt = None,
    stall_timeout: StallTimeoutOpt = None,
    client_processes: ClientProcessesOpt = None,
    served_model: ServedModelOpt = None,
    server_image: ServerImageOpt = None,
    target_qps: TargetQpsOpt = None,
    stop_if_below_band: StopBelowOpt = False,
    repeat: RepeatOpt = None,
    nodes: SystemNodesOpt = None,
    launcher: LauncherOpt = "local",
    partition: PartitionOpt = None,
    container_image: ImageOpt = None,
    image_registry: RegistryOpt = None,
    image_source: ImageSourceOpt = None,
    inside_job: InsideJobOpt = False,
    time_limit: TimeLimitOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Run the Server scenario through MLCommons LoadGen (streaming, so TTFT and TPOT are measured)."""
    from repro.core.launchers import launcher_spec

    if _submitted("Server", locals(), launcher_spec(launcher)):
        return
    _run("Server", locals())


def interactive(
    recipe: RecipeOpt = None,
    workspace: WorkspaceOpt = None,
    backend: BackendOpt = None,
    duration: DurationOpt = None,
    official_min_duration: OfficialOpt = False,
    samples: SamplesOpt = None,
    into: IntoOpt = None,
    sim_rate: RateOpt = None,
    endpoint: EndpointOpt = None,
    keep_servers: KeepServersOpt = False,
    listen: ListenOpt = "127.0.0.1",
    ready_timeout: ReadyTimeoutOpt = None,
    stall_timeout: StallTimeoutOpt = None,
    client_processes: ClientProcessesOpt = None,
    served_model: ServedModelOpt = None,
    server_image: ServerImageOpt = None,
    target_qps: TargetQpsOpt = None,
    stop_if_below_band: StopBelowOpt = False,
    repeat: RepeatOpt = None,
    nodes: SystemNodesOpt = None,
    launcher: LauncherOpt = "local",
    partition: PartitionOpt = None,
    container_image: ImageOpt = None,
    image_registry: RegistryOpt = None,
    image_source: ImageSourceOpt = None,
    inside_job: InsideJobOpt = False,
    time_limit: TimeLimitOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Run the Interactive scenario: LoadGen's Server scenario under the benchmark's Interactive TTFT/TPOT limits."""
    from repro.core.launchers import launcher_spec

    if _submitted("Interactive", locals(), launcher_spec(launcher)):
        return
    _run("Interactive", locals())
