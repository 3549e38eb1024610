"""Issue #29 items 2, 4 (result files) and 8 (symlink race): a result folder that disagrees with itself never
PASSes, every untrusted result file is read bounded, and a log swapped to a FIFO never hangs verify.

Each case edits a copy of a real published bundle (tests/fixtures/published) in tmp_path; each test fails on
11be551. The memory cases run the real CLI in a child process under a 2 GB address-space cap and read its own
peak RSS, so the old code's multi-GB reads fail fast instead of exhausting the shared machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import add_accuracy

from repro.results.compare import verify_against
from repro.results.logfiles import parse_detail
from repro.results.logs import parse_run
from repro.results.verify import verify_dir

GB300 = "azure-nd-gb300-v6-rack"
GB200 = "azure-nd-gb200-v6-v5.1"
AMD = "v4.1_AMD_8xMI300X_2xEPYC-9374F_llama2-70b-99_Offline"
GB200_PERF = "llama2-70b-99/Offline/performance/run_1"
GB200_ACC = "llama2-70b-99/Offline/accuracy"


def _gb300(fixtures: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of the GB300 rack bundle: (VM 1 folder, its summary, its detail log). VM 1 PASSes once it has an
    accuracy.txt (GB300's accuracy logs were published empty: a real published one of Llama-2-70B is added)."""
    root = tmp_path / "rack"
    shutil.copytree(fixtures / GB300, root)
    vm = root / "ND_GB300_v6_1"
    run = vm / "llama2-70b-99" / "Offline"
    add_accuracy(fixtures, run)
    return vm, run / "mlperf_log_summary.txt", run / "mlperf_log_detail.txt"


def _gb200(fixtures: Path, tmp_path: Path, name: str = "gb200") -> Path:
    dst = tmp_path / name
    shutil.copytree(fixtures / GB200, dst)
    return dst


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


def _reasons(v) -> str:  # type: ignore[no-untyped-def]
    return " | ".join(v.reasons)


def test_the_unedited_bundles_pass(fixtures: Path, tmp_path: Path) -> None:
    """The guard for every case below: the copies PASS before they are edited, and hold no contradiction."""
    vm, _, _ = _gb300(fixtures, tmp_path)
    assert verify_dir(vm).status == "PASS"
    v = verify_dir(_gb200(fixtures, tmp_path))
    assert v.status == "PASS" and not v.run.contradictions and not v.run.evidence_gaps


# --- item 2: the summary and the detail log disagree ---------------------------------------------------------------


def test_summary_valid_but_detail_invalid_fails_naming_both_files(fixtures: Path, tmp_path: Path) -> None:
    vm, _, detail = _gb300(fixtures, tmp_path)
    _edit(detail, '"key": "result_validity", "value": "VALID"', '"key": "result_validity", "value": "INVALID"')
    v = verify_dir(vm)
    assert v.status == "FAIL" and v.exit_code == 1
    assert "mlperf_log_summary.txt says Result is : VALID but mlperf_log_detail.txt says result_validity" in _reasons(v)
    said = v.to_json()
    assert said["reproduction"] is False and any("result_validity 'INVALID'" in c for c in said["contradictions"])


def test_tokens_per_second_beyond_rounding_fails_and_rounding_does_not(fixtures: Path, tmp_path: Path) -> None:
    vm, summary, detail = _gb300(fixtures, tmp_path)
    _edit(summary, "Tokens per second: 62690.8", "Tokens per second: 62690.84")  # rounding: still PASS
    assert verify_dir(vm).status == "PASS"
    _edit(detail, '"result_tokens_per_second", "value": 62690.8', '"result_tokens_per_second", "value": 12538.2')
    v = verify_dir(vm)
    assert v.status == "FAIL"
    assert "mlperf_log_summary.txt says tokens per second 62,690.8 but mlperf_log_detail.txt" in _reasons(v)


