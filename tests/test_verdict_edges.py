"""Verdict paths at their edges (issue #44 items 6 and 7), on copies of real published bundles edited in tmp: a
figure next to its limit prints what the comparison decided, the TEST06 re-check uses the benchmark file's EOS id,
a folder is never a reproduction of a recipe whose system it is not, and the words a user reads agree."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from helpers import cli, copy_bundle, edit

DELL405 = "v5.1_Dell_XE9685L_B200_SXM_180GBx8_TRT_llama3.1-405b_Offline"
ROUGEL_FLOOR = 21.6666 * 0.99  # llama3.1-405b.yaml: rougeL reference x the 99% factor


def _near_floor(n: int, seed: int) -> list[float]:
    """Scores a hair either side of the rougeL floor, as an accuracy.txt prints them (many digits or few)."""
    rng = random.Random(seed)
    out = [21.4499, 21.44993, 21.449933, 21.4499334, 21.449934, 21.44994, 21.4500]
    while len(out) < n:
        offset = rng.choice([-1, 1]) * 10 ** rng.uniform(-9, -3)
        out.append(round(ROUGEL_FLOOR + offset, rng.randint(4, 12)))
    return out


@pytest.mark.parametrize("score", _near_floor(24, 44))
def test_a_score_next_to_its_floor_prints_what_was_decided(fixtures: Path, tmp_path: Path, score: float) -> None:
    run = copy_bundle(fixtures, DELL405, tmp_path / "b")
    edit(run / "accuracy/accuracy.txt", "'rougeL': 22.041015729494127", f"'rougeL': {score!r}")
    res = cli("verify", str(run), "--json")
    doc = json.loads(res.stdout)
    check = next(c for c in doc["checks"] if c["name"] == "accuracy rougeL")
    m = re.match(r"([\d.]+) ([≥<]) ([\d.]+) ", check["detail"])
    assert m, check["detail"]
    shown, op, limit = float(m.group(1)), m.group(2), float(m.group(3))
    assert (op == "≥") == (score >= ROUGEL_FLOOR) == check["ok"], (score, check)
    assert (m.group(1) == m.group(3)) == (score == ROUGEL_FLOOR), check["detail"]  # different numbers print apart
    assert (shown >= limit) == (op == "≥"), check["detail"]  # the printed numbers say what the comparison said
    assert res.exit_code == (0 if score >= ROUGEL_FLOOR else 1)


TPS_FLOOR = 684.68 * 0.9  # llama3.1-405b.yaml: tokens_per_sample reference x the band's low end


@pytest.mark.parametrize("tps", [616.2, 616.21, 616.2119, TPS_FLOOR, 616.2121, 616.3, 753.148, 753.1481, 753.15])
def test_tokens_per_sample_next_to_its_band_prints_what_was_decided(fixtures: Path, tmp_path: Path, tps: float) -> None:
    run = copy_bundle(fixtures, DELL405, tmp_path / "b")
    edit(run / "accuracy/accuracy.txt", "'tokens_per_sample': 651.5", f"'tokens_per_sample': {tps!r}")
    doc = json.loads(cli("verify", str(run), "--json").stdout)
    check = next(c for c in doc["checks"] if c["name"] == "accuracy tokens_per_sample")
    m = re.match(r"([\d.]+) (within|outside) ([\d.]+)–([\d.]+) ", check["detail"])
    assert m, check["detail"]
    shown, low, high = (float(m.group(i)) for i in (1, 3, 4))
    inside = TPS_FLOOR <= tps <= 684.68 * 1.1
    assert check["ok"] is inside and (m.group(2) == "within") is inside, check["detail"]
    assert (low <= shown <= high) is inside, check["detail"]


INTERACTIVE = "v5.1_NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Interactive"


@pytest.mark.parametrize("p99_ns", [39_999_999, 40_000_000, 40_000_001, 40_000_049, 40_000_051, 40_040_000])
def test_a_p99_next_to_its_limit_prints_what_was_decided(fixtures: Path, tmp_path: Path, p99_ns: int) -> None:
    from helpers import edit_detail

    run = copy_bundle(fixtures, INTERACTIVE, tmp_path / "b")
    perf = run / "performance/run_1"
    line = "time to output token (ns)   : "
    edit(perf / "mlperf_log_summary.txt", line + "38148975", f"{line}{p99_ns}")
    edit_detail(perf / "mlperf_log_detail.txt", "result_time_per_output_token_99.00_percentile_ns", p99_ns)
    doc = json.loads(cli("verify", str(run), "--json").stdout)
    check = next(c for c in doc["checks"] if c["name"] == "TPOT p99")
    m = re.match(r"([\d,.]+) ms ([≤>]) ([\d,.]+) ms", check["detail"])
    assert m, check["detail"]
    shown, limit = (float(m.group(i).replace(",", "")) for i in (1, 3))
    assert check["ok"] is (p99_ns <= 40_000_000) is (m.group(2) == "≤") is (shown <= limit), check["detail"]


# ---------------------------------------------------------------- TEST06: the benchmark file's EOS id

AZURE405 = "azure-nd-gb200-v6-v5.1-llama3.1-405b"
INT64 = "v5.1_Intel_1-node-4x-BMG-Pro-B60-Dual_llama2-70b-99_Offline_int64"


def _real_405b_entries(fixtures: Path) -> list[dict]:
    """The whole entries of Azure's published 405B accuracy log (the fixture keeps its first 8 KB)."""
    text = (fixtures / AZURE405 / "llama3.1-405b/Offline/accuracy/mlperf_log_accuracy.json").read_text()
    decoder, pos, out = json.JSONDecoder(), text.index("{"), []
    while True:
        try:
            entry, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return out
        out.append(entry)
        pos = text.index("{", pos) if "{" in text[pos:] else len(text)


