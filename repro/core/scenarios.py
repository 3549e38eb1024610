"""The scenarios repro runs, as data: each one's LoadGen scenario, and what follows from it.

Interactive is not a LoadGen scenario of its own: it is LoadGen's Server scenario under the benchmark's
`-interactive` model key and tighter limits (mlcommons/inference @ b66003e1 `loadgen/mlperf.conf`, as the benchmark
files cite it: `llama2-70b-interactive` Server TTFT/TPOT 450/40 ms). Whatever depends on the scenario LoadGen runs
(its TestScenario, the user.conf key, whether first tokens are timed, whether the samples come in one query) asks the
spec, resolved once from the name, and never compares the name: Interactive runs posted unstreamed (TTFT = the whole
answer, every run INVALID) came from a `scenario == "Server"` written where LoadGen's scenario was meant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from repro.core.errors import InputError

LoadGenScenario = Literal["Offline", "Server"]


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    """What repro calls it (`repro run offline|server|interactive`, run.json's `scenario`)."""
    loadgen: LoadGenScenario
    """LoadGen's TestScenario and the scenario part of the user.conf key (`<model>.<loadgen>.<key>`)."""

    @property
    def latency_bound(self) -> bool:
        """LoadGen's Server scenario: queries arrive one by one (Poisson) and each is judged by its TTFT and TPOT."""
        return self.loadgen == "Server"

    @property
    def streams(self) -> bool:
        """A backend that can stream does: LoadGen's Server scenario takes TTFT from the first token reported
        (`FirstTokenComplete`, `use_token_latencies`), which an unstreamed answer reports only once it has ended.
        NVIDIA's harness streams exactly there (AZ51 `closed/Azure/code/llmlib/config.py:180`: streaming off for
        Offline; the executor core streams in Server)."""
        return self.latency_bound

    @property
    def one_query(self) -> bool:
        """LoadGen's Offline issues every sample in one query at the start: the total is known before the run."""
        return self.loadgen == "Offline"


SCENARIOS: tuple[ScenarioSpec, ...] = (
    ScenarioSpec("Offline", "Offline"),
    ScenarioSpec("Server", "Server"),
    ScenarioSpec("Interactive", "Server"),
)
NAMES: tuple[str, ...] = tuple(s.name for s in SCENARIOS)


def scenario_spec(name: str) -> ScenarioSpec:
    """The registered spec of a scenario name; an unknown one is a usage error naming the choices."""
    for spec in SCENARIOS:
        if spec.name == name:
            return spec
    raise InputError(f"Unknown scenario '{name}'; choose Offline, Server or Interactive.", "`repro run offline`")
