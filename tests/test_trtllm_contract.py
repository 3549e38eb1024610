"""Every generated TensorRT-LLM command line, serve option and request field exists in the release the recipe pins.

The contracts come from the package source via scripts/trtllm_contract.py
(repro/rehearse/standin/trtllm_contract_*.json).
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from trtllm_contract import (
    argv_problems,
    load,
    options_problems,
    request_problems,
    response_fields,
    versions,
)

from repro.core.recipes import all_recipes, get_recipe
from repro.engine import quantize as q
from repro.run.backends.http_client import build_payload

ROOT = Path(__file__).resolve().parents[1]
TRT_RECIPES = [r.name for r in all_recipes() if r.trtllm is not None]


def _version(name: str) -> str:
    t = get_recipe(name).trtllm
    assert t is not None
    return t.version


@pytest.mark.parametrize("name", TRT_RECIPES)
def test_recipe_pins_a_release_with_a_contract(name: str) -> None:
    t = get_recipe(name).trtllm
    assert t is not None
    assert t.version in versions(), f"{name} pins TensorRT-LLM {t.version}; no contract for it"
    assert t.base_image.rsplit(":", 1)[-1] == t.version, f"{name}: base_image {t.base_image} is not {t.version}"


@pytest.mark.parametrize("name", TRT_RECIPES)
def test_quantize_flags_exist(name: str) -> None:
    recipe = get_recipe(name)
    argv = q.quantize_command(recipe, q.paths_for(recipe))
    if argv[1] != q.TRTLLM_QUANTIZE:
        pytest.skip("hf-quantize is repro's own entry point, not TensorRT-LLM's quantize.py")
    assert argv_problems(argv[2:], _version(name), "quantize_py") == []


@pytest.mark.parametrize("name", TRT_RECIPES)
def test_trtllm_build_flags_exist(name: str) -> None:
    recipe = get_recipe(name)
    argv = q.build_command(recipe, q.paths_for(recipe))
    if argv is None:
        pytest.skip("PyTorch backend: no engine build")
    assert argv[0] == "trtllm-build"
    assert argv_problems(argv[1:], _version(name), "trtllm_build") == []


@pytest.mark.parametrize("name", TRT_RECIPES)
def test_trtllm_serve_flags_exist(name: str) -> None:
    recipe = get_recipe(name)
    for server in q.serve_commands(recipe, q.paths_for(recipe)):
        assert server.argv[0] == "trtllm-serve"
        assert argv_problems(server.argv[2:], _version(name), "trtllm_serve") == []


@pytest.mark.parametrize("name", TRT_RECIPES)
def test_serve_options_yaml_keys_exist(name: str) -> None:
    recipe = get_recipe(name)
    options = yaml.safe_load(q.serve_config(recipe))
    args_class = "TrtLlmArgs" if recipe.backend == "trtllm-engine" else "TorchLlmArgs"
    assert options_problems(options, _version(name), args_class) == []


@pytest.mark.parametrize("version", versions())
@pytest.mark.parametrize("stream", [False, True])
def test_request_fields_exist(version: str, stream: bool) -> None:
    chat = build_payload("chat", [1, 2, 3], 16, stream=stream, model="llama2-70b")
    assert request_problems(chat, version, "ChatCompletionRequest") == []
    completion = build_payload("completions", [1, 2, 3], 16, stream=stream, model="llama2-70b")
    assert request_problems(completion, version, "CompletionRequest") == []


def test_engine_backend_tensorrt_is_rejected_by_1_0_and_named() -> None:
    """The defect the paper check found: 1.0's click choice is `trt`; the checker must name the flag."""
    problems = argv_problems(["/engine", "--backend", "tensorrt"], "1.0.0", "trtllm_serve")
    assert len(problems) == 1 and "--backend" in problems[0] and "'tensorrt'" in problems[0]
    assert argv_problems(["--backend", "trt"], "1.0.0", "trtllm_serve") == []
    assert argv_problems(["--backend", "tensorrt"], "1.1.0", "trtllm_serve") == []


def test_gb200_engine_path_serves_with_the_1_0_backend_name() -> None:
    recipe = get_recipe("nd-gb200-v6")
    assert q.serve_backend(recipe) == "trt"
    argv = q.serve_commands(recipe, q.paths_for(recipe))[0].argv
    assert argv[argv.index("--backend") + 1] == "trt"


def test_checkers_name_what_is_missing() -> None:
    assert argv_problems(["--no_such_flag=1"], "1.1.0", "trtllm_build") == [
        "trtllm_build 1.1.0 has no flag --no_such_flag"
    ]
    problems = options_problems(
        {
            "kv_cache_config": {"free_gpu_memory_fraction": 0.9, "bogus": 1},
            "scheduler_config": {"capacity_scheduler_policy": "NOT_A_POLICY"},
        },
        "1.1.0",
        "TorchLlmArgs",
    )
    assert any("kv_cache_config.bogus" in p for p in problems)
    assert any("scheduler_config.capacity_scheduler_policy" in p and "NOT_A_POLICY" in p for p in problems)
    assert request_problems({"messages": [], "token_ids": True}, "1.1.0") == [
        "ChatCompletionRequest of TensorRT-LLM 1.1.0 has no field token_ids"
    ]