def _with_tail(entry: dict, tail: list[int], width: str = "<i4") -> dict:
    import numpy as np

    ids = np.concatenate([np.frombuffer(bytes.fromhex(entry["data"]), dtype=width), np.array(tail, dtype=width)])
    return {**entry, "data": ids.astype(width).tobytes().hex().upper(), "token_count": len(ids)}


def _tails(seed: int) -> list[tuple[list[int], int]]:
    """(tokens appended to one sample, how many 128009 it then ends with) mixing ids 2 and 128009, generated."""
    rng = random.Random(seed)
    out = []
    for _ in range(8):
        last, other = rng.choice([(2, 128009), (128009, 2)])
        n = rng.randint(1, 4)
        out.append(([other] * rng.randint(0, 3) + [last] * n, n if last == 128009 else 0))
    return out


@pytest.mark.parametrize(("tail", "n_eos_405b"), [([128009, 128009], 2), ([2, 2], 0), ([128009], 1), *_tails(6)])
def test_test06_counts_the_405b_eos_id(fixtures: Path, tmp_path: Path, tail: list[int], n_eos_405b: int) -> None:
    """A 405B TEST06 log (Dell's bundle, its log built from Azure's real 405B accuracy log): two trailing 128009
    fail the EOS check; two trailing 2 (Llama-2's EOS, an ordinary token in Llama-3's vocabulary) do not."""
    run = copy_bundle(fixtures, DELL405, tmp_path / "b")
    entries = _real_405b_entries(fixtures)
    assert len(entries) >= 3
    log = run / "TEST06/accuracy/mlperf_log_accuracy.json"
    log.parent.mkdir(parents=True)
    log.write_text(json.dumps([_with_tail(entries[1], tail), *entries[2:], entries[0]]))
    doc = json.loads(cli("verify", str(run), "--json").stdout)
    check = next(c for c in doc["checks"] if c["name"] == "TEST06")
    if n_eos_405b > 1:
        assert check["ok"] is False and f"ends with {n_eos_405b} EOS tokens (id 128009)" in check["detail"], check
        assert doc["status"] == "FAIL"
    else:
        assert check["ok"] is True and "EOS: True" in check["detail"], check
        assert doc["status"] == "PASS"


