"""The launcher seam (issue 46 item 1): a typed plan of what runs where, resolved once; launchers in a registry; the
one-VM servers and the per-VM rack as plans over the same launchers, behaving as before; a toy launcher added in one
module runs a plan end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from standin_util import free_port_range, standin_workspace

from repro.core.errors import InputError
from repro.core.recipes import all_recipes, get_recipe
from repro.core.workspace import Workspace
from repro.run import launchers
from repro.run.launchers.layout import Allocation, Group, ServingLayout, place_system, resolve
from repro.run.launchers.local import server_plans
from repro.run.launchers.plan import Instance, LaunchPlan, LoadGenHost, Node, PlanError, Rank
from repro.run.launchers.srun import srun_argv, step_env
from repro.run.servers import ServerOptions, plan_servers

TRTLLM = [r for r in all_recipes() if r.trtllm is not None and not r.reference_only]
ONE_VM = [r for r in TRTLLM if all(d.trtllm is None or d.trtllm.system is None for d in r.deployments())]
"""The recipes whose every scenario is one VM's servers (the DeepSeek-R1 racks are one system: their own tests)."""


@pytest.fixture
def ws(_isolated_home: Path) -> Workspace:
    return Workspace.open(None).ensure()


@pytest.mark.parametrize("recipe", ONE_VM, ids=lambda r: r.name)
def test_one_vm_plan_starts_exactly_the_servers_it_always_did(recipe, ws: Workspace) -> None:
    """Every shipped recipe and scenario: the local launcher's containers are plan_servers' own, field by field."""
    for scenario in ("Offline", "Server", "Interactive"):
        dep = recipe.deployment(scenario)
        for opts in (ServerOptions(), ServerOptions(gpus=False, base_port=41000, listen="0.0.0.0", env={"A": "1"})):
            plan = resolve(dep, ws, Allocation.this_vm(recipe.system.gpus_per_vm), opts)
            assert plan.shape == "one-vm" and len(plan.nodes) == 1 and plan.loadgen[0].node == 0
            got, want = server_plans(plan), plan_servers(dep, ws, opts)
            assert [vars(g) for g in got] == [vars(w) for w in want]
            assert list(plan.endpoints()) == [w.url for w in want]


def test_a_rack_of_vms_is_a_per_vm_plan_each_node_its_own_servers_and_loadgen(ws: Workspace) -> None:
    recipe = get_recipe("nd-gb300-v6")
    plan = resolve(recipe.deployment("Offline"), ws, Allocation.planned(18, 4))
    assert plan.shape == "per-vm" and len(plan.nodes) == 18 and len(plan.loadgen) == 18
    per = recipe.trtllm.servers_per_vm
    for lg in plan.loadgen:  # every LoadGen drives its own node's servers only, at 127.0.0.1
        assert [plan.instance(t).node for t in lg.targets] == [lg.node] * per
        assert all(u.startswith("http://127.0.0.1:") for u in plan.endpoints(lg.node))
    lines = plan.lines()
    assert lines[0].startswith("per-vm: 18 node(s)") and len(lines) == 19
    assert all("LoadGen over" in line for line in lines[1:])
    with pytest.raises(InputError, match="does not run a per-vm plan"):
        launchers.for_plan(plan, "local")


def _gb300(scenario: str, groups: tuple[Group, ...], front_ends: int = 0) -> ServingLayout:
    return ServingLayout("one-system", groups, gpus_per_node=4, base_port=8336, front_ends=front_ends, nodes=18)


def _system(layout: ServingLayout, nodes: int = 18, hosts: tuple[str, ...] | None = None) -> LaunchPlan:
    dep = get_recipe("nd-gb300-v6").deployment("Server")
    argv = ("trtllm-serve", "/models/x", "--host", "127.0.0.1", "--port", "1")
    lay = ServingLayout(
        layout.shape,
        tuple(Group(g.role, g.count, g.gpus, argv) for g in layout.groups),
        layout.gpus_per_node,
        layout.base_port,
        layout.front_ends,
        layout.nodes,
    )
    alloc = Allocation(hosts or tuple(f"gpc{i:02d}" for i in range(nodes)), 4, "77")
    return place_system(dep, None, lay, alloc, ServerOptions())