def test_a_run_shorter_than_its_own_min_duration_fails(fixtures: Path, tmp_path: Path) -> None:
    """The summary says 'Min duration satisfied : Yes' but its own max latency is 300 s of a 2,400 s setting."""
    vm, summary, detail = _gb300(fixtures, tmp_path)
    _edit(summary, "Max latency (ns)                : 4490471937196", "Max latency (ns)                : 300000000000")
    _edit(detail, '"result_max_latency_ns", "value": 4490471937196', '"result_max_latency_ns", "value": 300000000000')
    v = verify_dir(vm)
    assert v.status == "FAIL"
    assert "the run lasted 300.0 s" in _reasons(v) and "min_duration 2,400 s" in _reasons(v)


def test_a_summary_alone_can_contradict_itself_and_against_does_not_pass_it(fixtures: Path, tmp_path: Path) -> None:
    """The GB200 bundle with its detail log removed: its summary alone says 'Min duration satisfied : Yes' over
    300 s of a 2,400 s setting. Neither the verdict nor `verify --against` (the published-record comparison) PASSes
    it, and the contradiction FAILs it beyond the missing detail log."""
    root = _gb200(fixtures, tmp_path)
    (root / GB200_PERF / "mlperf_log_detail.txt").unlink()
    _edit(
        root / GB200_PERF / "mlperf_log_summary.txt",
        "Max latency (ns)                : 3225601298025",
        "Max latency (ns)                : 300000000000",
    )
    v = verify_dir(root)
    assert v.status == "FAIL" and "the run lasted 300.0 s" in _reasons(v)
    cmp = verify_against(root, ["5.1-0008"])
    assert cmp.status == "FAIL" and any("the run lasted 300.0 s" in n for n in cmp.facts.notes)


def test_an_interactive_run_shorter_than_its_own_min_duration_fails(fixtures: Path, tmp_path: Path) -> None:
    """Server/Interactive: the queries LoadGen generated span 300 s of a 1,200 s setting, yet both files say met."""
    root = tmp_path / "b200"
    shutil.copytree(fixtures / "v5.1_NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Interactive", root)
    assert verify_dir(root).status == "PASS"
    detail = root / "performance" / "run_1" / "mlperf_log_detail.txt"
    _edit(detail, '"generated_query_duration", "value": 1228210705758', '"generated_query_duration", "value": 3e11')
    v = verify_dir(root)
    assert v.status == "FAIL" and "the run lasted 300.0 s (generated_query_duration" in _reasons(v)


def test_summary_and_detail_disagreeing_on_min_duration_met_fails(fixtures: Path, tmp_path: Path) -> None:
    vm, _, detail = _gb300(fixtures, tmp_path)
    _edit(detail, '"result_min_duration_met", "value": true', '"result_min_duration_met", "value": false')
    v = verify_dir(vm)
    assert v.status == "FAIL" and "Min duration satisfied: Yes but mlperf_log_detail.txt" in _reasons(v)


def test_a_setting_that_is_text_is_missing_evidence_not_a_skipped_check(fixtures: Path, tmp_path: Path) -> None:
    vm, _, detail = _gb300(fixtures, tmp_path)
    _edit(detail, '"effective_samples_per_query", "value": 1029600', '"effective_samples_per_query", "value": "lots"')
    v = verify_dir(vm)
    assert v.status == "NOT A REPRODUCTION" and v.exit_code == 1
    assert "effective_samples_per_query is 'lots', not a number" in _reasons(v)
    assert any(c.name == "evidence" and c.ok is None for c in v.checks)


@pytest.mark.parametrize("digits", ["٢٤٠٠٠٠٠", "２４０００００", "2_400_000"])
def test_a_setting_in_other_digits_is_not_a_number(digits: str, fixtures: Path, tmp_path: Path) -> None:
    """Python's int() reads Arabic-Indic and fullwidth digits and underscores; LoadGen never writes them."""
    root = _gb200(fixtures, tmp_path)
    _edit(root / GB200_PERF / "mlperf_log_summary.txt", "min_duration (ms): 2400000", f"min_duration (ms): {digits}")
    v = verify_dir(root)
    assert v.status == "NOT A REPRODUCTION"
    assert f"min_duration (ms) is '{digits}', not a number" in _reasons(v)


