"""The LoadGen harness: a real `mlperf_loadgen` SUT and QSL over a prepared dataset, driving one backend.

LoadGen owns timing and the logs; this module turns backend events into LoadGen's token-level
callbacks (FirstTokenComplete, then QuerySamplesComplete with n_tokens), so the summary reports
tokens/s, TTFT and TPOT exactly as MLPerf's LLM benchmarks do. Every run gets its own folder
`runs/<recipe>/<scenario>/<timestamp>/` with the MLPerf logs, the generated user.conf and run.json.

LoadGen has no abort: on Ctrl-C or a backend failure the harness answers every outstanding sample
at once (one placeholder token), LoadGen finishes and writes its logs, and run.json marks them incomplete.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from repro.core.clock import now_iso, stamped_path
from repro.core.errors import InputError, Interrupted, ReproError, StepFailed
from repro.core.fsutil import atomic_write_text, write_published_json
from repro.core.recipes import Recipe, get_recipe
from repro.core.steps import StepOutcome
from repro.core.workspace import Workspace
from repro.run.backends import Backend, Request, make_backend, recipe_backend_name
from repro.run.progress import RunProgress, choose_mode
from repro.run.projection import RunWatch
from repro.run.servers import ServerDied, ServerFleet, ServerOptions, dry_run_details, plan_servers
from repro.setup.dataset import PreparedDataset, load_prepared

AUDIT_CONFIG = "audit.config"
MODEL_KEY = "llama2-70b"
SCENARIOS = ("Offline", "Server", "Interactive")
# LoadGen's early stopping (loadgen/early_stopping.cc, p99 at 99% confidence) needs 459 queries with none over a
# TTFT/TPOT limit and 662 with one: the demo's 64 could never be VALID in Server or Interactive.
DEMO_LATENCY_QUERIES = 662
_PLACEHOLDER = np.zeros(1, dtype=np.int32)


def ledger_step(scenario: str) -> str:
    return f"run-{scenario.lower()}"


def loadgen_scenario(scenario: str) -> str:
    """Interactive is LoadGen's Server scenario under the llama2-70b-interactive benchmark's tighter limits."""
    return "Server" if scenario == "Interactive" else scenario


def model_key(scenario: str) -> str:
    """The benchmark name LoadGen's config is keyed by (mlperf.conf: `llama2-70b-interactive.Server.ttft_latency`)."""
    return f"{MODEL_KEY}-interactive" if scenario == "Interactive" else MODEL_KEY


def recipe_target_qps(recipe: Recipe, scenario: str) -> float | None:
    """The recipe's own arrival rate for Server or Interactive (None: it carries none)."""
    target = {"Server": recipe.loadgen.server, "Interactive": recipe.loadgen.interactive}.get(scenario)
    return float(target.target_qps) if target is not None else None


def run_label(recipe: Recipe, backend: str, duration_s: float | None, samples: int | None) -> str | None:
    """Anything that is not a full-length run of a real recipe on a real backend says so."""
    if backend == "sim":
        return "simulated"
    if recipe.demo:
        return "demo"
    if duration_s is not None or samples is not None:
        return "smoke"
    return None


def loadgen_settings(
    recipe: Recipe,
    scenario: str,
    *,
    duration_s: float | None = None,
    samples: int | None = None,
    dataset_size: int | None = None,
    accuracy: bool = False,
    official_min_duration: bool = False,
) -> dict[str, Any]:
    """The user.conf keys for this run; smoke options shorten the run, nothing else changes.

    `official_min_duration`: MLPerf's own 600 s (mlperf.conf) instead of the recipe's 2,400 s (Azure's choice):
    still a valid run, about a quarter of the samples and the time."""
    lg = recipe.loadgen
    size = dataset_size or lg.performance_sample_count
    qps, min_duration = lg.offline_expected_qps, lg.min_duration_ms
    if scenario != "Offline":
        # Interactive without its own published rate starts from Server's; `repro tune interactive` finds its own.
        target = (lg.interactive if scenario == "Interactive" else None) or lg.server
        if target is not None:
            qps, min_duration = target.target_qps, target.min_duration_ms or min_duration
        elif not recipe.demo:  # the demo measures its Server rate before the run (run/demo.py)
            raise InputError(
                f"Recipe '{recipe.name}' has no Server target_qps (loadgen.server): the Offline rate would schedule "
                "more than the system sustains and the run would be INVALID.",
                "repro recipes validate",
            )
    if official_min_duration:
        from repro.results.rules import MIN_DURATION_MS

        min_duration = MIN_DURATION_MS
    s: dict[str, Any] = {
        "target_qps": qps,
        "min_duration": min_duration,
        "min_query_count": lg.min_query_count,
        "performance_sample_count_override": min(lg.performance_sample_count, size),
        "use_token_latencies": 1,
    }
    if scenario != "Offline":
        s.update(server_latency_keys(recipe, scenario))
        if recipe.demo:
            s["min_query_count"] = max(int(s["min_query_count"]), DEMO_LATENCY_QUERIES)
    if duration_s is not None:
        s.update(min_duration=int(duration_s * 1000), max_duration=int(duration_s * 1000), min_query_count=1)
    if samples is not None:
        s.update(min_query_count=samples, max_query_count=samples, performance_sample_count_override=min(samples, size))
        if duration_s is None:
            s["min_duration"] = 0
    return s


def server_latency_keys(recipe: Recipe, scenario: str = "Server") -> dict[str, int]:
    """TTFT/TPOT limits in milliseconds, the unit LoadGen reads them in (Interactive: MLPerf's 450/40 ms).

    LoadGen scales these keys itself (`test_settings_internal.cc`: `lookupkv(model, "Server", "ttft_latency",
    &server_ttft_latency, nullptr, 1000 * 1000)`, as `mlperf.conf` writes `llama2-70b.Server.ttft_latency = 2000`),
    so multiplying here would make the limits 10^6 too loose.
    """
    if scenario == "Interactive":
        from repro.results.rules import LATENCY_LIMITS

        limits = LATENCY_LIMITS["Interactive"]
        return {"ttft_latency": int(limits.ttft_ms), "tpot_latency": int(limits.tpot_ms)}
    return {"ttft_latency": int(recipe.loadgen.ttft_latency_ms), "tpot_latency": int(recipe.loadgen.tpot_latency_ms)}


