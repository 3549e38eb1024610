"""A one-system plan's servers as Slurm job steps: one `srun` per instance, one task per GPU, started from the node
that runs LoadGen (the batch step, node 0 of the allocation), watched and stopped from there.

Every task runs `trtllm-llmapi-launch trtllm-serve ...`, which takes its rank from SLURM_PROCID and serves HTTP on
rank 0 (TRT @ 020c89e6 `tensorrt_llm/llmapi/trtllm-llmapi-launch`): `--ntasks=<GPUs>
--ntasks-per-node=min(GPUs, GPUs per node) --nodelist=<its nodes> --mpi=pmi2` as Azure's v6.1 runs used (intel-ai-tce/
inference_results_v6.1 @ 5174fca8 `closed/Azure/configs/deepseek_r1/*/TRTLLM/*/slurm_env_sflow.yaml`; TRT's docs use
pmix), `--overlap` so the steps share the nodes with the batch step (NVIDIA/nv-sflow @ 0364840a
`src/sflow/plugins/operators/srun.py`), `--kill-on-bad-exit=1` so one dead rank ends its step rather than leave a
server answering 503 (TensorRT-LLM issue 18663), and the step's output one file per task (`--output=.../rank-%t.log`,
written by srun on this node, so the logs land in the run folder whatever storage the other nodes share). The
environment goes through srun's own environment and `--export=ALL` (nv-sflow does the same), never the command line.
With an image, each task runs in it through pyxis (`--container-image`, the workspace mounted, `--container-workdir`,
`--container-remap-root`, `--container-mount-home`, a read-only root: Azure's flags); without one, on the node's host
(the rehearsal's stand-ins, a cluster with TensorRT-LLM installed).

A rank that dies fails its server at once: srun reports `task N: Exited with exit code C` (or Killed) and ends the
step, and `alive()` names the instance, its node and rank, and that rank's log. `stop()` sends SIGTERM to every step
(srun forwards it to the tasks on every node), waits a grace, then `scancel --signal=KILL` the steps still there and
kills the srun processes (nv-sflow @ 0364840a `src/sflow/core/launcher.py`: SIGTERM, 5 s, SIGKILL).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from repro.core.errors import StepFailed
from repro.core.fsutil import atomic_write_text
from repro.core.safeio import read_text_bounded
from repro.run.launchers import preflight as preflight_module
from repro.run.launchers.plan import Instance, LaunchPlan, Rank
from repro.run.launchers.preflight import STEP_TIMEOUT_S, TOKEN_DIR, Preflight, judge
from repro.run.servers import LOG_TAIL, ServerDied

LAUNCH_WRAPPER = ("trtllm-llmapi-launch",)
STOP_GRACE_S = 10.0
"""SIGTERM, then this long before SIGKILL (nv-sflow waits 5 s; a server flushing its logs gets a little more)."""
PYXIS_ENV = {"ENROOT_TRANSFER_RETRIES": "3", "ENROOT_CONNECT_TIMEOUT": "60"}
"""Azure's `export: ALL,ENROOT_TRANSFER_RETRIES=3,ENROOT_CONNECT_TIMEOUT=60` (slurm_env_sflow.yaml)."""
SRUN_LOG = "srun.log"
_TASK_END = re.compile(
    r"srun: error: (?P<host>\S+): tasks? (?P<tasks>[0-9,\-]+): (?P<how>Exited with exit code (?P<code>\d+)|Killed|"
    r"Terminated|Segmentation fault|Aborted)"
)


@dataclass
class StepOptions:
    """How the steps are started; the defaults are Azure's. Tests and the rehearsal swap the program, not the flags."""

    srun: str = "srun"
    mpi: str | None = None
    """None: the plan's (pmi2)."""
    wrapper: tuple[str, ...] = LAUNCH_WRAPPER
    kill_on_bad_exit: bool = True
    container_workdir: str = "/workspace"
    grace_s: float = STOP_GRACE_S
    extra: tuple[str, ...] = ()
    """More srun flags for every step (a site's --cpu-bind, --segment)."""
    env: Mapping[str, str] = field(default_factory=dict)
    check_gpus: bool = True
    """The preflight holds each node to the GPUs the plan gives its ranks (off for stand-ins without GPUs)."""
    preflight: bool = True