@pytest.mark.parametrize("digits", ["٥٢٠٦١.٦", "５２０６１.６", "5_2061.6"])
def test_throughput_in_other_digits_is_an_input_error(digits: str, fixtures: Path, tmp_path: Path) -> None:
    root = _gb200(fixtures, tmp_path)
    _edit(root / GB200_PERF / "mlperf_log_summary.txt", "Tokens per second: 52061.6", f"Tokens per second: {digits}")
    proc = _cli("verify", str(root))
    assert proc.returncode == 2 and "not a number" in proc.stderr and "mlperf_log_summary.txt" in proc.stderr


def test_a_key_logged_twice_with_different_values_fails(fixtures: Path, tmp_path: Path) -> None:
    vm, _, detail = _gb300(fixtures, tmp_path)
    line = next(ln for ln in detail.read_text().splitlines() if '"key": "result_min_latency_ns"' in ln)
    detail.write_text(detail.read_text() + line.replace("9869173812", "1") + "\n")
    v = verify_dir(vm)
    assert v.status == "FAIL"
    assert re.search(r"logs result_min_latency_ns twice with different values: 9869173812 \(line \d+\), 1", _reasons(v))


def test_messages_logged_twice_are_not_contradictions(fixtures: Path, tmp_path: Path) -> None:
    vm, _, detail = _gb300(fixtures, tmp_path)
    assert parse_detail(detail)["repeats"] == []  # the published log repeats generic_message with other texts
    assert not parse_run(vm / "llama2-70b-99" / "Offline").contradictions


# --- item 2: accuracy.txt ------------------------------------------------------------------------------------------

FAILING_SCORES = (
    "{'rouge1': 40.1, 'rouge2': 20.1, 'rougeL': 25.1, 'rougeLsum': 38.0, 'gen_len': 1, 'gen_num': 24576, "
    "'gen_tok_len': 1, 'tokens_per_sample': 273.4}"
)


def test_two_scores_lines_in_accuracy_txt_are_an_input_error(fixtures: Path, tmp_path: Path) -> None:
    root = _gb200(fixtures, tmp_path)
    acc = root / GB200_ACC / "accuracy.txt"
    acc.write_text(FAILING_SCORES + "\n" + acc.read_text())  # the published (passing) line comes last
    proc = _cli("verify", str(root))
    assert proc.returncode == 2
    assert "2 scores lines (lines 1, 5)" in proc.stderr and "accuracy.txt" in proc.stderr


@pytest.mark.parametrize("score", ["'٤٤.٧٤٩٤'", "'４４.７４９４'", "4_4.7494"])
def test_a_score_in_other_digits_is_not_a_score(score: str, fixtures: Path, tmp_path: Path) -> None:
    root = _gb200(fixtures, tmp_path)
    _edit(root / GB200_ACC / "accuracy.txt", "'rouge1': 44.7494", f"'rouge1': {score}")
    v = verify_dir(root)
    assert v.status == "FAIL" and "accuracy rouge1: missing from" in _reasons(v)


def _accuracy_log(entries: int) -> bytes:
    """A LoadGen accuracy log of `entries` samples (int32 token ids in hex), as LoadGen writes it."""
    rows = [
        {"seq_id": i, "qsl_idx": i, "data": (i.to_bytes(4, "little") * 20).hex().upper(), "token_count": 20}
        for i in range(entries)
    ]
    return ("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n").encode()


def test_hash_unlike_a_full_accuracy_log_fails_naming_both_files(fixtures: Path, tmp_path: Path) -> None:
    root = _gb200(fixtures, tmp_path)
    log = root / GB200_ACC / "mlperf_log_accuracy.json"
    log.write_bytes(_accuracy_log(200))
    assert log.stat().st_size > 10 * 1024
    v = verify_dir(root)
    assert v.status == "FAIL"
    assert re.search(
        r"accuracy.txt says hash=ff76eec60562082e\.\.\. but mlperf_log_accuracy.json \([\d,]+ bytes\) hashes to",
        _reasons(v),
    )
    acc = root / GB200_ACC / "accuracy.txt"
    _edit(acc, "hash=ff76eec60562082e7d042390d53fd4a58969102cdb4ce8b256030b6314e009ca", "hash=" + _sha(log))
    v = verify_dir(root)
    assert v.status == "PASS"
    assert next(c for c in v.checks if c.name == "accuracy.txt hash").ok is True