@pytest.mark.parametrize("version", versions())
def test_response_fields_of_a_chat_completion(version: str) -> None:
    f = response_fields(version)
    assert "token_ids" not in f["choice"] and "token_ids" not in f["message"], "chat choices carry no token ids"
    assert {"completion_tokens", "prompt_tokens", "total_tokens"} <= f["usage"]
    assert {"id", "object", "created", "model", "choices", "usage"} <= f["response"]
    assert {"index", "message", "finish_reason"} <= f["choice"] and "content" in f["message"]
    assert {"index", "delta", "finish_reason"} <= f["chunk_choice"] and "content" in f["delta"]
    assert "usage" in f["chunk"]


@pytest.mark.parametrize("version", versions())
def test_contract_records_where_it_came_from(version: str) -> None:
    c = load(version)
    assert c["version"] == version and c["generated_by"] == "scripts/trtllm_contract.py"
    src = c["source"]
    assert src["kind"] == "wheel" and len(src["sha256"]) == 64 or src["kind"] == "directory" and src.get("note")


_SERVE = """
import click
@click.command("serve")
@click.argument("model")
@click.option("--backend", type=ChoiceWithAlias(["pytorch", "tensorrt"], {"trt": "tensorrt"}), default="pytorch")
@click.option("--config", "--extra_llm_api_options", type=str, default=None)
@click.option("--trust_remote_code", is_flag=True, default=False)
def serve(model, backend, config, trust_remote_code):
    pass
"""
_BUILD = """
import argparse
def parse_arguments():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint_dir", type=str)
    group = parser.add_argument_group("x")
    group.add_argument("--kv_cache_type", choices=["continuous", "paged", "disabled"])
    add_plugin_argument(group)
"""
_PLUGIN = """
class PluginConfig(BaseModel):
    gemm_plugin: Optional[Literal["auto", "float16", None]] = Field(default=None, description="g")
    context_fmha: bool = Field(default=True, description="c")
    not_on_cli: bool = Field(default=True, description="n")
cli_plugin_args = ["gemm_plugin", "context_fmha"]
"""
_ARGS = """
class StrictBaseModel(BaseModel):
    class Config:
        extra = "forbid"
class CapacitySchedulerPolicy(StrEnum):
    MAX_UTILIZATION = "MAX_UTILIZATION"
class SchedulerConfig(StrictBaseModel):
    capacity_scheduler_policy: CapacitySchedulerPolicy = CapacitySchedulerPolicy.MAX_UTILIZATION
class BaseLlmArgs(StrictBaseModel):
    model: str
    scheduler_config: SchedulerConfig = Field(default_factory=SchedulerConfig)
class TorchLlmArgs(BaseLlmArgs):
    stream_interval: int = 1
    _private: int = 0
LlmArgs = TorchLlmArgs
"""
_PROTOCOL = """
class OpenAIBaseModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
class ChatCompletionRequest(OpenAIBaseModel):
    max_completion_tokens: Optional[int] = Field(default=None, validation_alias="max_tokens")
"""
_QUANTIZE = """
parser.add_argument("--qformat", choices=["fp8", "nvfp4"], default="fp8")
parser.add_argument("--tp_size", type=int, default=1)
"""


def test_script_reads_a_wheel(tmp_path: Path) -> None:
    """The extractor on a wheel-shaped zip: click aliases and alias choices, argparse groups, plugin flags,
    inherited pydantic fields, aliases, enums and extra='forbid'."""
    wheel = tmp_path / "tensorrt_llm-9.9.9-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("tensorrt_llm/commands/serve.py", _SERVE)
        z.writestr("tensorrt_llm/commands/build.py", _BUILD)
        z.writestr("tensorrt_llm/plugin/plugin.py", _PLUGIN)
        z.writestr("tensorrt_llm/llmapi/llm_args.py", _ARGS)
        z.writestr("tensorrt_llm/serve/openai_protocol.py", _PROTOCOL)
    quant = tmp_path / "quantize.py"
    quant.write_text(_QUANTIZE)
    out = tmp_path / "c.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "trtllm_contract.py"),
            str(wheel),
            "--version",
            "9.9.9",
            "--quantize-py",
            str(quant),
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    c = json.loads(out.read_text())
    assert c["source"]["kind"] == "wheel" and len(c["source"]["sha256"]) == 64
    assert c["trtllm_serve"]["--backend"]["choices"] == ["pytorch", "tensorrt", "trt"]
    assert c["trtllm_serve"]["--extra_llm_api_options"]["aliases"] == ["--config"]
    assert c["trtllm_serve"]["--trust_remote_code"]["is_flag"] is True
    assert c["trtllm_build"]["--kv_cache_type"]["choices"] == ["continuous", "paged", "disabled"]
    assert c["trtllm_build"]["--context_fmha"]["choices"] == ["enable", "disable"]
    assert c["trtllm_build"]["--gemm_plugin"]["choices"] == ["auto", "float16", "disable"]
    assert "--not_on_cli" not in c["trtllm_build"]
    assert sorted(c["quantize_py"]) == ["--qformat", "--tp_size"]
    torch_args = c["llm_args"]["TorchLlmArgs"]
    assert sorted(torch_args["fields"]) == ["model", "scheduler_config", "stream_interval"]
    assert torch_args["extra_forbid"] is True and c["llm_args"]["LlmArgs"]["defined_as"] == "TorchLlmArgs"
    assert c["llm_args_enums"]["CapacitySchedulerPolicy"] == ["MAX_UTILIZATION"]
    req = c["openai"]["ChatCompletionRequest"]
    assert req["extra_forbid"] is True and req["fields"]["max_completion_tokens"]["alias"] == "max_tokens"