@pytest.mark.parametrize("tail", [[2, 2], [2, 2, 2], [128009, 128009], [128009, 2, 2]])
def test_test06_counts_llama2s_eos_id_on_llama2(fixtures: Path, tmp_path: Path, tail: list[int]) -> None:
    """Intel's real Llama-2 TEST06 log (int64 token ids): two trailing 2 fail; 128009 is no EOS of Llama-2."""
    run = copy_bundle(fixtures, INT64, tmp_path / "b")
    log = run / "TEST06/accuracy/mlperf_log_accuracy.json"
    entries = json.loads(log.read_text())
    entries[3] = _with_tail(entries[3], tail, "<i8")
    log.write_text(json.dumps(entries))
    doc = json.loads(cli("verify", str(run), "--json").stdout)
    check = next(c for c in doc["checks"] if c["name"] == "TEST06")
    trailing_2 = len(tail) - len([t for t in tail if t != 2]) if tail[-1] == 2 else 0
    assert (check["ok"] is False) == (trailing_2 > 1), check


def test_a_test06_folder_without_its_log_is_no_passed_recheck(fixtures: Path, tmp_path: Path) -> None:
    """Dell's published TEST06 folder as the fixture keeps it (verify_accuracy.txt, no accuracy log): what it states
    is shown, never as a passed re-check; a statement of failure still fails."""
    run = copy_bundle(fixtures, DELL405, tmp_path / "b")
    doc = json.loads(cli("verify", str(run), "--json").stdout)
    check = next(c for c in doc["checks"] if c["name"] == "TEST06")
    assert check["ok"] is None and check["detail"].startswith("cannot be re-checked: no accuracy/"), check
    assert doc["test06"] == "cannot be re-checked"
    edit(run / "TEST06/verify_accuracy.txt", "EOS check pass: True", "EOS check pass: False")
    doc = json.loads(cli("verify", str(run), "--json").stdout)
    assert doc["test06"] == "FAIL" and doc["status"] == "FAIL"


# ---------------------------------------------------------------- --against another benchmark


def _records(benchmark: str, accelerator: str, scenario: str, n: int) -> list[str]:
    """Up to n published records of `benchmark` on the same accelerator (model and form factor) as `accelerator`."""
    from repro.core.published import Accelerator, load_index

    mine = Accelerator.parse(accelerator)
    rows = [
        r
        for r in load_index().rows
        if r.benchmark_name == benchmark
        and r.scenario == scenario
        and mine.same_as(Accelerator.parse(r.accelerator_model_name))
    ]
    return [r.ref for r in rows][:n]


@pytest.mark.parametrize(
    ("bundle", "benchmark", "others"),
    [
        ("azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Offline", "llama3.1-405b", "llama2-70b-99"),
        ("azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Offline", "llama3.1-405b", "llama2-70b-99.9"),
        ("azure-nd-gb200-v6-v5.1", "llama2-70b-99", "llama3.1-405b"),
        (DELL405, "llama3.1-405b", "llama2-70b-99"),
    ],
)
def test_against_another_benchmarks_record_is_refused(fixtures: Path, bundle: str, benchmark: str, others: str) -> None:
    """Every record of the other model on the same accelerator: refused (exit 2) as another accelerator is, never
    a -98% or +7,725% FAIL; the JSON names the run's own benchmark."""
    from repro.results.compare import pick_perf_run
    from repro.results.identity import identify

    accelerator = identify(pick_perf_run(fixtures / bundle)).accelerator
    assert accelerator
    refs = _records(others, accelerator, "Offline", 4)
    assert refs, (others, accelerator)
    for ref in refs:
        res = cli("verify", str(fixtures / bundle), "--against", ref, "--json")
        doc = json.loads(res.stdout)
        assert res.exit_code == 2 and doc["status"] == "REFUSED", (ref, doc["reasons"])
        assert doc["run"]["benchmark"] == benchmark and doc["against"][0]["deviation_pct"] is None
        assert doc["against"][0]["refused"].startswith(f"another benchmark: the run is {benchmark}"), doc["against"]
    same = cli("verify", str(fixtures / bundle), "--against", _records(benchmark, accelerator, "Offline", 1)[0])
    assert same.exit_code in (0, 1) and "another benchmark" not in same.output


# ---------------------------------------------------------------- a system that is not the recipe's