def test_a_small_log_repro_wrote_must_match_its_hash(fixtures: Path, tmp_path: Path) -> None:
    """A log repro wrote is never truncated, so even under 10 KiB it is the full one."""
    root = _gb200(fixtures, tmp_path)
    log = root / GB200_ACC / "mlperf_log_accuracy.json"
    log.write_bytes(_accuracy_log(5))
    assert log.stat().st_size < 10 * 1024
    assert verify_dir(root).status == "PASS"  # a published log this small cannot be re-checked: said, not failed
    (root / GB200_ACC / "run.json").write_text(json.dumps({"repro_version": "0.1.0", "mode": "AccuracyOnly"}))
    v = verify_dir(root, recipe="nd-gb200-v6")
    assert v.status == "FAIL" and "a log repro wrote is never truncated" in _reasons(v)


def test_a_truncated_published_log_is_said_to_be_unrecheckable(fixtures: Path, tmp_path: Path) -> None:
    root = tmp_path / "amd"
    shutil.copytree(fixtures / AMD, root)
    run = parse_run(root / "performance" / "run_1")
    assert run.accuracy_log_hash is not None and run.accuracy_log_hash.ok is None
    assert "cut to its first and last 4 KB by MLCommons' truncate_accuracy_log.py" in run.accuracy_log_hash.detail
    assert not run.contradictions


# --- item 2: a de-duplicated copy, a system JSON from anywhere ------------------------------------------------------


def test_an_identical_copy_cannot_hide_its_siblings_failing_accuracy(fixtures: Path, tmp_path: Path) -> None:
    """The same run published twice: the first copy's accuracy passes, the second's fails; not a PASS."""
    tree = tmp_path / "tree"
    _gb200(fixtures, tree, "a")
    b = _gb200(fixtures, tree, "b")
    _edit(b / GB200_ACC / "accuracy.txt", "'rouge1': 44.7494", "'rouge1': 40.1")
    v = verify_dir(tree, recipe="nd-gb200-v6")
    assert v.status == "FAIL"
    assert "accuracy rouge1: 40.1000 < " in _reasons(v) and str(tree / "b") in _reasons(v)


