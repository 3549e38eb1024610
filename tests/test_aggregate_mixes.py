"""`aggregate` sums one kind of result only, by the rule `verify A B` refuses by (issue #44 item 5): results of
another benchmark, round, division, submitter or system are excluded naming what differs, or, when no kind is the
most, the whole set is refused (exit 2); the answer never depends on PYTHONHASHSEED.

Inputs are Azure's real GB300 rack VM logs, each copied into its own folder with its system JSON and edited to be
another kind of result (its benchmark folder, its round's path, its division or submitter), and made another run
(helpers.as_another_run) so that no duplicate is merged away.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import CLI, add_accuracy, as_another_run, cli, edit_json

RACK = "azure-nd-gb300-v6-rack"
VMS = ("ND_GB300_v6_1", "ND_GB300_v6_4", "ND_GB300_v6_16")


def _vm(fixtures: Path, root: Path, vm: str, i: int, **kind: str) -> Path:
    """One VM's run as its own result folder: `benchmark`, `round`, `division` or `submitter` made another."""
    parent = root / (f"inference_results_{kind['round']}" if "round" in kind else "") / f"v{i}"
    shutil.copytree(fixtures / RACK / vm, parent / vm)
    shutil.copy(fixtures / RACK / "ND_GB300_v6.json", parent)
    as_another_run(parent / vm, i)
    if "benchmark" in kind:
        (parent / vm / "llama2-70b-99").rename(parent / vm / kind["benchmark"])
    edit_json(parent / "ND_GB300_v6.json", **{k: v for k, v in kind.items() if k in ("division", "submitter")})
    bench = kind.get("benchmark", "llama2-70b-99")
    if bench.startswith("llama2"):
        add_accuracy(fixtures, parent / vm / bench / "Offline")
    return parent / vm


MIXES = {
    "round": [{"round": "v6.0"}, {"round": "v5.1"}],
    "division": [{"division": "closed"}, {"division": "open"}],
    "submitter": [{"submitter": "Azure"}, {"submitter": "NVIDIA"}, {"submitter": "Dell"}, {"submitter": "HPE"}],
}


def _folders(fixtures: Path, root: Path, kinds: list[dict]) -> list[Path]:
    return [_vm(fixtures, root, VMS[i % 3], i, **k) for i, k in enumerate(kinds)]


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_a_tie_of_kinds_is_refused_as_verify_a_b_refuses_it(fixtures: Path, tmp_path: Path, mix: str) -> None:
    folders = _folders(fixtures, tmp_path, MIXES[mix])
    res = cli("aggregate", *map(str, folders), "--json")
    assert res.exit_code == 2, res.output[-1000:]
    err = json.loads(res.stdout)["error"]["message"]
    assert "results of different kinds, none of them the most, never summed" in err, err
    assert f"{mix} " in err, err
    pair = cli("verify", *map(str, folders[:2]))
    assert pair.exit_code == 2 and "are different configurations" in pair.output and f"{mix} " in pair.output


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_the_minority_kind_is_excluded_naming_what_differs(fixtures: Path, tmp_path: Path, mix: str) -> None:
    major, minor = MIXES[mix][0], MIXES[mix][1]
    folders = _folders(fixtures, tmp_path, [major, minor, major])
    for order in (folders, folders[::-1], [folders[1], folders[0], folders[2]]):
        res = cli("aggregate", *map(str, order), "--json")
        assert res.exit_code == 1, res.output[-1000:]
        doc = json.loads(res.stdout)
        assert doc["stats"]["vms"] == 2, doc
        ((name, why),) = [(n, w) for n, w in doc["excluded_why"].items()]
        assert why.startswith(f"another {mix}: "), why
        assert f"v1/{VMS[1]}" in name or name.endswith(VMS[1]) or "v1" in name, name


GB200_70B = "azure-nd-gb200-v6-v5.1"
GB200_405B = "azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Offline"


def _two_models(fixtures: Path, root: Path, seventy: int) -> list[Path]:
    """The two models one Azure GB200 VM published (its real 405B and 70B bundles), the 70B one `seventy` times
    as that many runs."""
    out = [root / "405b"]
    shutil.copytree(fixtures / "azure-nd-gb200-v6-v5.1-llama3.1-405b", out[0])
    out[0] = out[0] / "llama3.1-405b/Offline"
    for i in range(seventy):
        shutil.copytree(fixtures / GB200_70B, root / f"70b-{i}")
        out.append(as_another_run(root / f"70b-{i}", i))
    return out


@pytest.mark.parametrize("seventy", [1, 2, 3])
def test_two_models_of_one_machine_are_never_summed(fixtures: Path, tmp_path: Path, seventy: int) -> None:
    folders = _two_models(fixtures, tmp_path, seventy)
    for order in (folders, folders[::-1]):
        res = cli("aggregate", *map(str, order), "--json")
        assert res.exit_code == 2, res.output[-800:]
        assert "never summed" in json.loads(res.stdout)["error"]["message"]
    pair = cli("verify", *map(str, folders[:2]))
    assert pair.exit_code == 2 and "benchmark llama2-70b-99 vs llama3.1-405b" in " ".join(pair.output.split())
    one = json.loads(cli("aggregate", *map(str, folders), "--recipe", "nd-gb200-v6", "--json").stdout)
    assert (
        one["stats"]["vms"] == seventy
        and one["excluded_why"]
        == {"405b": "another benchmark: llama3.1-405b (llama3.1-405b in the path), the rack's is llama2-70b-99"}
        or list(one["excluded_why"].values())
        == ["another benchmark: llama3.1-405b (llama3.1-405b in the path), the rack's is llama2-70b-99"]
    ), one["excluded_why"]


@pytest.mark.parametrize("mix", ["benchmark", "submitter", "division"])
def test_aggregate_is_the_same_under_every_hash_seed(fixtures: Path, tmp_path: Path, mix: str) -> None:
    """The same folders, the same answer, whatever PYTHONHASHSEED (a 405B and a 70B run gave 277.3 or 23,113.1
    tokens/s by the set's order); each in its own interpreter."""
    if mix == "benchmark":
        folders = _two_models(fixtures, tmp_path, 1)
    else:
        folders = _folders(fixtures, tmp_path, [*MIXES[mix], MIXES[mix][0]])
    import subprocess

    # Independent interpreters, started at once (each its own seed): the answers are compared when all are done.
    procs = [
        subprocess.Popen(
            [*CLI, "aggregate", *map(str, folders), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed, "COLUMNS": "200"},
        )
        for seed in ("0", "1", "2", "3", "44", "random")
    ]
    outs = set()
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode in (1, 2), stderr[-2000:]
        outs.add((proc.returncode, stdout))
    assert len(outs) == 1, [o[1][:400] for o in outs]
