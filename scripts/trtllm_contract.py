#!/usr/bin/env python3
"""Write the TensorRT-LLM contract (CLI flags, LLM-API option keys, OpenAI fields) that repro's tests check against.

Reads the package statically (AST only: tensorrt_llm cannot be imported without CUDA) from a wheel, an unpacked
wheel, or a source checkout, and writes one JSON per version under repro/rehearse/standin/
(read by the tests and by the rehearsal's stand-in tools). Usage:

    python scripts/trtllm_contract.py SOURCE --version 1.1.0 [--quantize-py PATH] [--source-note TEXT] [-o OUT]

SOURCE is a `.whl` file or a directory holding `tensorrt_llm/` (site-packages, unpacked wheel or git checkout).
The wheel does not ship examples/quantization/quantize.py; pass it with --quantize-py (from the release image's
/app/tensorrt_llm/examples or the git tag), otherwise it is looked up beside `tensorrt_llm/` in a checkout.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

STANDIN = Path(__file__).resolve().parents[1] / "repro" / "rehearse" / "standin"

SERVE = "tensorrt_llm/commands/serve.py"
BUILD = "tensorrt_llm/commands/build.py"
PLUGIN = "tensorrt_llm/plugin/plugin.py"
LLM_ARGS = "tensorrt_llm/llmapi/llm_args.py"
PROTOCOL = "tensorrt_llm/serve/openai_protocol.py"
QUANTIZE = "examples/quantization/quantize.py"

LLM_ARGS_CLASSES = (
    "BaseLlmArgs",
    "TrtLlmArgs",
    "TorchLlmArgs",
    "LlmArgs",
    "KvCacheConfig",
    "SchedulerConfig",
    "DynamicBatchConfig",
    "CudaGraphConfig",
    "PeftCacheConfig",
    "ExtendedRuntimePerfKnobConfig",
    "CacheTransceiverConfig",
    "TorchCompileConfig",
    "MoeConfig",
    "AttentionDpConfig",
    "CalibConfig",
)
LLM_ARGS_ENUMS = ("CapacitySchedulerPolicy", "ContextChunkingPolicy", "BatchingType")
OPENAI_CLASSES = (
    "ChatCompletionRequest",
    "ChatCompletionResponse",
    "ChatCompletionResponseChoice",
    "ChatMessage",
    "UsageInfo",
    "PromptTokensDetails",
    "ChatCompletionStreamResponse",
    "ChatCompletionResponseStreamChoice",
    "DeltaMessage",
    "StreamOptions",
    "CompletionRequest",
    "CompletionResponse",
    "CompletionResponseChoice",
    "CompletionStreamResponse",
    "CompletionResponseStreamChoice",
    "ErrorResponse",
)


class Source:
    """One place to read package files from: a wheel (zip) or a directory."""

    def __init__(self, path: Path, quantize_py: Path | None) -> None:
        self.path = path
        self.quantize_py = quantize_py
        self._zip = zipfile.ZipFile(path) if path.is_file() else None

    def read(self, rel: str) -> str | None:
        if rel == QUANTIZE:
            if self.quantize_py is not None:
                return self.quantize_py.read_text()
            candidate = self.path / QUANTIZE if self._zip is None else None
            return candidate.read_text() if candidate is not None and candidate.exists() else None
        if self._zip is not None:
            try:
                return self._zip.read(rel).decode()
            except KeyError:
                return None
        f = self.path / rel
        return f.read_text() if f.exists() else None

    def describe(self) -> dict[str, Any]:
        if self._zip is not None:
            return {"kind": "wheel", "name": self.path.name, "sha256": _sha256(self.path)}
        out: dict[str, Any] = {"kind": "directory", "name": self.path.name, "sha256": None}
        try:
            commit = subprocess.run(
                ["git", "-C", str(self.path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
            out["git_commit"] = commit
        except (OSError, subprocess.CalledProcessError):
            pass
        return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _choices(call: ast.Call) -> list[str] | None:
    """click.Choice([...]) / ChoiceWithAlias([...], {alias: name}) / argparse choices=[...]."""
    for kw in call.keywords:
        if kw.arg == "choices":
            value = _literal(kw.value)
            return [str(v) for v in value] if isinstance(value, list | tuple) else None
        if kw.arg == "type" and isinstance(kw.value, ast.Call) and kw.value.args:
            values = _literal(kw.value.args[0])
            if isinstance(values, list | tuple):
                out = [str(v) for v in values]
                if len(kw.value.args) > 1 and isinstance(aliases := _literal(kw.value.args[1]), dict):
                    out += [str(a) for a in aliases]
                return out
    return None


def _is_flag(call: ast.Call) -> bool:
    for kw in call.keywords:
        if kw.arg == "is_flag" and _literal(kw.value) is True:
            return True
        if kw.arg == "action" and _literal(kw.value) in ("store_true", "store_false"):
            return True
    return False


def _option_entry(call: ast.Call) -> tuple[list[str], dict[str, Any]]:
    names = [
        a.value
        for a in call.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
    ]
    return names, {"choices": _choices(call), "is_flag": _is_flag(call)}


def click_options(text: str, command: str) -> dict[str, Any]:
    """Every option of the click command function `command`, aliases expanded to their own keys."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == command:
            options: dict[str, Any] = {}
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and _callee(dec).endswith("option"):
                    names, entry = _option_entry(dec)
                    for n in names:
                        options[n] = {**entry, "aliases": sorted(set(names) - {n})}
            return dict(sorted(options.items()))
    raise SystemExit(f"no click command '{command}' found")