def test_an_identical_copy_cannot_hide_its_siblings_failing_test06(fixtures: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _gb200(fixtures, tree, "a")
    b = _gb200(fixtures, tree, "b")
    test06 = b / "llama2-70b-99" / "Offline" / "TEST06"
    test06.mkdir()
    (test06 / "verify_accuracy.txt").write_text(
        "First token check pass: Skipped\nEOS check pass: True\nSample length check pass: False\n"
        "TEST06 verification failed\n"
    )
    v = verify_dir(tree, recipe="nd-gb200-v6")
    assert v.status == "FAIL" and "TEST06" in _reasons(v) and str(tree / "b") in _reasons(v)


def test_a_system_json_in_an_arbitrary_ancestor_is_not_the_runs(fixtures: Path, tmp_path: Path) -> None:
    """A JSON five levels up (say in /tmp) describes nothing about this run; beside it or in systems/ it does."""
    top = tmp_path / "x"
    run = top / "a" / "b" / "c" / "d" / "run"
    shutil.copytree(fixtures / GB200 / GB200_PERF, run)
    shutil.copy(fixtures / GB200 / "ND_GB200_v6.json", top / "ND_GB200_v6.json")
    assert parse_run(run).system_path is None
    (run / "systems").mkdir()
    shutil.copy(fixtures / GB200 / "ND_GB200_v6.json", run / "systems")
    assert parse_run(run).system_path == run / "systems" / "ND_GB200_v6.json"


def test_the_submission_layout_finds_systems_beside_results(fixtures: Path, tmp_path: Path) -> None:
    sub = tmp_path / "closed" / "Azure"
    scenario = sub / "results" / "ND_GB200_v6" / "llama2-70b-99" / "Offline"
    shutil.copytree(fixtures / GB200 / "llama2-70b-99" / "Offline", scenario)
    (sub / "systems").mkdir(parents=True)
    shutil.copy(fixtures / GB200 / "ND_GB200_v6.json", sub / "systems")
    v = verify_dir(scenario)
    assert v.run.system_path == sub / "systems" / "ND_GB200_v6.json" and v.status == "PASS"


# --- item 4: memory bounded by what is parsed -----------------------------------------------------------------------

_PEAK = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from typer.testing import CliRunner
from repro.cli import app
res = CliRunner().invoke(app, sys.argv[1:])
exc = res.exception if not isinstance(res.exception, SystemExit) else None
hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))  # this image's peak, in KB
print("RESULT", res.exit_code, type(exc).__name__ if exc else "-", hwm)
print(res.output[-1500:])
"""


def _peak(*args: str, timeout: float = 240) -> tuple[int, float, str]:
    """(exit code, peak RSS in MB, output) of the CLI in a child capped at 2 GB of address space."""
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, *args], capture_output=True, text=True, timeout=timeout, cwd=tempfile.gettempdir()
    )
    m = re.search(r"^RESULT (-?\d+) (\S+) (\d+)$", proc.stdout, re.M)
    assert m, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert m.group(2) == "-", f"{m.group(2)} escaped: {proc.stdout[-2000:]}"
    assert time.monotonic() - start < timeout
    return int(m.group(1)), int(m.group(3)) / 1024, proc.stdout


def test_a_200_mb_test06_log_of_empty_objects_is_bounded(fixtures: Path, tmp_path: Path) -> None:
    vm, _, _ = _gb300(fixtures, tmp_path)
    acc = vm / "llama2-70b-99" / "Offline" / "TEST06" / "accuracy"
    acc.mkdir(parents=True)
    with open(acc / "mlperf_log_accuracy.json", "wb") as fh:
        fh.write(b"[")
        block = b"{}," * (1 << 20)
        for _ in range(68):
            fh.write(block)
        fh.write(b"{}]")
    assert (acc / "mlperf_log_accuracy.json").stat().st_size > 200 << 20
    code, rss, out = _peak("verify", str(vm))
    assert code == 1 and rss < 500, (code, rss, out)
    assert "more than 100,000 entries" in out


def test_a_1_gb_line_in_the_detail_log_is_bounded(fixtures: Path, tmp_path: Path) -> None:
    vm, _, detail = _gb300(fixtures, tmp_path)
    with open(detail, "ab") as fh:
        fh.write(b":::MLLOG ")
        fh.truncate(fh.tell() + (1 << 30))  # a sparse 1 GB line: no disk, 1 GB to read
    code, rss, out = _peak("verify", str(vm))
    assert code in (0, 1) and rss < 500, (code, rss, out)


def test_64_mb_of_list_values_under_fresh_keys_is_not_kept_whole(fixtures: Path, tmp_path: Path) -> None:
    """What is kept is capped, not only what is read: 64 MB of `[1.5, ...]` values expand to 550 MB on 11be551."""
    vm, _, detail = _gb300(fixtures, tmp_path)
    body = ", ".join(["1.5"] * 200_000)
    with open(detail, "a") as fh:
        for i in range(64):
            fh.write(f':::MLLOG {{"key": "k{i}", "value": [{body}]}}\n')
    code, rss, out = _peak("verify", str(vm))
    assert code == 0 and rss < 500, (code, rss, out)


def test_a_6_gb_sparse_tail_on_a_summary_is_bounded(fixtures: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _gb200(fixtures, tree, "a")
    b = _gb200(fixtures, tree, "b")  # two copies: verify hashes the summaries to tell copies apart
    summary = b / GB200_PERF / "mlperf_log_summary.txt"
    with open(summary, "ab") as fh:
        fh.write(b"\n" * 8192)
        fh.truncate(fh.tell() + (6 << 30))
    code, rss, out = _peak("verify", str(tree), "--recipe", "nd-gb200-v6")
    assert code == 2 and rss < 500, (code, rss, out)
    assert "larger than 4 MB" in out


def test_a_60_mb_accuracy_txt_line_is_bounded(fixtures: Path, tmp_path: Path) -> None:
    root = _gb200(fixtures, tmp_path)
    acc = root / GB200_ACC / "accuracy.txt"
    acc.write_bytes(b"{'rouge1': 44.0" + b", 'x': 1" * (60 << 17) + b"}\n" + acc.read_bytes())
    assert acc.stat().st_size > 60 << 20
    code, rss, out = _peak("verify", str(root))
    assert code == 2 and rss < 500, (code, rss, out)


_READ_LOG = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from pathlib import Path
from repro.core.errors import InputError
from repro.results.accuracy import read_accuracy_log
try:
    read_accuracy_log(Path(sys.argv[1]))
    said = "read"
except InputError as exc:
    said = exc.message
hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(hwm, said)
"""


