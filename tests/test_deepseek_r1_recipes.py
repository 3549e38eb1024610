"""Issue 45 item 5: the recipes of Azure's DeepSeek-R1 rack systems, read from Azure's v6.1 configs
(intel-ai-tce/inference_results_v6.1 @ 5174fca8 closed/Azure/configs/deepseek_r1/): one per published system
(GB300 NVL72 x72, GB200 NVL72 x72 and x288), every scenario's layout as published, the figures the index holds, and
`repro recipes show` / `build-engine --dry-run` / `explain` telling the whole plan, GB300 Interactive's 64 of 72 GPUs
included."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from golden_util import check_golden
from helpers import cli

from repro.core.errors import RecipeError
from repro.core.published import load_index, reference_row
from repro.core.recipes import get_recipe, load_recipe_file
from repro.core.serving import gpus_served
from repro.results.verify import verify_dir

ROOT = Path(__file__).resolve().parents[1]
AZURE = ROOT / "tests" / "fixtures" / "published" / "v6.1_Azure_deepseek-r1" / "closed" / "Azure" / "results"
LAYOUTS = {  # (recipe, scenario) -> (nodes, [(role, instances, tp, ep)], front ends), as Azure's configs state them
    ("nd-gb300-v6-dsr1", "Offline"): (18, [("server", 18, 4, 4)], 0),
    ("nd-gb300-v6-dsr1", "Server"): (18, [("server", 9, 8, 8)], 0),
    ("nd-gb300-v6-dsr1", "Interactive"): (18, [("context", 2, 4, 4), ("generation", 7, 8, 8)], 5),
    ("nd-gb200-v6-dsr1", "Offline"): (18, [("server", 9, 8, 8)], 0),
    ("nd-gb200-v6-dsr1", "Server"): (18, [("server", 9, 8, 8)], 0),
    ("nd-gb200-v6-dsr1-x288", "Offline"): (72, [("server", 36, 8, 8)], 0),
    ("nd-gb200-v6-dsr1-x288", "Server"): (72, [("server", 36, 8, 8)], 0),
}
SYSTEMS = {
    "nd-gb300-v6-dsr1": "Azure-GB300-NVL72_288GBx72",
    "nd-gb200-v6-dsr1": "Azure-GB200-NVL72_186GBx72",
    "nd-gb200-v6-dsr1-x288": "Azure-GB200-NVL72_186GBx288",
}


@pytest.mark.parametrize(("name", "scenario"), sorted(LAYOUTS))
def test_each_scenario_serves_as_published(name: str, scenario: str) -> None:
    recipe = get_recipe(name)
    assert recipe.benchmark == "deepseek-r1" and recipe.precision == "nvfp4" and recipe.system.gpus_per_vm == 4
    dep = recipe.deployment(scenario)
    assert dep.trtllm is not None and dep.trtllm.system is not None
    nodes, roles, front_ends = LAYOUTS[(name, scenario)]
    system = dep.trtllm.system
    assert (system.nodes, system.front_ends) == (nodes, front_ends)
    if system.instances is not None:
        ep = dep.trtllm.serve_extra_options["moe_expert_parallel_size"]
        got = [("server", system.instances, dep.trtllm.tp_size, ep)]
    else:
        got = [
            (r, getattr(system, r).instances, getattr(system, r).tp_size, getattr(system, r).ep_size)
            for r in ("context", "generation")
        ]
    assert got == roles
    assert dep.trtllm.serve_extra_options["kv_cache_config"]["enable_block_reuse"] is False


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_every_published_figure_is_the_index_row(name: str) -> None:
    """Per GPU over the system's accelerators as its system JSON counts them (72 or 288), per node over its nodes,
    exactly the index's row, for every scenario the system published."""
    recipe = get_recipe(name)
    published = [recipe.published, *recipe.published_scenarios]
    assert [p.scenario for p in published] == (
        ["Offline", "Server", "Interactive"] if "gb300" in name else ["Offline", "Server"]
    )
    for pub in published:
        row = reference_row(pub.result_id or "", "deepseek-r1", pub.scenario)
        assert row is not None and row.system_folder == SYSTEMS[name], (name, pub.scenario)
        assert pub.tokens_per_s_per_gpu == pytest.approx(row.per_accelerator, rel=1e-12)
        assert pub.tokens_per_s_per_vm == pytest.approx(row.per_node, rel=1e-12)
        assert row.total_accelerators == gpus_served(recipe.deployment(pub.scenario))[1]