def sim_pace(recipe: Recipe, settings: dict[str, Any], output_lens: np.ndarray) -> tuple[float | None, str]:
    """An unpaced sim answers LoadGen's whole Offline query at once, before min_duration: INVALID every time, and a
    rehearsal that cannot be VALID teaches nothing. Pace it at the published tokens/s per VM where that outlasts
    min_duration, else so the run lasts 1.5 x min_duration."""
    min_s = int(settings.get("min_duration", 0)) / 1000
    if min_s <= 0 or len(output_lens) == 0:
        return None, "unpaced: no minimum duration to outlast"
    per_sample = float(np.minimum(output_lens, recipe.loadgen.max_tokens).mean())
    tokens = per_sample * expected_samples(settings, "Offline")
    published = recipe.published.tokens_per_s_per_vm
    if isinstance(published, (int, float)) and tokens / published >= 1.2 * min_s:
        return float(published), f"the published {published:,.1f} tokens/s per VM"
    return tokens / (1.5 * min_s), "paced to last 1.5 x min_duration"


def user_conf_text(settings: dict[str, Any], scenario: str) -> str:
    lines = [
        "# Generated by repro for this run; LoadGen reads it with TestSettings.FromConfig(path, "
        f"'{model_key(scenario)}', '{loadgen_scenario(scenario)}')."
    ]
    lines += [f"{model_key(scenario)}.{loadgen_scenario(scenario)}.{k} = {v}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"


def new_run_dir(ws: Workspace, recipe: str, scenario: str, *, create: bool = True) -> Path:
    path = stamped_path(ws.runs / recipe / scenario)
    if create:
        path.mkdir(parents=True)
    return path


# ---------------------------------------------------------------- run-folder layout (issues 13 item 6, 19)
# One run folder is laid out like a submission's result folder, so one `repro verify RUN_DIR` reads the
# performance run, its accuracy run and its TEST06 together:
#   RUN_DIR/performance/run_1/  LoadGen logs, user.conf, run.json, power.csv of the performance run
#   RUN_DIR/accuracy/           the AccuracyOnly run: mlperf_log_accuracy.json, accuracy.txt, run.json
#   RUN_DIR/TEST06/             verify_accuracy.txt; accuracy/ holds the test run's LoadGen logs and audit.config
RUN_KINDS = ("performance", "accuracy", "TEST06")
_KIND_DIRS = {
    "performance": Path("performance") / "run_1",
    "accuracy": Path("accuracy"),
    "TEST06": Path("TEST06") / "accuracy",
}


def run_kind(accuracy: bool, compliance: str | None) -> str:
    return compliance or ("accuracy" if accuracy else "performance")


def kind_dir(run_dir: Path, kind: str) -> Path:
    """Where the LoadGen logs of one kind of run go inside a run folder."""
    return Path(run_dir) / _KIND_DIRS[kind]


def _performance_info(run_dir: Path) -> dict[str, Any] | None:
    import json

    path = kind_dir(run_dir, "performance") / "run.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _belongs(info: dict[str, Any] | None, recipe: Recipe, backend: str) -> str | None:
    """Why a performance run cannot take this accuracy/TEST06 run (None: it can)."""
    if info is None:
        return "it holds no performance run (performance/run_1/run.json)"
    if info.get("recipe_hash") != recipe.hash() or info.get("recipe") != recipe.name:
        used = f"{info.get('recipe')} ({str(info.get('recipe_hash'))[:12]})"
        return f"its performance run used recipe {used}, not this {recipe.name}"
    if info.get("backend") != backend:
        return f"its performance run used backend {info.get('backend')}, not {backend}"
    return None


def choose_run_dir(
    ws: Workspace,
    recipe: Recipe,
    scenario: str,
    kind: str,
    backend: str,
    into: Path | None = None,
    *,
    create: bool = True,
) -> tuple[Path, str | None]:
    """The run folder a run writes into, and the performance run it is paired with (None: a new folder).

    A performance run always starts a new folder (unless --into names an empty one). An accuracy or TEST06
    run joins the latest complete performance run of the same recipe, scenario and backend when that run has
    no such result yet; otherwise it starts a new folder. `--into RUN_DIR` names the folder explicitly.
    """
    if into is not None:
        run_dir = Path(into).expanduser()
        hint = f"`repro run {scenario.lower()} --into RUN_DIR` with a run folder of recipe {recipe.name}"
        if not run_dir.is_dir():
            raise InputError(f"--into {run_dir}: no such run folder.", hint)
        if kind_dir(run_dir, kind).exists() or (kind == "TEST06" and (run_dir / "TEST06").exists()):
            raise InputError(
                f"--into {run_dir}: already holds a{'n' if kind[0] in 'aeiou' else ''} {kind} run "
                f"({kind_dir(run_dir, kind)}); results are never overwritten.",
                f"move that folder away, or `repro run {scenario.lower()}` into a new run folder",
            )
        info = _performance_info(run_dir)
        if kind != "performance":
            why = _belongs(info, recipe, backend)
            if why is not None:
                raise InputError(f"--into {run_dir}: {why}.", hint)
            if info and info.get("scenario") != scenario:
                raise InputError(f"--into {run_dir}: a {info.get('scenario')} run, not {scenario}.", hint)
        return run_dir, str(kind_dir(run_dir, "performance")) if info else None
    if kind != "performance":
        base = ws.runs / recipe.name / scenario
        newest = None
        for cand in sorted(base.iterdir(), reverse=True) if base.is_dir() else []:
            info = _performance_info(cand)
            if info is not None and info.get("status") == "complete" and _belongs(info, recipe, backend) is None:
                newest = cand
                break
        if newest is not None and not (newest / ("TEST06" if kind == "TEST06" else "accuracy")).exists():
            return newest, str(kind_dir(newest, "performance"))
    return new_run_dir(ws, recipe.name, scenario, create=create), None


def _spans(arrays: list[np.ndarray]) -> tuple[np.ndarray | None, list[tuple[int, int, int, int]]]:
    """(buffer, [(pointer, bytes, tokens, item size)]) of each output, as LoadGen reads them.

    A ctypes pointer lookup costs ~0.8 us, more than the rest of a sample's bookkeeping: outputs of one dtype
    (every backend's int32) are copied into one contiguous buffer by one call and pointed into. The caller keeps
    the buffer alive until LoadGen, which copies response bytes before returning, is done."""
    dtype = arrays[0].dtype
    if len(arrays) > 1 and all(a.dtype == dtype and a.ndim == 1 for a in arrays):
        buf = np.concatenate(arrays)
        size = dtype.itemsize
        out = []
        offset = buf.ctypes.data
        for a in arrays:
            n = len(a)
            out.append((offset, n * size, n, size))
            offset += n * size
        return buf, out
    return None, [(a.ctypes.data, a.nbytes, len(a), a.itemsize) for a in arrays]


class LoadGenSUT:
    """The SUT/QSL pair plus the bookkeeping that keeps LoadGen and the backend in step; it is the backend's sink."""

    def __init__(
        self,
        backend: Backend,
        dataset: PreparedDataset,
        max_tokens: int,
        performance_sample_count: int,
        total_samples: int | None = None,
    ) -> None:
        import mlperf_loadgen as lg

        self.lg = lg
        self.backend = backend
        self.dataset = dataset
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        # Outstanding sample id -> whether its first token has gone to LoadGen (one dict, no per-sample objects).
        self._outstanding: dict[int, bool] = {}
        self.issued = 0
        self.samples_done = 0
        self.tokens_done = 0
        self.t0: float | None = None
        self.error: BaseException | None = None
        self.stopping = False
        self.finished = threading.Event()
        self.sut = lg.ConstructSUT(self._issue, self._flush)
        total = min(total_samples or len(dataset), len(dataset))
        perf = max(1, min(performance_sample_count, total))
        self.qsl = lg.ConstructQSL(total, perf, lambda _: None, lambda _: None)

    def _issue(self, query_samples: Sequence[Any]) -> None:
        prompt, max_tokens = self.dataset.prompt, self.max_tokens
        reqs = [Request(q.id, q.index, prompt(q.index), max_tokens) for q in query_samples]
        with self._lock:
            if self.t0 is None:
                self.t0 = time.monotonic()
            self.issued += len(reqs)
            self._outstanding.update(dict.fromkeys([r.id for r in reqs], False))
            stopping = self.stopping
        if stopping:
            self.drain()
        else:
            self.backend.submit(reqs)

    def _flush(self) -> None:
        pass

    def first_tokens(self, events: Sequence[tuple[int, int]]) -> None:
        with self._lock:
            outstanding = self._outstanding
            events = [(i, t) for i, t in events if outstanding.get(i) is False]
            for i, _ in events:
                outstanding[i] = True
        if not events:
            return
        # One int32 buffer for the batch; LoadGen copies each response before FirstTokenComplete returns.
        tokens = np.fromiter((t for _, t in events), dtype=np.int32, count=len(events))
        base, size = tokens.ctypes.data, tokens.itemsize
        QSR = self.lg.QuerySampleResponse
        self.lg.FirstTokenComplete([QSR(i, base + k * size, size) for k, (i, _) in enumerate(events)])

    def completed(self, events: Sequence[tuple[int, np.ndarray] | tuple[int, np.ndarray, int]]) -> None:
        """Each event is (id, output ids) or (id, output ids, tokens to count): an HTTP backend counts the
        server's own tokens (its usage), which may differ from the ids it logs (re-tokenized text)."""
        kept: list[tuple[int, np.ndarray]] = []
        counts: dict[int, int] = {}
        missing: list[int] = []  # positions in `kept` whose first token LoadGen has not had yet
        tokens = 0
        with self._lock:
            pop = self._outstanding.pop
            for event in events:
                i, a = event[0], event[1]
                sent = pop(i, None)
                if sent is None:
                    continue
                if not sent:
                    missing.append(len(kept))
                if len(event) > 2:
                    counts[len(kept)] = int(event[2])
                kept.append((i, a))
                tokens += counts.get(len(kept) - 1, len(a))
            self.samples_done += len(kept)
            self.tokens_done += tokens
        if not kept:
            return
        QSR = self.lg.QuerySampleResponse
        buf, spans = _spans([a for _, a in kept])
        if missing:
            self.lg.FirstTokenComplete([QSR(kept[k][0], spans[k][0], min(spans[k][1], spans[k][3])) for k in missing])
        self.lg.QuerySamplesComplete(
            [
                QSR(i, ptr, nbytes, counts.get(k, n))
                for k, ((i, _), (ptr, nbytes, n, _)) in enumerate(zip(kept, spans, strict=True))
            ]
        )
        del buf  # alive until here: LoadGen has copied every response

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = exc
        self.stop()

    def stop(self) -> None:
        """Stop the backend and answer everything outstanding so LoadGen can finish and write its logs."""
        with self._lock:
            self.stopping = True
        self.backend.cancel()
        self.drain()

    def drain(self) -> None:
        with self._lock:
            ids = list(self._outstanding)
        self.completed([(i, _PLACEHOLDER) for i in ids])

    def start_test(self, settings: Any, log_settings: Any, audit_config: str = "audit.config") -> None:
        """Runs in its own thread; `finished` (not Thread.is_alive, which Ctrl-C during join can corrupt) says when
        LoadGen returned. LoadGen applies `audit_config` on top of the settings when that file exists
        (compliance tests)."""
        try:
            self.lg.StartTestWithLogSettings(self.sut, self.qsl, settings, log_settings, audit_config)
        finally:
            self.finished.set()

    def destroy(self) -> None:
        self.lg.DestroyQSL(self.qsl)
        self.lg.DestroySUT(self.sut)


def expected_samples(settings: dict[str, Any], scenario: str) -> int:
    """LoadGen's own count: Offline issues max(min_query_count, 1.1 x qps x min_duration) in one query."""
    mq = int(settings.get("min_query_count", 1))
    by_time = (
        int(1.1 * float(settings["target_qps"]) * int(settings.get("min_duration", 0)) / 1000)
        if scenario == "Offline"
        else int(float(settings["target_qps"]) * int(settings.get("min_duration", 0)) / 1000)
    )
    n = max(mq, by_time)
    if "max_query_count" in settings:
        n = (
            min(n, int(settings["max_query_count"]))
            if scenario != "Offline"
            else max(int(settings["max_query_count"]), 1)
        )
    return max(n, 1)


def _resolve_model_dir(recipe: Recipe, ws: Workspace, model_dir: Path | None) -> Path:
    """An explicit folder, else where `repro setup` recorded the weights, else the default folder under models/."""
    if model_dir is not None:
        return Path(model_dir)
    try:
        from repro.core.ledger import Ledger

        rec = Ledger.load(ws.ledger_path).get("setup")
    except ReproError:
        rec = None
    for key in ("model_dir", "model_path"):
        if rec is not None and rec.details.get(key):
            return Path(rec.details[key])
    return ws.models / recipe.model.repo_id.split("/")[-1]


def run_benchmark(
    recipe: Recipe | str,
    ws: Workspace,
    *,
    scenario: str = "Offline",
    backend: str | None = None,
    duration_s: float | None = None,
    samples: int | None = None,
    accuracy: bool = False,
    dry_run: bool = False,
    progress: bool | None = None,
    rate_tokens_per_s: float | None = None,
    model_dir: Path | None = None,
    argv: list[str] | None = None,
    detect: bool = True,
    backend_factory: Callable[..., Backend] | None = None,
    on_started: Callable[[LoadGenSUT], None] | None = None,
    endpoints: Sequence[str] | None = None,
    servers: ServerOptions | None = None,
    compliance: str | None = None,
    into: Path | None = None,
    bar: Callable[[str], Any] | None = None,
    served_model: str | None = None,
    official_min_duration: bool = False,
    target_qps: float | dict[str, Any] | None = None,
    settings_override: dict[str, Any] | None = None,
    probe: bool = False,
    stop_if_below_band: bool = False,
) -> StepOutcome:
    """One LoadGen test end to end; returns details['run_dir'] (the run folder) and details['log_dir'] (its logs).

    Raises StepFailed/Interrupted after recording them. `compliance="TEST06"` runs MLPerf's TEST06 and checks it.
    `target_qps` replaces the recipe's rate (else a Server/Interactive run takes the rate `repro tune` saved);
    `probe` is one of tune's short runs: user.conf keys from `settings_override`, labelled, kept out of the ledger."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if scenario not in SCENARIOS:
        raise InputError(
            f"Unknown scenario '{scenario}'; choose Offline, Server or Interactive.", "`repro run offline`"
        )
    bname = backend or recipe_backend_name(recipe.backend)
    if endpoints and backend not in (None, "trtllm"):
        raise InputError(
            "--endpoint sends requests to an OpenAI-compatible server; it cannot be combined with "
            f"--backend {backend}.",
            f"`repro run {scenario.lower()} --endpoint URL` without --backend",
        )
    if endpoints:
        bname = "trtllm"
    if served_model and bname != "trtllm":
        raise InputError(
            f"--served-model names the model of an OpenAI-compatible server; backend {bname} sends no requests to one.",
            f"`repro run {scenario.lower()} --endpoint URL --served-model {served_model}`",
        )
    if bname not in ("sim", "hf", "trtllm"):
        raise InputError(f"Unknown backend '{bname}'; choose sim, hf or trtllm.", "`repro run offline --backend sim`")
    if samples is not None and samples <= 0:
        raise InputError(
            f"--samples must be at least 1 (got {samples}): a run with zero samples measures nothing.",
            f"`repro run {scenario.lower()} --samples 64`",
        )
    if duration_s is not None and duration_s <= 0:
        raise InputError(
            f"--duration must be positive (got {duration_s}).", f"`repro run {scenario.lower()} --duration 60`"
        )
    if recipe.reference_only:
        raise InputError(
            f"Recipe '{recipe.name}' is reference-only (a published system repro does not run).", "`repro recipes list`"
        )
    if accuracy and scenario != "Offline":
        raise InputError("--accuracy runs in the Offline scenario only.", "`repro run offline --accuracy`")
    check_compliance_options(compliance, scenario, accuracy=accuracy, duration_s=duration_s, samples=samples)
    kind = run_kind(accuracy, compliance)
    label = "tune probe" if probe else run_label(recipe, bname, duration_s, samples)
    # An accuracy run is its own step: it must not mark the performance run done and send status to a verify
    # that finds only AccuracyOnly logs.
    step = ledger_step(scenario) + (f"-{compliance.lower()}" if compliance else "-accuracy" if accuracy else "")
    settings = loadgen_settings(
        recipe,
        scenario,
        duration_s=duration_s,
        samples=samples,
        dataset_size=recipe.dataset.samples,
        accuracy=accuracy,
        official_min_duration=official_min_duration,
    )
    settings.update(settings_override or {})
    rate_source = _rate_source(ws, recipe, scenario, target_qps, probe=probe or accuracy)
    if rate_source is not None:
        settings["target_qps"] = rate_source["target_qps"]
    mode = "AccuracyOnly" if accuracy else "PerformanceOnly"
    data_dir = ws.preprocessed / recipe.dataset.name
    planned_dir, paired = choose_run_dir(ws, recipe, scenario, kind, bname, into, create=False)
    plan: dict[str, Any] = {
        "recipe": recipe.name,
        "scenario": scenario,
        "mode": mode,
        "backend": bname,
        "label": label,
        "run_dir": str(planned_dir),
        "log_dir": str(kind_dir(planned_dir, kind)),
        "paired_with": paired,
        "kind": kind,
        "dataset": str(data_dir),
        "user_conf": user_conf_text(settings, scenario),
        "expected_samples": expected_samples({**settings, **compliance_settings(compliance)}, scenario),
        "target_qps_source": rate_source,
    }
    if compliance:
        plan["audit_config"] = audit_config_text()
    if bname == "hf" or recipe.demo:
        plan["model_dir"] = (
            str(ws.models / "tiny-llama") if recipe.demo else str(_resolve_model_dir(recipe, ws, model_dir))
        )
    managed = _manages_servers(recipe, bname, endpoints)
    if bname == "trtllm":
        plan.update(_server_plan(recipe, ws, endpoints, servers, managed))
    if dry_run:
        demo = "demo: build the tiny model and sample if missing, then " if recipe.demo else ""
        what = f"{demo}run LoadGen {scenario} {mode}"
        if plan.get("servers"):
            after = "leave them running" if plan.get("keep_servers") else "remove them"
            what = (
                f"start {len(plan['servers'])} trtllm-serve container(s), wait up to "
                f"{plan['readiness']['timeout_s']:.0f} s for them to answer, {what}, then {after},"
            )
        return StepOutcome(
            step=step,
            status="dry-run",
            summary=f"would {what} with backend {bname}{f' [{label}]' if label else ''}, writing {plan['run_dir']}",
            details=plan,
        )

    from repro.core import provenance
    from repro.core.fsutil import sha256_text
    from repro.core.ledger import Artifact, Ledger

    ws.ensure()
    ledger: Any = _NoLedger() if probe else Ledger.load(ws.ledger_path)
    inputs_hash = sha256_text(
        f"{recipe.hash()}|{scenario}|{mode}|{bname}|{duration_s}|{samples}" + ("|600s" if official_min_duration else "")
    )[:16]
    if recipe.demo:
        from repro.run.demo import calibrate_settings, prepare_demo

        paths = prepare_demo(ws)
        data_dir, model_path = paths["dataset"], paths["model_dir"]
        calibration = (
            None
            if rate_source is not None or probe
            else calibrate_settings(
                settings,
                paths,
                recipe,
                bname,
                scenario=loadgen_scenario(scenario),
                samples=samples,
                duration_s=duration_s,
                accuracy=accuracy,
            )
        )
    else:
        model_path = _resolve_model_dir(recipe, ws, model_dir)
        calibration = None
    run_dir, paired = choose_run_dir(ws, recipe, scenario, kind, bname, into)
    log_dir = kind_dir(run_dir, kind)
    log_dir.mkdir(parents=True, exist_ok=True)
    facts = provenance.collect(detect=detect)
    info: dict[str, Any] = {
        "repro_version": facts["repro_version"],
        "recipe": recipe.name,
        "recipe_hash": recipe.hash(),
        "scenario": scenario,
        "mode": mode,
        "backend": bname,
        "label": label,
        "incomplete": True,
        "status": "interrupted",
        "error": "the run did not finish (process ended before LoadGen returned)",
        "gpus": facts["gpus"],
        "driver": facts["driver"],
        "vm_size": facts["vm_size"],
        "container_digest": facts["container_digest"],
        "loadgen_version": facts["loadgen_version"],
        "command": list(argv if argv is not None else sys.argv),
        "model_path": str(model_path) if bname != "sim" else None,
        "dataset_sha256": None,
        "started": now_iso(),
        "finished": None,
        "settings": settings,
        "provenance": facts,
        "kind": kind,
        "run_dir": str(run_dir),
        "paired_with": paired,
        "target_qps_source": rate_source,
    }
    if compliance:
        info["compliance"] = {"test": compliance, "audit_settings": compliance_settings(compliance)}
    if calibration is not None:
        info["demo_calibration"] = calibration
    try:
        if compliance:
            atomic_write_text(log_dir / AUDIT_CONFIG, audit_config_text())
        atomic_write_text(log_dir / "user.conf", user_conf_text(settings, scenario))
        write_published_json(log_dir / "run.json", info)
    except OSError:
        _remove_empty(log_dir, run_dir, everything=True)  # a full disk must not leave an empty, unmarked folder
        raise
    ledger.start(step, inputs_hash, recipe=recipe.name, run_dir=str(run_dir), label=label)

    def finish(status: str, error: str | None) -> None:
        info.update(status=status, error=error, incomplete=status != "complete", finished=now_iso())
        write_published_json(log_dir / "run.json", info)

    sut: LoadGenSUT | None = None
    be: Backend | None = None
    fleet: ServerFleet | None = None
    sampler = None
    worker: threading.Thread | None = None
    interrupted, stop_signal = False, "SIGINT"
    watch: RunWatch | None = None
    try:
        dataset = load_prepared(data_dir)
        info["dataset_sha256"] = dataset.sha256
        info["samples_in_dataset"] = len(dataset)
        if bname == "hf" and model_path is not None:
            from repro.run.backends.hf import check_model_dir

            check_model_dir(model_path)
        factory = backend_factory or make_backend
        rate = rate_tokens_per_s
        if bname == "sim" and rate is None and scenario == "Offline" and not accuracy and not compliance:
            rate, info["sim_pace"] = sim_pace(recipe, settings, dataset.output_lens)
        extra: dict[str, Any] = {}
        if bname == "trtllm":
            if managed:
                fleet = ServerFleet(plan_servers(recipe, ws, servers), keep=bool(servers and servers.keep))
                fleet.start(run_dir / "servers")
                info["servers"] = fleet.to_json()
            extra = _http_backend_kwargs(recipe, scenario, dataset, model_path, endpoints, fleet, servers)
            extra.update(model=served_model, default_model=recipe.model.repo_id)
        be = factory(bname, recipe=recipe, dataset=dataset, model_dir=model_path, rate_tokens_per_s=rate, **extra)
        info["backend_details"] = be.describe()
        if bname == "trtllm":
            info["open_files"] = _open_files_for(be, scenario)
        settings["performance_sample_count_override"] = min(
            int(settings["performance_sample_count_override"]), len(dataset)
        )
        atomic_write_text(log_dir / "user.conf", user_conf_text(settings, scenario))
        import mlperf_loadgen as lg

        # AccuracyOnly issues the whole QSL: a smoke accuracy run (--samples N) gets a QSL of the first N samples.
        accuracy_total = min(samples, len(dataset)) if accuracy and samples else len(dataset)
        sut = LoadGenSUT(
            be,
            dataset,
            recipe.loadgen.max_tokens,
            int(settings["performance_sample_count_override"]),
            total_samples=accuracy_total,
        )
        _start_backend(be, sut, fleet)
        info["backend_details"] = be.describe()
        info["serving"] = _serving_record(recipe, bool(fleet), info["backend_details"])
        ts = lg.TestSettings()
        ts.scenario = getattr(lg.TestScenario, loadgen_scenario(scenario))
        ts.mode = lg.TestMode.AccuracyOnly if accuracy else lg.TestMode.PerformanceOnly
        if ts.FromConfig(str(log_dir / "user.conf"), model_key(scenario), loadgen_scenario(scenario)) != 0:
            raise InputError(
                f"{log_dir / 'user.conf'}: LoadGen rejected the generated settings.", "`repro run offline --debug`"
            )
        out = lg.LogOutputSettings()
        out.outdir = str(log_dir)
        out.copy_summary_to_stdout = False
        log = lg.LogSettings()
        log.log_output = out
        log.enable_trace = False
        try:
            from repro.run.power import PowerSampler

            sampler = PowerSampler(log_dir).start() if facts["gpus"]["count"] else None
        except Exception:  # noqa: BLE001 - power is optional
            sampler = None
        # Only the run's own audit.config (TEST06) is ever applied: a stray one in the shell's folder is not.
        worker = threading.Thread(
            target=sut.start_test, args=(ts, log, str(log_dir / AUDIT_CONFIG)), name="repro-loadgen", daemon=True
        )
        planned = {**settings, **compliance_settings(compliance)}
        total = accuracy_total if accuracy else expected_samples(planned, scenario)
        watch = RunWatch.for_run(recipe, scenario, facts["gpus"]["count"], stop_if_below_band)
        progress_view = RunProgress(
            choose_mode(progress),
            f"LoadGen {scenario}",
            total,
            fixed_total=scenario == "Offline",
            bar_factory=bar,
            projector=watch.projector,
        )
        with progress_view:
            watch.start()
            worker.start()
            if on_started is not None:
                on_started(sut)
            give_up = float("inf")
            while not sut.finished.is_set() and time.monotonic() < give_up:
                try:
                    sut.finished.wait(0.25)
                    progress_view.update(sut)
                    if watch.check(progress_view.projection):
                        progress_view.interrupted(sut)
                        sut.stop()
                except KeyboardInterrupt as stop:
                    if interrupted:
                        raise
                    interrupted, stop_signal = True, _signal_name(stop)
                    progress_view.interrupted(sut)
                    sut.stop()
                    give_up = time.monotonic() + INTERRUPT_GRACE_S
            progress_view.finish(sut)
            watch.finish()
    except KeyboardInterrupt as stop:
        interrupted, stop_signal = True, _signal_name(stop)
        if sut is not None:
            sut.stop()
            sut.finished.wait(INTERRUPT_GRACE_S)
    except ReproError as exc:
        _record_failure(log_dir, run_dir, finish, ledger, step, exc.message)
        _cleanup(be, sut, sampler, info, worker, fleet)
        exc.message = f"{exc.message} (run folder: {run_dir})"
        raise
    except BaseException as exc:
        _record_failure(log_dir, run_dir, finish, ledger, step, f"{type(exc).__name__}: {exc}")
        _cleanup(be, sut, sampler, info, worker, fleet)
        raise
    _cleanup(be, sut, sampler, info, worker, fleet)
    info["measured_by_harness"] = {"samples": sut.samples_done if sut else 0, "tokens": sut.tokens_done if sut else 0}
    if watch is not None:
        info.update(watch.to_json())
    if sut is not None and sut.error is None and watch is not None and watch.stopped is not None and not interrupted:
        msg = watch.stop_message
        _mark_interrupted_summary(log_dir, "--stop-if-below-band")
        _record_failure(log_dir, run_dir, finish, ledger, step, msg)
        raise StepFailed(
            f"{msg[:1].upper()}{msg[1:]}. The partial logs in {log_dir} are marked stopped; see why with the "
            "next command.",
            f"repro explain {shlex.quote(str(run_dir))}",
        )
    if sut is not None and sut.error is not None:
        msg = info.get("server_died") or f"The {bname} backend failed mid-run: {sut.error}"
        finish("failed", msg)
        ledger.fail(step, msg)
        raise StepFailed(
            f"{msg.rstrip('.')}. Partial LoadGen logs are in {log_dir} (marked incomplete).",
            f"fix the backend, then `repro run {scenario.lower()}`",
        )
    if interrupted:
        why = f"interrupted by {STOP_SIGNALS.get(stop_signal, stop_signal)}"
        info["signal"] = stop_signal
        abandoned = sut is not None and not sut.finished.is_set()
        info["loadgen_finished"] = not abandoned
        _mark_interrupted_summary(log_dir, stop_signal)
        _record_failure(
            log_dir, run_dir, lambda st, err: finish("interrupted", err), ledger, step, why, signal=stop_signal
        )
        how = (
            "LoadGen was still waiting out its minimum duration and was left behind"
            if abandoned
            else "LoadGen stopped cleanly"
        )
        stopped = Interrupted(
            f"Interrupted ({stop_signal}); repro stopped issuing and answered what was in flight, {how}; "
            f"the partial logs in {log_dir} are marked interrupted.",
            f"`repro run {scenario.lower()}` to start again",
            exit_code=SIGNAL_EXIT.get(stop_signal, 130),
        )
        stopped.abandoned_threads = abandoned
        raise stopped
    empty = _empty_logs(log_dir)
    if empty:
        msg = f"LoadGen wrote empty logs ({', '.join(empty)}); is the disk full?"
        _record_failure(log_dir, run_dir, finish, ledger, step, msg)
        raise StepFailed(f"{msg} Run folder: {run_dir} (marked failed).", "free space (`df -h`), then `repro doctor`")
    finish("complete", None)
    summary = _summarise(log_dir)
    warnings = [*(info.get("warnings") or []), *((info.get("backend_stats") or {}).get("warnings") or [])]
    if accuracy:
        scores = _write_accuracy(log_dir, dataset, model_path, info)
        if scores is not None:
            summary["accuracy"] = scores
    if compliance:
        summary["compliance"] = finish_compliance(run_dir, scenario, info)
        write_published_json(log_dir / "run.json", info)
    outputs = [Artifact.of(p) for p in (log_dir / "mlperf_log_summary.txt", log_dir / "run.json") if p.exists()]
    ledger.finish(step, outputs, run_dir=str(run_dir), label=label, **summary)
    tag = f" [{label}]" if label else ""
    tps = summary.get("tokens_per_s")
    what = f"{compliance} ({mode})" if compliance else mode
    pairing = f" (paired with {paired})" if paired else ""
    if rate_source is not None and rate_source.get("from") == "repro tune":
        pairing += f"; target_qps {rate_source['target_qps']:g} from repro tune ({rate_source['file']})"
    return StepOutcome(
        step=step,
        status="done",
        summary=f"LoadGen {scenario} {what}{tag} finished: "
        f"{f'{tps:,.1f} tokens/s' if isinstance(tps, (int, float)) else 'see the summary'}; "
        f"logs in {log_dir}{pairing}",
        details={
            "run_dir": str(run_dir),
            "log_dir": str(log_dir),
            "paired_with": paired,
            "kind": kind,
            "label": label,
            "backend": bname,
            "scenario": scenario,
            "mode": mode,
            "target_qps": settings.get("target_qps"),
            "target_qps_source": rate_source,
            "warnings": warnings,
            **summary,
        },
    )


# After Ctrl-C/SIGTERM: how long LoadGen gets to return once nothing is in flight. Offline returns at once; Server
# keeps its schedule to min_duration, so it is left behind and the process exits (exit 130/143).
INTERRUPT_GRACE_S = 5.0
SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}
INTERRUPTED_MARK = " * Run interrupted by {signal}: repro stopped issuing queries; this partial run is not a result"


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


class _NoLedger:
    """A tune probe is not a run of the scenario: `repro status` must not count it."""

    def start(self, *a: Any, **kw: Any) -> None:
        pass

    def finish(self, *a: Any, **kw: Any) -> None:
        pass

    def fail(self, *a: Any, **kw: Any) -> None:
        pass


def _rate_source(
    ws: Workspace, recipe: Recipe, scenario: str, target_qps: float | dict[str, Any] | None, *, probe: bool
) -> dict[str, Any] | None:
    """Where a run's target_qps comes from when not the recipe: --target-qps (a number, or the record of the probe
    that measured it), else the rate `repro tune` saved."""
    if isinstance(target_qps, dict):
        return target_qps
    if target_qps is not None:
        if target_qps <= 0:
            raise InputError(
                f"--target-qps must be positive (got {target_qps:g}).",
                f"`repro run {scenario.lower()} --target-qps 10`",
            )
        return {"from": "--target-qps", "target_qps": float(target_qps)}
    if scenario == "Offline" or probe:
        return None
    from repro.run.tuned import read_tuned

    return read_tuned(ws, recipe, scenario)


STOP_SIGNALS = {
    "SIGINT": "the user (Ctrl-C, SIGINT)",
    "SIGTERM": "SIGTERM (scancel, docker stop or kill)",
    "SIGHUP": "SIGHUP (the terminal closed)",
}


def _signal_name(stop: KeyboardInterrupt) -> str:
    """KeyboardInterrupt from Ctrl-C carries nothing; the SIGTERM handler in commands/run.py passes the signal name."""
    name = stop.args[0] if stop.args and isinstance(stop.args[0], str) else "SIGINT"
    return name if name.startswith("SIG") else "SIGINT"


def _empty_logs(run_dir: Path) -> list[str]:
    return [
        p.name
        for p in (run_dir / "mlperf_log_summary.txt", run_dir / "mlperf_log_detail.txt")
        if not p.is_file() or p.stat().st_size == 0
    ]


def _remove_empty(log_dir: Path, run_dir: Path, *, everything: bool = False) -> None:
    """Remove 0-byte files (or, with everything, all files) from log_dir, then the folders up to run_dir left empty."""
    with contextlib.suppress(OSError):
        for p in log_dir.iterdir():
            if p.is_file() and (everything or p.stat().st_size == 0):
                p.unlink()
    folder = log_dir
    while True:
        with contextlib.suppress(OSError):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        if folder == run_dir or run_dir not in folder.parents:
            return
        folder = folder.parent


def _serving_record(recipe: Recipe, managed: bool, details: dict[str, Any]) -> dict[str, Any]:
    """The serving configuration this run used, for `repro explain`: the recipe's server options only when repro
    started the servers from them, the client's concurrency and max_tokens always."""
    out: dict[str, Any] = {"max_tokens": recipe.loadgen.max_tokens}
    trt = recipe.trtllm
    if managed and trt is not None:
        kv = trt.serve_extra_options.get("kv_cache_config") if isinstance(trt.serve_extra_options, dict) else None
        out.update(
            gpu_batch_size=trt.gpu_batch_size,
            tp_size=trt.tp_size,
            pp_size=trt.pp_size,
            precision=recipe.precision,
            servers_per_vm=trt.servers_per_vm,
            max_num_tokens=trt.runtime_flags.get("max_num_tokens"),
            kv_cache_free_gpu_memory_fraction=kv.get("free_gpu_memory_fraction") if isinstance(kv, dict) else None,
        )
    concurrency = details.get("max_concurrency_per_endpoint", details.get("max_concurrency"))
    if concurrency is not None:
        out["client_concurrency"] = concurrency
    return {k: v for k, v in out.items() if v is not None}