def _callee(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr
    return f.id if isinstance(f, ast.Name) else ""


def argparse_options(text: str) -> dict[str, Any]:
    """Every `--flag` of every add_argument call in a module (argparse parsers and groups alike)."""
    options: dict[str, Any] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and _callee(node) == "add_argument":
            names, entry = _option_entry(node)
            for n in names:
                if n.startswith("--"):
                    options[n] = {**entry, "aliases": sorted(set(names) - {n})}
    return dict(sorted(options.items()))


def plugin_options(text: str) -> dict[str, Any]:
    """trtllm-build's plugin flags: `add_plugin_argument` adds `--<field>` for each PluginConfig field listed in
    `cli_plugin_args`; bool fields take enable/disable, Literal fields their values (None shown as 'disable')."""
    tree = ast.parse(text)
    listed: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "cli_plugin_args" for t in node.targets
        ):
            listed = [str(v) for v in _literal(node.value) or []]
    fields = class_fields(tree).get("PluginConfig", {})
    out: dict[str, Any] = {}
    for name in listed:
        if name not in fields:
            continue
        ann = fields[name]["annotation"]
        choices: list[str] | None = None
        if ann == "bool":
            choices = ["enable", "disable"]
        elif "Literal[" in ann:
            lit = ann[ann.index("Literal[") + len("Literal[") : ann.rindex("]")].rstrip("]")
            values = _literal(ast.parse(f"[{lit}]", mode="eval").body) or []
            choices = [v if v else "disable" for v in values] + (
                ["disable"] if "None" in ann.split("Literal")[0] or "Optional" in ann else []
            )
            choices = sorted(set(choices), key=choices.index)
        out[f"--{name}"] = {"choices": choices, "is_flag": False, "aliases": []}
    return out