def test_x288_is_its_own_system_and_recipe() -> None:
    """Four racks as one system: a recipe of its own, since its figures, rates and configs are its own; the x72
    recipe never judges it."""
    x72, x288 = get_recipe("nd-gb200-v6-dsr1"), get_recipe("nd-gb200-v6-dsr1-x288")
    assert (x72.loadgen.offline_expected_qps, x288.loadgen.offline_expected_qps) == (120, 480)
    assert (x72.loadgen.server.target_qps, x288.loadgen.server.target_qps) == (120, 470)
    run = AZURE / "Azure-GB200-NVL72_186GBx288" / "deepseek-r1" / "Offline"
    assert verify_dir(run, recipe="nd-gb200-v6-dsr1-x288").status == "PASS"
    v = verify_dir(run, recipe="nd-gb200-v6-dsr1")
    assert v.status == "NOT A REPRODUCTION"
    assert "is not recipe nd-gb200-v6-dsr1's (18 nodes, 72 GPUs)" in v.reasons[0]


@pytest.mark.parametrize(("name", "scenario"), [(n, s) for n, s in sorted(LAYOUTS)])
def test_azures_folders_pass_against_their_recipe(name: str, scenario: str) -> None:
    v = verify_dir(AZURE / SYSTEMS[name] / "deepseek-r1" / scenario, recipe=name)
    assert v.status == "PASS" and v.recipe is not None and v.recipe.name == name, v.reasons
    assert v.gpus == (288 if "x288" in name else 72) and abs(v.deviation_pct or 0.0) < 1e-9


PUBLISHED = [(n, s) for n, s in sorted(LAYOUTS) if not (n != "nd-gb300-v6-dsr1" and s == "Interactive")]
"""The seven published results a user names: (recipe, scenario)."""
PLACED = {  # (recipe, scenario) -> nodes, nodes serving, instances by role, ranks, LoadGen targets (front ends)
    ("nd-gb300-v6-dsr1", "Offline"): (18, 18, {"server": 18}, 72, 18),
    ("nd-gb300-v6-dsr1", "Server"): (18, 18, {"server": 9}, 72, 9),
    ("nd-gb300-v6-dsr1", "Interactive"): (18, 16, {"generation": 7, "context": 2, "router": 5}, 69, 5),
    ("nd-gb200-v6-dsr1", "Offline"): (18, 18, {"server": 9}, 72, 9),
    ("nd-gb200-v6-dsr1", "Server"): (18, 18, {"server": 9}, 72, 9),
    ("nd-gb200-v6-dsr1-x288", "Offline"): (72, 72, {"server": 36}, 288, 36),
    ("nd-gb200-v6-dsr1-x288", "Server"): (72, 72, {"server": 36}, 288, 36),
}


