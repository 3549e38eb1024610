"""MLPerf's rules a recipe's serving configuration is held to: the rules are data (repro/data/mlperf_rules.yaml: the
rule's text, where it is, what it checks), this module is the few kinds of check they name.

Recipe-side checks (serve options, engine flags, the output cap) run on every recipe load, for each deployment a
recipe has (a scenario with its own engine has its own serve options), so no command runs a configuration MLPerf
forbids. The request-side checks take the request body the client sends; `repro recipes validate` builds it.
An unset key counts as TensorRT-LLM's default, which the rule names with its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from repro.core.merge import merged
from repro.core.safeio import read_text_bounded, safe_yaml

if TYPE_CHECKING:
    from repro.core.benchmarks import Benchmark

# core.recipes calls these checks while it validates a recipe, so this module cannot import it (not even for types):
# a `Deployment` and a `Recipe` are taken as what they are, typed Any here.
Deployment = Any
Recipe = Any

RULES_FILE = Path(__file__).resolve().parent.parent / "data" / "mlperf_rules.yaml"
CheckKind = Literal[
    "serve_option", "serve_option_absent", "engine_flag", "max_tokens", "request_greedy", "request_min_tokens"
]
_UNSET = object()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RuleCheck(_Strict):
    kind: CheckKind
    key: str | None = Field(default=None, description="A dotted serve option, or a build/runtime flag")
    flag: str | None = Field(default=None, description="serve_option_absent: the build flag that must be unset too")
    must_be: bool | int | None = None
    unset_is: bool | int | None = Field(default=None, description="What TensorRT-LLM takes when the key is unset")
    unset_source: str = ""
    except_: list[str] = Field(default_factory=list, alias="except", description="'benchmark/Scenario' exempted")


class Rule(_Strict):
    id: str = Field(pattern=r"^[a-z0-9-]+$")
    title: str
    lines: str
    text: str
    why: str
    also: str = ""
    check: RuleCheck


class Source(_Strict):
    repo: str
    commit: str
    path: str


class RuleBook(_Strict):
    schema_version: Literal[1]
    source: Source
    rules: list[Rule]

    def cite(self, rule: Rule) -> str:
        return f"{self.source.repo} @ {self.source.commit} {self.source.path}:{rule.lines}"


@cache
def rulebook() -> RuleBook:
    """The shipped rules, read once (a packaged file: a broken one is repro's bug, not bad input)."""
    return RuleBook.model_validate(safe_yaml(read_text_bounded(RULES_FILE, 1 << 20, what="MLPerf rules")))


@dataclass(frozen=True)
class Violation:
    """One rule one deployment (or the client's request) breaks: where, what was found, and the rule."""

    rule: Rule
    where: str
    found: str
    want: str

    def message(self) -> str:
        """One sentence: where, what was found, the rule (its id, title and where MLPerf says it), and why."""
        return (
            f"{self.where} is {self.found}, but MLPerf rule '{self.rule.id}' ({self.rule.title}; "
            f"{rulebook().cite(self.rule)}) needs {self.want}: {self.rule.why}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule.id,
            "title": self.rule.title,
            "where": self.where,
            "found": self.found,
            "want": self.want,
            "source": rulebook().cite(self.rule),
            "rule_text": self.rule.text,
        }


def _lookup(options: dict[str, Any], dotted: str) -> Any:
    node: Any = options
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _UNSET
        node = node[part]
    return node


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value) if isinstance(value, str) else str(value)


def _exempt(check: RuleCheck, recipe: Recipe, scenario: str) -> bool:
    names = {recipe.benchmark, recipe.bench.mlperf_model}
    return any(e.split("/", 1)[0] in names and e.split("/", 1)[-1] in (scenario, "*") for e in check.except_)


def _scenarios_of(dep: Deployment) -> str:
    """Which scenarios a deployment serves, for the message: the scenario with its own engine, or the base's."""
    if dep.own:
        return f"scenarios.{dep.scenario}: "
    return ""


def _value_check(rule: Rule, value: Any, where: str) -> Violation | None:
    check = rule.check
    unset = value is _UNSET
    effective = check.unset_is if unset else value
    if effective == check.must_be and type(effective) is type(check.must_be):
        return None
    found = (
        f"unset, which TensorRT-LLM takes as {_shown(check.unset_is)} ({check.unset_source})"
        if unset
        else _shown(value)
    )
    return Violation(rule, where, found, _shown(check.must_be))


