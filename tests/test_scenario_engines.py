"""A scenario with its own engine: 405B Server as published (TP4xPP1, max_num_tokens 2,048 at build and runtime, its
own checkpoint, 470 GB more disk; mlcommons/inference_results_v5.1 closed/Azure/configs/ND_GB200_v6/Server/
llama3_1-405b.py:20-21,29,44), resolved once into a Deployment that build-engine, run, doctor and the guide take.
Every command here is the real CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import cli, cli_process, one_line_error

from repro.core.ledger import Ledger
from repro.core.recipes import get_recipe, load_recipe_file, recipes_dir
from repro.core.workspace import Workspace
from repro.engine import quantize as q
from repro.flow.doctor import check_disk
from repro.flow.status import build_status

R405 = "nd-gb200-v6-405b"


def _copy(tmp_path: Path, edit: Any, name: str = R405) -> Path:
    raw = yaml.safe_load((recipes_dir() / f"{name}.yaml").read_text())
    raw["name"] = f"copy-{name}"
    edit(raw)
    path = tmp_path / f"copy-{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_the_405b_server_deployment_is_the_published_one() -> None:
    recipe = get_recipe(R405)
    offline, server, interactive = (recipe.deployment(s) for s in ("Offline", "Server", "Interactive"))
    assert not offline.own and not interactive.own and server.own
    assert offline.layout is not None and server.layout is not None
    assert (offline.layout.tp_size, offline.layout.pp_size, offline.layout.max_num_tokens) == (2, 2, 1536)
    assert (server.layout.tp_size, server.layout.pp_size, server.layout.max_num_tokens) == (4, 1, 2048)
    assert server.layout.text() == "TP4xPP1, max_num_tokens 2,048"
    assert server.trtllm is not None and server.trtllm.build_flags["max_num_tokens"] == 2048
    # every other build flag is the Offline config's (the published Server config lists the same ones)
    assert offline.trtllm is not None
    assert {k: v for k, v in server.trtllm.build_flags.items() if k != "max_num_tokens"} == {
        k: v for k, v in offline.trtllm.build_flags.items() if k != "max_num_tokens"
    }
    assert server.quantization.output_name == "llama3.1-405b-instruct-hf-tp4pp1-fp4"
    assert server.source is not None and "Server/llama3_1-405b.py:20-21,29,44" in server.source
    # the recipe's published layouts match what it runs, scenario by scenario
    for scenario in ("Offline", "Server"):
        pub = recipe.published_for(scenario)
        assert pub is not None and pub.engine is not None
        assert recipe.deployment(scenario).layout.differences(pub.engine) == []  # type: ignore[union-attr]
    # each engine in its own folder, beside its own serve config; the checkpoints apart too
    po, ps = q.paths_for(offline), q.paths_for(server)
    assert str(ps.engine_dir).endswith("/Server/llama3_1-405b/gpu-fp4-b2048-tp4-pp1")
    assert str(po.engine_dir).endswith("/Offline/llama3_1-405b/gpu-fp4-b2048-tp2-pp2")
    assert ps.checkpoint_dir != po.checkpoint_dir and ps.serve_config != po.serve_config
    assert recipe.disk_needed_gb == 1870 and recipe.scenarios["Server"].disk_gb == 470


def test_build_engine_dry_run_for_server_shows_tp4_pp1_and_2048() -> None:
    res = cli("build-engine", "--recipe", R405, "--scenario", "server", "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["step"] == "build-engine-server" and doc["status"] == "dry-run"
    details = doc["details"]
    assert details["engine_layout"] == "TP4xPP1, max_num_tokens 2,048" and details["scenario"] == "Server"
    quantize, engine = (s["command"] for s in details["steps"] if s["name"] in ("quantize", "engine"))
    assert "--tp_size=4" in quantize and "--pp_size=1" in quantize
    assert "--max_num_tokens=2048" in engine
    assert any(a.endswith("/Server/llama3_1-405b/gpu-fp4-b2048-tp4-pp1") for a in engine)
    (serve,) = details["serve"]
    argv = serve["argv"]
    assert argv[argv.index("--tp_size") + 1] == "4" and argv[argv.index("--pp_size") + 1] == "1"
    assert argv[argv.index("--max_num_tokens") + 1] == "2048"
    text = cli("build-engine", "--recipe", R405, "--scenario", "Server", "--dry-run").stdout
    assert "TP4xPP1, max_num_tokens 2,048" in text and "# serve (started by `repro run server`)" in text
    # without --scenario: the base engine, as before
    base = json.loads(cli("build-engine", "--recipe", R405, "--dry-run", "--json").stdout)
    assert base["step"] == "build-engine" and base["details"]["engine_layout"] == "TP2xPP2, max_num_tokens 1,536"


def test_run_server_dry_run_serves_the_server_engine() -> None:
    res = cli("run", "server", "--recipe", R405, "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    details = json.loads(res.stdout)["details"]
    assert details["engine"]["layout"] == "TP4xPP1, max_num_tokens 2,048"
    assert details["engine"]["build"] == f"repro build-engine --recipe {R405} --scenario Server"
    (server,) = details["servers"]
    argv = server["command"]
    assert argv[argv.index("--tp_size") + 1] == "4" and argv[argv.index("--max_num_tokens") + 1] == "2048"
    assert any("/Server/llama3_1-405b/gpu-fp4-b2048-tp4-pp1" in a for a in argv)
    offline = json.loads(cli("run", "offline", "--recipe", R405, "--dry-run", "--json").stdout)["details"]
    assert offline["engine"]["layout"] == "TP2xPP2, max_num_tokens 1,536"
    interactive = json.loads(cli("run", "interactive", "--recipe", R405, "--dry-run", "--json").stdout)["details"]
    assert interactive["engine"]["layout"] == offline["engine"]["layout"]  # no Interactive engine of its own


def test_run_server_without_its_engine_names_the_build_command_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "repro-home"
    err = one_line_error(cli_process("run", "server", "--recipe", R405))
    assert "Server's own engine (TP4xPP1, max_num_tokens 2,048) is not built" in err
    assert "not serve Server from the Offline engine (TP2xPP2, max_num_tokens 1,536)" in err
    assert f"Next: repro build-engine --recipe {R405} --scenario Server" in err
    assert not home.exists() or not any(home.rglob("run.json")) and not (home / "ledger.json").exists()


def test_a_bad_scenario_block_is_refused_naming_its_place(tmp_path: Path) -> None:
    bad = _copy(tmp_path, lambda raw: raw["scenarios"]["Server"]["trtllm"].update(tp_size=0))
    res = cli("recipes", "validate", "--json", str(bad))
    assert res.exit_code == 2
    assert "scenarios.Server: tp_size: Input should be greater than 0" in json.loads(res.stdout)["recipes"][0]["error"]
    image = _copy(tmp_path, lambda raw: raw["scenarios"]["Server"]["trtllm"].update(base_image="x:1"))
    err = json.loads(cli("recipes", "validate", "--json", str(image)).stdout)["recipes"][0]["error"]
    assert "cannot change trtllm.base_image (one image per recipe)" in err
    disk = _copy(tmp_path, lambda raw: raw.update(disk_needed_gb=400))
    err = json.loads(cli("recipes", "validate", "--json", str(disk)).stdout)["recipes"][0]["error"]
    assert "disk_needed_gb 400 must count the scenarios' own 470 GB" in err
    scenario = _copy(tmp_path, lambda raw: raw["scenarios"].update(Sever=raw["scenarios"]["Server"]))
    assert cli("recipes", "validate", str(scenario)).exit_code == 2
    bad_flag = cli("build-engine", "--recipe", R405, "--scenario", "sever", "--dry-run")
    assert bad_flag.exit_code == 2 and "not a scenario (Offline, Server or Interactive)" in bad_flag.output


def test_a_recipe_without_scenario_blocks_keeps_its_hash_and_engine_folder() -> None:
    """Fields added for per-scenario engines count in the hash only when set: nothing already built goes stale."""
    import hashlib

    recipe = get_recipe("nc-h100-v5")
    assert recipe.deployments() == [recipe.deployment("Offline")] and recipe.deployment("Server").own is False
    doc = recipe.model_dump(mode="json")
    for key in ("scenarios", "published_host", "known_differences", "waive_rules"):
        assert doc.pop(key, None) in ({}, [], None)
    for pub in (doc["published"], *doc["published_scenarios"]):
        assert pub.pop("engine") is None
    assert doc["trtllm"].pop("system") is None  # a one-system layout (issue 46) counts only when a recipe has one
    assert recipe.hash() == hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
    assert str(q.paths_for(recipe).serve_config) == "/workspace/engines/nc-h100-v5/trtllm_serve_extra_conf.yaml"


def test_doctor_counts_the_server_engines_disk(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    free = shutil.disk_usage(tmp_path).free / 1e9

    def sized(total: float, server: float) -> Any:
        def edit(raw: dict[str, Any]) -> None:
            raw["disk_needed_gb"], raw["scenarios"]["Server"]["disk_gb"] = total, server

        return load_recipe_file(_copy(tmp_path, edit))

    row = check_disk(get_recipe(R405), ws)
    assert "recipe needs 1,870 GB (Server's own engine 470 GB of it)" in row.detail
    between = check_disk(sized(free + 30, 50), ws)  # the base fits, Server's own engine does not
    assert between.level == "WARN" and "enough for the base engine, not for Server's own" in between.detail
    assert check_disk(sized(free + 200, 50), ws).level == "FAIL"
    assert check_disk(sized(max(free / 2, 2), 1), ws).level == "PASS"


def test_the_guide_and_status_name_the_server_engine_until_it_is_built(tmp_path: Path) -> None:
    home = tmp_path / "repro-home"
    res = cli("guide", "--recipe", R405, "--dry-run")
    note = f"`repro build-engine --recipe {R405} --scenario Server` before `repro run server`"
    assert note in res.output and "TP4xPP1, max_num_tokens 2,048, 470 GB more disk" in res.output
    ws = Workspace(home).ensure()
    ledger = Ledger.load(ws.ledger_path)
    recipe = get_recipe(R405)
    for step in ("setup", "build-engine", "run-offline", "verify"):
        ledger.start(step, recipe.hash(), recipe=recipe.name, recipe_hash=recipe.hash())
        ledger.finish(step)
    report = build_status(ws, Ledger.load(ws.ledger_path), recipe, "test")
    assert report.hint is not None and note in report.hint
    ledger = Ledger.load(ws.ledger_path)
    ledger.start("build-engine-server", recipe.hash(), recipe=recipe.name)
    ledger.finish("build-engine-server")
    report = build_status(ws, Ledger.load(ws.ledger_path), recipe, "test")
    assert report.hint is not None and "--scenario Server" not in report.hint
    assert "--scenario Server" not in cli("guide", "--recipe", R405, "--dry-run").output


@pytest.mark.parametrize("scenario", ["Server"])
def test_the_server_engine_is_found_once_built(tmp_path: Path, scenario: str) -> None:
    """With the engine's config.json in place the run gets past the check (and stops later, at Docker here)."""
    from repro.run.servers import check_engine_built

    ws = Workspace(tmp_path / "repro-home").ensure()
    dep = get_recipe(R405).deployment(scenario)
    p = q.paths_for(dep)
    assert p.engine_dir is not None
    engine = ws.root / p.engine_dir.relative_to(q.CONTAINER_WORKSPACE)
    with pytest.raises(Exception, match="is not built"):
        check_engine_built(dep, ws)
    engine.mkdir(parents=True)
    (engine / "config.json").write_text("{}")
    check_engine_built(dep, ws)
    check_engine_built(get_recipe(R405).deployment("Offline"), Workspace(tmp_path / "empty"))  # base: never checked