def _record_failure(
    log_dir: Path,
    run_dir: Path,
    finish: Callable[[str, str | None], None],
    ledger: Any,
    step: str,
    msg: str,
    signal: str | None = None,
) -> None:
    """Mark the logs and the ledger; on a full disk neither write may succeed, so clean what is left instead.

    0-byte files carry nothing and are removed; folders left empty are removed; a ledger entry that cannot be
    written stays 'running' with this pid and host, which `repro status` reports as stale once the process is gone.
    """
    with contextlib.suppress(OSError):
        finish("failed" if signal is None else "interrupted", msg)
    _remove_empty(log_dir, run_dir)
    with contextlib.suppress(OSError):
        if signal is None:
            ledger.fail(step, msg)
        else:
            ledger.fail(step, msg, interrupted=True, signal=signal)


def _cleanup(
    be: Backend | None,
    sut: LoadGenSUT | None,
    sampler: Any,
    info: dict[str, Any],
    worker: threading.Thread | None,
    fleet: ServerFleet | None = None,
) -> None:
    if worker is not None and worker.ident is not None and sut is not None and not sut.finished.is_set():
        sut.stop()
        # Server and Interactive schedule queries until min_duration whatever the SUT answers; after a signal
        # repro does not wait that out (up to 40 min on the GPU recipes).
        sut.finished.wait(INTERRUPT_GRACE_S if sut.stopping else None)
    if be is not None:
        try:
            info["backend_stats"] = be.stats()
            be.close()
        except Exception:  # noqa: BLE001 - closing must not hide the real outcome
            pass
    if fleet is not None:
        _stop_servers(fleet, sut, info)
    if sut is not None and (worker is None or worker.ident is None or sut.finished.is_set()):
        sut.destroy()
    if sampler is not None:
        path = sampler.stop()
        if path is not None:
            info["power_file"] = path.name