def _option_sets(trt: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every set of serve options a deployment's servers start with: the trtllm block's, and each role's of a
    disaggregated system (its own options over the block's, as the launcher merges them, run/launchers/layout.py)."""
    out = [("trtllm.serve_extra_options", dict(trt.serve_extra_options))]
    system = getattr(trt, "system", None)
    for role in ("context", "generation"):
        spec = getattr(system, role, None) if system is not None else None
        if spec is not None:
            options = merged(dict(trt.serve_extra_options), dict(spec.serve_extra_options))
            out.append((f"trtllm.system.{role}.serve_extra_options", options))
    return out


def deployment_violations(dep: Deployment) -> list[Violation]:
    """The serve-option and engine-flag rules against one deployment's merged blocks."""
    trt = dep.trtllm
    if trt is None:
        return []
    out: list[Violation] = []
    pre = _scenarios_of(dep)
    for rule in rulebook().rules:
        check = rule.check
        if check.kind == "serve_option" and check.key:
            for block, options in _option_sets(trt):
                found = _value_check(rule, _lookup(options, check.key), f"{pre}{block}.{check.key}")
                out += [found] if found else []
        elif check.kind == "engine_flag" and check.key:
            for block, flags in (("build_flags", trt.build_flags), ("runtime_flags", trt.runtime_flags)):
                value = flags.get(check.key, _UNSET)
                found = _value_check(rule, value, f"{pre}trtllm.{block}.{check.key}")
                out += [found] if found else []
        elif check.kind == "serve_option_absent" and check.key and not _exempt(check, dep.recipe, dep.scenario):
            for block, options in _option_sets(trt):
                if _lookup(options, check.key) not in (_UNSET, None):
                    out.append(Violation(rule, f"{pre}{block}.{check.key}", "set", "it unset"))
            if check.flag and check.flag in trt.build_flags:
                out.append(Violation(rule, f"{pre}trtllm.build_flags.{check.flag}", "set", "it unset"))
    return out


def recipe_violations(recipe: Recipe) -> list[Violation]:
    """Every recipe-side rule against every deployment of a recipe that serves through TensorRT-LLM; the CPU demo
    is never a reproduction and is not held to them."""
    if recipe.demo or recipe.trtllm is None:
        return []
    base, *own = recipe.deployments()
    out = deployment_violations(base)
    inherited = {(v.rule.id, v.where, v.found) for v in out}
    for dep in own:  # what a scenario inherits from the base is said once, at the base
        prefix = _scenarios_of(dep)
        out += [v for v in deployment_violations(dep) if (v.rule.id, v.where[len(prefix) :], v.found) not in inherited]
    gen = recipe.bench.generation
    for rule in rulebook().rules:
        if rule.check.kind == "max_tokens" and recipe.loadgen.max_tokens < gen.reference_max:
            out.append(
                Violation(
                    rule,
                    "loadgen.max_tokens",
                    f"{recipe.loadgen.max_tokens:,}",
                    f"benchmark {recipe.benchmark}'s reference maximum {gen.reference_max:,}",
                )
            )
    return out


def request_violations(body: dict[str, Any], bench: Benchmark, where: str) -> list[Violation]:
    """The request-side rules against one request body the client sends (`where` names its form)."""
    out: list[Violation] = []
    gen = bench.generation
    for rule in rulebook().rules:
        kind = rule.check.kind
        if kind == "request_greedy" and gen.decoding == "greedy":
            top_k, temperature = body.get("top_k"), body.get("temperature")
            if top_k != 1 and temperature != 0:
                found = f"top_k {_shown(top_k)}, temperature {_shown(temperature)}"
                out.append(Violation(rule, f"{where} sampling", found, "top_k 1 or temperature 0 (greedy)"))
        elif kind == "request_min_tokens" and "min_tokens" in body and body["min_tokens"] not in gen.allowed_min_tokens:
            allowed = " or ".join(str(n) for n in gen.allowed_min_tokens)
            out.append(Violation(rule, f"{where} min_tokens", _shown(body["min_tokens"]), allowed))
    return out