def _hosts(plan: LaunchPlan, inst: Instance) -> list[str]:
    """The instance's nodes as Slurm names them, in order and once each (a rehearsal's nodes may share a host)."""
    out: list[str] = []
    for n in inst.nodes:
        h = plan.nodes[n].host or plan.nodes[n].name
        if h not in out:
            out.append(h)
    return out


def _per_host(plan: LaunchPlan, inst: Instance) -> int:
    counts: dict[str, int] = {}
    for r in inst.ranks:
        h = plan.nodes[r.node].host or plan.nodes[r.node].name
        counts[h] = counts.get(h, 0) + 1
    return max(counts.values())


def step_name(plan: LaunchPlan, inst: Instance) -> str:
    return f"repro-{plan.recipe}-{inst.name}"[:120]


def srun_argv(
    plan: LaunchPlan,
    inst: Instance,
    log_dir: Path,
    opts: StepOptions | None = None,
    *,
    job_id: str | None = None,
    config_path: Path | None = None,
) -> list[str]:
    """The step of one instance, as an argv list (no shell on either side)."""
    o = opts or StepOptions()
    hosts = _hosts(plan, inst)
    argv = [o.srun]
    if job_id:
        argv.append(f"--jobid={job_id}")
    argv += [
        "--overlap",
        f"--job-name={step_name(plan, inst)}",
        f"--nodes={len(hosts)}",
        f"--ntasks={len(inst.ranks)}",
        f"--ntasks-per-node={_per_host(plan, inst)}",
        f"--nodelist={','.join(hosts)}",
    ]
    mpi = o.mpi or plan.mpi
    if mpi and inst.role != "router":
        argv.append(f"--mpi={mpi}")
    if o.kill_on_bad_exit:
        argv.append("--kill-on-bad-exit=1")
    argv += ["--unbuffered", "--export=ALL", f"--output={log_dir / inst.name / 'rank-%t.log'}"]
    if plan.image:
        mounts = ",".join(f"{m.host}:{m.target}" + (":ro" if m.read_only else "") for m in plan.mounts)
        argv += [f"--container-image={plan.image}"]
        argv += [f"--container-mounts={mounts}"] if mounts else []
        argv += [f"--container-workdir={o.container_workdir}", "--container-remap-root", "--container-mount-home"]
    argv += list(o.extra)
    command = list(inst.argv)
    if inst.config_file and config_path is not None:
        command = [str(config_path) if a == inst.config_file else a for a in command]
    if not plan.image:  # on the node's host: the container's paths are the mounts' host folders
        command = [_host_path(a, plan) for a in command]
    wrapper = list(o.wrapper) if inst.role != "router" else []
    return [*argv, *wrapper, *command]


def _host_path(arg: str, plan: LaunchPlan) -> str:
    for m in sorted(plan.mounts, key=lambda m: -len(m.target)):
        if arg == m.target or arg.startswith(m.target.rstrip("/") + "/"):
            return str(m.host) + arg[len(m.target.rstrip("/")) :]
    return arg


def step_env(plan: LaunchPlan, inst: Instance, opts: StepOptions | None = None) -> dict[str, str]:
    """What srun's environment adds for this step (srun --export=ALL hands it to every task)."""
    o = opts or StepOptions()
    env = {**dict(plan.env), **dict(inst.env), **dict(o.env)}
    if plan.image:
        env = {**PYXIS_ENV, **env}
    return env


@dataclass
class _Step:
    inst: Instance
    argv: list[str]
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    died: str | None = None
    exit_code: int | None = None