def test_azure_gb300_server_nine_instances_of_eight_gpus_each_span_two_nodes() -> None:
    plan = _system(_gb300("Server", (Group("server", 9, 8),)))
    assert len(plan.instances) == 9 and plan.gpus == 72 and plan.ranks == 72
    for k, inst in enumerate(plan.instances):
        assert inst.nodes == (2 * k, 2 * k + 1) and inst.tasks_per_node == 4
        assert [r.gpu for r in inst.ranks] == [0, 1, 2, 3, 0, 1, 2, 3]
        assert [r.local_rank for r in inst.ranks] == [0, 1, 2, 3, 0, 1, 2, 3]
        assert inst.port == 8336 + k and inst.argv[inst.argv.index("--host") + 1] == "0.0.0.0"
        assert "NVIDIA_VISIBLE_DEVICES" not in inst.env  # a whole node's GPUs
    assert plan.endpoints() == tuple(f"http://gpc{2 * k:02d}:{8336 + k}" for k in range(9))
    assert plan.loadgen == (LoadGenHost(0, tuple(f"server-{k}" for k in range(9))),)
    argv = srun_argv(plan, plan.instances[1], Path("/r/servers"), job_id="77")
    assert argv[:11] == [
        "srun",
        "--jobid=77",
        "--overlap",
        "--job-name=repro-nd-gb300-v6-server-1",
        "--nodes=2",
        "--ntasks=8",
        "--ntasks-per-node=4",
        "--nodelist=gpc02,gpc03",
        "--mpi=pmi2",
        "--kill-on-bad-exit=1",
        "--unbuffered",
    ]
    assert "--output=/r/servers/server-1/rank-%t.log" in argv
    assert argv[argv.index("trtllm-llmapi-launch") + 1 :][:2] == ["trtllm-serve", "/models/x"]
    assert step_env(plan, plan.instances[1])["TLLM_SPAWN_PROXY_PROCESS_IPC_ADDR"] == "tcp://127.0.0.1:10013"


def test_azure_gb300_offline_eighteen_single_node_instances_share_nothing() -> None:
    plan = _system(_gb300("Offline", (Group("server", 18, 4),)))
    assert [i.nodes for i in plan.instances] == [(k,) for k in range(18)]
    assert all(i.tasks_per_node == 4 for i in plan.instances)
    lines = plan.lines()
    assert lines[1] == "node-00 (gpc00): server server-0 :8336 ranks 0-3 GPUs 0,1,2,3; LoadGen over 18 front end(s)"


def test_instances_smaller_than_a_node_share_it_on_their_own_gpus_ports_and_ipc() -> None:
    plan = _system(_gb300("x", (Group("server", 4, 2),)), nodes=2)
    assert [(i.node, i.gpus) for i in plan.instances] == [(0, (0, 1)), (0, (2, 3)), (1, (0, 1)), (1, (2, 3))]
    assert [i.env["NVIDIA_VISIBLE_DEVICES"] for i in plan.instances] == ["0,1", "2,3", "0,1", "2,3"]
    ipc = [i.env["TLLM_SPAWN_PROXY_PROCESS_IPC_ADDR"] for i in plan.instances]
    assert len(set(ipc)) == 4 and len({i.port for i in plan.instances}) == 4