def _manages_servers(recipe: Recipe, bname: str, endpoints: Sequence[str] | None) -> bool:
    """repro starts trtllm-serve itself unless the user points it at running servers (--endpoint or the env)."""
    import os

    external = bool(endpoints) or bool(os.environ.get("REPRO_TRTLLM_ENDPOINTS"))
    return bname == "trtllm" and recipe.trtllm is not None and not external


def _server_plan(
    recipe: Recipe, ws: Workspace, endpoints: Sequence[str] | None, servers: ServerOptions | None, managed: bool
) -> dict[str, Any]:
    if managed:
        return dry_run_details(recipe, ws, servers)
    from repro.run.backends.trtllm import endpoints_for

    return {"endpoints": list(endpoints) if endpoints else endpoints_for(recipe), "servers": []}


def _http_backend_kwargs(
    recipe: Recipe,
    scenario: str,
    dataset: PreparedDataset,
    model_path: Path | None,
    endpoints: Sequence[str] | None,
    fleet: ServerFleet | None,
    servers: ServerOptions | None,
) -> dict[str, Any]:
    """Endpoints, streaming, the model's tokenizer (to re-tokenize text answers) and the readiness wait."""
    from repro.run.servers import ready_timeout_s
    from repro.run.tokens import load_tokenizer

    kw: dict[str, Any] = {
        "stream": scenario == "Server",
        "tokenizer": load_tokenizer([model_path, dataset.manifest.get("tokenizer")]),
    }
    if fleet is not None:
        wait = servers.ready_timeout_s if servers and servers.ready_timeout_s else ready_timeout_s(recipe)
        kw.update(endpoints=fleet.urls, alive=fleet.alive, health_timeout_s=wait)
    elif endpoints:
        kw["endpoints"] = list(endpoints)
    if servers is not None and servers.ready_timeout_s and fleet is None:
        kw["health_timeout_s"] = servers.ready_timeout_s
    if servers is not None and servers.stall_timeout_s:
        kw["stall_timeout_s"] = servers.stall_timeout_s
    return kw


