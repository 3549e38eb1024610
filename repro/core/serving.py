"""A scenario's serving layout in numbers and words, for the views that tell a recipe's whole plan before anything
runs (recipes show, build-engine --dry-run, explain): the GPUs its servers take of the system's, which MLPerf divides
by whatever share the published config served from (Azure's GB300 DeepSeek-R1 Interactive: 64 of 72)."""

from __future__ import annotations

from repro.core.recipes import Deployment


def gpus_served(dep: Deployment) -> tuple[int, int]:
    """(GPUs its servers take, the system's GPUs): one VM's servers_per_vm x tp x pp of its gpus_per_vm, or a
    system's instances of its nodes x gpus_per_vm. MLPerf divides by the second, whatever the first."""
    t, per_node = dep.trtllm, dep.recipe.system.gpus_per_vm
    if t is None:
        return 0, per_node
    sys = t.system
    if sys is None:
        return t.servers_per_vm * t.tp_size * t.pp_size, per_node
    if sys.instances is not None:
        return sys.instances * t.tp_size * t.pp_size, sys.nodes * per_node
    assert sys.context is not None and sys.generation is not None
    return sys.context.instances * sys.context.gpus + sys.generation.instances * sys.generation.gpus, (
        sys.nodes * per_node
    )


def serving_text(dep: Deployment) -> str:
    """How this scenario serves, in words: one VM's servers, or one system's instances over its nodes, and the
    GPUs they take of the system's (Azure's GB300 Interactive: 64 of 72)."""
    t = dep.trtllm
    if t is None:
        return "no inference servers (no trtllm block)"
    per_node = dep.recipe.system.gpus_per_vm
    sys = t.system
    if sys is None:
        n, gpus = t.servers_per_vm, t.tp_size * t.pp_size
        return (
            f"{n} server{'s' if n != 1 else ''} x {gpus} GPU{'s' if gpus != 1 else ''} "
            f"(TP{t.tp_size}xPP{t.pp_size}) on one VM of {per_node}"
        )
    ep = t.serve_extra_options.get("moe_expert_parallel_size")
    if sys.instances is not None:
        groups = [("server", sys.instances, t.tp_size, t.pp_size, ep if isinstance(ep, int) else None)]
    else:
        assert sys.context is not None and sys.generation is not None
        groups = [
            (role, r.instances, r.tp_size, r.pp_size, r.ep_size)
            for role, r in (("context", sys.context), ("generation", sys.generation))
        ]
    parts, nodes = [], 0
    for role, n, tp, pp, ep_size in groups:
        gpus = tp * pp
        par = f"TP{tp}" + (f"xPP{pp}" if pp > 1 else "") + (f", EP{ep_size}" if ep_size else "")
        span = f", each over {gpus // per_node} nodes" if gpus > per_node else ""
        label = "" if role == "server" else f"{role} "
        parts.append(f"{n} {label}server{'s' if n != 1 else ''} x {gpus} GPUs ({par}{span})")
        nodes += n * -(-gpus // per_node) if gpus >= per_node else -(-n * gpus // per_node)
    text = " + ".join(parts)
    fe = sys.front_ends
    if fe:
        text += f" behind {fe} front end{'s' if fe != 1 else ''}"
    used, total = gpus_served(dep)
    if used < total:
        text += f": {used} of the system's {total} GPUs, on {nodes} of its {sys.nodes} nodes"
    else:
        text += f": all {total} GPUs of its {sys.nodes} nodes"
    # One rank per GPU and one per front end; LoadGen on the allocation's first node (run/launchers/layout.py
    # place_system, as nv-sflow runs the harness: ../shared/reference/multinode-serving.md "LoadGen side").
    ranks = f"{used + fe} ranks (" + (f"{used} on GPUs, {fe} front ends" if fe else "one per GPU") + ")"
    targets = f"{fe} front end{'s' if fe != 1 else ''}" if fe else f"{sum(g[1] for g in groups)} servers"
    return f"{text}; {ranks}; LoadGen on node 0 over its {targets}"
