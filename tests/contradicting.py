"""Self-contradicting result folders (issue #29 item 2), built from real published bundles.

Each edit makes a copy of a published bundle disagree with itself in one way a hand-edited or assembled folder
would; `build` applies several to one copy. Shared by the property suite (tests/test_fuzz.py) and the counting
probe (benchmarks/contradicting_folders.py), so both try the same inputs. None of the results may PASS.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "published"
GB300 = FIXTURES / "azure-nd-gb300-v6-rack"
GB200 = FIXTURES / "azure-nd-gb200-v6-v5.1"
PERF = Path("llama2-70b-99/Offline/performance/run_1")
ACC = Path("llama2-70b-99/Offline/accuracy")
OTHER_DIGITS = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")

Edit = Callable[[Path, random.Random], None]


def _sub(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    if old not in text:
        raise AssertionError(f"{path}: {old!r} not found")
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _set_line(path: Path, prefix: str, value: str) -> None:
    """The line starting with `prefix` now ends with `value` (edits of one line compose in any order)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith(prefix))
    lines[i] = prefix + value
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _odd_digits(text: str, rng: random.Random) -> str:
    return rng.choice([text.translate(OTHER_DIGITS), text.translate(FULLWIDTH), text[:1] + "_" + text[1:]])


# --- the GB300 VM 1 run: summary and detail log beside each other (PASSes as published) -----------------------------


def _vm(root: Path) -> Path:
    return root / "ND_GB300_v6_1" / "llama2-70b-99" / "Offline"


def _detail_value(root: Path, key: str, old: str, new: str) -> None:
    _sub(_vm(root) / "mlperf_log_detail.txt", f'"key": "{key}", "value": {old}', f'"key": "{key}", "value": {new}')


def detail_invalid(root: Path, rng: random.Random) -> None:
    _detail_value(root, "result_validity", '"VALID"', '"INVALID"')


def detail_tokens(root: Path, rng: random.Random) -> None:
    _detail_value(root, "result_tokens_per_second", "62690.8", f"{62690.8 * rng.choice([0.2, 0.5, 0.9, 1.1, 5]):.1f}")


def summary_tokens(root: Path, rng: random.Random) -> None:
    new = f"{62690.8 * rng.choice([0.95, 0.98, 1.01, 1.02]):.1f}"
    _set_line(_vm(root) / "mlperf_log_summary.txt", "Tokens per second: ", new)


def shorter_than_setting(root: Path, rng: random.Random) -> None:
    ns = rng.randrange(1, 2_399) * 10**9
    _set_line(_vm(root) / "mlperf_log_summary.txt", "Max latency (ns)                : ", str(ns))
    _detail_value(root, "result_max_latency_ns", "4490471937196", str(ns))


def min_duration_met_flag(root: Path, rng: random.Random) -> None:
    _detail_value(root, "result_min_duration_met", "true", "false")


def min_duration_setting(root: Path, rng: random.Random) -> None:
    _detail_value(root, "effective_min_duration_ms", "2400000", str(rng.choice([600000, 1200000, 4800000])))


def repeated_key(root: Path, rng: random.Random) -> None:
    detail = _vm(root) / "mlperf_log_detail.txt"
    key = rng.choice(["result_min_latency_ns", "result_samples_per_second", "effective_samples_per_query"])
    line = next(ln for ln in detail.read_text().splitlines() if f'"key": "{key}"' in ln)
    entry = json.loads(line[len(":::MLLOG") :])
    old = entry["value"]
    entry["value"] = old * 2 + 1 if isinstance(old, (int, float)) and not isinstance(old, bool) else 12345
    detail.write_text(detail.read_text() + ":::MLLOG " + json.dumps(entry) + "\n")


def setting_is_text(root: Path, rng: random.Random) -> None:
    value = rng.choice(['"lots"', '"1029600"', "null", "true", '"1O29600"'])
    _detail_value(root, "effective_samples_per_query", "1029600", value)


def summary_setting_digits(root: Path, rng: random.Random) -> None:
    _set_line(_vm(root) / "mlperf_log_summary.txt", "min_duration (ms): ", _odd_digits("2400000", rng))


def summary_tokens_digits(root: Path, rng: random.Random) -> None:
    _set_line(_vm(root) / "mlperf_log_summary.txt", "Tokens per second: ", _odd_digits("62690.8", rng))


def detail_scenario(root: Path, rng: random.Random) -> None:
    _detail_value(root, "effective_scenario", '"Offline"', '"Server"')


def junk_keys_before_a_result(root: Path, rng: random.Random) -> None:
    """#36 item 3a: a result key moved after more junk keys than the parser keeps, its value flipped."""
    detail = _vm(root) / "mlperf_log_detail.txt"
    lines = detail.read_text().split("\n")
    key = rng.choice(["result_validity", "result_min_duration_met", "result_tokens_per_second"])
    at = next(i for i, ln in enumerate(lines) if f'"key": "{key}"' in ln)
    moved = lines.pop(at)
    flip = {'"VALID"': '"INVALID"', "true": "false"}
    for old, new in flip.items():
        moved = moved.replace(f'"value": {old}', f'"value": {new}')
    if key == "result_tokens_per_second":
        entry = json.loads(moved[len(":::MLLOG") :])
        entry["value"] = entry["value"] * 2
        moved = ":::MLLOG " + json.dumps(entry)
    junk = "".join(f':::MLLOG {{"key": "junk_{i}", "value": {i}}}\n' for i in range(rng.randrange(10_001, 10_200)))
    detail.write_text("\n".join(lines) + junk + moved + "\n")