def _resized(fixtures: Path, tmp: Path, per_node: int, nodes: int) -> Path:
    """Azure's real GB200 405B bundle as a system of `nodes` x `per_node` GB200 with the same tokens/s per GPU (what
    NVIDIA's 72-GPU NVL72 rack publishes: 18 x 4), so only the system, not the per-GPU figure, differs."""
    from helpers import edit_detail, edit_json

    b = copy_bundle(fixtures, AZURE405, tmp / f"b{per_node}x{nodes}")
    edit_json(b / "ND_GB200_v6.json", accelerators_per_node=per_node, number_of_nodes=nodes)
    perf = b / "llama3.1-405b/Offline/performance/run_1"
    scale = per_node * nodes / 4
    tps, sps = round(847.233 * scale, 3), round(1.29825 * scale, 5)
    edit(perf / "mlperf_log_summary.txt", "Tokens per second: 847.233", f"Tokens per second: {tps}")
    edit(perf / "mlperf_log_summary.txt", "Samples per second: 1.29825", f"Samples per second: {sps}")
    edit_detail(perf / "mlperf_log_detail.txt", "result_tokens_per_second", tps)
    edit_detail(perf / "mlperf_log_detail.txt", "result_samples_per_second", sps)
    return b / "llama3.1-405b/Offline"


@pytest.mark.parametrize(("per_node", "nodes"), [(4, 18), (4, 2), (4, 9), (8, 1), (2, 1), (1, 4), (4, 1)])
def test_a_system_that_is_not_the_recipes_vm_is_never_its_reproduction(
    fixtures: Path, tmp_path: Path, per_node: int, nodes: int
) -> None:
    folder = _resized(fixtures, tmp_path, per_node, nodes)
    res = cli("verify", str(folder), "--recipe", "nd-gb200-v6-405b", "--json")
    doc = json.loads(res.stdout)
    assert doc["deviation_pct"] == pytest.approx(0, abs=0.05)  # the per-GPU figure is the published one
    if (per_node, nodes) == (4, 1):
        assert res.exit_code == 0 and doc["status"] == "PASS" and doc["reproduction"] is True, doc["reasons"]
        return
    assert res.exit_code == 1 and doc["status"] == "NOT A REPRODUCTION" and doc["reproduction"] is False
    assert "is not recipe nd-gb200-v6-405b's (one VM, 4 GPUs)" in doc["reasons"][0], doc["reasons"]
    assert (f"{nodes} nodes" in doc["reasons"][0]) is (nodes > 1)
    assert (f"{per_node * nodes} accelerators" in doc["reasons"][0]) is (per_node * nodes != 4)


@pytest.mark.parametrize("gpus", [1, 2, 3, 5, 8, 72])
def test_a_gpus_override_the_files_contradict_is_never_a_pass(fixtures: Path, tmp_path: Path, gpus: int) -> None:
    """Azure's GB200 405B run (4 GPUs by its system JSON) with tokens/s edited so that `--gpus N` puts it in the
    band: the override and the contradiction are in the JSON and the reasons, and the verdict is no PASS."""
    from helpers import edit_detail

    run = copy_bundle(fixtures, AZURE405, tmp_path / "b") / "llama3.1-405b/Offline"
    tps = round(847.233 * gpus / 4, 3)
    perf = run / "performance/run_1"
    edit(perf / "mlperf_log_summary.txt", "Tokens per second: 847.233", f"Tokens per second: {tps}")
    edit_detail(perf / "mlperf_log_detail.txt", "result_tokens_per_second", tps)
    plain = json.loads(cli("verify", str(run), "--json").stdout)
    assert (plain["status"] == "PASS") is (gpus == 4)
    res = cli("verify", str(run), "--gpus", str(gpus), "--json")
    doc = json.loads(res.stdout)
    assert doc["gpus_override"] == {
        "gpus": gpus,
        "files_give": 4,
        "contradicts": [] if gpus == 4 else ["system JSON ND_GB200_v6.json: 4 per node gives 4"],
    }
    if gpus == 4:
        assert res.exit_code == 0 and doc["status"] == "PASS"
        return
    assert doc["status"] != "PASS" and res.exit_code == 1 and doc["reproduction"] is False
    assert doc["reasons"][0].startswith(f"--gpus {gpus} contradicts the run's own files (system JSON ND_GB200_v6")
    text = cli("verify", str(run), "--gpus", str(gpus)).output
    assert f"--gpus {gpus} contradicts" in text and "Verdict: PASS" not in text