def test_azure_gb300_interactive_disaggregated_behind_five_front_ends() -> None:
    """2 context x 4 GPUs + 7 generation x 8 GPUs = 64 GPUs on 16 of 18 nodes, 5 front ends (Azure's
    deepseek_config_sflow.yaml), placed as NVIDIA's run_scaleout_disagg.py places them."""
    lay = _gb300("Interactive", (Group("context", 2, 4), Group("generation", 7, 8)), front_ends=5)
    plan = _system(lay)
    gen = [i for i in plan.instances if i.role == "generation"]
    ctx = [i for i in plan.instances if i.role == "context"]
    routers = [i for i in plan.instances if i.role == "router"]
    assert [g.nodes for g in gen] == [(2 * k, 2 * k + 1) for k in range(7)]
    assert [c.nodes for c in ctx] == [(14,), (15,)]
    assert plan.gpus == 64 and plan.gpus_allocated == 72
    assert [r.node for r in routers] == [0, 1, 2, 3, 4] and [r.port for r in routers] == list(range(8345, 8350))
    cfg = routers[0].config
    assert cfg is not None and cfg["context_servers"]["num_instances"] == 2
    assert cfg["context_servers"]["urls"] == ["gpc14:8343", "gpc15:8344"]
    assert cfg["generation_servers"]["urls"] == [f"gpc{2 * k:02d}:{8336 + k}" for k in range(7)]
    assert plan.endpoints() == tuple(f"http://gpc{k:02d}:{8345 + k}" for k in range(5))
    argv = srun_argv(plan, routers[0], Path("/r/servers"), config_path=Path("/r/servers/router-0/disagg_config.yaml"))
    assert "--mpi=pmi2" not in argv and "trtllm-llmapi-launch" not in argv
    assert argv[-8:] == [
        "trtllm-serve",
        "disaggregated",
        "--config_file",
        "/r/servers/router-0/disagg_config.yaml",
        "--server_start_timeout",
        "7200",
        "--request_timeout",
        "7200",
    ]


def test_too_few_nodes_is_one_error_naming_the_node_count() -> None:
    with pytest.raises(InputError, match="9 server x 8 GPUs = 72 GPUs, 18 nodes of 4; the allocation has 4"):
        _system(_gb300("Server", (Group("server", 9, 8),)), nodes=4)


def test_a_rehearsal_host_standing_for_several_nodes_gets_one_srun_node() -> None:
    plan = _system(_gb300("Server", (Group("server", 2, 8),)), nodes=4, hosts=("vm",) * 4)
    argv = srun_argv(plan, plan.instances[0], Path("/r"))
    assert "--nodes=1" in argv and "--nodelist=vm" in argv and "--ntasks-per-node=8" in argv and "--ntasks=8" in argv


def test_a_plan_that_cannot_run_is_refused_when_built() -> None:
    def inst(name: str, port: int, gpu: int) -> Instance:
        return Instance(name, "server", 0, (Rank(0, 0, 0, gpu, f"{name}.log"),), port, ("x",))

    nodes = (Node(0, "h", 4),)
    with pytest.raises(PlanError, match="both listen on port 9"):
        LaunchPlan("one-system", "r", "Offline", nodes, (inst("a", 9, 0), inst("b", 9, 1)), ())
    with pytest.raises(PlanError, match="GPU 1 of node-00 is given to a rank 0 and b rank 0"):
        LaunchPlan("one-system", "r", "Offline", nodes, (inst("a", 9, 1), inst("b", 10, 1)), ())
    with pytest.raises(PlanError, match="GPU 7 is not on node-00"):
        LaunchPlan("one-system", "r", "Offline", nodes, (inst("a", 9, 7),), ())
    with pytest.raises(PlanError, match="not instances"):
        LaunchPlan("one-system", "r", "Offline", nodes, (inst("a", 9, 0),), (LoadGenHost(0, ("zz",)),))


def test_the_registry_is_what_launcher_choices_and_checks_read() -> None:
    assert launchers.names() == ("local", "slurm")
    assert launchers.launcher_spec("slurm").spans_nodes and not launchers.launcher_spec("local").spans_nodes
    with pytest.raises(InputError, match="choose one of local, slurm"):
        launchers.launcher_spec("k8s")