def _open_files_for(be: Backend, scenario: str) -> dict[str, int]:
    """Offline puts every sample in flight at once: make sure the sockets fit under the open-file limit."""
    from repro.run.limits import ensure_open_files, open_files_needed

    urls = getattr(be, "urls", None) or []
    conc = int(getattr(be, "max_concurrency", 0) or 0)
    if not urls or not conc:
        return {}
    return {
        "needed": open_files_needed(len(urls), conc),
        **ensure_open_files(open_files_needed(len(urls), conc), command=f"repro run {scenario.lower()}"),
    }


def _start_backend(be: Backend, sut: LoadGenSUT, fleet: ServerFleet | None) -> None:
    """Start the backend (HTTP: wait until every server is ready); a readiness failure shows the servers' log tails."""
    from repro.run.backends.trtllm import BackendError

    try:
        be.start(sut)
    except BackendError as exc:
        if fleet is not None:
            fleet.alive()
            tails = [
                f"server {p.rank}: {' | '.join(fleet.tail(p.rank)[-3:])}" for p in fleet.plans if fleet.tail(p.rank)
            ]
            if tails:
                exc.message = f"{exc.message}. Last output of {'; '.join(tails)}"
            logs = fleet.plans[0].log_path.parent if fleet.plans and fleet.plans[0].log_path else None
            if exc.kind == "timeout" and logs is not None:
                exc.next_command = f"see the server logs in {logs}; if they are still loading, raise --ready-timeout"
        raise