def class_fields(tree: ast.Module) -> dict[str, dict[str, Any]]:
    """Annotated class attributes of every class in a module (own fields only), with alias= where given."""
    out: dict[str, dict[str, Any]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields: dict[str, Any] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
                ann = ast.unparse(stmt.annotation)
                if name.startswith("_") or ann.startswith("ClassVar"):
                    continue
                alias = None
                if isinstance(stmt.value, ast.Call) and _callee(stmt.value) == "Field":
                    for kw in stmt.value.keywords:
                        if kw.arg in ("alias", "validation_alias") and isinstance(kw.value, ast.Constant):
                            alias = kw.value.value
                fields[name] = {"annotation": ann, "alias": alias}
        out[node.name] = fields
    return out


def _bases(tree: ast.Module) -> dict[str, list[str]]:
    return {n.name: [ast.unparse(b) for b in n.bases] for n in tree.body if isinstance(n, ast.ClassDef)}


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Module-level `LlmArgs = TrtLlmArgs` style names."""
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Name)
        ):
            out[node.targets[0].id] = node.value.id
    return out


def model_fields(text: str, wanted: tuple[str, ...]) -> dict[str, Any]:
    """Fields of each wanted pydantic class including those inherited from classes of the same module."""
    tree = ast.parse(text)
    own, bases, aliases = class_fields(tree), _bases(tree), _aliases(tree)

    def resolve(name: str, seen: frozenset[str] = frozenset()) -> dict[str, Any]:
        name = aliases.get(name, name)
        if name in seen or name not in own:
            return {}
        merged: dict[str, Any] = {}
        for b in bases.get(name, []):
            merged.update(resolve(b, seen | {name}))
        merged.update(own[name])
        return merged

    out: dict[str, Any] = {}
    for cls in wanted:
        target = aliases.get(cls, cls)
        if target in own:
            fields = resolve(cls)
            out[cls] = {
                "defined_as": target,
                "bases": bases.get(target, []),
                "extra_forbid": _forbids_extra(tree, target, bases),
                "fields": {k: fields[k] for k in sorted(fields)},
            }
    return out


def _forbids_extra(tree: ast.Module, cls: str, bases: dict[str, list[str]]) -> bool | None:
    """True when the class or a same-module base sets extra='forbid' (StrictBaseModel, OpenAIBaseModel)."""
    by_name = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    todo, seen = [cls], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        src = ast.unparse(by_name[name])
        if re.search(r"extra\s*=\s*['\"]forbid['\"]", src):
            return True
        todo += bases.get(name, [])
    return False


def enum_values(text: str, wanted: tuple[str, ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef) and node.name in wanted:
            vals = [_literal(s.value) for s in node.body if isinstance(s, ast.Assign)]
            out[node.name] = [str(v) for v in vals if v is not None]
    return out


def build_contract(src: Source, version: str, note: str | None) -> dict[str, Any]:
    def need(rel: str) -> str:
        text = src.read(rel)
        if text is None:
            raise SystemExit(f"{rel} not found in {src.path}")
        return text

    llm_args = need(LLM_ARGS)
    quantize = src.read(QUANTIZE)
    build = argparse_options(need(BUILD))
    plugin = src.read(PLUGIN)
    if plugin is not None:
        build.update(plugin_options(plugin))
    return {
        "version": version,
        "source": {**src.describe(), **({"note": note} if note else {})},
        "generated_by": "scripts/trtllm_contract.py",
        "trtllm_serve": click_options(need(SERVE), "serve"),
        "trtllm_build": dict(sorted(build.items())),
        "quantize_py": argparse_options(quantize) if quantize is not None else None,
        "llm_args": model_fields(llm_args, LLM_ARGS_CLASSES),
        "llm_args_enums": enum_values(llm_args, LLM_ARGS_ENUMS),
        "openai": model_fields(need(PROTOCOL), OPENAI_CLASSES),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="tensorrt_llm wheel (.whl) or directory holding tensorrt_llm/")
    ap.add_argument("--version", required=True, help="the release this describes, e.g. 1.1.0")
    ap.add_argument("--quantize-py", type=Path, default=None, help="examples/quantization/quantize.py of that release")
    ap.add_argument("--source-note", default=None, help="where the source came from, stored in the JSON")
    ap.add_argument(
        "--override-choices",
        action="append",
        default=[],
        metavar="SECTION:FLAG=A,B",
        help="replace one flag's choices, when the source is not the release itself (recorded with "
        "--source-note in the JSON), e.g. trtllm_serve:--backend=pytorch,trt,_autodeploy",
    )
    ap.add_argument(
        "-o", "--output", type=Path, default=None, help="default: repro/rehearse/standin/trtllm_contract_<version>.json"
    )
    args = ap.parse_args(argv)
    contract = build_contract(Source(args.source, args.quantize_py), args.version, args.source_note)
    for spec in args.override_choices:
        section, _, rest = spec.partition(":")
        flag, _, values = rest.partition("=")
        if flag not in (contract.get(section) or {}):
            raise SystemExit(f"--override-choices: {section} has no {flag}")
        contract[section][flag]["choices"] = values.split(",")
        contract["source"].setdefault("overrides", []).append(spec)
    out = args.output or STANDIN / f"trtllm_contract_{args.version}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(contract, indent=1, sort_keys=False) + "\n")
    tmp.replace(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