# ---------------------------------------------------------------- a report compares Server with Server

SERVER_CASES = [
    (f"{AZURE405}/llama3.1-405b/Server", "nd-gb200-v6-405b", "Server"),
    (f"{AZURE405}/llama3.1-405b/Offline", "nd-gb200-v6-405b", "Offline"),
    ("nvidia-dgx-h100-v4.1/llama2-70b-99.9/Server", "dgx-h100", "Server"),
    ("nvidia-dgx-h100-v4.1/llama2-70b-99.9/Server", "nc-h100-v5", "Server"),
    ("v5.1_Lenovo_SR680a_V3_B200SXMx8_TRT_llama2-70b-99.9_Server_power", "nd-gb200-v6", "Server"),
    (INTERACTIVE, "nd-gb200-v6", "Interactive"),
]


@pytest.mark.parametrize("scale", [1.0, 0.6, 1.3])
@pytest.mark.parametrize(("bundle", "recipe", "scenario"), SERVER_CASES)
def test_a_report_compares_each_scenario_with_its_own_published_figures(
    fixtures: Path, tmp_path: Path, bundle: str, recipe: str, scenario: str, scale: float
) -> None:
    """Every published figure a report sets beside a run (its first table, its ranking, its explanation) is of the
    run's scenario: a 405B Server run is never read against the 211.8 Offline figure."""
    from helpers import edit_detail

    from repro.core.recipes import all_recipes, get_recipe

    run = copy_bundle(fixtures, bundle, tmp_path / "b")
    summary = next(run.rglob("run_1/mlperf_log_summary.txt"))
    line = next(ln for ln in summary.read_text().splitlines() if "tokens per second" in ln.lower())
    key, value = line.rsplit(":", 1)
    edit(summary, line, f"{key}: {float(value) * scale:.3f}")
    detail_key = "result_completed_tokens_per_second" if scenario != "Offline" else "result_tokens_per_second"
    edit_detail(summary.with_name("mlperf_log_detail.txt"), detail_key, round(float(value) * scale, 3))
    res = cli("report", str(run), "--recipe", recipe, "--json")
    assert res.exit_code in (0, 1), res.output
    doc = json.loads(res.stdout)
    assert doc["scenario"] == scenario
    own = get_recipe(recipe).published_for(scenario)
    assert (doc["published"] or {}).get("tokens_per_s_per_gpu") == (own.tokens_per_s_per_gpu if own else None)
    expected = {
        r.name: r.published_for(scenario).tokens_per_s_per_gpu
        for r in all_recipes()
        if not r.demo
        and r.published_for(scenario) is not None
        and r.published_for(scenario).band() is not None
        and r.bench.mlperf_model == get_recipe(recipe).bench.mlperf_model
    }
    assert {c["recipe"]: c["published_tokens_per_s_per_gpu"] for c in doc["comparisons"]} == expected
    text = cli("report", str(run), "--recipe", recipe).output
    offline_only = {
        f"{float(r.published.tokens_per_s_per_gpu):,.1f}"
        for r in all_recipes()
        if scenario != "Offline"
        and r.published.band() is not None
        and r.name in {c["recipe"] for c in doc["comparisons"]} | {recipe}
    } - {f"{float(v):,.1f}" for v in expected.values()}
    first_table = text.split("2. Run")[0]
    assert not any(figure in first_table for figure in offline_only), (offline_only, first_table)
    if "Among " in first_table:
        assert f" {scenario}, shipped index)" in first_table


# ---------------------------------------------------------------- Next is never the command just run

ALL_BUNDLES = sorted(
    p.name for p in (Path(__file__).parent / "fixtures" / "published").iterdir() if p.is_dir() and p.name != "rack"
)


def _strip(bundle: Path, what: str) -> None:
    import shutil

    for p in sorted(bundle.rglob("*"), reverse=True):
        rel = p.relative_to(bundle).as_posix()
        detail = p.name == "mlperf_log_detail.txt" and "/performance/" in f"/{rel}"
        system = p.suffix == ".json" and p.parent.name in ("systems", bundle.name)
        if what == "accuracy" and p.is_dir() and p.name == "accuracy" and "TEST06" not in rel:
            shutil.rmtree(p)
        elif (what == "detail" and detail) or (what == "system" and system):
            p.unlink()