def test_a_toy_launcher_in_one_module_runs_a_plan(tmp_path: Path, _isolated_home: Path) -> None:
    """tests/toy_launcher.py is the whole launcher: registered, it is a --launcher choice and carries a real run
    (LoadGen against the stand-in servers it started as plain processes) from plan to run.json."""
    from repro.run.harness import run_benchmark
    from repro.run.options import RunOptions

    spec = launchers.register("toy_launcher")
    try:
        assert "toy" in launchers.names() and spec.shapes == ("one-vm",)
        ws = standin_workspace("nd-h100-v5")
        opts = ServerOptions(gpus=False, base_port=free_port_range(8), ready_timeout_s=60)
        out = run_benchmark(
            RunOptions.build("nd-h100-v5", ws, launcher="toy", servers=opts, samples=16, duration_s=1, detect=False)
        )
        record = json.loads((Path(out.details["log_dir"]) / "run.json").read_text())
        assert record["status"] == "complete"
        n = get_recipe("nd-h100-v5").trtllm.servers_per_vm
        assert record["servers"]["launcher"] == "toy" and len(record["servers"]["servers"]) == n
        assert record["backend_details"]["endpoints"] == [f"http://127.0.0.1:{opts.base_port + i}" for i in range(n)]
        with pytest.raises(InputError, match="does not run a per-vm plan"):
            plan = resolve(get_recipe("nd-h100-v5").deployment("Offline"), ws, Allocation.planned(2, 8), opts)
            launchers.for_plan(plan, "toy")
    finally:
        launchers.unregister("toy")
    assert "toy" not in launchers.names()


