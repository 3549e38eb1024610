"""What a TensorRT-LLM release accepts and answers, read from repro/rehearse/standin/trtllm_contract_<version>.json
(the one copy: the rehearsal's stand-in tools parse their flags from the same files).

The JSON files are written by scripts/trtllm_contract.py from the package source (see each file's `source`).
Other tests use `response_fields(version)` to hold a stand-in server to exactly the fields the real one sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "repro" / "rehearse" / "standin"


def versions() -> list[str]:
    return sorted(p.stem.removeprefix("trtllm_contract_") for p in DATA.glob("trtllm_contract_*.json"))


@cache
def load(version: str) -> dict[str, Any]:
    path = DATA / f"trtllm_contract_{version}.json"
    if not path.exists():
        raise FileNotFoundError(f"no TensorRT-LLM contract for {version} ({path}); run scripts/trtllm_contract.py")
    return json.loads(path.read_text())


def _fields(version: str, section: str, cls: str) -> dict[str, Any]:
    return load(version)[section][cls]["fields"]


def field_names(version: str, cls: str, section: str = "openai") -> set[str]:
    """Names a pydantic model accepts on input: its fields and their aliases."""
    fields = _fields(version, section, cls)
    return set(fields) | {f["alias"] for f in fields.values() if f.get("alias")}


def response_fields(version: str) -> dict[str, frozenset[str]]:
    """The exact keys of a chat completion in `version`, per object, for non-stream answers and stream chunks.

    A chat choice has no `token_ids` (ChatCompletionResponseChoice in serve/openai_protocol.py); token ids only
    exist in the completions API's choices.
    """

    def names(cls: str) -> frozenset[str]:
        return frozenset(_fields(version, "openai", cls))

    return {
        "response": names("ChatCompletionResponse"),
        "choice": names("ChatCompletionResponseChoice"),
        "message": names("ChatMessage"),
        "usage": names("UsageInfo"),
        "chunk": names("ChatCompletionStreamResponse"),
        "chunk_choice": names("ChatCompletionResponseStreamChoice"),
        "delta": names("DeltaMessage"),
    }


def argv_problems(argv: Sequence[str], version: str, section: str) -> list[str]:
    """Every flag of a command line that `section` (trtllm_serve, trtllm_build, quantize_py) of `version` lacks,
    or whose value is not one of its choices. Values may be `--flag=value` or `--flag value`."""
    options: dict[str, Any] = load(version)[section]
    problems: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("--"):
            continue
        flag, eq, value = token.partition("=")
        spec = options.get(flag)
        if spec is None:
            problems.append(f"{section} {version} has no flag {flag}")
            continue
        if not eq and not spec["is_flag"] and i < len(argv):
            value = argv[i]
            i += 1
        if spec["choices"] is not None and value not in spec["choices"]:
            problems.append(f"{section} {version}: {flag} {value!r} is not one of {spec['choices']}")
    return problems


def _nested_class(annotation: str, classes: dict[str, Any]) -> str | None:
    for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", annotation):
        if name in classes:
            return name
    return None


def _enum_of(annotation: str, enums: dict[str, list[str]]) -> str | None:
    return next((n for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", annotation) if n in enums), None)


def options_problems(options: dict[str, Any], version: str, args_class: str) -> list[str]:
    """Every key of an `--extra_llm_api_options` mapping that `args_class` (TorchLlmArgs for the PyTorch backend,
    TrtLlmArgs for engines) of `version` does not have, checked into nested configs and enum values."""
    contract = load(version)
    classes, enums = contract["llm_args"], contract["llm_args_enums"]
    problems: list[str] = []

    def walk(mapping: dict[str, Any], cls: str, path: str) -> None:
        fields = classes[cls]["fields"]
        accepted = set(fields) | {f["alias"] for f in fields.values() if f.get("alias")}
        for key, value in mapping.items():
            where = f"{path}{key}"
            if key not in accepted:
                problems.append(f"{cls} of TensorRT-LLM {version} has no key {where}")
                continue
            ann = fields[key]["annotation"]
            nested = _nested_class(ann, classes)
            if isinstance(value, dict) and nested:
                walk(value, nested, f"{where}.")
            elif isinstance(value, str) and (enum := _enum_of(ann, enums)) and value not in enums[enum]:
                problems.append(f"{where}: {value!r} is not a {enum} of TensorRT-LLM {version} ({enums[enum]})")

    walk(options, args_class, "")
    return problems


def request_problems(body: dict[str, Any], version: str, cls: str = "ChatCompletionRequest") -> list[str]:
    """Request keys the server's model would reject (the OpenAI models forbid extra fields)."""
    accepted = field_names(version, cls)
    problems = [f"{cls} of TensorRT-LLM {version} has no field {k}" for k in body if k not in accepted]
    if isinstance(body.get("stream_options"), dict):
        so = field_names(version, "StreamOptions")
        problems += [
            f"StreamOptions of TensorRT-LLM {version} has no field {k}" for k in body["stream_options"] if k not in so
        ]
    return problems