def _stop_servers(fleet: ServerFleet, sut: LoadGenSUT | None, info: dict[str, Any]) -> None:
    if sut is not None and sut.error is not None:
        try:
            fleet.alive(grace_s=3.0)
        except ServerDied as died:
            info["server_died"] = died.message
    fleet.stop()
    info["servers"] = fleet.to_json()


def _summarise(run_dir: Path) -> dict[str, Any]:
    """Headline numbers from LoadGen's own summary (through the shared parser when it is there)."""
    try:
        from repro.results.logs import parse_run

        run = parse_run(run_dir)
        return {"tokens_per_s": run.tokens_per_s, "samples_per_s": run.samples_per_s, "validity": run.validity}
    except Exception:  # noqa: BLE001 - the summary line below is enough to report
        pass
    out: dict[str, Any] = {}
    path = run_dir / "mlperf_log_summary.txt"
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


def _write_accuracy(
    run_dir: Path, dataset: PreparedDataset, model_path: Path | None, info: dict[str, Any]
) -> dict[str, Any] | None:
    """accuracy.txt comes from repro.accuracy when that module is installed; its absence is not an error."""
    try:
        from repro.results import accuracy as acc
    except ImportError:
        return None
    tokenizer_dir = (
        model_path
        if model_path and (Path(model_path) / "tokenizer_config.json").exists()
        else dataset.manifest.get("tokenizer")
    )
    if not tokenizer_dir or not Path(tokenizer_dir).is_dir():
        info.setdefault("warnings", []).append("accuracy.txt not written: no tokenizer folder to decode the log with")
        write_published_json(run_dir / "run.json", info)
        return None
    scores = acc.evaluate_accuracy_log(run_dir / "mlperf_log_accuracy.json", dataset.outputs, tokenizer_dir)
    acc.write_accuracy_txt(run_dir, scores)
    return dict(scores)


