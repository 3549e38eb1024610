"""What runs where, as data: the plan a launcher turns into processes.

A `LaunchPlan` is resolved once (`repro.run.launchers.layout.resolve`) from a scenario's deployment (the recipe's
per-scenario layout) and an allocation (this VM, N planned nodes, or the nodes Slurm gave the job), and handed to a
launcher (`repro.run.launchers`), which starts its instances and says how; the harness drives LoadGen from the node
the plan names. Nothing here starts or reads anything: `--dry-run` prints a plan, tests build one by hand.

Three shapes, over the same launchers:
- one-vm: this VM's servers and its LoadGen (`repro run`, as it always was);
- per-vm: N VMs, each its own servers and its own LoadGen, the results summed by `repro aggregate` (Azure's
  Llama-2 rack method: 18 independent runs);
- one-system: N nodes, servers that span nodes (one rank per GPU), one LoadGen on the first node over every front
  end (MLPerf's rack systems: Azure's DeepSeek-R1 GB300 NVL72 x72, one system of 18 nodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from repro.engine.container import Mount

Shape = Literal["one-vm", "per-vm", "one-system"]
Role = Literal["server", "context", "generation", "router"]
"""server: an aggregated trtllm-serve; context/generation: a disaggregated worker (behind routers); router: a
`trtllm-serve disaggregated` front end over the context and generation servers."""

SHAPES: tuple[Shape, ...] = ("one-vm", "per-vm", "one-system")
ROLE_WORDS: dict[Role, str] = {
    "server": "server",
    "context": "context server",
    "generation": "generation server",
    "router": "front end",
}


class PlanError(ValueError):
    """A plan that cannot run as written (two instances on one port of a node, a GPU given twice, ...): a bug in
    whatever built it, caught before anything starts."""


@dataclass(frozen=True)
class Node:
    """One node of the allocation. `host` is None until Slurm names it (a login node's dry run)."""

    index: int
    host: str | None = None
    gpus: int = 0

    @property
    def name(self) -> str:
        """How every view names it: node-00 (and its host once known)."""
        return f"node-{self.index:02d}"

    def text(self) -> str:
        return f"{self.name} ({self.host})" if self.host else self.name

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "host": self.host, "gpus": self.gpus}


@dataclass(frozen=True)
class Rank:
    """One rank of an instance: a process (one Slurm task per GPU) or, on one VM, the GPU a server's own workers use."""

    rank: int
    """The rank within its instance (SLURM_PROCID of its task); rank 0 runs the HTTP front."""
    node: int
    """Index into LaunchPlan.nodes."""
    local_rank: int
    """Its place among the instance's ranks on that node (SLURM_LOCALID)."""
    gpu: int | None
    """The node's GPU it gets (None: a server without GPUs, a stand-in or a router)."""
    log: str
    """Its log file, relative to the run folder's servers/ folder."""

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "node": self.node, "local_rank": self.local_rank, "gpu": self.gpu, "log": self.log}


@dataclass(frozen=True)
class Instance:
    """One server: a trtllm-serve (aggregated, context or generation) or a disaggregated front end."""

    name: str
    """Unique in the plan: server-3, ctx-0, gen-6, router-1; also its folder of rank logs."""
    role: Role
    index: int
    """Its place among the plan's instances of its role."""
    ranks: tuple[Rank, ...]
    port: int
    argv: tuple[str, ...]
    """What every rank runs (under Slurm after trtllm-llmapi-launch; on one VM in the server container)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Its own environment on top of the plan's: TLLM_SPAWN_PROXY_PROCESS_IPC_ADDR, the GPUs it sees."""
    config: Mapping[str, Any] | None = None
    """A front end's `trtllm-serve disaggregated` config (written into the run folder); None for a server."""
    config_file: str | None = None
    """Where that config goes, relative to the run folder's servers/ folder."""
    container: str | None = None
    """The container's name where the launcher names containers (Docker, enroot)."""
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def front(self) -> Rank:
        """The rank that serves HTTP (trtllm-llmapi-launch starts the server on rank 0)."""
        return self.ranks[0]

    @property
    def node(self) -> int:
        return self.front.node

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(sorted({r.node for r in self.ranks}))

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(r.gpu for r in self.ranks if r.gpu is not None)

    @property
    def spans_nodes(self) -> bool:
        return len(self.nodes) > 1

    def ranks_on(self, node: int) -> tuple[Rank, ...]:
        return tuple(r for r in self.ranks if r.node == node)

    @property
    def tasks_per_node(self) -> int:
        """srun's --ntasks-per-node: min(ranks, the most on one node)."""
        return max(len(self.ranks_on(n)) for n in self.nodes)