class SrunFleet:
    """One srun step per instance of a one-system plan, started from this node (node 0)."""

    def __init__(
        self,
        plan: LaunchPlan,
        *,
        job_id: str | None = None,
        opts: StepOptions | None = None,
        environ: Mapping[str, str] | None = None,
        workspace: Path | None = None,
    ) -> None:
        self.plan = plan
        self.workspace = workspace
        self.preflight: Preflight | None = None
        self.job_id = job_id
        self.opts = opts or StepOptions()
        self.environ = dict(os.environ if environ is None else environ)
        self.steps: dict[str, _Step] = {}
        self._log_dir: Path | None = None
        self.image_ids: dict[str, str] = {}
        self.stopped: list[str] = []
        self.killed: list[str] = []

    @property
    def urls(self) -> list[str]:
        return list(self.plan.endpoints())

    @property
    def log_dir(self) -> Path | None:
        return self._log_dir

    def __enter__(self) -> SrunFleet:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self, log_dir: Path | None = None) -> None:
        """Every step at once (workers first, front ends last: a front end waits for its workers itself)."""
        if log_dir is None:
            raise ValueError("a system's servers write their rank logs into the run folder")
        self._log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        if self.opts.preflight:
            self.check_nodes(log_dir.parent)
        order = sorted(self.plan.instances, key=lambda i: i.role == "router")
        for inst in order:
            folder = log_dir / inst.name
            folder.mkdir(parents=True, exist_ok=True)
            config = None
            if inst.config is not None and inst.config_file:
                config = log_dir / inst.config_file
                # JSON, which is YAML too: trtllm-serve reads both files with yaml.safe_load
                atomic_write_text(config, json.dumps(inst.config, indent=1) + "\n")
            argv = srun_argv(self.plan, inst, log_dir, self.opts, job_id=self.job_id, config_path=config)
            step = _Step(inst, argv)
            self.steps[inst.name] = step
            step.log = open(folder / SRUN_LOG, "ab")  # noqa: SIM115 - open while the step runs
            try:
                step.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=step.log,
                    stderr=subprocess.STDOUT,
                    env={**self.environ, **step_env(self.plan, inst, self.opts)},
                    start_new_session=True,  # Ctrl-C reaches repro, which stops the steps in order
                )
            except FileNotFoundError:
                self.stop()
                raise StepFailed(
                    f"`{self.opts.srun}` not found on this node: a system's servers start as Slurm job steps.",
                    "run inside the Slurm job (`repro run ... --launcher slurm --nodes N` from the login node)",
                ) from None

    def hosts(self) -> list[str]:
        """The allocation's hosts in order, once each."""
        out: list[str] = []
        for n in self.plan.nodes:
            h = n.host or n.name
            if h not in out:
                out.append(h)
        return out

    def check_nodes(self, run_dir: Path) -> Preflight:
        """Every node at once (one srun step, one task per node): GPUs, image, shared storage, clock. A node that
        fails is named and nothing starts."""
        hosts = self.hosts()
        need: dict[str, int] = {}
        for inst in self.plan.instances:
            for r in inst.ranks:
                if r.gpu is not None and self.opts.check_gpus:
                    h = self.plan.nodes[r.node].host or self.plan.nodes[r.node].name
                    need[h] = max(need.get(h, 0), r.gpu + 1)
        token = secrets.token_hex(16)
        spec = {
            "run_dir": str(run_dir),
            "token": token,
            "image": self.plan.image,
            "gpus": self.opts.check_gpus,
            "folders": {"workspace": str(self.workspace)} if self.workspace is not None else {},
        }
        argv = [self.opts.srun, *([f"--jobid={self.job_id}"] if self.job_id else [])]
        argv += ["--overlap", f"--job-name=repro-{self.plan.recipe}-preflight"[:120], f"--nodes={len(hosts)}"]
        argv += [f"--ntasks={len(hosts)}", "--ntasks-per-node=1", f"--nodelist={','.join(hosts)}", "--export=ALL"]
        argv += [sys.executable, "-I", str(Path(preflight_module.__file__)), json.dumps(spec)]
        started = time.time()
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, env=self.environ, check=False
            )
        except FileNotFoundError:
            raise StepFailed(
                f"`{self.opts.srun}` not found on this node: a system's servers start as Slurm job steps.",
                "run inside the Slurm job (`repro run ... --launcher slurm --nodes N` from the login node)",
            ) from None
        except subprocess.TimeoutExpired:
            raise StepFailed(
                f"the node check (one srun step on {len(hosts)} nodes) did not finish in {STEP_TIMEOUT_S:.0f} s.",
                "`sinfo -N` for nodes that are down, then submit again",
            ) from None
        answers = []
        for line in done.stdout.splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict):
                    answers.append(doc)
        pf = judge(answers, hosts, need, token, run_dir, started, time.time())
        if done.returncode != 0 and not answers:
            pf.problems.append(f"srun failed: {(done.stderr.strip().splitlines() or ['no output'])[-1][:300]}")
        self.preflight = pf
        self.image_ids = {h: str(d) for h, d in pf.image_digests().items() if d}
        atomic_write_text(run_dir / TOKEN_DIR / "preflight.json", json.dumps(pf.to_json(), indent=1))
        if not pf.ok:
            more = (
                f" (and {len(pf.problems) - 1} more, {run_dir / TOKEN_DIR / 'preflight.json'})"
                if len(pf.problems) > 1
                else ""
            )
            raise StepFailed(
                f"node check before the run: {pf.problems[0]}{more}; nothing was started.",
                "fix that node or leave it out (`--exclude` it in the job), then submit again",
            )
        return pf

    def system(self) -> dict[str, Any]:
        """The system this run is, for run.json: its nodes (host, GPUs, the image's digest there), its instances'
        endpoints and ranks, and the node that ran LoadGen."""
        answers = {str(a.get("host")): a for a in (self.preflight.nodes if self.preflight else [])}
        nodes = []
        for n in self.plan.nodes:
            a = answers.get(n.host or n.name, {})
            nodes.append(
                {
                    **n.to_json(),
                    "gpus_seen": a.get("gpus"),
                    "gpu_names": a.get("gpu_names", []),
                    "image": self.image_ids.get(n.host or n.name),
                }
            )
        lg = self.plan.loadgen[0]
        return {
            "shape": self.plan.shape,
            "number_of_nodes": len(self.plan.nodes),
            "accelerators_per_node": self.plan.nodes[0].gpus if self.plan.nodes else 0,
            "accelerators": self.plan.gpus_allocated,
            "accelerators_serving": self.plan.gpus,
            "ranks": self.plan.ranks,
            "nodes": nodes,
            "loadgen": {"node": self.plan.nodes[lg.node].text(), "endpoints": list(self.plan.endpoints())},
            "instances": [
                {
                    "name": i.name,
                    "role": i.role,
                    "url": self.plan.url(i),
                    "ranks": len(i.ranks),
                    "nodes": [self.plan.nodes[k].text() for k in i.nodes],
                }
                for i in self.plan.instances
            ],
        }

    # -- watching --------------------------------------------------------------------------------------------------

    def _srun_lines(self, name: str) -> list[str]:
        if self._log_dir is None:
            return []
        try:
            text = read_text_bounded(self._log_dir / name / SRUN_LOG, 1 << 20, what="srun log")
        except (OSError, ValueError):
            return []
        return text.splitlines()

    def _dead_rank(self, step: _Step) -> tuple[Rank, str] | None:
        """The task srun reported ended first (its rank and how), from the step's own messages, which srun writes as
        each task ends: the rank that died, not the ones that exited after it (a world that loses a rank aborts: its
        rank 0 exits 1 a moment later, and --kill-on-bad-exit ends the rest of the step unreported)."""
        ends = [m for m in map(_TASK_END.search, self._srun_lines(step.inst.name)) if m is not None]
        for m in ends:
            first = int(re.split(r"[,\-]", m["tasks"])[0])
            if first < len(step.inst.ranks):
                how = f"exit code {m['code']}" if m["code"] is not None else m["how"].lower()
                return step.inst.ranks[first], how
        return None

    def rank_tail(self, inst: Instance, rank: Rank, n: int = 5) -> list[str]:
        if self._log_dir is None:
            return []
        try:
            text = read_text_bounded(self._log_dir / rank.log, 8 << 20, what="rank log")
        except (OSError, ValueError):
            return []
        lines = deque((ln for ln in text.splitlines() if ln.strip()), maxlen=n)
        return list(lines)

    def alive(self, grace_s: float = 0.0) -> None:
        """Raise ServerDied for the first instance whose step ended or reported a task ended, naming its node, its
        rank and that rank's log (within grace_s: srun writes its message a moment after the task ends)."""
        deadline = time.monotonic() + grace_s
        while True:
            self._check()
            if time.monotonic() >= deadline:
                return
            time.sleep(0.2)

    def _check(self) -> None:
        for step in self.steps.values():
            if step.proc is None:
                continue
            code = step.proc.poll()
            dead = self._dead_rank(step)
            if code is None and dead is None:
                continue
            inst = step.inst
            rank, how = dead if dead is not None else (inst.front, f"step exit code {code}")
            step.died, step.exit_code = how, code
            last = " | ".join(self.rank_tail(inst, rank)) or "(no output)"
            log = self._log_dir / rank.log if self._log_dir else rank.log
            raise ServerDied(
                f"{self.plan.who(inst, rank)} ended ({how}): {inst.name} is down. Last output: {last}",
                f"see {log}, fix it, then run again",
            )

    def tails(self) -> list[tuple[str, list[str]]]:
        out = []
        for step in self.steps.values():
            lines = self.rank_tail(step.inst, step.inst.front, LOG_TAIL)
            if lines:
                out.append((f"{step.inst.name} (rank 0 on {self.plan.nodes[step.inst.node].text()})", lines))
        return out

    def where(self, url: str) -> str | None:
        for inst in self.plan.instances:
            if self.plan.url(inst) == url.rstrip("/"):
                log = self._log_dir / inst.front.log if self._log_dir else inst.front.log
                return f"{self.plan.who(inst)}, log {log}"
        return None

    # -- stopping --------------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """SIGTERM every step (srun forwards it to its tasks on every node), a grace, then scancel --signal=KILL
        what is left and SIGKILL the srun processes; survives a second Ctrl-C."""
        pending: KeyboardInterrupt | None = None
        live = [s for s in self.steps.values() if s.proc is not None and s.proc.poll() is None]
        for s in live:
            with contextlib.suppress(ProcessLookupError):
                assert s.proc is not None
                s.proc.send_signal(signal.SIGTERM)
                self.stopped.append(s.inst.name)
        deadline = time.monotonic() + self.opts.grace_s
        for s in live:
            assert s.proc is not None
            try:
                s.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            except KeyboardInterrupt as exc:
                pending = exc
        left = [s for s in live if s.proc is not None and s.proc.poll() is None]
        if left:
            self._scancel(left)
            for s in left:
                assert s.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(s.proc.pid, signal.SIGKILL)
                self.killed.append(s.inst.name)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    s.proc.wait(10)
        for s in self.steps.values():
            if s.proc is not None and s.exit_code is None:
                s.exit_code = s.proc.poll()
            if s.log is not None:
                s.log.close()
                s.log = None
        if pending is not None:
            raise pending

    def _scancel(self, steps: list[_Step]) -> None:
        """`scancel --signal=KILL JOB.STEP` for the named steps still in Slurm (the tasks on the other nodes)."""
        job = self.job_id or self.environ.get("SLURM_JOB_ID")
        if not job:
            return
        from repro.run.slurm import SlurmError, run_tool

        names = {step_name(self.plan, s.inst) for s in steps}
        try:
            listed = run_tool(["squeue", "-h", "-s", "-j", job, "-o", "%i|%j"], timeout=20).stdout
        except SlurmError:
            return
        ids = [sid for sid, _, name in (ln.partition("|") for ln in listed.splitlines()) if name.strip() in names]
        if ids:
            with contextlib.suppress(SlurmError):
                run_tool(["scancel", "--signal=KILL", *ids], timeout=30)

    def to_json(self) -> dict[str, Any]:
        out = []
        for inst in self.plan.instances:
            s = self.steps.get(inst.name)
            out.append(
                {
                    "instance": inst.name,
                    "role": inst.role,
                    "url": self.plan.url(inst),
                    "nodes": [self.plan.nodes[n].text() for n in inst.nodes],
                    "ranks": len(inst.ranks),
                    "srun": s.argv if s else None,
                    "logs": [str(self._log_dir / r.log) if self._log_dir else r.log for r in inst.ranks],
                    "exit_code": s.exit_code if s else None,
                    "died": s.died if s else None,
                }
            )
        return {
            "launcher": "slurm",
            "job_id": self.job_id or self.environ.get("SLURM_JOB_ID"),
            "servers": out,
            "image_ids": self.image_ids,
            "stopped": self.stopped,
            "killed": self.killed,
            "preflight": self.preflight.to_json() if self.preflight else None,
        }