def test_an_accuracy_log_of_200_mb_of_empty_objects_is_read_bounded(tmp_path: Path) -> None:
    """`repro explain` and the accuracy scorer read a run's mlperf_log_accuracy.json: streamed, it stops at the
    first entry that is not a sample instead of expanding 66 million dicts (12 GB on 11be551)."""
    log = tmp_path / "mlperf_log_accuracy.json"
    with open(log, "wb") as fh:
        fh.write(b"[")
        for _ in range(68):
            fh.write(b"{}," * (1 << 20))
        fh.write(b"{}]")
    proc = subprocess.run(
        [sys.executable, "-c", _READ_LOG, str(log)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    kb, _, said = proc.stdout.partition(" ")
    assert proc.returncode == 0 and int(kb) < 500 << 10, (proc.stdout, proc.stderr[-2000:])
    assert "entry 0 lacks 'qsl_idx'" in said


# --- item 8: a log swapped to a FIFO between a check and the open ---------------------------------------------------

_RACE = """
import sys
from pathlib import Path
from repro.core.errors import InputError
from repro.results.logfiles import parse_detail
ok = refused = 0
for _ in range(int(sys.argv[2])):
    try:
        parse_detail(Path(sys.argv[1]))
        ok += 1
    except InputError:
        refused += 1
print(ok, refused)
"""


def test_a_detail_log_swapped_to_a_fifo_never_hangs(tmp_path: Path) -> None:
    """Another process flips the log's symlink between a real file and a FIFO as fast as it can; every parse ends
    (the old code checked one handle and read a second, which could open the FIFO and block for ever)."""
    real = tmp_path / "real.txt"
    real.write_text(':::MLLOG {"key": "result_validity", "value": "VALID"}\n' * 4)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    log = tmp_path / "mlperf_log_detail.txt"
    log.symlink_to(real)
    flipper = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys\n"
            "d, real, fifo = sys.argv[1:]\n"
            "i = 0\n"
            "while True:\n"
            "    tmp = os.path.join(d, f'.flip{i % 2}')\n"
            "    os.symlink(fifo if i % 2 else real, tmp)\n"
            "    os.replace(tmp, os.path.join(d, 'mlperf_log_detail.txt'))\n"
            "    i += 1\n",
            str(tmp_path),
            str(real),
            str(fifo),
        ]
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _RACE, str(log), "3000"], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )
    except subprocess.TimeoutExpired:
        pytest.fail("parsing a log whose symlink flips to a FIFO hung")
    finally:
        flipper.kill()
        flipper.wait()
    ok, refused = map(int, proc.stdout.split())
    assert ok + refused == 3000 and ok > 0 and refused > 0, proc.stdout


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", "from repro.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    return proc


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("count", ["٤", "４"])
def test_an_accelerator_count_in_other_digits_is_not_a_count(count: str, fixtures: Path, tmp_path: Path) -> None:
    """int() reads '٤' as 4: a system JSON saying so gives no count, and the note says it is unusable."""
    root = _gb200(fixtures, tmp_path)
    system = root / "ND_GB200_v6.json"
    doc = json.loads(system.read_text())
    doc["accelerators_per_node"] = count
    system.write_text(json.dumps(doc))
    v = verify_dir(root)
    assert "unusable accelerator count" in " ".join(v.notes) and not v.gpus_source.startswith("system JSON")