def _system_recipe(tmp_path: Path, name: str = "gb300-system", **system) -> Path:
    """nd-gb300-v6 as a one-system recipe: trtllm.system per scenario (a test's copy; the DeepSeek-R1 racks are
    the shipped ones)."""
    import yaml

    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes" / "nd-gb300-v6.yaml").read_text())
    doc["name"] = name
    doc["trtllm"]["tp_size"] = 8
    doc["trtllm"]["system"] = {"nodes": 4, "instances": 2, "source": "test", **system}
    doc["disk_needed_gb"] = 500
    doc["scenarios"] = {
        "Interactive": {
            "source": "test",
            "trtllm": {
                "system": {
                    "instances": None,
                    "context": {"instances": 1, "tp_size": 4, "serve_extra_options": {"max_batch_size": 128}},
                    "generation": {"instances": 1, "tp_size": 8, "ep_size": 8},
                    "front_ends": 2,
                }
            },
        }
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_recipe_states_one_system_per_scenario_and_resolve_places_it(tmp_path: Path, ws: Workspace) -> None:
    from repro.core.recipes import load_recipe_file

    recipe = load_recipe_file(_system_recipe(tmp_path))
    server = resolve(recipe.deployment("Server"), ws, Allocation(tuple(f"n{i}" for i in range(4)), 4, "5"))
    assert server.shape == "one-system" and [i.nodes for i in server.instances] == [(0, 1), (2, 3)]
    argv = server.instances[1].argv
    assert argv[0] == "trtllm-serve" and argv[argv.index("--port") + 1] == "30001"
    assert argv[argv.index("--tp_size") + 1] == "8"
    inter = resolve(recipe.deployment("Interactive"), ws, Allocation.planned(4, 4))
    roles = [(i.name, i.role, i.nodes) for i in inter.instances]
    assert roles == [
        ("gen-0", "generation", (0, 1)),
        ("ctx-0", "context", (2,)),
        ("router-0", "router", (0,)),
        ("router-1", "router", (1,)),
    ]
    ctx = inter.instance("ctx-0")
    assert ctx.argv[ctx.argv.index("--tp_size") + 1] == "4"
    assert ctx.argv[ctx.argv.index("--extra_llm_api_options") + 1] == "ctx-0/extra_llm_api_options.yaml"
    assert ctx.config is not None and ctx.config["max_batch_size"] == 128
    assert ctx.config["kv_cache_config"]["enable_block_reuse"] is False  # the deployment's options, merged
    gen = inter.instance("gen-0")
    assert gen.argv[gen.argv.index("--ep_size") + 1] == "8"
    assert inter.endpoints() == ("http://node-00:30002", "http://node-01:30003")


@pytest.mark.parametrize(
    ("system", "error"),
    [
        ({"instances": 5}, "its servers need 40 GPUs; 4 nodes of 4 have 16"),
        ({"instances": None}, "give either instances"),
        ({"front_ends": 1}, "aggregated servers none"),
    ],
)
def test_a_system_that_does_not_fit_its_nodes_is_refused_at_load(tmp_path: Path, system, error) -> None:
    from repro.core.errors import RecipeError
    from repro.core.recipes import load_recipe_file

    with pytest.raises(RecipeError, match=error):
        load_recipe_file(_system_recipe(tmp_path, **system))


def test_recipes_without_a_system_keep_their_hash() -> None:
    import hashlib

    for recipe in all_recipes():
        if recipe not in ONE_VM and recipe.trtllm is not None and not recipe.reference_only:
            continue  # a recipe with a system layout hashes it
        doc = recipe.model_dump(mode="json")
        if doc.get("trtllm"):
            assert doc["trtllm"].pop("system") is None
        for key in ("scenarios", "published_host", "known_differences", "waive_rules"):
            if doc.get(key) in (None, {}, []):
                doc.pop(key, None)
        for pub in (doc["published"], *doc["published_scenarios"]):
            if pub.get("engine") is None:
                pub.pop("engine", None)
        assert recipe.hash() == hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def test_system_dry_run_shows_every_node_its_servers_ranks_and_the_loadgen_node(tmp_path: Path, ws: Workspace) -> None:
    from helpers import cli

    recipe = _system_recipe(tmp_path)
    res = cli("run", "interactive", "--recipe", str(recipe), "--launcher", "slurm", "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["shape"] == "one-system" and doc["scenario"] == "Interactive" and doc["nodes"] == 4
    assert doc["plan_lines"][1] == (
        "node-00: generation server gen-0 :30000 ranks 0-3 GPUs 0,1,2,3 (spans node-00, node-01); front end "
        "router-0 :30002 rank 0; LoadGen over 2 front end(s)"
    )
    steps = {s["instance"]: s["argv"] for s in doc["steps"]}
    assert set(steps) == {"gen-0", "ctx-0", "router-0", "router-1"}
    assert "--ntasks=8" in steps["gen-0"] and "--ntasks=4" in steps["ctx-0"] and "--ntasks=1" in steps["router-0"]
    assert any(a.startswith("--container-image=") and a.endswith(".sqsh") for a in steps["gen-0"])
    assert doc["image_source"] == "enroot" and doc["submit_command"][-1].endswith("system.sbatch")
    assert "--inside-job" in doc["script"] and "#SBATCH --nodes=4" in doc["script"]
    assert not list((ws.root / "racks").glob("*/*"))  # a dry run writes nothing
    text = cli("run", "interactive", "--recipe", str(recipe), "--launcher", "slurm", "--dry-run")
    assert "LoadGen over 2 front end(s)" in text.stdout and "trtllm-serve disaggregated" in text.stdout


def test_host_image_source_runs_a_systems_ranks_on_the_nodes_hosts(tmp_path: Path, ws: Workspace) -> None:
    from repro.run.rack_system import plan_system, render_system_script

    plan = plan_system(str(_system_recipe(tmp_path)), ws, "Server", 4, image_source="host", slurm_nodes=1)
    assert plan.launch is not None and plan.launch.image is None and plan.server_image is None
    argv = srun_argv(plan.launch, plan.launch.instances[0], Path("/r"))
    assert not any(a.startswith("--container") for a in argv)
    model = argv[argv.index("trtllm-serve") + 1]
    assert model.startswith(str(ws.root) + "/engines/"), model  # the container's /workspace is the host's workspace
    script = render_system_script(plan)
    assert "#SBATCH --nodes=1" in script and "--server-image" not in script
    with pytest.raises(InputError, match="without a container image"):
        plan_system(str(_system_recipe(tmp_path)), ws, "Server", 4, image_source="host", container_image="x:y")


def test_a_one_vm_recipe_is_a_rack_of_vms_for_offline_only(ws: Workspace) -> None:
    from helpers import cli

    res = cli("run", "server", "--recipe", "nd-gb300-v6", "--launcher", "slurm", "--dry-run")
    assert res.exit_code == 2 and "a rack of one-VM runs is Offline" in res.output
    offline = cli("run", "offline", "--recipe", "nd-gb300-v6", "--launcher", "slurm", "--nodes", "2", "--dry-run")
    assert offline.exit_code == 0 and "vm-NN" in offline.stdout


def test_the_node_check_names_each_node_that_fails(tmp_path: Path) -> None:
    from repro.run.launchers.preflight import TOKEN_DIR, judge

    (tmp_path / TOKEN_DIR).mkdir()
    for host in ("a", "b", "c"):
        (tmp_path / TOKEN_DIR / f"{host}.token").write_text("T" if host != "c" else "stale")

    def answer(host: str, **kw) -> dict:
        base = {"host": host, "gpus": 4, "image": {"kind": "squashfs", "sha256": "sha256:aa"}, "clock": 100.5}
        return base | {"storage": {"token": "written", "workspace": "present"}} | kw

    answers = [
        answer("a"),
        answer("b", clock=90.0, image={"kind": "squashfs", "sha256": "sha256:bb"}),
        answer("c", gpus=2, storage={"token": "written", "workspace": "missing: /ws"}),
    ]
    pf = judge(answers, ["a", "b", "c", "d"], {"a": 4, "b": 4, "c": 4}, "T", tmp_path, 100.0, 101.0)
    assert pf.problems == [
        "b: its clock is -10.0 s off node 0's (more than 2 s)",
        "c: 2 GPUs (nvidia-smi -L), the plan puts 4 there",
        f"c: wrote into {tmp_path}, which node 0 does not see (not shared storage)",
        "c: the shared workspace folder is missing: /ws",
        "d: no answer from the node's check (it did not run there)",
        "the nodes read different server images: a sha256:aa, b sha256:bb, c sha256:aa",
    ]
    assert pf.image_digests() == {"a": "sha256:aa", "b": "sha256:bb", "c": "sha256:aa"}


def test_a_system_on_one_vm_is_refused_naming_the_slurm_command(tmp_path: Path, ws: Workspace) -> None:
    from helpers import cli

    res = cli("run", "server", "--recipe", str(_system_recipe(tmp_path)), "--dry-run")
    assert res.exit_code == 2
    assert "gb300-system Server is one system of 4 nodes (2 server x 8 GPUs, 16 GPUs)" in res.output
    assert "--launcher slurm" in res.output


def test_a_systems_stall_window_counts_its_servers(tmp_path: Path) -> None:
    """The Offline rate of a system is the whole system's: the stall window spreads it over its instances."""
    from repro.core.recipes import load_recipe_file
    from repro.run.backends.trtllm import stall_timeout_s

    path = _system_recipe(tmp_path, instances=2)
    path.write_text(path.read_text().replace("offline_expected_qps: 400", "offline_expected_qps: 10"))
    recipe = load_recipe_file(path)
    assert recipe.trtllm.servers_per_vm == 4 and recipe.loadgen.offline_expected_qps == 10
    mean = float(recipe.bench.accuracy.tokens_per_sample.reference)
    want = 2.0 * 2048 * 2 / 10 * max(1.0, recipe.loadgen.max_tokens / mean)  # 2 servers, not a VM's 4
    assert want > 600 and stall_timeout_s(recipe) == float(round(want))