def _stable(text: str, home: Path) -> str:
    """The output with what varies by machine and minute replaced: the workspace, the checkout, the run folder's
    timestamp and the image's content tag."""
    text = text.replace(str(home), "<ws>").replace(str(ROOT), "<repo>")
    text = re.sub(r"/\d{8}-\d{6}(?=/|\b)", "/<stamp>", text)
    return re.sub(r"(nd-gb[0-9]+-v6-dsr1(?:-x288)?)-[0-9a-f]{12}\b", r"\1-<tag>", text)


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_recipes_show_at_80_columns_tells_every_scenarios_plan(name: str) -> None:
    """The serving block `repro recipes show` prints above the recipe, at 80 columns: every scenario's layout
    (instances, GPUs, TP/EP, nodes, ranks, front ends, the LoadGen host), its published figure and band, and for
    GB300 Interactive the 64 of 72 GPUs it served from while per GPU is over the 72."""
    res = cli("recipes", "show", name, env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    header = []
    for line in res.output.splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    check_golden(f"dsr1/{name}-show.txt", "\n".join(header[1:]) + "\n")  # [0]: title and hash


def test_recipes_show_json_is_the_launchers_placement() -> None:
    """--json: each published scenario's nodes, instances by role, ranks and LoadGen host are the launcher's own
    placement on the system's nodes, and the figures are the recipe's."""
    for (name, scenario), (nodes, serving, roles, ranks, targets) in PLACED.items():
        doc = json.loads(cli("recipes", "show", name, "--json").stdout)
        row = next(s for s in doc["serving"] if s["scenario"] == scenario)
        assert row["shape"] == "one-system" and row["loadgen_node"] == "node-00", (name, scenario)
        assert (row["nodes"], row["nodes_serving"], row["instances"], row["ranks"], row["loadgen_targets"]) == (
            nodes,
            serving,
            roles,
            ranks,
            targets,
        ), (name, scenario)
        pub = get_recipe(name).published_for(scenario)
        assert pub is not None and row["published_tokens_per_s_per_gpu"] == pub.tokens_per_s_per_gpu
        assert row["published_band_tokens_per_s_per_gpu"] == list(pub.band() or ())
        served = row["published_tokens_per_s_per_gpu_served"]
        if (name, scenario) == ("nd-gb300-v6-dsr1", "Interactive"):
            assert (row["gpus_served"], row["system_gpus"]) == (64, 72)
            assert served == pytest.approx(260098.15 / 64, rel=1e-6)
        else:
            assert served is None and row["gpus_served"] == row["system_gpus"]
    gb200 = json.loads(cli("recipes", "show", "nd-gb200-v6-dsr1", "--json").stdout)
    inter = next(s for s in gb200["serving"] if s["scenario"] == "Interactive")
    assert inter["published_tokens_per_s_per_gpu"] is None


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_build_engine_dry_run_tells_the_whole_plan(name: str, tmp_path: Path) -> None:
    """`build-engine --dry-run` at 80 columns: what it builds, every scenario's layout and which build it serves
    from, and where each node's servers are listed."""
    res = cli("build-engine", "--recipe", name, "--dry-run", env={"REPRO_HOME": str(tmp_path), "COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    plan = [
        ln
        for ln in lines
        if ln.startswith("# ")
        and not ln.startswith("#   ")
        or ln.startswith("#   ")
        and (ln[4:].split(":")[0] in ("Offline", "Server", "Interactive"))
    ]
    check_golden(f"dsr1/{name}-build.txt", _stable("\n".join([lines[0], *plan]) + "\n", tmp_path))
    assert not any(tmp_path.iterdir()), "a dry run wrote into the workspace"
    doc = json.loads(
        cli("build-engine", "--recipe", name, "--dry-run", "--json", env={"REPRO_HOME": str(tmp_path)}).stdout
    )
    assert doc["status"] == "dry-run" and "hf-quantize" in json.dumps(doc) and "--calib_size=500" in json.dumps(doc)


def test_build_engine_dry_run_of_disaggregated_interactive_names_its_roles(tmp_path: Path) -> None:
    """GB300 Interactive's build is the checkpoint its context (TP4) and generation (TP8) servers load: its dry run
    says so, and points at the run's dry run for each role's command, never one aggregated server's."""
    env = {"REPRO_HOME": str(tmp_path), "COLUMNS": "80"}
    res = cli("build-engine", "--recipe", "nd-gb300-v6-dsr1", "--scenario", "Interactive", "--dry-run", env=env)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    shown = [lines[0], *(ln for ln in lines if ln.startswith("# ") and not ln.startswith("#   "))]
    check_golden("dsr1/nd-gb300-v6-dsr1-interactive-build.txt", _stable("\n".join(shown) + "\n", tmp_path))
    assert not any(ln.startswith("CUDA_VISIBLE_DEVICES=") for ln in lines), "an aggregated server's command"


@pytest.mark.parametrize(("name", "scenario"), PUBLISHED)
def test_run_dry_run_at_80_columns_tells_every_node(name: str, scenario: str, tmp_path: Path) -> None:
    """`repro run SCENARIO --recipe R --launcher slurm --dry-run` for each of the seven published results, at 80
    columns: the job, every node's servers and ranks with their GPUs and ports, the LoadGen host, and the first srun
    step of each role (the rest differ in name, nodes and port); --json carries the same plan."""
    env = {"REPRO_HOME": str(tmp_path), "COLUMNS": "80"}
    args = ("run", scenario.lower(), "--recipe", name, "--launcher", "slurm", "--dry-run")
    res = cli(*args, env=env)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("#!/bin/bash"))
    shown, seen = [], set()
    for ln in lines[:cut]:
        step = re.match(r"  ([a-z]+)-(\d+): srun ", ln)
        if step and (step.group(1) in seen or step.group(2) != "0"):
            continue
        if step:
            seen.add(step.group(1))
        shown.append(ln)
    shown += [ln for ln in lines[cut:] if ln.startswith("#SBATCH")]
    check_golden(f"dsr1/{name}-{scenario.lower()}-run.txt", _stable("\n".join(shown) + "\n", tmp_path))
    doc = json.loads(cli(*args, "--json", env=env).stdout)
    plan = doc["plan"]
    assert doc["shape"] == "one-system" and doc["scenario"] == scenario and doc["nodes"] == LAYOUTS[(name, scenario)][0]
    assert [ln.strip() for ln in doc["plan_lines"]] == [ln.strip() for ln in lines[3 : 3 + len(doc["plan_lines"])]]
    nodes, _, roles, ranks, targets = PLACED[(name, scenario)]
    assert (len(plan["nodes"]), plan["ranks"], len(plan["loadgen"][0]["targets"])) == (nodes, ranks, targets)
    assert plan["loadgen"][0]["node"] == "node-00" and plan["mpi"] == "pmi2"
    assert len(doc["steps"]) == sum(roles.values())


def test_explain_says_interactive_is_served_from_64_of_72(tmp_path: Path) -> None:
    res = cli(
        "explain",
        str(AZURE / "Azure-GB300-NVL72_288GBx72" / "deepseek-r1" / "Interactive"),
        "--recipe",
        "nd-gb300-v6-dsr1",
    )
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "recipe nd-gb300-v6-dsr1 serves Interactive with" in text and "64 of the system's 72 GPUs" in text
    assert "per GPU is over all 72, as MLPerf counts" in text


def test_a_roles_own_serve_options_are_held_to_mlperfs_rules(tmp_path: Path) -> None:
    """KV-cache block reuse turned on in the generation servers' own options is refused at load, naming the role;
    the MTP speculative decoding both roles use is allowed because MLPerf allows it for DeepSeek-R1 Interactive only,
    and refused in Server."""
    doc = yaml.safe_load((ROOT / "recipes" / "nd-gb300-v6-dsr1.yaml").read_text())
    gen = doc["scenarios"]["Interactive"]["trtllm"]["system"]["generation"]["serve_extra_options"]
    gen["kv_cache_config"]["enable_block_reuse"] = True
    bad = tmp_path / "reuse.yaml"
    bad.write_text(yaml.safe_dump({**doc, "name": "reuse"}, sort_keys=False))
    with pytest.raises(RecipeError, match=r"trtllm\.system\.generation\.serve_extra_options\.kv_cache_config"):
        load_recipe_file(bad)
    doc = yaml.safe_load((ROOT / "recipes" / "nd-gb300-v6-dsr1.yaml").read_text())
    doc["scenarios"]["Server"]["trtllm"]["serve_extra_options"]["speculative_config"] = {"decoding_type": "MTP"}
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**doc, "name": "spec"}, sort_keys=False))
    with pytest.raises(RecipeError, match="no-speculative-decoding"):
        load_recipe_file(spec)
    assert load_recipe_file(ROOT / "recipes" / "nd-gb300-v6-dsr1.yaml").deployment("Interactive").trtllm is not None


