"""A scenario's serving layout and the allocation it runs on, resolved once into a `LaunchPlan`.

`serving_layout(deployment)` reads the recipe's per-scenario layout: how many instances of which role, how many GPUs
each, how many front ends, one VM's servers or one system over many nodes. `Allocation` is where it runs: this VM,
N nodes planned on a login node (named node-00.. until Slurm names them), or the nodes of the Slurm job this process
runs in. `resolve()` places the instances on the allocation, one rank per GPU, as NVIDIA's scale-out scripts do
(intel-ai-tce/inference_results_v6.1 @ 5174fca8 `closed/NVIDIA/scaleout/run_scaleout.sh`: an instance of at least
a node's GPUs takes whole consecutive nodes, smaller ones share a node on distinct GPUs, ports and IPC addresses;
`run_scaleout_disagg.py`: generation workers first, then context workers, then the front ends on node i mod N at
the ports after the workers'), and returns the plan the launchers and the dry run read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from repro.core.errors import InputError
from repro.core.merge import merged
from repro.core.recipes import Deployment, RoleLayout
from repro.run.launchers.plan import Instance, LaunchPlan, LoadGenHost, Node, PlanError, Rank, Role, Shape

if TYPE_CHECKING:
    from repro.core.workspace import Workspace
    from repro.run.servers import ServerOptions

IPC_BASE_PORT = 10012
"""trtllm-llmapi-launch's first proxy IPC port (TRT @ 020c89e6 `tensorrt_llm/llmapi/trtllm-llmapi-launch`); instances
sharing a node each get their own from here (run_scaleout.sh: TLLM_SPAWN_PROXY_PROCESS_IPC_ADDR 10012 + j)."""
ROUTER_TIMEOUT_S = 7200
"""`trtllm-serve disaggregated --server_start_timeout/--request_timeout` as NVIDIA's scale-out runs pass them
(run_scaleout_disagg.py; TRT @ 33338f3c examples/disaggregated/slurm/benchmark/start_server.sh: -t 7200 -r 7200)."""


@dataclass(frozen=True)
class Group:
    """Instances of one role: `count` of them, each on `gpus` GPUs (one rank per GPU), all running `argv`."""

    role: Role
    count: int
    gpus: int
    argv: tuple[str, ...] = ()
    """The server's command with --host/--port set per instance (empty: the deployment's serve command)."""
    env: Mapping[str, str] = field(default_factory=dict)
    parallel: Mapping[str, int] = field(default_factory=dict)
    """Flags of the serve command this role sets otherwise (--tp_size, --pp_size, --ep_size)."""
    options: Mapping[str, Any] | None = None
    """This role's own extra_llm_api_options (written per instance into the run folder; None: the deployment's)."""


@dataclass(frozen=True)
class ServingLayout:
    """How a scenario serves, read from the recipe: one VM's servers, or one system's instances over many nodes."""

    shape: Shape
    """one-vm: a VM's servers (a rack of them is per-vm); one-system: instances placed across nodes."""
    groups: tuple[Group, ...]
    gpus_per_node: int
    base_port: int
    front_ends: int = 0
    """`trtllm-serve disaggregated` routers LoadGen sends to (0: it sends to the servers themselves)."""
    nodes: int | None = None
    """The nodes the published system used (None: one VM)."""
    env: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def gpus(self) -> int:
        return sum(g.count * g.gpus for g in self.groups)

    @property
    def nodes_needed(self) -> int:
        return -(-self.gpus // self.gpus_per_node)

    @property
    def disaggregated(self) -> bool:
        return self.front_ends > 0

    def text(self) -> str:
        """'9 servers x 8 GPUs': the words a view uses."""
        parts = [f"{g.count} {g.role} x {g.gpus} GPU{'s' if g.gpus != 1 else ''}" for g in self.groups]
        if self.front_ends:
            parts.append(f"{self.front_ends} front end{'s' if self.front_ends != 1 else ''}")
        return " + ".join(parts)


def serving_layout(dep: Deployment) -> ServingLayout:
    """The deployment's layout: its `trtllm.system` (one system over many nodes: aggregated servers of tp x pp GPUs,
    or context and generation servers behind front ends), else one VM's servers_per_vm servers of tp x pp GPUs."""
    t = dep.trtllm
    if t is None:
        raise InputError(
            f"recipe {dep.recipe.name} starts no inference servers (it has no trtllm block).",
            "`repro recipes show " + dep.recipe.name + "`",
        )
    source = dep.source or f"recipes/{dep.recipe.name}.yaml"
    sys = t.system
    if sys is None:
        return ServingLayout(
            shape="one-vm",
            groups=(Group("server", t.servers_per_vm, t.tp_size * t.pp_size),),
            gpus_per_node=dep.recipe.system.gpus_per_vm,
            base_port=t.base_port,
            source=source,
        )
    if sys.instances is not None:
        groups: tuple[Group, ...] = (Group("server", sys.instances, t.tp_size * t.pp_size),)
    else:
        assert sys.context is not None and sys.generation is not None
        roles: tuple[tuple[Role, RoleLayout], ...] = (("context", sys.context), ("generation", sys.generation))
        groups = tuple(
            Group(
                role,
                spec.instances,
                spec.gpus,
                parallel={"--tp_size": spec.tp_size, "--pp_size": spec.pp_size}
                | ({"--ep_size": spec.ep_size} if spec.ep_size else {}),
                options=merged(dict(t.serve_extra_options), dict(spec.serve_extra_options)),
                env=dict(spec.env),
            )
            for role, spec in roles
        )
    return ServingLayout(
        shape="one-system",
        groups=groups,
        gpus_per_node=dep.recipe.system.gpus_per_vm,
        base_port=t.base_port,
        front_ends=sys.front_ends,
        nodes=sys.nodes,
        env=dict(sys.env),
        source=f"{source}; {sys.source}",
    )


@dataclass(frozen=True)
class Allocation:
    """The nodes a plan runs on: hosts in order (None until Slurm names them) and each node's GPUs."""

    hosts: tuple[str | None, ...]
    gpus_per_node: int
    job_id: str | None = None

    @classmethod
    def this_vm(cls, gpus: int) -> Allocation:
        return cls((None,), gpus)

    @classmethod
    def planned(cls, nodes: int, gpus_per_node: int) -> Allocation:
        """N nodes a job will get: named node-00.. until the job runs."""
        return cls((None,) * nodes, gpus_per_node)

    @classmethod
    def of_job(cls, gpus_per_node: int, environ: Mapping[str, str] | None = None) -> Allocation:
        """The Slurm job this process runs in: its nodes in Slurm's order (the batch step runs on the first)."""
        env = os.environ if environ is None else environ
        job, nodelist = env.get("SLURM_JOB_ID"), env.get("SLURM_JOB_NODELIST")
        if not job or not nodelist:
            raise InputError(
                "--inside-job runs inside a Slurm allocation, and this process is not in one "
                "(no SLURM_JOB_ID / SLURM_JOB_NODELIST).",
                "submit it with `repro run ... --launcher slurm --nodes N` from the login node, or `salloc` first",
            )
        return cls(tuple(expand_nodelist(nodelist)), gpus_per_node, job)

    @property
    def nodes(self) -> int:
        return len(self.hosts)


_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")


def expand_nodelist(nodelist: str) -> list[str]:
    """`scontrol show hostnames` of a Slurm node list (vm[01-03],gpu7), every name checked as a host name."""
    from repro.run.slurm import run_tool

    proc = run_tool(["scontrol", "show", "hostnames", nodelist])
    hosts = proc.stdout.split() if proc.returncode == 0 else []
    if not hosts or not all(_HOST.fullmatch(h) for h in hosts):
        raise InputError(
            f"Slurm's node list {ascii(nodelist[:200])} did not expand to host names.", "`scontrol show hostnames`"
        )
    return hosts


def resolve(
    dep: Deployment,
    ws: Workspace,
    allocation: Allocation,
    servers: ServerOptions | None = None,
    *,
    layout: ServingLayout | None = None,
    shape: Shape | None = None,
    image: str | None = None,
) -> LaunchPlan:
    """The plan of a scenario on an allocation. A one-VM layout on N nodes is the per-vm rack (each node its own
    servers and LoadGen); a one-system layout is placed across the allocation with one LoadGen on node 0."""
    from repro.run.servers import ServerOptions

    opts = servers or ServerOptions()
    lay = layout or serving_layout(dep)
    shape = shape or (lay.shape if lay.shape == "one-system" else "one-vm" if allocation.nodes == 1 else "per-vm")
    if shape == "one-system":
        return place_system(dep, ws, lay, allocation, opts, image=image)
    return _vm_plan(dep, ws, lay, allocation, opts, shape, image)


def _vm_plan(
    dep: Deployment,
    ws: Workspace,
    lay: ServingLayout,
    allocation: Allocation,
    opts: ServerOptions,
    shape: Shape,
    image: str | None,
) -> LaunchPlan:
    """Each node's servers exactly as `repro run` starts them on one VM (servers.plan_servers), its own LoadGen."""
    from repro.run.servers import plan_servers

    servers = plan_servers(dep, ws, opts)
    nodes = tuple(Node(i, h, allocation.gpus_per_node) for i, h in enumerate(allocation.hosts))
    instances: list[Instance] = []
    loadgen: list[LoadGenHost] = []
    for node in nodes:
        mine = []
        for s in servers:
            gpus = [int(g) for g in s.gpus] if s.gpus else []
            name = f"server-{s.rank}" if shape == "one-vm" else f"{node.name}.server-{s.rank}"
            ranks = tuple(
                Rank(r, node.index, r, gpus[r] if gpus else None, f"trtllm_serve_{s.rank}.log")
                for r in range(max(1, len(gpus)))
            )
            instances.append(
                Instance(
                    name,
                    "server",
                    s.rank,
                    ranks,
                    s.port,
                    tuple(s.argv),
                    env=dict(s.env),
                    container=s.name,
                    labels=dict(s.labels),
                )
            )
            mine.append(name)
        loadgen.append(LoadGenHost(node.index, tuple(mine)))
    return LaunchPlan(
        shape,
        dep.recipe.name,
        dep.scenario,
        nodes,
        tuple(instances),
        tuple(loadgen),
        image=servers[0].image if servers else image,
        mpi=None,
        listen=opts.listen,
        mounts=tuple(servers[0].mounts) if servers else (),
        shm_size=servers[0].shm_size if servers else None,
        source=lay.source,
    )


def serve_argv(dep: Deployment, ws: Workspace) -> tuple[str, ...]:
    """The deployment's trtllm-serve command (what build-engine records), without the container entry's prefix."""
    from repro.engine.plan import plan_build

    build = plan_build(dep, ws, gpus=True)
    argv = list(build.serve[0].argv)
    return tuple(argv)


def _with_flags(argv: Sequence[str], flags: Mapping[str, str]) -> tuple[str, ...]:
    """The command with each flag's value set (replaced where it is, appended where it is not)."""
    out = list(argv)
    for flag, value in flags.items():
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return tuple(out)


def _with_host_port(argv: Sequence[str], host: str, port: int) -> tuple[str, ...]:
    return _with_flags(argv, {"--host": host, "--port": str(port)})


def place_system(
    dep: Deployment,
    ws: Workspace | None,
    lay: ServingLayout,
    allocation: Allocation,
    opts: ServerOptions,
    *,
    image: str | None = None,
) -> LaunchPlan:
    """Place a one-system layout: generation (or aggregated) servers first, then context servers, each on
    consecutive GPUs, node-major; an instance smaller than a node never straddles two; then the front ends."""
    gpn = allocation.gpus_per_node
    if allocation.nodes < lay.nodes_needed:
        raise InputError(
            f"{dep.recipe.name} {dep.scenario} serves {lay.text()} = {lay.gpus} GPUs, {lay.nodes_needed} nodes of "
            f"{gpn}; the allocation has {allocation.nodes}.",
            f"`repro run {dep.scenario.lower()} --recipe {dep.recipe.name} --launcher slurm --nodes "
            f"{lay.nodes_needed}`",
        )
    nodes = tuple(Node(i, h, gpn) for i, h in enumerate(allocation.hosts))
    order = sorted(lay.groups, key=lambda g: {"generation": 0, "server": 0, "context": 1}.get(g.role, 2))
    base_argv = serve_argv(dep, ws) if ws is not None and any(not g.argv for g in order) else ()
    slot, index = 0, 0
    instances: list[Instance] = []
    for group in order:
        if group.gpus > gpn and group.gpus % gpn:
            raise PlanError(f"{group.role}: {group.gpus} GPUs is not a whole number of {gpn}-GPU nodes")
        if group.gpus < gpn and gpn % group.gpus:
            raise PlanError(f"{group.role}: {group.gpus} GPUs does not divide a {gpn}-GPU node")
        for k in range(group.count):
            if group.gpus >= gpn or slot % gpn + group.gpus > gpn:
                slot = -(-slot // gpn) * gpn  # to the next node's first GPU
            ranks: list[Rank] = []
            seen: dict[int, int] = {}
            for r in range(group.gpus):
                node, gpu = divmod(slot + r, gpn)
                seen[node] = seen.get(node, -1) + 1
                ranks.append(Rank(r, node, seen[node], gpu, f"{_name(group.role, k)}/rank-{r}.log"))
            slot += group.gpus
            port = lay.base_port + index
            env = {
                **dict(group.env),
                "TLLM_SPAWN_PROXY_PROCESS_IPC_ADDR": f"tcp://127.0.0.1:{IPC_BASE_PORT + index}",
            }
            if group.gpus < gpn:  # sharing a node: only its own GPUs (run_scaleout.sh NVIDIA_VISIBLE_DEVICES)
                env["NVIDIA_VISIBLE_DEVICES"] = ",".join(str(r.gpu) for r in ranks)
            name = _name(group.role, k)
            argv = _with_host_port(group.argv or _without_entry(base_argv), "0.0.0.0", port)
            argv = _with_flags(argv, {f: str(v) for f, v in group.parallel.items()})
            config_file = None
            if group.options is not None:
                config_file = f"{name}/extra_llm_api_options.yaml"
                argv = _with_flags(argv, {"--extra_llm_api_options": config_file})
            instances.append(
                Instance(
                    name,
                    group.role,
                    k,
                    tuple(ranks),
                    port,
                    argv,
                    env=env,
                    config=dict(group.options) if group.options is not None else None,
                    config_file=config_file,
                )
            )
            index += 1
    plan_nodes = nodes
    targets = [i.name for i in instances if i.role == "server"]
    instances += _front_ends(lay, instances, plan_nodes, index)
    if lay.front_ends:
        targets = [i.name for i in instances if i.role == "router"]
    mounts: tuple[Any, ...] = ()
    if ws is not None:
        from repro.engine.plan import plan_build

        mounts = tuple(plan_build(dep, ws, gpus=True).mounts)
    return LaunchPlan(
        "one-system",
        dep.recipe.name,
        dep.scenario,
        plan_nodes,
        tuple(instances),
        (LoadGenHost(0, tuple(targets)),),
        image=image or opts.image,
        mounts=mounts,
        env=dict(lay.env),
        mpi="pmi2",
        listen="0.0.0.0",
        source=lay.source,
    )


def _name(role: Role, k: int) -> str:
    return {"server": "server", "context": "ctx", "generation": "gen", "router": "router"}[role] + f"-{k}"


def _without_entry(argv: Sequence[str]) -> tuple[str, ...]:
    """The serve command without repro's container entry (`exec --`): under Slurm each rank runs it directly."""
    out = list(argv)
    if out[:2] == ["exec", "--"]:
        out = out[2:]
    return tuple(out)


def _front_ends(lay: ServingLayout, workers: list[Instance], nodes: tuple[Node, ...], index: int) -> list[Instance]:
    """`trtllm-serve disaggregated` front ends on node i mod N, ports after the workers', each with its config
    (TRT @ 0228a712 `tensorrt_llm/llmapi/disagg_utils.py`: hostname, port, context_servers and generation_servers
    with num_instances and urls host:port, a router type; other keys reach the servers as LLM arguments)."""
    out = []

    def url(i: Instance) -> str:
        n = nodes[i.node]
        return f"{n.host or n.name}:{i.port}"

    ctx = [url(i) for i in workers if i.role == "context"]
    gen = [url(i) for i in workers if i.role == "generation"]
    for k in range(lay.front_ends):
        node = k % len(nodes)
        port = lay.base_port + index + k
        config: dict[str, Any] = {
            "hostname": "0.0.0.0",
            "port": port,
            "backend": "pytorch",
            "context_servers": {"num_instances": len(ctx), "urls": ctx, "router": {"type": "round_robin"}},
            "generation_servers": {"num_instances": len(gen), "urls": gen, "router": {"type": "round_robin"}},
        }
        name = _name("router", k)
        cfg = f"{name}/disagg_config.yaml"
        argv = (
            "trtllm-serve",
            "disaggregated",
            "--config_file",
            cfg,
            "--server_start_timeout",
            str(ROUTER_TIMEOUT_S),
            "--request_timeout",
            str(ROUTER_TIMEOUT_S),
        )
        out.append(
            Instance(
                name,
                "router",
                k,
                (Rank(0, node, 0, None, f"{name}/rank-0.log"),),
                port,
                argv,
                config=config,
                config_file=cfg,
            )
        )
    return out
