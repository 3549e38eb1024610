"""The cost of a token: USD per million output tokens (MLPerf's basis: LoadGen counts output tokens) and per
million total tokens (input + output, InferenceX's basis), from a price per VM-hour, with measured tokens per joule
beside it when the run sampled power.csv. Every figure says what it rests on; none is computed from a guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from repro.core.prices import Price, resolve_price
from repro.core.recipes import Recipe
from repro.results.index_match import count_value
from repro.results.logs import LoadGenRun

MLPERF_BASIS = "MLPerf's basis: LoadGen's tokens/s counts generated tokens"
TOTAL_BASIS = "total tokens, input + output (InferenceX's basis)"


@dataclass
class TokenCost:
    price: Price | None
    why: str
    """Where the price came from ("given", "table") or why there is none."""
    vms: int
    tokens_per_s: float
    per_million_output: float | None = None
    input_per_sample: float | None = None
    output_per_sample: float | None = None
    input_basis: str = ""
    per_million_total: float | None = None
    tokens_per_joule: float | None = None
    joule_basis: str = "no power.csv in the run folder"
    vms_basis: str = "one VM"

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.price is None else self.price.usd_per_hour * self.vms

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, figure, basis) for every view."""
        if self.price is None:
            out = [("$ per million output tokens", "no price known", self.why)]
        else:
            hourly = f"{self.price.basis}" + (f" x {self.vms_basis}" if self.vms > 1 else "")
            total = (
                f"input + output, InferenceX's basis: {self.input_per_sample:,.1f} input + "
                f"{self.output_per_sample:,.1f} output tokens per sample (input {self.input_basis})"
                if self.per_million_total is not None and self.input_per_sample and self.output_per_sample
                else f"input + output, InferenceX's basis: input tokens {self.input_basis}"
            )
            out = [
                (
                    "$ per million output tokens",
                    _usd(self.per_million_output),
                    f"{hourly} / 3600 / {self.tokens_per_s:,.1f} output tokens/s x 10^6 ({MLPERF_BASIS})",
                ),
                (
                    "$ per million total tokens",
                    _usd(self.per_million_total) if self.per_million_total is not None else "not computed",
                    total,
                ),
            ]
        tpj = f"{self.tokens_per_joule:,.2f}" if self.tokens_per_joule is not None else "not measured"
        out.append(("output tokens per joule", tpj, self.joule_basis))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "price": self.price.to_json() if self.price else None,
            "price_note": self.why,
            "vms": self.vms,
            "vms_basis": self.vms_basis,
            "output_tokens_per_s": self.tokens_per_s,
            "usd_per_million_output_tokens": _round(self.per_million_output),
            "usd_per_million_total_tokens": _round(self.per_million_total),
            "output_basis": MLPERF_BASIS,
            "total_basis": TOTAL_BASIS,
            "input_tokens_per_sample": self.input_per_sample,
            "output_tokens_per_sample": self.output_per_sample,
            "input_basis": self.input_basis,
            "tokens_per_joule": self.tokens_per_joule,
            "tokens_per_joule_basis": self.joule_basis,
        }


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.3f}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def nodes_of(run: LoadGenRun) -> tuple[int, str]:
    """The VMs (nodes) one run's system had and where that is stated: its system JSON's number_of_nodes (an NVL72
    rack is 18 ND GB200 v6 VMs), or run.json's `system` for one system repro ran over many nodes (trtllm.system
    recipes); 1 for a folder that is one node of a system, for a run on one VM and when nothing says."""
    if run.system_node_of:
        return 1, "one node of a system"
    own = run.run_info.system if run.run_info is not None else None
    if isinstance(own, dict) and own.get("number_of_nodes") is not None:
        return count_value(own["number_of_nodes"]) or 1, "run.json"
    if run.system and run.system.get("number_of_nodes") is not None:
        return count_value(run.system["number_of_nodes"]) or 1, "the system JSON"
    return 1, ""


def vms_of(runs: list[LoadGenRun]) -> tuple[int, str]:
    """(VMs the runs' tokens were made on, in words): every run's own system counted, summed over the runs."""
    counted = [nodes_of(r) for r in runs]
    total = max(1, sum(n for n, _ in counted))
    multi = [n for n, _ in counted if n > 1]
    if not multi:
        return total, f"{total} VM{'s' if total > 1 else ''}, one per run"
    where = " and ".join(dict.fromkeys(w for n, w in counted if n > 1))
    return total, f"{total} VMs: number_of_nodes in {where} ({' + '.join(str(n) for n, _ in counted)})"


def token_cost(
    runs: list[LoadGenRun], recipe: Recipe | None, price_per_hour: float | None, input_tokens: tuple[float | None, str]
) -> TokenCost:
    """The cost of the runs' tokens (one run per VM, summed). `input_tokens` is (mean prompt tokens, how known)."""
    tokens = sum(float(r.tokens_per_s or 0.0) for r in runs)
    samples = sum(float(r.samples_per_s or 0.0) for r in runs)
    infos = [r.run_info for r in runs if r.run_info is not None]
    vm_size = next((i.vm_size for i in infos if i.vm_size), None) or (recipe.system.vm_size if recipe else None)
    vm_name = recipe.title if recipe is not None and recipe.system.vm_size == vm_size else vm_size
    price, why = resolve_price(price_per_hour, vm_size, vm_name)
    vms, vms_basis = vms_of(runs)
    cost = TokenCost(price, why, vms, tokens, vms_basis=vms_basis)
    if price is not None and tokens > 0 and math.isfinite(tokens):
        cost.per_million_output = price.usd_per_hour * cost.vms / 3600 / tokens * 1e6
    cost.input_per_sample, cost.input_basis = input_tokens
    cost.output_per_sample = tokens / samples if samples > 0 else None
    if cost.per_million_output is not None and cost.input_per_sample is not None and cost.output_per_sample:
        total_per_s = tokens * (1 + cost.input_per_sample / cost.output_per_sample)
        cost.per_million_total = price.usd_per_hour * cost.vms / 3600 / total_per_s * 1e6 if price else None
    if runs and all((r.folder / "power.csv").is_file() for r in runs):  # verify loads no run stage without one
        from repro.run.power import read_power

        powers = [(r, read_power(r.folder)) for r in runs]
    else:
        powers = []
    if powers and all(p is not None for _, p in powers):
        watts = sum(p.mean_watts_total for _, p in powers if p is not None)
        if watts > 0:
            cost.tokens_per_joule = tokens / watts
            cost.joule_basis = f"output tokens/s / mean NVML watts ({watts:,.0f} W) from power.csv"
    return cost