# ---------------------------------------------------------------- compliance tests (issue 19)
COMPLIANCE_TESTS = ("TEST06",)


def check_compliance_options(
    compliance: str | None, scenario: str, *, accuracy: bool, duration_s: float | None, samples: int | None
) -> None:
    if compliance is None:
        return
    cmd = f"repro run {scenario.lower()} --compliance TEST06"
    if compliance not in COMPLIANCE_TESTS:
        raise InputError(
            f"--compliance {compliance}: repro runs {', '.join(COMPLIANCE_TESTS)} "
            "(the test MLPerf requires for llama2-70b).",
            f"`{cmd}`",
        )
    if accuracy:
        raise InputError(
            "--compliance and --accuracy are separate runs: TEST06 is a PerformanceOnly run.",
            f"`{cmd}`, then `repro run offline --accuracy`",
        )
    if duration_s is not None or samples is not None:
        raise InputError(
            "--compliance sets its own length (audit.config: 100 queries, no minimum duration); "
            "drop --duration/--samples.",
            f"`{cmd}`",
        )


def compliance_settings(compliance: str | None) -> dict[str, Any]:
    """The settings LoadGen takes from the test's audit.config (for planning and progress; LoadGen reads the file)."""
    if compliance is None:
        return {}
    from repro.results.compliance import AUDIT_SETTINGS

    return {k: v for k, v in AUDIT_SETTINGS.items() if k != "mode"}


def audit_config_text() -> str:
    from repro.results.compliance import audit_config_text as text

    return text()


def finish_compliance(run_dir: Path, scenario: str, info: dict[str, Any]) -> dict[str, Any]:
    """Check the TEST06 run's accuracy log, write RUN_DIR/TEST06/verify_accuracy.txt, record the result in run.json."""
    from repro.results.compliance import read_test06, write_test06

    result = read_test06(Path(run_dir) / "TEST06", scenario)
    path = write_test06(Path(run_dir) / "TEST06", result)
    doc = {**result.to_json(), "verify_accuracy": str(path), "verify_text": result.verify_text()}
    info["compliance"] = {**info.get("compliance", {}), **doc}
    return doc