def test_the_index_names_each_recipes_system() -> None:
    idx = load_index()
    for name, folder in SYSTEMS.items():
        rows = idx.resolve(get_recipe(name).published.result_id or "")
        assert {r.system_folder for r in rows} == {folder} and {r.benchmark for r in rows} == {"deepseek-r1"}


def test_a_scenarios_own_build_takes_the_base_checkpoint_it_shares(tmp_path: Path) -> None:
    """DeepSeek-R1 Server and Interactive serve the base's NVFP4 checkpoint with their own options: where the base
    build's prepare-calib and quantize ran the very same command and their outputs still verify, a scenario's own
    build takes them (no second quantization of 671 B parameters into the same folder); an output that changed, or a
    command of its own (405B Server's TP4 checkpoint), is run again."""
    from repro.core.ledger import Artifact, Ledger
    from repro.core.workspace import Workspace
    from repro.engine.plan import _hash, plan_build, shared_step

    ws = Workspace.open(tmp_path / "ws").ensure()
    ledger = Ledger.load(ws.ledger_path)
    digest = "sha256:" + "0" * 64
    recipe = get_recipe("nd-gb300-v6-dsr1")
    base, server, inter = (plan_build(d, ws) for d in recipe.deployments())
    assert (base.step, server.step, inter.step) == ("build-engine", "build-engine-server", "build-engine-interactive")
    for step in base.steps:
        for out in step.outputs:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(f"{step.name} output")
        key = f"build-engine.{step.name}"
        ledger.start(
            key, _hash(base.deployment.build_hash(), recipe.model.revision, digest, step.argv), command=step.argv
        )
        ledger.finish(key, [Artifact.of(p) for p in step.outputs])
    for plan in (server, inter):
        for step, mine in zip(base.steps, plan.steps, strict=True):
            got = shared_step(plan, Ledger.load(ws.ledger_path), mine, digest)
            assert got is not None and [a.path for a in got] == [str(p) for p in step.outputs], (plan.step, step.name)
    assert shared_step(server, ledger, server.steps[1], "sha256:" + "1" * 64) is None, "another image"
    base.steps[1].outputs[0].write_text("changed")
    assert shared_step(server, Ledger.load(ws.ledger_path), server.steps[1], digest) is None, "an output changed"
    assert shared_step(server, Ledger.load(ws.ledger_path), server.steps[0], digest) is not None

    llama = get_recipe("nd-gb200-v6-405b")
    b405, s405 = (plan_build(d, ws) for d in llama.deployments())
    step = b405.steps[1]
    ledger.start(
        "build-engine.quantize",
        _hash(b405.deployment.build_hash(), llama.model.revision, digest, step.argv),
        command=step.argv,
    )
    ledger.finish("build-engine.quantize", [])
    assert s405.steps[1].argv != step.argv and shared_step(s405, ledger, s405.steps[1], digest) is None