@dataclass(frozen=True)
class LoadGenHost:
    """Where a LoadGen runs and which front ends it drives (by instance name)."""

    node: int
    targets: tuple[str, ...]


@dataclass(frozen=True)
class LaunchPlan:
    shape: Shape
    recipe: str
    scenario: str
    nodes: tuple[Node, ...]
    instances: tuple[Instance, ...]
    loadgen: tuple[LoadGenHost, ...]
    image: str | None = None
    """The server image: a Docker image name, or an enroot squashfs file (pyxis and enroot take it)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Every rank's environment (the recipe's serving env)."""
    mpi: str | None = "pmi2"
    """srun's --mpi for ranks that span nodes (Azure's v6.1 runs used pmi2; TRT's docs pmix)."""
    listen: str = "127.0.0.1"
    """The address servers bind (one VM: this VM only; a system's servers: every node's, 0.0.0.0)."""
    mounts: tuple[Mount, ...] = ()
    """What every rank's container mounts (the workspace at /workspace, the model read-only)."""
    shm_size: str | None = None
    label: str | None = None
    source: str = ""
    """Where the layout was read from (the recipe's per-scenario block and its published config)."""

    def __post_init__(self) -> None:
        self.validate()

    # -- reading the plan ------------------------------------------------------------------------------------------

    def instance(self, name: str) -> Instance:
        for inst in self.instances:
            if inst.name == name:
                return inst
        raise KeyError(name)

    def host(self, node: int) -> str:
        """The address of a node as its URLs use it: its host in a system (its name before Slurm names it), else
        127.0.0.1."""
        if self.shape != "one-system":
            return "127.0.0.1"  # each VM's LoadGen drives its own servers
        n = self.nodes[node]
        return n.host or n.name

    def url(self, inst: Instance) -> str:
        return f"http://{self.host(inst.node)}:{inst.port}"

    def front_ends(self, loadgen: int = 0) -> tuple[Instance, ...]:
        """The instances a LoadGen sends requests to (servers, or routers when serving is disaggregated)."""
        return tuple(self.instance(n) for n in self.loadgen[loadgen].targets)

    def endpoints(self, loadgen: int = 0) -> tuple[str, ...]:
        return tuple(self.url(i) for i in self.front_ends(loadgen))

    def on_node(self, node: int) -> tuple[Instance, ...]:
        """Every instance with a rank on this node."""
        return tuple(i for i in self.instances if node in i.nodes)

    @property
    def ranks(self) -> int:
        return sum(len(i.ranks) for i in self.instances)

    @property
    def gpus(self) -> int:
        return sum(len(i.gpus) for i in self.instances)

    @property
    def gpus_allocated(self) -> int:
        return sum(n.gpus for n in self.nodes)

    def who(self, inst: Instance, rank: Rank | None = None) -> str:
        """'server-3 rank 5 on node-03 (gpu-12), log servers/server-3/rank-5.log': the words an error names."""
        r = rank or inst.front
        gpu = f", GPU {r.gpu}" if r.gpu is not None else ""
        return f"{inst.name} rank {r.rank} on {self.nodes[r.node].text()}{gpu}"

    # -- checks ----------------------------------------------------------------------------------------------------

    def validate(self) -> None:
        """The plan's own consistency, so no launcher has to check it: nodes in range, a port of a host and a GPU of
        a node given once, every LoadGen target an instance, names unique, every instance with a rank 0."""
        names = [i.name for i in self.instances]
        if len(set(names)) != len(names):
            raise PlanError(f"instance names repeat: {names}")
        if [n.index for n in self.nodes] != list(range(len(self.nodes))):
            raise PlanError("nodes must be numbered 0..N-1 in order")
        ports: dict[tuple[str, int], str] = {}
        gpus: dict[tuple[int, int], str] = {}
        for inst in self.instances:
            if not inst.ranks or [r.rank for r in inst.ranks] != list(range(len(inst.ranks))):
                raise PlanError(f"{inst.name}: ranks must be 0..N-1 in order")
            for r in inst.ranks:
                if not 0 <= r.node < len(self.nodes):
                    raise PlanError(f"{inst.name} rank {r.rank}: node {r.node} is not in the plan")
                if r.gpu is not None:
                    if self.nodes[r.node].gpus and not 0 <= r.gpu < self.nodes[r.node].gpus:
                        raise PlanError(f"{inst.name} rank {r.rank}: GPU {r.gpu} is not on {self.nodes[r.node].name}")
                    here = f"{inst.name} rank {r.rank}"
                    other = gpus.setdefault((r.node, r.gpu), here)
                    if other != here:
                        raise PlanError(f"GPU {r.gpu} of {self.nodes[r.node].name} is given to {other} and {here}")
            key = (self._host_key(inst.node), inst.port)
            if key in ports:
                raise PlanError(f"{inst.name} and {ports[key]} both listen on port {inst.port} of {key[0]}")
            ports[key] = inst.name
        for lg in self.loadgen:
            if not 0 <= lg.node < len(self.nodes):
                raise PlanError(f"LoadGen on node {lg.node}, which is not in the plan")
            missing = [t for t in lg.targets if t not in names]
            if missing:
                raise PlanError(f"LoadGen targets {missing}, which are not instances")

    def _host_key(self, node: int) -> str:
        """Instances share ports by host: two rehearsal 'nodes' on one machine are one host."""
        n = self.nodes[node]
        return n.host or n.name

    # -- views -----------------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "recipe": self.recipe,
            "scenario": self.scenario,
            "label": self.label,
            "nodes": [n.to_json() for n in self.nodes],
            "gpus": self.gpus,
            "gpus_allocated": self.gpus_allocated,
            "ranks": self.ranks,
            "image": self.image,
            "mpi": self.mpi,
            "listen": self.listen,
            "env": dict(self.env),
            "mounts": [m.to_json() for m in self.mounts],
            "source": self.source,
            "instances": [
                {
                    "name": i.name,
                    "role": i.role,
                    "index": i.index,
                    "url": self.url(i),
                    "port": i.port,
                    "nodes": [self.nodes[n].name for n in i.nodes],
                    "ranks": [r.to_json() for r in i.ranks],
                    "argv": list(i.argv),
                    "env": dict(i.env),
                    **({"config": dict(i.config), "config_file": i.config_file} if i.config is not None else {}),
                }
                for i in self.instances
            ],
            "loadgen": [
                {"node": self.nodes[lg.node].name, "host": self.nodes[lg.node].host, "targets": list(lg.targets)}
                for lg in self.loadgen
            ],
        }

    def lines(self) -> list[str]:
        """The plan in words, node by node (what a dry run prints): its servers with their ranks and GPUs, and which
        node runs LoadGen over which front ends."""
        out = [
            f"{self.shape}: {len(self.nodes)} node(s), {len(self.instances)} instance(s), {self.ranks} rank(s) on "
            f"{self.gpus} of {self.gpus_allocated} GPUs"
        ]
        for node in self.nodes:
            here = []
            for inst in self.on_node(node.index):
                mine = inst.ranks_on(node.index)
                gpus = ",".join(str(r.gpu) for r in mine if r.gpu is not None)
                span = f" (spans {', '.join(self.nodes[n].name for n in inst.nodes)})" if inst.spans_nodes else ""
                front = f" :{inst.port}" if inst.node == node.index else ""
                ranks = f"ranks {mine[0].rank}-{mine[-1].rank}" if len(mine) > 1 else f"rank {mine[0].rank}"
                here.append(
                    f"{ROLE_WORDS[inst.role]} {inst.name}{front} {ranks}" + (f" GPUs {gpus}" if gpus else "") + span
                )
            lg = [i for i, h in enumerate(self.loadgen) if h.node == node.index]
            if lg:
                targets = sum(len(self.loadgen[i].targets) for i in lg)
                here.append(f"LoadGen over {targets} front end(s)")
            out.append(f"{node.text()}: " + ("; ".join(here) if here else "idle"))
        return out