def summary_line_twice(root: Path, rng: random.Random) -> None:
    """#36 item 3b: a summary line stated twice, the second hidden behind a separator or on its own line."""
    summary = _vm(root) / "mlperf_log_summary.txt"
    line = rng.choice(["Result is : VALID", "Tokens per second: 62690.8", "  Min duration satisfied : Yes"])
    other = line.replace("VALID", "INVALID").replace("62690.8", "99999.9").replace("Yes", "No")
    sep = rng.choice(["\n", "\x1e", "\x1c", "\u2028", "\x85"])
    _sub(summary, line, other + sep + line)


VM_EDITS: dict[str, Edit] = {
    "result key after 10,000 junk keys": junk_keys_before_a_result,
    "a summary line stated twice": summary_line_twice,
    "detail says INVALID": detail_invalid,
    "detail tokens/s": detail_tokens,
    "summary tokens/s": summary_tokens,
    "shorter than its min duration": shorter_than_setting,
    "min duration met: summary yes, detail no": min_duration_met_flag,
    "min_duration setting differs": min_duration_setting,
    "a key logged twice": repeated_key,
    "a setting that is text": setting_is_text,
    "a setting in other digits": summary_setting_digits,
    "tokens/s in other digits": summary_tokens_digits,
    "scenario differs": detail_scenario,
}


# --- the GB200 bundle: performance/run_1 and accuracy/ (PASSes as published) ------------------------------------------

FAILING_SCORES = (
    "{'rouge1': 40.1, 'rouge2': 20.1, 'rougeL': 25.1, 'rougeLsum': 38.0, 'gen_len': 1, 'gen_num': 24576, "
    "'gen_tok_len': 1, 'tokens_per_sample': 273.4}"
)


def _bundle(root: Path) -> Path:
    return root / "a"


def two_scores_lines(root: Path, rng: random.Random) -> None:
    acc = _bundle(root) / ACC / "accuracy.txt"
    lines = acc.read_text().splitlines()
    lines.insert(rng.randrange(len(lines) + 1), FAILING_SCORES)
    acc.write_text("\n".join(lines) + "\n")


def score_digits(root: Path, rng: random.Random) -> None:
    _sub(_bundle(root) / ACC / "accuracy.txt", "'rouge1': 44.7494", "'rouge1': " + _odd_digits("44.7494", rng))


def accuracy_log_hash(root: Path, rng: random.Random) -> None:
    rows = [
        {"seq_id": i, "qsl_idx": i, "data": (i.to_bytes(4, "little") * 16).hex().upper(), "token_count": 16}
        for i in range(rng.randrange(100, 400))
    ]
    (_bundle(root) / ACC / "mlperf_log_accuracy.json").write_text("[\n" + ",\n".join(map(json.dumps, rows)) + "\n]\n")


def copy_failing_accuracy(root: Path, rng: random.Random) -> None:
    b = root / "b"
    if not b.exists():
        shutil.copytree(GB200, b)
    _sub(b / ACC / "accuracy.txt", "'rouge1': 44.7494", f"'rouge1': {rng.uniform(20, 43.9):.4f}")


def copy_failing_test06(root: Path, rng: random.Random) -> None:
    b = root / "b"
    if not b.exists():
        shutil.copytree(GB200, b)
    test06 = b / "llama2-70b-99" / "Offline" / "TEST06"
    test06.mkdir(exist_ok=True)
    failing = rng.choice(["EOS check pass: False", "Sample length check pass: False"])
    lines = ["First token check pass: Skipped", "EOS check pass: True", "Sample length check pass: True"]
    lines = [failing if ln.split(":")[0] == failing.split(":")[0] else ln for ln in lines]
    (test06 / "verify_accuracy.txt").write_text("\n".join([*lines, "TEST06 verification failed"]) + "\n")


def score_twice(root: Path, rng: random.Random) -> None:
    """#36 item 3c: accuracy.txt stating a score twice in its scores line, failing first."""
    key, low = rng.choice([("rouge1", "40.1"), ("rougeL", "25.1"), ("tokens_per_sample", "99.0")])
    acc = _bundle(root) / ACC / "accuracy.txt"
    _sub(acc, "{'rouge1'", f"{{'{key}': {low}, 'rouge1'")


def test06_check_twice(root: Path, rng: random.Random) -> None:
    """#36 item 3c: TEST06's verify_accuracy.txt stating a check twice (failing first, passing last)."""
    test06 = _bundle(root) / "llama2-70b-99" / "Offline" / "TEST06"
    test06.mkdir(exist_ok=True)
    lines = ["First token check pass: Skipped", "EOS check pass: True", "Sample length check pass: True"]
    i = rng.randrange(1, 3)
    lines.insert(i, lines[i].replace("True", "False"))
    (test06 / "verify_accuracy.txt").write_text("\n".join([*lines, "TEST06 verification complete"]) + "\n")


BUNDLE_EDITS: dict[str, Edit] = {
    "a score stated twice": score_twice,
    "a TEST06 check stated twice": test06_check_twice,
    "two scores lines": two_scores_lines,
    "a score in other digits": score_digits,
    "hash unlike the full accuracy log": accuracy_log_hash,
    "a copy with failing accuracy": copy_failing_accuracy,
    "a copy with failing TEST06": copy_failing_test06,
}


def build(root: Path, base: str, names: list[str], rng: random.Random) -> list[str]:
    """A copy of the base bundle under root with the named edits applied; returns the verify argv."""
    if base == "vm":
        shutil.copytree(GB300, root)
        for name in names:
            VM_EDITS[name](root, rng)
        return ["verify", str(root / "ND_GB300_v6_1")]
    shutil.copytree(GB200, _bundle(root))
    for name in names:
        BUNDLE_EDITS[name](root, rng)
    return ["verify", str(root), "--recipe", "nd-gb200-v6"]