@pytest.mark.parametrize("what", ["accuracy", "detail", "accuracy+detail", "accuracy+system"])
@pytest.mark.parametrize("bundle", ALL_BUNDLES)
def test_verifys_next_line_is_never_the_command_just_run(fixtures: Path, tmp_path: Path, bundle: str, what: str):
    from repro.core.hints import is_command

    b = copy_bundle(fixtures, bundle, tmp_path / "b")
    for part in what.split("+"):
        _strip(b, part)
    res = cli("verify", str(b), "--json")
    if res.exit_code == 2:  # refused as bad input: its Next is an error's, judged elsewhere
        return
    doc = json.loads(res.stdout)
    nxt = doc["next_command"]
    text = cli("verify", str(b)).output
    lines = [ln.removeprefix("Next: ") for ln in text.splitlines() if ln.startswith("Next: ")]
    assert lines == ([nxt] if nxt else []), (lines, nxt)
    if nxt is None:
        return
    import shlex

    argv = shlex.split(nxt)
    assert is_command(nxt), nxt
    if argv[:2] == ["repro", "verify"]:
        target = Path(next(a for a in argv[2:] if not a.startswith("-"))).resolve()
        assert not (target == b.resolve() or b.resolve() in target.parents or target in b.resolve().parents), nxt


# ---------------------------------------------------------------- v4.0 accuracy folders: a detail log, no summary

WITH_ACCURACY_DETAIL = sorted(
    str(p.parent.parent.relative_to(Path(__file__).parent / "fixtures" / "published"))
    for p in (Path(__file__).parent / "fixtures" / "published").rglob("accuracy/mlperf_log_detail.txt")
    if "TEST06" not in p.parts and p.with_name("mlperf_log_summary.txt").is_file()
)  # Azure's v4.0 bundle published no accuracy summary: test_published_azure_v40.py reads it as it is


@pytest.mark.parametrize("bundle", WITH_ACCURACY_DETAIL)
def test_an_accuracy_folder_without_its_summary_is_read_as_the_accuracy_run(
    fixtures: Path, tmp_path: Path, bundle: str
) -> None:
    """v4.0 submissions published accuracy/ with mlperf_log_detail.txt (AccuracyOnly) and no summary: the folder is
    the accuracy run, never an unfinished performance run; the verdict is the one the whole bundle gets."""
    first = cli("verify", str(fixtures / bundle), "--json")
    whole = json.loads(first.stdout)
    b = copy_bundle(fixtures, bundle, tmp_path / "b")
    (b / "accuracy/mlperf_log_summary.txt").unlink()
    res = cli("verify", str(b), "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == first.exit_code, res.output[-600:]
    if first.exit_code == 2:  # refused for another reason (no recipe, no record): refused the same way
        assert doc["error"]["message"].replace(str(b), "") == whole["error"]["message"].replace(
            str(fixtures / bundle), ""
        )
        return
    assert doc["status"] == whole["status"] and doc["accuracy_verdict"] == whole["accuracy_verdict"]
    assert doc["tokens_per_s"] == whole["tokens_per_s"]


def test_a_performance_detail_without_validity_or_summary_is_still_unfinished(fixtures: Path, tmp_path: Path) -> None:
    """Only LoadGen's own AccuracyOnly mode excuses the missing summary: a performance run's detail log without
    result_validity and without its summary is still a run that did not finish (exit 2)."""
    from helpers import drop_detail

    b = copy_bundle(fixtures, "v4.1_AMD_8xMI300X_2xEPYC-9374F_llama2-70b-99_Offline", tmp_path / "b")
    perf = b / "performance/run_1"
    (perf / "mlperf_log_summary.txt").unlink()
    drop_detail(perf / "mlperf_log_detail.txt", "result_validity")
    res = cli("verify", str(b))
    assert res.exit_code == 2 and "no result_validity entry and no summary; the run did not finish" in res.output
