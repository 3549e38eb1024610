"""The request bodies `repro run` sends to trtllm-serve, held to MLPerf's request rules (greedy decoding, the
benchmark's minimum output length): `repro recipes validate` and doctor check them beside the recipe's own rules."""

from __future__ import annotations

from repro.core.mlperf_rules import Violation, request_violations
from repro.core.recipes import Recipe

PROBE_IDS = [1, 2, 3]


def request_rule_violations(recipe: Recipe) -> list[Violation]:
    """Every form of the trtllm backend's request (chat and completions, streamed or not) for this recipe; the CPU
    demo and recipes that send no HTTP requests have none."""
    from repro.run.backends.http_client import build_payload

    if recipe.demo or recipe.trtllm is None:
        return []
    out: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    for api in ("chat", "completions"):
        for stream in (False, True):
            body = build_payload(api, PROBE_IDS, recipe.loadgen.max_tokens, stream=stream, model=recipe.model.repo_id)
            for v in request_violations(body, recipe.bench, f"the {api} request repro sends"):
                if (v.rule.id, v.found) not in seen and v.rule.id not in recipe.waive_rules:
                    seen.add((v.rule.id, v.found))
                    out.append(v)
    return out
