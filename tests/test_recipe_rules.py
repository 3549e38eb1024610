"""Recipes held to MLPerf's rules (repro/data/mlperf_rules.yaml): every trtllm recipe's serve config, engine flags,
output cap and the request the client sends, through the real `repro recipes validate` and the real loader.

Each test edits a copy of a shipped recipe (renamed, so it is not mistaken for the shipped one) and expects one
clear refusal naming the rule and where MLPerf states it (mlcommons/inference_policies @ ac93e89)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import cli, cli_process, one_line_error

from repro.core.benchmarks import load_benchmark
from repro.core.mlperf_rules import recipe_violations, request_violations, rulebook
from repro.core.recipes import all_recipes, load_recipe_file, recipes_dir
from repro.run.backends.http_client import build_payload
from repro.run.request_rules import request_rule_violations

TRT = [r.name for r in all_recipes() if r.trtllm is not None]


def _copy(tmp_path: Path, name: str, edit: Any) -> Path:
    """A renamed copy of a shipped recipe with `edit(raw)` applied to its parsed YAML."""
    raw = yaml.safe_load((recipes_dir() / f"{name}.yaml").read_text())
    raw["name"] = f"copy-{name}"
    edit(raw)
    path = tmp_path / f"copy-{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _validate(path: Path) -> dict[str, Any]:
    res = cli("recipes", "validate", "--json", str(path))
    assert res.exit_code == 2, res.output
    (row,) = json.loads(res.stdout)["recipes"]
    assert row["valid"] is False
    return row


def _kv(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["trtllm"]["serve_extra_options"].setdefault("kv_cache_config", {})


def test_the_shipped_recipes_break_no_rule() -> None:
    """All shipped recipes, the 405B one included (it left block reuse at TensorRT-LLM's default before)."""
    assert cli("recipes", "validate").exit_code == 0
    for recipe in all_recipes():
        assert recipe_violations(recipe) == [], recipe.name
        assert request_rule_violations(recipe) == [], recipe.name
    assert {r.name for r in all_recipes()} >= {"nd-gb200-v6-405b", "dgx-h100"}
    assert "nd-gb200-v6-405b" in TRT


@pytest.mark.parametrize("name", TRT)
@pytest.mark.parametrize("reuse", [True, None], ids=["reuse-on", "reuse-unset"])
def test_block_reuse_on_or_unset_is_refused_naming_the_rule(tmp_path: Path, name: str, reuse: bool | None) -> None:
    def edit(raw: dict[str, Any]) -> None:
        kv = _kv(raw)
        kv.pop("enable_block_reuse", None)
        if reuse is not None:
            kv["enable_block_reuse"] = reuse

    error = _validate(_copy(tmp_path, name, edit))["error"]
    assert "trtllm.serve_extra_options.kv_cache_config.enable_block_reuse is " in error
    assert "MLPerf rule 'kv-block-reuse-off'" in error
    assert "mlcommons/inference_policies @ ac93e89 inference_rules.adoc:895-897" in error
    assert ("is true," in error) if reuse else ("is unset, which TensorRT-LLM takes as true" in error)


def test_a_run_of_a_recipe_that_breaks_a_rule_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """The loader refuses it, so no command (here a real `repro run` in its own process) plans such a run."""
    path = _copy(tmp_path, "nd-gb200-v6-405b", lambda raw: _kv(raw).pop("enable_block_reuse"))
    err = one_line_error(cli_process("run", "offline", "--recipe", str(path), "--dry-run"))
    assert "kv-block-reuse-off" in err and f"repro recipes validate {path}" in err
    assert not (tmp_path / "repro-home" / "runs").exists()


def test_a_scenarios_own_serve_options_are_held_to_the_rules_too(tmp_path: Path) -> None:
    """405B Server's own block turning reuse back on is named at its place, once."""

    def edit(raw: dict[str, Any]) -> None:
        raw["scenarios"]["Server"]["trtllm"]["serve_extra_options"] = {"kv_cache_config": {"enable_block_reuse": True}}

    error = _validate(_copy(tmp_path, "nd-gb200-v6-405b", edit))["error"]
    assert "scenarios.Server: trtllm.serve_extra_options.kv_cache_config.enable_block_reuse is true" in error
    assert "more rule" not in error


def test_what_a_scenario_inherits_is_named_once_at_the_base(tmp_path: Path) -> None:
    recipe = load_recipe_file(_copy(tmp_path, "nd-gb200-v6-405b", lambda raw: None))
    assert recipe.deployments()[1].own
    raw = yaml.safe_load((tmp_path / "copy-nd-gb200-v6-405b.yaml").read_text())
    _kv(raw)["enable_block_reuse"] = True
    path = tmp_path / "copy-nd-gb200-v6-405b.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    error = _validate(path)["error"]
    assert error.count("enable_block_reuse") == 1 and "scenarios.Server" not in error and "more rule" not in error


@pytest.mark.parametrize(
    ("name", "edit", "rule", "where"),
    [
        (
            "nd-gb200-v6",
            lambda raw: raw["trtllm"]["runtime_flags"].update(max_beam_width=4),
            "beam-width-1",
            "trtllm.runtime_flags.max_beam_width is 4",
        ),
        (
            "nd-gb300-v6",
            lambda raw: raw["trtllm"]["serve_extra_options"].update(speculative_config={"decoding_type": "MTP"}),
            "no-speculative-decoding",
            "trtllm.serve_extra_options.speculative_config is set",
        ),
        (
            "nd-gb200-v6-405b",
            lambda raw: raw["loadgen"].update(max_tokens=1024),
            "max-output-length",
            "loadgen.max_tokens is 1,024",
        ),
        (
            "nd-h100-v5",
            lambda raw: raw["loadgen"].update(max_tokens=512),
            "max-output-length",
            "loadgen.max_tokens is 512",
        ),
    ],
    ids=["beam-width", "speculative", "405b-max-tokens", "70b-max-tokens"],
)
def test_each_recipe_side_rule_refuses_its_breach(tmp_path: Path, name: str, edit: Any, rule: str, where: str) -> None:
    error = _validate(_copy(tmp_path, name, edit))["error"]
    assert where in error and f"MLPerf rule '{rule}'" in error
    lines = next(r.lines for r in rulebook().rules if r.id == rule)
    assert f"inference_rules.adoc:{lines}" in error


def test_the_405b_cap_is_the_reference_implementations_not_the_rules_table() -> None:
    """The table says 20,000 new tokens; MLPerf holds a submission to the reference's maximum, 2,000 (SUT_VLLM.py
    and NVIDIA's generation_config.json): the recipe's 2,000 passes, and a request asking for 1 token minimum does."""
    gen = load_benchmark("llama3.1-405b").generation
    assert (gen.max_new_tokens, gen.reference_max) == (20000, 2000)
    assert gen.allowed_min_tokens == (1, 2)
    assert load_benchmark("llama2-70b-99").generation.reference_max == 1024


def test_the_request_the_client_sends_is_greedy_with_the_benchmarks_minimum() -> None:
    bench = load_benchmark("llama3.1-405b")
    real = build_payload("chat", [1, 2, 3], 2000, stream=True, model="m")
    assert request_violations(real, bench, "the request") == []
    sampled = {**real, "top_k": 50, "temperature": 0.7}
    (greedy,) = request_violations(sampled, bench, "the request")
    assert greedy.rule.id == "greedy-decoding" and "top_k 50, temperature 0.7" in greedy.message()
    forced = {**real, "min_tokens": 64}
    (minimum,) = request_violations(forced, bench, "the request")
    assert minimum.rule.id == "min-new-tokens" and "min_tokens is 64" in minimum.message()
    assert "needs 1 or 2" in minimum.message()


def test_every_rule_is_data_with_its_text_and_lines() -> None:
    book = rulebook()
    assert (book.source.repo, book.source.commit, book.source.path) == (
        "mlcommons/inference_policies",
        "ac93e89",
        "inference_rules.adoc",
    )
    ids = [r.id for r in book.rules]
    assert len(ids) == len(set(ids)) and "kv-block-reuse-off" in ids
    for rule in book.rules:
        assert rule.text and rule.why and rule.lines


def test_a_recipe_that_waives_a_rule_loads_and_its_runs_are_never_a_reproduction(tmp_path: Path) -> None:
    """An experiment (a lower output cap) says which rule it breaks: it loads, and every run of it is labelled."""
    from repro.core.workspace import Workspace
    from repro.run.options import RunOptions
    from repro.run.plan import run_label

    def edit(raw: dict[str, Any]) -> None:
        raw["loadgen"]["max_tokens"] = 120
        raw["waive_rules"] = ["max-output-length"]

    path = _copy(tmp_path, "nd-h100-v5", edit)
    assert cli("recipes", "validate", str(path)).exit_code == 0
    recipe = load_recipe_file(path)
    assert run_label(RunOptions(recipe, Workspace(tmp_path / "ws"))) == "non-compliant"
    other = _copy(tmp_path, "nd-h100-v5", lambda raw: raw.update(waive_rules=["no-such-rule"]))
    assert "'no-such-rule' is not an MLPerf rule repro checks" in _validate(other)["error"]
    # waiving one rule waives that one only
    both = _copy(tmp_path, "nd-h100-v5", lambda raw: (edit(raw), _kv(raw).update(enable_block_reuse=True)))
    assert "kv-block-reuse-off" in _validate(both)["error"]


def test_a_non_compliant_run_is_never_a_reproduction(fixtures: Path, tmp_path: Path) -> None:
    import shutil

    from repro.results.verify import verify_dir

    run_dir = tmp_path / "run"
    shutil.copytree(fixtures / "azure-nd-gb200-v6-v5.1" / "llama2-70b-99/Offline/performance/run_1", run_dir)
    (run_dir / "run.json").write_text(json.dumps({"recipe": "nd-gb200-v6", "label": "non-compliant"}))
    v = verify_dir(run_dir, recipe="nd-gb200-v6")
    assert v.status == "NOT A REPRODUCTION" and "its recipe waives MLPerf rules" in v.reasons[0]
