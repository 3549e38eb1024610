"""One LoadGen test end to end: `run_benchmark(options)` plans it (`repro.run.plan`) and `execute(plan, hooks)`
carries the plan out.

Execution opens the run folder and its run.json (marked interrupted until LoadGen returns), starts the servers
when repro owns them, drives LoadGen through the SUT (`repro.run.sut`) with the registered backend, then
records the outcome in run.json and the ledger. Ctrl-C, SIGTERM and a failing backend all end the same way:
LoadGen is answered, writes its logs, and run.json marks them incomplete.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.clock import now_iso
from repro.core.errors import SIGNAL_EXIT, InputError, Interrupted, ReproError, StepFailed, stop_signal
from repro.core.fsutil import atomic_write_text
from repro.core.ledger import Artifact, Ledger
from repro.core.recipes import Deployment
from repro.core.record import GpuFacts, RunRecord
from repro.core.steps import StepOutcome
from repro.results.compliance import audit_config_text, compliance_settings, finish_test06
from repro.run.backends import Backend, BackendContext, create_backend
from repro.run.launchers import Fleet, FleetContext
from repro.run.layout import AUDIT_CONFIG, choose_run_dir, empty_logs, kind_dir, remove_empty
from repro.run.options import RunHooks, RunOptions
from repro.run.plan import RunPlan, plan_run
from repro.run.progress import HEARTBEAT_FLOOR_S, RunProgress, choose_mode, heartbeat_interval
from repro.run.projection import RunWatch
from repro.run.servers import ServerDied, ready_timeout_s
from repro.run.settings import expected_samples, model_key, sim_pace, user_conf_text
from repro.run.sut import LoadGenSUT
from repro.setup.dataset import PreparedDataset, load_prepared

STOP_SIGNALS = {
    "SIGINT": "the user (Ctrl-C, SIGINT)",
    "SIGTERM": "SIGTERM (scancel, docker stop or kill)",
    "SIGHUP": "SIGHUP (the terminal closed)",
}
# After Ctrl-C/SIGTERM: how long LoadGen gets to return once nothing is in flight. Offline returns at once; Server
# keeps its schedule to min_duration, so it is left behind and the process exits (exit 130/143).
INTERRUPT_GRACE_S = 3.0
"""After Ctrl-C, how long LoadGen may take to finish on its own, counted once from the signal: Server and
Interactive keep scheduling queries until min_duration, which nothing can cut short, so after this LoadGen is left."""
CLOSE_AFTER_STOP_S = 2.0
"""Then how long the backend may take to close (a CPU batch mid-generate, in-flight HTTP requests); the prompt is
back within INTERRUPT_GRACE_S + CLOSE_AFTER_STOP_S + server removal, under 10 s, whatever the scenario."""
INTERRUPTED_MARK = " * Run interrupted by {signal}: repro stopped issuing queries; this partial run is not a result"


def run_benchmark(options: RunOptions, hooks: RunHooks | None = None) -> StepOutcome:
    """The plan as a dry-run outcome, or the executed run (details['run_dir'], details['log_dir'])."""
    plan = plan_run(options)
    if options.dry_run:
        return plan.dry_run_outcome()
    return execute(plan, hooks or RunHooks())


@dataclass
class ActiveRun:
    """A run being executed: its plan, folders and record, and what has been started (for the cleanup)."""

    plan: RunPlan
    ledger: Any
    """The workspace ledger (a tune probe's records nothing)."""
    record: RunRecord
    run_dir: Path
    log_dir: Path
    settings: dict[str, Any]
    data_dir: Path
    model_dir: Path
    dataset: PreparedDataset | None = None
    backend: Backend | None = None
    sut: LoadGenSUT | None = None
    fleet: Fleet | None = None
    sampler: Any = None
    worker: threading.Thread | None = None
    stop_signal: str | None = None
    watch: RunWatch | None = None
    stop_deadline: float | None = None
    """When LoadGen's grace after a signal ends: one deadline, however many places wait for it."""
    died_next: str | None = None
    """The next command of a server's death (its log), when one died."""
    backend_left: bool = False
    """The backend's thread was still busy when its close gave up (after a signal): the process leaves at once."""

    def grace_left(self) -> float:
        """Seconds left of the grace after a signal, starting it on first use."""
        if self.stop_deadline is None:
            self.stop_deadline = time.monotonic() + INTERRUPT_GRACE_S
        return max(0.0, self.stop_deadline - time.monotonic())

    def finish(self, status: str, error: str | None) -> None:
        self.record.status, self.record.error = status, error
        self.record.incomplete, self.record.finished = status != "complete", now_iso()
        self.record.write(self.log_dir)

    def fail(self, msg: str, signal: str | None = None) -> None:
        """Mark the logs and the ledger; on a full disk neither write may succeed, so clean what is left instead.

        0-byte files carry nothing and are removed; folders left empty are removed; a ledger entry that cannot be
        written stays 'running' with this pid and host, which `repro status` reports as stale once the process
        is gone."""
        with contextlib.suppress(OSError):
            self.finish("failed" if signal is None else "interrupted", msg)
        remove_empty(self.log_dir, self.run_dir)
        with contextlib.suppress(OSError):
            if signal is None:
                self.ledger.fail(self.plan.step, msg)
            else:
                self.ledger.fail(self.plan.step, msg, interrupted=True, signal=signal)


def execute(plan: RunPlan, hooks: RunHooks) -> StepOutcome:
    """Carry out a plan. Raises StepFailed, Interrupted or the error that stopped it, after recording it."""
    run = _open_run(plan)
    try:
        _drive(run, hooks)
    except KeyboardInterrupt as stop:
        run.stop_signal = stop_signal(stop)
        if run.sut is not None:
            run.sut.stop()
            run.sut.finished.wait(run.grace_left())
    except ReproError as exc:
        run.fail(exc.message)
        _cleanup(run)
        exc.message = f"{exc.message} (run folder: {run.run_dir})"
        raise
    except BaseException as exc:
        run.fail(f"{type(exc).__name__}: {exc}")
        _cleanup(run)
        raise
    _cleanup(run)
    return _conclude(run)


def _open_run(plan: RunPlan) -> ActiveRun:
    """The run folder with user.conf and a run.json marked interrupted, and the ledger entry, before LoadGen."""
    from repro.core import provenance
    from repro.core.fsutil import sha256_text

    o, recipe = plan.options, plan.recipe
    plan.backend.check_installed()
    ws = o.workspace
    ws.ensure()
    ledger: Any = _NoLedger() if o.probe else Ledger.load(ws.ledger_path)
    settings, data_dir, model_dir, calibration = dict(plan.settings), plan.data_dir, plan.model_dir, None
    if recipe.demo:
        from repro.run.demo import calibrate_settings
        from repro.setup.demo import prepare_demo

        paths = prepare_demo(ws)
        data_dir, model_dir = paths["dataset"], paths["model_dir"]
        calibration = None
        if plan.rate_source is None and not o.probe:
            calibration = calibrate_settings(
                settings,
                paths,
                recipe,
                plan.backend.name,
                scenario=o.scenario_spec.loadgen,
                samples=o.samples,
                duration_s=o.duration_s,
                accuracy=o.accuracy,
            )
    run_dir, paired = choose_run_dir(ws, recipe, o.scenario, o.kind, plan.backend.name, o.into)
    log_dir = kind_dir(run_dir, o.kind)
    log_dir.mkdir(parents=True, exist_ok=True)
    facts = provenance.collect(detect=o.detect)
    record = RunRecord(
        repro_version=facts["repro_version"],
        recipe=recipe.name,
        recipe_hash=recipe.hash(),
        benchmark=recipe.benchmark,
        scenario=o.scenario,
        mode=o.mode,
        backend=plan.backend.name,
        label=plan.label,
        incomplete=True,
        status="interrupted",
        error="the run did not finish (process ended before LoadGen returned)",
        gpus=GpuFacts.model_validate(facts["gpus"]),
        driver=facts["driver"],
        vm_size=facts["vm_size"],
        container_digest=facts["container_digest"],
        loadgen_version=facts["loadgen_version"],
        command=list(o.argv if o.argv is not None else sys.argv),
        model_path=_recorded(model_dir, o) if plan.backend.name != "sim" else None,
        dataset_path=_recorded(data_dir, o),
        started=now_iso(),
        settings=settings,
        provenance=facts,
        kind=o.kind,
        run_dir=str(run_dir),
        paired_with=paired,
        target_qps_source=plan.rate_source,
    )
    if o.compliance:
        record.compliance = {"test": o.compliance, "audit_settings": compliance_settings(o.compliance)}
    record.demo_calibration = calibration
    record.boost_slider, advice = _boost_slider(recipe, o.detect)
    if advice:
        record.warnings = [*(record.warnings or []), advice]
    if not o.probe:
        from repro.run.gpu_probe import latest_probe

        record.probe = latest_probe(ws, list(record.gpus.uuids) if record.gpus else [])
    try:
        if o.compliance:
            atomic_write_text(log_dir / AUDIT_CONFIG, audit_config_text())
        atomic_write_text(log_dir / "user.conf", user_conf_text(settings, o.scenario, plan.recipe.bench))
        record.write(log_dir)
    except OSError:
        remove_empty(log_dir, run_dir, everything=True)  # a full disk must not leave an empty, unmarked folder
        raise
    inputs = f"{recipe.hash()}|{o.scenario}|{o.mode}|{plan.backend.name}|{o.duration_s}|{o.samples}"
    inputs += "|600s" if o.official_min_duration else ""
    ledger.start(plan.step, sha256_text(inputs)[:16], recipe=recipe.name, run_dir=str(run_dir), label=plan.label)
    return ActiveRun(plan, ledger, record, run_dir, log_dir, settings, data_dir, model_dir)


def _boost_slider(recipe: Any, detect: bool) -> tuple[dict[str, Any], str | None]:
    """The host's boost slider as the run starts (read only, never set) and, where the published run's harness set
    another, the sentence that names the host command."""
    from repro.results.stack import vboost_advice
    from repro.run.host_state import read_boost_slider

    state = (
        read_boost_slider()
        if detect
        else {"state": "unknown", "vboost": None, "why": "machine detection was off for this run"}
    )
    return state, vboost_advice(recipe, state)


def _recorded(path: Path, o: RunOptions) -> str:
    """An input's path as run.json keeps it: in `inputs_from` when the run's workspace only links to it."""
    home, shared = o.workspace.root, o.inputs_from
    if shared is not None and path.is_relative_to(home):
        return str(shared.root / path.relative_to(home))
    return str(path)


def _drive(run: ActiveRun, hooks: RunHooks) -> None:
    """Servers, backend and LoadGen, then watch LoadGen until it returns (Ctrl-C answers everything outstanding)."""
    import mlperf_loadgen as lg

    plan, record, o = run.plan, run.record, run.plan.options
    run.dataset = dataset = load_prepared(run.data_dir)
    record.dataset_sha256, record.samples_in_dataset = dataset.sha256, len(dataset)
    if plan.backend.needs_model:
        from repro.run.backends.hf import check_model_dir

        check_model_dir(run.model_dir)
    if plan.managed:
        assert plan.launch is not None
        run.fleet = plan.launcher().fleet(plan.launch, FleetContext(o.workspace, o.servers))
        run.fleet.start(run.run_dir / "servers")
        record.servers = run.fleet.to_json()
        _record_system(record, run.fleet.system())
    sim_rate = o.sim_rate
    paced = "sim_rate" in plan.backend.options and o.scenario_spec.one_query and not o.accuracy and not o.compliance
    if paced and sim_rate is None:
        sim_rate, record.sim_pace = sim_pace(plan.recipe, run.settings, dataset.output_lens)
    ctx = _backend_context(run, dataset, sim_rate)
    make = hooks.backend_factory or create_backend
    run.backend = make(plan.backend.name, ctx)
    if hooks.progress is not False and getattr(run.backend, "on_wait", False) is None:
        from repro.run.progress import ReadyWait

        run.backend.on_wait = ReadyWait()  # type: ignore[attr-defined]
    if hooks.progress is not False and getattr(run.backend, "on_warmup", False) is None:
        from repro.run.progress import say

        run.backend.on_warmup = say  # type: ignore[attr-defined]
    record.backend_details = run.backend.describe()
    if plan.backend.starts_servers:
        record.open_files = _open_files_for(run.backend, o.scenario)
    settings = run.settings
    settings["performance_sample_count_override"] = min(
        int(settings["performance_sample_count_override"]), len(dataset)
    )
    atomic_write_text(run.log_dir / "user.conf", user_conf_text(settings, o.scenario, plan.recipe.bench))
    # AccuracyOnly issues the whole QSL: a smoke accuracy run (--samples N) gets a QSL of the first N samples.
    accuracy_total = min(o.samples, len(dataset)) if o.accuracy and o.samples else len(dataset)
    run.sut = sut = LoadGenSUT(
        run.backend,
        dataset,
        plan.recipe.loadgen.max_tokens,
        int(settings["performance_sample_count_override"]),
        total_samples=accuracy_total,
    )
    _start_backend(run.backend, sut, run.fleet)
    record.backend_details = run.backend.describe()
    record.serving = _serving_record(plan.deployment, run.fleet is not None, record.backend_details)
    ts, log = _loadgen_settings(lg, run)
    run.sampler = _power_sampler(run)
    # Only the run's own audit.config (TEST06) is ever applied: a stray one in the shell's folder is not.
    run.worker = threading.Thread(
        target=sut.start_test, args=(ts, log, str(run.log_dir / AUDIT_CONFIG)), name="repro-loadgen", daemon=True
    )
    planned = {**settings, **compliance_settings(o.compliance)}
    total = accuracy_total if o.accuracy else expected_samples(planned, o.scenario)
    _watch(run, hooks, total)


def _record_system(record: RunRecord, system: dict[str, Any] | None) -> None:
    """A system over many nodes is one system: run.json's GPUs are all of its nodes' (per GPU divides by them, as
    MLPerf's system description counts accelerators_per_node x number_of_nodes), with the names every node's
    nvidia-smi gave."""
    if system is None:
        return
    record.system = system
    names = [name for n in system["nodes"] for name in n.get("gpu_names") or []]
    record.gpus = GpuFacts.model_validate(
        {
            "count": system["accelerators"],
            "names": names if len(names) == system["accelerators"] else [],
            "uuids": [],
            "nodes": system["number_of_nodes"],
            "per_node": system["accelerators_per_node"],
            "source": "every node's check before the run (nvidia-smi -L), counted as the plan places them",
        }
    )


def _backend_context(run: ActiveRun, dataset: PreparedDataset, sim_rate: float | None) -> BackendContext:
    """What the backend is built from: endpoints and readiness wait of the servers, and the tokenizer it needs."""
    plan, o = run.plan, run.plan.options
    tokenizer = None
    if plan.backend.needs_tokenizer:
        from repro.run.tokens import load_tokenizer

        tokenizer = load_tokenizer([run.model_dir, dataset.manifest.get("tokenizer")])
    fleet = run.fleet
    wait = o.servers.ready_timeout_s or (ready_timeout_s(plan.recipe) if fleet is not None else None)
    return BackendContext(
        recipe=plan.recipe,
        scenario=o.scenario,
        dataset=dataset,
        model_dir=run.model_dir,
        sim_rate=sim_rate,
        stream=plan.backend.streams and o.scenario_spec.streams,
        tokenizer=tokenizer,
        endpoints=tuple(fleet.urls) if fleet is not None else o.endpoints,
        alive=fleet.alive if fleet is not None else None,
        ready_timeout_s=wait,
        stall_timeout_s=o.servers.stall_timeout_s,
        client_concurrency=o.servers.client_concurrency,
        client_processes=int((plan.serving.get("client") or {}).get("processes") or 1),
        served_model=o.served_model,
        time_scale=o.time_scale,
        warmup=not o.probe,
    )


def _loadgen_settings(lg: Any, run: ActiveRun) -> tuple[Any, Any]:
    """LoadGen's TestSettings (mlperf.conf, then the run's user.conf) and LogSettings (logs into the run's folder).

    LoadGen 6.0.17 loads mlperf.conf only on the first FromConfig of a process: a later run in the same process logs
    error_invalid_config "Multiple conf files are used" and runs without mlperf.conf. Loading mlperf.conf (conf_type
    0) and user.conf (2) separately avoids that but crashed LoadGen on an Interactive run (tests/test_harness.py
    keeps the limit as a strict xfail), so every LoadGen run is its process's first: tune's probes
    (run/probe_timeline.py), the --target-qps auto probe, --repeat and the rehearsal's steps each spawn one."""
    o = run.plan.options
    ts = lg.TestSettings()
    scenario = o.scenario_spec.loadgen
    ts.scenario = getattr(lg.TestScenario, scenario)
    ts.mode = lg.TestMode.AccuracyOnly if o.accuracy else lg.TestMode.PerformanceOnly
    key = model_key(run.plan.recipe.bench, o.scenario)
    if ts.FromConfig(str(run.log_dir / "user.conf"), key, scenario) != 0:
        raise InputError(
            f"{run.log_dir / 'user.conf'}: LoadGen rejected the generated settings.",
            f"`repro run {o.scenario.lower()} --debug`",
        )
    # A scaled run's latency limits in ns (user.conf's ttft_latency is whole milliseconds: strtoull in LoadGen's
    # FromConfig): the keys are in user.conf, which LoadGen ignores, and applied here; the summary prints them.
    for key in ("ttft_latency", "tpot_latency"):
        if f"{key}_ns" in run.settings:
            setattr(ts, key, int(run.settings[f"{key}_ns"]))
    out = lg.LogOutputSettings()
    out.outdir = str(run.log_dir)
    out.copy_summary_to_stdout = False
    log = lg.LogSettings()
    log.log_output = out
    log.enable_trace = False
    return ts, log


def _power_sampler(run: ActiveRun) -> Any:
    """NVML power samples beside the logs when the run uses the machine's GPUs; power is optional. A backend on the
    CPU (the demo's numpy runner on a GPU VM) leaves the GPUs idle: their power is not the run's."""
    gpus = run.record.gpus
    if gpus is None or not gpus.count or run.record.ran_on_cpu:
        return None
    try:
        from repro.run.power import PowerSampler

        return PowerSampler(run.log_dir).start()
    except Exception:  # noqa: BLE001 - power is optional
        return None


def _watch(run: ActiveRun, hooks: RunHooks, total: int) -> None:
    """Start LoadGen and show progress until it returns; a first Ctrl-C answers everything, a second one aborts."""
    assert run.sut is not None and run.worker is not None
    sut, scenario, o = run.sut, run.plan.scenario, run.plan.options
    gpus = run.record.gpus.count if run.record.gpus is not None else 0
    # a rehearsal's stand-in runs at a scaled rate: the recipe's published band says nothing about it
    if o.rehearsal:
        run.watch = watch = RunWatch(None, o.stop_if_below_band)
    else:
        run.watch = watch = RunWatch.for_run(run.plan.recipe, scenario, gpus, o.stop_if_below_band)
    view = RunProgress(
        choose_mode(hooks.progress),
        f"LoadGen {scenario}",
        total,
        fixed_total=o.scenario_spec.one_query,
        bar_factory=hooks.bar,
        projector=watch.projector,
        interval_s=o.time_scale.deadline(heartbeat_interval(), floor_s=HEARTBEAT_FLOOR_S),
    )
    with view:
        watch.start()
        run.worker.start()
        if hooks.on_started is not None:
            hooks.on_started(sut)
        give_up = float("inf")
        while not sut.finished.is_set() and time.monotonic() < give_up:
            try:
                sut.finished.wait(0.25)
                view.update(sut)
                if watch.check(view.projection):
                    view.interrupted(sut)
                    sut.stop()
            except KeyboardInterrupt as stop:
                if run.stop_signal is not None:
                    raise
                run.stop_signal = stop_signal(stop)
                view.interrupted(sut)
                sut.stop()
                give_up = time.monotonic() + run.grace_left()
        view.finish(sut)
        watch.finish()


def _conclude(run: ActiveRun) -> StepOutcome:
    """Record how the run ended; a finished run gets its summary, accuracy and compliance results."""
    plan, record, sut, o = run.plan, run.record, run.sut, run.plan.options
    record.measured_by_harness = {"samples": sut.samples_done if sut else 0, "tokens": sut.tokens_done if sut else 0}
    watch = run.watch
    if watch is not None:
        for key, value in watch.to_json().items():
            setattr(record, key, value)
    if (
        sut is not None
        and sut.error is None
        and watch is not None
        and watch.stopped is not None
        and not run.stop_signal
    ):
        msg = watch.stop_message
        _mark_interrupted_summary(run.log_dir, "--stop-if-below-band")
        run.fail(msg)
        raise StepFailed(
            f"{msg[:1].upper()}{msg[1:]}. The partial logs in {run.log_dir} are marked stopped; see why with the "
            "next command.",
            f"repro explain {shlex.quote(str(run.run_dir))}",
        )
    if sut is not None and sut.error is not None:
        msg = record.server_died or f"The {plan.backend.name} backend failed mid-run: {sut.error}"
        run.finish("failed", msg)
        run.ledger.fail(plan.step, msg)
        raise StepFailed(
            f"{msg.rstrip('.')}. Partial LoadGen logs are in {run.log_dir} (marked incomplete).",
            run.died_next or f"fix the backend, then `repro run {o.scenario.lower()}`",
        )
    if run.stop_signal is not None:
        raise _interrupted(run)
    empty = empty_logs(run.log_dir)
    if empty:
        msg = f"LoadGen wrote empty logs ({', '.join(empty)}); is the disk full?"
        run.fail(msg)
        raise StepFailed(
            f"{msg} Run folder: {run.run_dir} (marked failed).", "free space (`df -h`), then `repro doctor`"
        )
    run.finish("complete", None)
    summary = _summarise(run.log_dir)
    summary["warnings"] = [*(record.warnings or []), *((record.backend_stats or {}).get("warnings") or [])]
    if o.accuracy and run.dataset is not None:
        scores = _write_accuracy(run, run.dataset)
        if scores is not None:
            summary["accuracy"] = scores
    if o.compliance:
        summary["compliance"] = doc = finish_test06(run.run_dir, o.scenario, run.plan.recipe.bench.model.eos_token_id)
        record.compliance = {**(record.compliance or {}), **doc}
        record.write(run.log_dir)
    files = (run.log_dir / "mlperf_log_summary.txt", run.log_dir / "run.json")
    outputs = [Artifact.of(p) for p in files if p.exists()]
    run.ledger.finish(plan.step, outputs, run_dir=str(run.run_dir), label=plan.label, **summary)
    return _outcome(run, summary)


def _interrupted(run: ActiveRun) -> Interrupted:
    """Mark an interrupted run (summary, run.json, ledger); the error to raise says whether LoadGen was left behind."""
    sig, sut = run.stop_signal or "SIGINT", run.sut
    abandoned = (sut is not None and not sut.finished.is_set()) or run.backend_left
    run.record.signal, run.record.loadgen_finished = sig, not abandoned
    _mark_interrupted_summary(run.log_dir, sig)
    run.fail(f"interrupted by {STOP_SIGNALS.get(sig, sig)}", signal=sig)
    how = (
        "LoadGen was still waiting out its minimum duration and was left behind"
        if abandoned
        else "LoadGen stopped cleanly"
    )
    stopped = Interrupted(
        f"Interrupted ({sig}); repro stopped issuing and answered what was in flight, {how}; "
        f"the partial logs in {run.log_dir} are marked interrupted.",
        f"`repro run {run.plan.scenario.lower()}` to start again",
        exit_code=SIGNAL_EXIT.get(sig, 130),
    )
    stopped.abandoned_threads = abandoned
    return stopped


def _mark_interrupted_summary(log_dir: Path, stop_signal: str) -> None:
    """LoadGen judges only what it saw: a run cut short can read `Result is : VALID`. It never does here."""
    path = log_dir / "mlperf_log_summary.txt"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = path.read_text(encoding="utf-8")
        if not text:
            return
        mark = INTERRUPTED_MARK.format(signal=stop_signal)
        text = text.replace("Result is : VALID", "Result is : INVALID", 1)
        lines = text.splitlines(keepends=True)
        at = next((i + 1 for i, line in enumerate(lines) if line.startswith("Result is :")), 0)
        lines.insert(at, mark + "\n")
        atomic_write_text(path, "".join(lines))


def _outcome(run: ActiveRun, summary: dict[str, Any]) -> StepOutcome:
    plan, o = run.plan, run.plan.options
    tag = f" [{plan.label}]" if plan.label else ""
    tps = summary.get("tokens_per_s")
    what = f"{o.compliance} ({o.mode})" if o.compliance else o.mode
    paired = run.record.paired_with
    pairing = f" (paired with {paired})" if paired else ""
    source = plan.rate_source
    if source is not None and source.get("from") == "repro tune":
        pairing += f"; target_qps {source['target_qps']:g} from repro tune ({source['file']})"
    rate = f"{tps:,.1f} tokens/s" if isinstance(tps, (int, float)) else "see the summary"
    return StepOutcome(
        step=plan.step,
        status="done",
        summary=f"LoadGen {o.scenario} {what}{tag} finished: {rate}; logs in {run.log_dir}{pairing}",
        details={
            "run_dir": str(run.run_dir),
            "log_dir": str(run.log_dir),
            "paired_with": paired,
            "kind": o.kind,
            "label": plan.label,
            "backend": plan.backend.name,
            "scenario": o.scenario,
            "mode": o.mode,
            "target_qps": run.settings.get("target_qps"),
            "target_qps_source": plan.rate_source,
            **summary,
        },
    )


def _cleanup(run: ActiveRun) -> None:
    """Stop LoadGen, the backend, the servers repro started and the power sampler, whatever state they are in."""
    sut, worker, be = run.sut, run.worker, run.backend
    if worker is not None and worker.ident is not None and sut is not None and not sut.finished.is_set():
        stopping = sut.stopping or run.stop_signal is not None
        sut.stop()
        # Server and Interactive schedule queries until min_duration whatever the SUT answers; after a signal
        # repro does not wait that out (up to 40 min on the GPU recipes), and the grace already spent counts.
        sut.finished.wait(run.grace_left() if stopping else None)
    if be is not None:
        try:
            run.record.backend_stats = be.stats()
            if run.stop_signal is not None:
                run.backend_left = not _close_within(be, CLOSE_AFTER_STOP_S)
            else:
                be.close()
        except Exception:  # noqa: BLE001 - closing must not hide the real outcome
            pass
    if run.fleet is not None:
        run.died_next = _stop_servers(run.fleet, sut, run.record)
    if sut is not None and (worker is None or worker.ident is None or sut.finished.is_set()):
        sut.destroy()
    if run.sampler is not None:
        path = run.sampler.stop()
        if path is not None:
            run.record.power_file = path.name


def _close_within(be: Backend, seconds: float) -> bool:
    """Close the backend waiting at most `seconds` for its threads; True when they ended."""
    for attr in ("join_timeout", "close_timeout"):
        if hasattr(be, attr):
            setattr(be, attr, min(float(getattr(be, attr)), seconds))
    be.close()
    thread = getattr(be, "_thread", None)
    return not (isinstance(thread, threading.Thread) and thread.is_alive())


def _open_files_for(be: Backend, scenario: str) -> dict[str, int]:
    """Offline puts every sample in flight at once: make sure the sockets fit under the open-file limit."""
    from repro.run.limits import ensure_open_files, open_files_needed

    urls = getattr(be, "urls", None) or []
    conc = int(getattr(be, "max_concurrency", 0) or 0)
    if not urls or not conc:
        return {}
    needed = open_files_needed(len(urls), conc)
    return {"needed": needed, **ensure_open_files(needed, command=f"repro run {scenario.lower()}")}


def _start_backend(be: Backend, sut: LoadGenSUT, fleet: Fleet | None) -> None:
    """Start the backend (HTTP: wait until every server is ready); a readiness failure shows the servers' log tails."""
    from repro.run.backends.http_client import BackendError

    try:
        be.start(sut)
    except BackendError as exc:
        if fleet is not None:
            # A server that died during readiness or NVIDIA's warm-up burst: say so with its exit code and log (Docker
            # marks a container exited a moment after its process ends, hence the grace), not as a broken connection.
            try:
                fleet.alive(grace_s=0.0 if exc.kind == "timeout" else 3.0)
            except ServerDied as died:
                when = "NVIDIA's warm-up burst" if exc.message.startswith("warm-up") else "the readiness wait"
                died.message = f"{died.message.rstrip('.')} (during {when}, before LoadGen started)."
                raise died from exc
            at = next((fleet.where(u) for u in fleet.urls if u in exc.message), None)
            if at is not None:
                exc.message = f"{exc.message.rstrip('.')}; that is {at}"
            tails = [f"{who}: {' | '.join(lines[-3:])}" for who, lines in fleet.tails()]
            if tails:
                exc.message = f"{exc.message}. Last output of {'; '.join(tails)}"
            logs = fleet.log_dir
            if exc.kind == "timeout" and logs is not None:
                exc.next_command = f"see the server logs in {logs}; if they are still loading, raise --ready-timeout"
        raise


def _stop_servers(fleet: Fleet, sut: LoadGenSUT | None, record: RunRecord) -> str | None:
    """After a failure, the server that died (its node, rank and log) or, when none has, the one at the URL the
    client failed on (a server answering 503 or stalled after a rank died inside it is still up). Returns the
    next command a death names (its log)."""
    died_next = None
    if sut is not None and sut.error is not None:
        try:
            fleet.alive(grace_s=3.0)
        except ServerDied as died:
            record.server_died = died.message
            died_next = died.next_command
        else:
            text = str(getattr(sut.error, "message", sut.error))
            at = next((fleet.where(u) for u in fleet.urls if u in text), None)
            if at is not None:
                record.server_died = f"{text.rstrip('.')}; that is {at}"
                if "HTTP 503" in text and fleet.log_dir is not None:  # up, but a rank inside it is gone (18663)
                    died_next = f"see the rank logs in {fleet.log_dir} for the rank that died, then run again"
    fleet.stop()
    record.servers = fleet.to_json()
    return died_next


def _summarise(log_dir: Path) -> dict[str, Any]:
    """Headline numbers from LoadGen's own summary (through the shared parser when it is there)."""
    try:
        from repro.results.logs import parse_run

        run = parse_run(log_dir)
        return {"tokens_per_s": run.tokens_per_s, "samples_per_s": run.samples_per_s, "validity": run.validity}
    except Exception:  # noqa: BLE001 - the summary line below is enough to report
        pass
    out: dict[str, Any] = {}
    path = log_dir / "mlperf_log_summary.txt"
    if path.exists():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, val = line.partition(":")
            key = key.strip()
            if key in ("Tokens per second", "Samples per second"):
                with contextlib.suppress(ValueError):
                    out["tokens_per_s" if key.startswith("Tokens") else "samples_per_s"] = float(val)
            elif key == "Result is":
                out["validity"] = val.strip()
    return out


def _write_accuracy(run: ActiveRun, dataset: PreparedDataset) -> dict[str, Any] | None:
    """accuracy.txt comes from repro.results.accuracy when its extra is installed; its absence is not an error."""
    try:
        from repro.results import accuracy as acc
    except ImportError:
        return None
    model = run.model_dir
    tokenizer_dir = model if (Path(model) / "tokenizer_config.json").exists() else dataset.manifest.get("tokenizer")
    if not tokenizer_dir or not Path(tokenizer_dir).is_dir():
        run.record.warnings = [
            *(run.record.warnings or []),
            "accuracy.txt not written: no tokenizer folder to decode the log with",
        ]
        run.record.write(run.log_dir)
        return None
    scores = acc.evaluate_accuracy_log(
        run.log_dir / "mlperf_log_accuracy.json",
        dataset.outputs,
        tokenizer_dir,
        bench=run.plan.recipe.bench,
        sample_metrics=dataset.metrics,
    )
    acc.write_accuracy_txt(run.log_dir, scores)
    return dict(scores)


class _NoLedger:
    """A tune probe is not a run of the scenario: `repro status` must not count it."""

    def start(self, *a: Any, **kw: Any) -> None:
        pass

    def finish(self, *a: Any, **kw: Any) -> None:
        pass

    def fail(self, *a: Any, **kw: Any) -> None:
        pass


def _serving_record(dep: Deployment, managed: bool, details: dict[str, Any]) -> dict[str, Any]:
    """The serving configuration this run used, for `repro explain` and verify: the deployment's engine layout and
    server options only when repro started the servers from them, the client's concurrency and max_tokens always."""
    recipe = dep.recipe
    out: dict[str, Any] = {"max_tokens": recipe.loadgen.max_tokens}
    trt, layout = dep.trtllm, dep.layout
    if managed and trt is not None and layout is not None:
        kv = trt.serve_extra_options.get("kv_cache_config") if isinstance(trt.serve_extra_options, dict) else None
        out.update(
            gpu_batch_size=trt.gpu_batch_size,
            tp_size=trt.tp_size,
            pp_size=trt.pp_size,
            precision=recipe.precision,
            servers_per_vm=trt.servers_per_vm,
            max_num_tokens=trt.runtime_flags.get("max_num_tokens"),
            kv_cache_free_gpu_memory_fraction=kv.get("free_gpu_memory_fraction") if isinstance(kv, dict) else None,
            engine={**layout.model_dump(exclude={"source"}), "scenario": dep.engine_scenario},
        )
    concurrency = details.get("max_concurrency_per_endpoint", details.get("max_concurrency"))
    if concurrency is not None:
        out["client_concurrency"] = concurrency
    return {k: v for k, v in out.items() if v is not None}
