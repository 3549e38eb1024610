"""MLPerf compliance TEST06 for the LLM benchmarks: the audit settings, the three checks, and the TEST06/ folder.

TEST06 is a PerformanceOnly run with LoadGen reading an audit.config that logs about 100 samples to
mlperf_log_accuracy.json with their `token_count` (and, outside Offline, the first token LoadGen was
given through FirstTokenComplete as `token_data`). It catches a harness that reports tokens it did
not log. The checks below are written from the rules in mlcommons/inference `compliance/TEST06/README.md`
(as of b66003e): first token matches the output (Server/Interactive only), at most one trailing EOS,
reported token count equals the logged length. Two choices are stricter than that repository's
run_verification.py, because the rules say so and its loops do not: an output of exactly two EOS
tokens fails (its EOS loop never looks at index 0), and an empty log or a missing `token_data`
fails instead of passing vacuously or with a caught exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # numpy is imported when a TEST06 log is read, not by every `repro verify`
    import numpy as np

from repro.core.errors import InputError
from repro.core.record import RUN_JSON, RunRecord

TEST06 = "TEST06"
DTYPES = {"int32": "<i4", "int64": "<i8"}  # LoadGen logs what the SUT hands it; most SUTs int32, some int64
ACCURACY_LOG = "mlperf_log_accuracy.json"
VERIFY_TXT = "verify_accuracy.txt"
AUDIT_CONFIG = "audit.config"
AUDIT_FOUND = "Found Audit Config file (audit.config)"
COMPLETE = "TEST06 verification complete"
FAILED = "TEST06 verification failed"
# The audit settings of compliance/TEST06/audit.config, as key -> value for every model and scenario.
AUDIT_SETTINGS: dict[str, int] = {
    "mode": 2,
    "accuracy_log_rng_seed": 720381539243781796,
    "accuracy_log_sampling_target": 100,
    "min_query_count": 100,
    "min_duration": 0,
    "sample_concatenate_permutation": 0,
}
_LINES = {"first_token": "First token check pass", "eos": "EOS check pass", "sample_length": "Sample length check pass"}
_MAX_LOG = 256 << 20
_MAX_ENTRIES = 100_000  # TEST06 logs ~100 samples (accuracy_log_sampling_target); a full accuracy run, every sample
_MAX_ENTRY = 1 << 20  # one sample: up to 2,048 int64 token ids in hex is 32 KB
_MAX_TEXT = 1 << 20

CheckStatus = Literal["True", "False", "Skipped"]


def audit_config_text() -> str:
    """The audit.config LoadGen reads for TEST06 (mode 2 = PerformanceOnly)."""
    head = "# TEST06 audit settings (mlcommons/inference compliance/TEST06/audit.config); written by repro.\n"
    return head + "".join(f"*.*.{k} = {v}\n" for k, v in AUDIT_SETTINGS.items())


@dataclass
class Test06Check:
    name: str
    status: CheckStatus
    failures: int = 0
    example: str | None = None

    @property
    def ok(self) -> bool:
        return self.status != "False"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "failures": self.failures, "example": self.example}


@dataclass
class Test06Result:
    """The three checks for one accuracy log (or as a published verify_accuracy.txt states them)."""

    folder: Path | None
    scenario: str | None
    samples: int | None
    checks: list[Test06Check]
    problems: list[str] = field(default_factory=list)
    source: str = "log"
    dtype: str | None = None
    """int32 or int64: the token-id width that fits the logged token counts (run_verification.py's --dtype)."""
    unreadable: str | None = None
    """Why the published accuracy log cannot be re-checked (truncated, empty) while its verify text states a pass."""

    @property
    def passed(self) -> bool:
        return not self.problems and self.unreadable is None and all(c.ok for c in self.checks)

    @property
    def state(self) -> Literal["passed", "failed", "cannot be re-checked"]:
        """A published log cut short or left empty is neither a pass nor a failure: it cannot be re-checked."""
        if self.unreadable is not None and not self.problems and all(c.ok for c in self.checks):
            return "cannot be re-checked"  # what is stated held; a stated failure is a failure
        return "passed" if self.passed else "failed"

    def check(self, name: str) -> Test06Check:
        return next(c for c in self.checks if c.name == name)

    def verify_text(self) -> str:
        """verify_accuracy.txt in the published line format."""
        lines = [f"{_LINES[c.name]}: {c.status}" for c in self.checks]
        return "\n".join([*lines, COMPLETE if self.passed else FAILED]) + "\n"

    @property
    def detail(self) -> str:
        parts = [f"{_LINES[c.name].replace(' check pass', '')}: {c.status}" for c in self.checks]
        text = ", ".join(parts)
        if self.samples is not None:
            text += f" ({self.samples} samples" + (f", token ids {self.dtype}" if self.dtype else "") + ")"
        if self.unreadable is not None:
            text = f"cannot be re-checked: {self.unreadable}; {VERIFY_TXT} states {text}"
        why = self.problems + [
            f"{c.failures} sample(s) fail the {c.name.replace('_', ' ')} check, e.g. {c.example}"
            for c in self.checks
            if c.status == "False" and c.failures
        ]
        return text + ("; " + "; ".join(why) if why else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "test": TEST06,
            "passed": self.passed,
            "state": self.state,
            "dtype": self.dtype,
            "unreadable": self.unreadable,
            "folder": str(self.folder) if self.folder else None,
            "scenario": self.scenario,
            "samples": self.samples,
            "source": self.source,
            "checks": [c.to_json() for c in self.checks],
            "problems": self.problems,
        }


def _tokens(hexdata: Any, dtype: str = "int32") -> np.ndarray | None:
    import numpy as np

    width = np.dtype(DTYPES[dtype]).itemsize
    if not isinstance(hexdata, str) or len(hexdata) % (2 * width):
        return None
    try:
        return np.frombuffer(bytes.fromhex(hexdata), dtype=DTYPES[dtype])
    except ValueError:
        return None


def detect_dtype(entries: list[dict[str, Any]]) -> str:
    """The token-id width whose length agrees with the logged token_count on more samples (int32 on a tie).

    MLCommons' run_verification.py is told the width (--dtype); a log carries no such field, but its counts do."""
    fits = {}
    for dtype in DTYPES:
        width = 2 * (4 if dtype == "int32" else 8)
        fits[dtype] = sum(
            1
            for e in entries
            if isinstance(e.get("data"), str)
            and isinstance(e.get("token_count"), int)
            and len(e["data"]) % width == 0
            and len(e["data"]) // width == e["token_count"]
        )
    return "int64" if fits["int64"] > fits["int32"] else "int32"


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    import numpy as np

    return bool(np.array_equal(a, b))


def _trailing(ids: np.ndarray, token: int) -> int:
    n = 0
    for t in ids[::-1]:
        if int(t) != token:
            break
        n += 1
    return n


def load_accuracy_log(path: Path) -> list[dict[str, Any]]:
    """LoadGen's mlperf_log_accuracy.json as a list of entries; InputError names the file when it is not one.
    Streamed entry by entry under caps (#29): a 200 MB `[{},{},...]` is an error after 100,000 entries, not 12 GB."""
    from repro.core.safeio import iter_json_list, open_regular

    try:
        with open_regular(path) as fh:
            doc = list(iter_json_list(fh, max_items=_MAX_ENTRIES, max_item_bytes=_MAX_ENTRY, max_bytes=_MAX_LOG))
    except OSError as exc:
        raise InputError(
            f"{path}: cannot be read ({exc.strerror}).", "check the path; `repro status` names the latest run folder"
        ) from None
    except ValueError as exc:
        raise InputError(
            f"{path}: is not valid JSON or not a LoadGen accuracy log ({exc}).",
            "re-run the test: `repro run offline --compliance TEST06`",
        ) from None
    if not all(isinstance(e, dict) for e in doc):
        raise InputError(
            f"{path}: is not a LoadGen accuracy log (a JSON list of samples).",
            "re-run the test: `repro run offline --compliance TEST06`",
        )
    return doc


def check_entries(
    entries: list[dict[str, Any]], scenario: str | None, *, eos_id: int, folder: Path | None = None
) -> Test06Result:
    """The three TEST06 checks over accuracy-log entries. scenario None: check first tokens where they were logged.
    `eos_id` is the benchmark file's (model.eos_token_id): Llama-2 ends with 2, Llama-3.1 with 128009."""
    first_needed = scenario != "Offline" if scenario else any("token_data" in e for e in entries)
    dtype = detect_dtype(entries)
    fails: dict[str, list[str]] = {"first_token": [], "eos": [], "sample_length": []}
    for e in entries:
        where = f"seq_id {e.get('seq_id')} (qsl_idx {e.get('qsl_idx')})"
        data = _tokens(e.get("data"), dtype)
        if data is None:
            for name in fails:
                if name != "first_token" or first_needed:
                    fails[name].append(f"{where}: data is not a whole number of {dtype} tokens")
            continue
        if (n := _trailing(data, eos_id)) > 1:
            fails["eos"].append(f"{where}: ends with {n} EOS tokens (id {eos_id})")
        count = e.get("token_count")
        if isinstance(count, bool) or not isinstance(count, int):
            fails["sample_length"].append(f"{where}: no token_count logged")
        elif count != len(data):
            fails["sample_length"].append(f"{where}: token_count {count} but {len(data)} tokens logged")
        if not first_needed:
            continue
        first = _tokens(e.get("token_data"), dtype) if "token_data" in e else None
        if first is None or len(first) == 0:
            fails["first_token"].append(f"{where}: no first token logged (token_data)")
        elif len(data) == 0:
            fails["first_token"].append(f"{where}: first token {int(first[0])} reported but no output logged")
        else:
            k = min(len(first), len(data))
            if not _equal(first[:k], data[:k]):
                fails["first_token"].append(
                    f"{where}: first token reported {first[:k].tolist()}, output starts {data[:k].tolist()}"
                )
    checks = []
    for name, found in fails.items():
        status: CheckStatus = "Skipped" if name == "first_token" and not first_needed else "False" if found else "True"
        checks.append(Test06Check(name, status, len(found), found[0] if found else None))
    problems = [] if entries else ["the accuracy log holds no samples"]
    if not entries:
        for c in checks:
            c.status = "False" if c.status == "True" else c.status
    return Test06Result(folder, scenario, len(entries), checks, problems, dtype=dtype if entries else None)


def check_accuracy_log(path: Path, scenario: str | None, *, eos_id: int) -> Test06Result:
    return check_entries(load_accuracy_log(path), scenario, eos_id=eos_id, folder=Path(path).parent)


def write_test06(test_dir: Path, result: Test06Result) -> Path:
    """verify_accuracy.txt beside accuracy/ in the TEST06 folder (the log itself is already in accuracy/)."""
    from repro.core.fsutil import atomic_write_text

    out = Path(test_dir) / VERIFY_TXT
    atomic_write_text(out, result.verify_text())
    return out


def parse_verify_text(text: str, path: Path | None = None) -> dict[str, str]:
    """The statuses a verify_accuracy.txt states; keys first_token/eos/sample_length/complete. Lines end at a
    newline only (str.splitlines also breaks at U+001C-U+001E and U+2028, which would let a hidden line count).
    A check stated twice is a file that contradicts itself: refused, never the last statement kept (#36)."""
    found: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate((ln.strip() for ln in text.split("\n")), 1):
        key = None
        for name, label in _LINES.items():
            if m := re.fullmatch(re.escape(label) + r"\s*:\s*(True|False|Skipped)", line):
                key, value = name, m.group(1)
        if line in (COMPLETE, FAILED):
            key, value = "complete", "True" if line == COMPLETE else "False"
        if key is None:
            continue
        if key in found:
            what = "its verification line" if key == "complete" else repr(_LINES[key])
            raise InputError(
                f"{path or VERIFY_TXT}: states {what} twice (lines {lines[key]} and {number}: {found[key]}, "
                f"{value}); run_verification.py writes each once, so the file contradicts itself.",
                "restore the verify_accuracy.txt TEST06 wrote (or re-run TEST06: `repro run offline --compliance`)",
            )
        found[key], lines[key] = value, number
    return found


def _scenario_of(test_dir: Path) -> str | None:
    """The test run's scenario: our run.json or LoadGen's detail log in accuracy/, else the folder names."""
    acc = test_dir / "accuracy"
    record = RunRecord.read(acc / RUN_JSON) if (acc / RUN_JSON).is_file() else None
    if record is not None and record.scenario:
        return record.scenario
    parts = [p.lower() for p in test_dir.resolve().parts]
    for name in ("interactive", "server", "offline"):
        if name in parts:
            return name.capitalize()
    return None


def _audit_problems(test_dir: Path) -> list[str]:
    """Where LoadGen's detail log of the test run is kept (our runs), it must say it read audit.config."""
    detail = test_dir / "accuracy" / "mlperf_log_detail.txt"
    if not detail.is_file():
        return []
    from repro.core.safeio import iter_lines, open_regular

    found = {AUDIT_FOUND.encode(): False, b'"effective_test_mode", "value": "PerformanceOnly"': False}
    with open_regular(detail) as fh:
        for line, _cut in iter_lines(fh, max_bytes=_MAX_LOG, max_line=_MAX_ENTRY):
            for needle in found:
                found[needle] = found[needle] or needle in line
    problems = []
    if not found[AUDIT_FOUND.encode()]:
        problems.append(f"{detail.name} does not say LoadGen found audit.config: the run used its own settings")
    if not found[b'"effective_test_mode", "value": "PerformanceOnly"']:
        problems.append(f"{detail.name}: the test run was not PerformanceOnly")
    return problems


def _read_small(path: Path, limit: int = _MAX_TEXT) -> str:
    """A result file's head from one non-blocking handle: a symlink swapped to a FIFO cannot hang verify (#29)."""
    from repro.core.safeio import read_head

    return read_head(path, limit)[0].decode("utf-8", errors="replace")


def find_test06(run_folder: Path) -> Path | None:
    """The TEST06 folder that belongs to a run folder: `<run>/TEST06` (also from `<run>/performance/run_N`),
    or in a submission tree `compliance/<system>/<benchmark>/<scenario>/TEST06` beside `results/...`."""
    folder = Path(run_folder)
    if folder.name == TEST06:
        return folder if folder.is_dir() else None
    top = folder.parent.parent if folder.parent.name == "performance" else folder
    for cand in (top / TEST06, top / "audit" / "compliance" / TEST06):
        if cand.is_dir():
            return cand
    parts = top.parts
    if "results" in parts:
        i = len(parts) - 1 - parts[::-1].index("results")
        cand = Path(*parts[:i], "compliance", *parts[i + 1 :], TEST06)
        if cand.is_dir():
            return cand
    return None


def read_test06(folder: Path, scenario: str | None = None, *, eos_id: int) -> Test06Result:
    """A TEST06 folder, published or ours: the checks re-run on its accuracy log where it has one, and the
    statements of its verify_accuracy.txt; any failure, disagreement or gap fails it. A log the publisher cut short
    or left empty beside a verify text that states a pass cannot be re-checked: shown, neither a pass nor a failure."""
    folder = Path(folder)
    if folder.name != TEST06 and (folder / TEST06).is_dir():
        folder = folder / TEST06
    scenario = scenario or _scenario_of(folder)
    log, txt = folder / "accuracy" / ACCURACY_LOG, folder / VERIFY_TXT
    problems: list[str] = []
    result: Test06Result | None = None
    unreadable: str | None = None
    try:
        stated = parse_verify_text(_read_small(txt), txt) if txt.is_file() else None
    except OSError as exc:
        stated, problems = None, [*problems, f"{txt}: cannot be read ({exc.strerror})"]
    if log.is_file():
        try:
            result = check_accuracy_log(log, scenario, eos_id=eos_id)
            result.folder = folder
        except InputError as exc:
            unreadable = f"accuracy/{ACCURACY_LOG} is cut short ({log.stat().st_size:,} bytes, not valid JSON)"
            problems.append(exc.message)
        if result is not None and not result.samples:
            unreadable = f"accuracy/{ACCURACY_LOG} holds no samples"
    elif stated is not None:  # a statement is not a re-check: no log, no evidence the checks held
        unreadable = f"no accuracy/{ACCURACY_LOG} to re-check"
    if unreadable is not None and stated is not None and stated.get("complete") == "True":
        problems, result = [], None
    else:
        unreadable = None
    if result is None:
        checks = []
        for name in _LINES:
            status = (stated or {}).get(name)
            checks.append(Test06Check(name, status if status in ("True", "False", "Skipped") else "False"))  # type: ignore[arg-type]
        result = Test06Result(
            folder, scenario, None, checks, problems, source=VERIFY_TXT if stated else "none", unreadable=unreadable
        )
        if stated is None and not problems and unreadable is None:
            result.problems.append(f"{folder}: neither {VERIFY_TXT} nor accuracy/{ACCURACY_LOG}")
    else:
        result.source = "log" + (f" + {VERIFY_TXT}" if stated is not None else "")
    if stated is not None:
        missing = [(_LINES[k]) for k in _LINES if k not in stated]
        if missing or "complete" not in stated:
            result.problems.append(f"{VERIFY_TXT} lacks {', '.join(missing) or 'its verification line'}")
        for c in result.checks:
            said = stated.get(c.name)
            if said is not None and said != c.status and result.source != VERIFY_TXT:
                result.problems.append(f"{VERIFY_TXT} says {_LINES[c.name]}: {said} but the log gives {c.status}")
        if stated.get("complete") == "False":
            result.problems.append(f"{VERIFY_TXT} says {FAILED}")
    if scenario in ("Server", "Interactive") and result.check("first_token").status == "Skipped":
        result.problems.append(f"first-token check skipped, but a {scenario} run must pass it")
    result.problems += _audit_problems(folder)
    result.scenario = scenario
    return result


# ---------------------------------------------------------------- what `repro run --compliance` needs
COMPLIANCE_TESTS = (TEST06,)


def check_compliance_options(
    compliance: str | None, scenario: str, *, accuracy: bool, duration_s: float | None, samples: int | None
) -> None:
    """A compliance run is its own kind of run: refuse the options it cannot take, naming the command that works."""
    if compliance is None:
        return
    cmd = f"repro run {scenario.lower()} --compliance TEST06"
    if compliance not in COMPLIANCE_TESTS:
        raise InputError(
            f"--compliance {compliance}: repro runs {', '.join(COMPLIANCE_TESTS)} "
            "(the test MLPerf requires for llama2-70b).",
            f"`{cmd}`",
        )
    if accuracy:
        raise InputError(
            "--compliance and --accuracy are separate runs: TEST06 is a PerformanceOnly run.",
            f"`{cmd}`, then `repro run offline --accuracy`",
        )
    if duration_s is not None or samples is not None:
        raise InputError(
            "--compliance sets its own length (audit.config: 100 queries, no minimum duration); "
            "drop --duration/--samples.",
            f"`{cmd}`",
        )


def compliance_settings(compliance: str | None) -> dict[str, int]:
    """The settings LoadGen takes from the test's audit.config (for planning and progress; LoadGen reads the file)."""
    if compliance is None:
        return {}
    return {k: v for k, v in AUDIT_SETTINGS.items() if k != "mode"}


def finish_test06(run_dir: Path, scenario: str, eos_id: int) -> dict[str, Any]:
    """Check the TEST06 run's accuracy log (EOS: the benchmark file's id) and write RUN_DIR/TEST06/verify_accuracy.txt;
    the result for run.json."""
    result = read_test06(Path(run_dir) / TEST06, scenario, eos_id=eos_id)
    path = write_test06(Path(run_dir) / TEST06, result)
    return {**result.to_json(), "verify_accuracy": str(path), "verify_text": result.verify_text()}
