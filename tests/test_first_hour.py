"""What a new user meets through real pipes and a real terminal: help, JSON, unwrapped output, hints that work.

Every command runs as the console script does (`python -c 'from repro.cli import main; main()'`) with
stdout and stderr as real pipes or files, so Rich sees what it sees under `| cat`, nohup or Slurm.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import CLI, run_in_pty, write_prepared

from repro.core.recipes import get_recipe
from repro.core.workspace import Workspace
from repro.run.progress import RunProgress, Snapshot, choose_mode, fmt_duration

REPO = Path(__file__).resolve().parents[1]


def repro(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    stderr_path: Path | None = None,
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    # Run where the test's own workspace is, so a pasted command that writes a file (`--html report.html`)
    # writes it there and never into the checkout.
    cwd = Path(full_env["REPRO_HOME"]).parent if full_env.get("REPRO_HOME") else None
    while cwd is not None and not cwd.is_dir():
        cwd = cwd.parent
    if stderr_path is not None:
        with open(stderr_path, "w") as err:
            proc = subprocess.run(
                [*CLI, *args],
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=stdin,
                text=True,
                env=full_env,
                timeout=timeout,
                cwd=cwd,
            )
        proc.stderr = stderr_path.read_text()
        return proc
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=full_env, timeout=timeout, stdin=stdin, cwd=cwd
    )


def _sim_dataset(recipe: str) -> None:
    w = Workspace.open(None).ensure()
    name = get_recipe(recipe).dataset.name
    write_prepared(w.preprocessed / name, name=name, seed=7, prompt_len=(20, 200), out_len=(10, 400), outputs=None)


# --- help and completion -----------------------------------------------------------------------

HELP = [
    ["--help"],
    ["setup", "--help"],
    ["build-engine", "--help"],
    ["verify", "--help"],
    ["aggregate", "--help"],
    ["report", "--help"],
    ["run", "offline", "--help"],
    ["recipes", "validate", "--help"],
    ["status", "--help"],
]


@pytest.mark.parametrize("argv", HELP, ids=[" ".join(a) for a in HELP])
def test_help_shows_words_not_python_types(argv):
    out = repro(*argv).stdout
    assert "Usage:" in out
    assert not re.search(r"<(list\[|path|str|int|float|text|file)", out), out


def test_shell_completion_is_on():
    env = {"_REPRO_COMPLETE": "complete_bash", "COMP_WORDS": "repro ru", "COMP_CWORD": "1"}
    assert "run" in repro(env=env).stdout.split()
    assert "--install-completion" in repro("--help").stdout


# --- --json: exactly one document, schema_version, never consent ---------------------------------


def _json_commands(fixtures: Path) -> list[list[str]]:
    run = str(fixtures / "azure-nd-gb200-v6-v5.1")
    return [
        ["recipes", "list"],
        ["recipes", "show", "demo"],
        ["recipes", "validate"],
        ["doctor", "--recipe", "demo"],
        ["status"],
        ["guide", "--recipe", "demo", "--dry-run"],
        ["setup", "--recipe", "demo", "--dry-run"],
        ["build-engine", "--recipe", "nd-gb300-v6", "--dry-run"],
        ["run", "offline", "--recipe", "demo", "--dry-run"],
        ["run", "server", "--recipe", "demo", "--dry-run"],
        ["verify", run],
        ["aggregate", run],
        ["report", run],
        ["--version"],
        ["verify", "/no/such/folder"],
        ["run", "offline", "--bogus-option"],
        [
            "run",
            "offline",
            "--launcher",
            "slurm",
            "--nodes",
            "2",
            "--recipe",
            "nd-gb300-v6",
            "--backend",
            "sim",
            "--dry-run",
        ],
    ]


def test_every_command_prints_exactly_one_json_document(fixtures):
    _sim_dataset("nd-gb300-v6")
    for argv in _json_commands(fixtures):
        proc = repro(*argv, "--json")
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"{argv}: stdout is not one JSON document ({exc}):\n{proc.stdout[:2000]}") from None
        assert doc["schema_version"] == 1, argv
        assert "Traceback" not in proc.stderr, (argv, proc.stderr[-2000:])
        if proc.returncode == 2:
            assert doc["error"]["exit_code"] == 2 and doc["error"]["next_command"], argv


def test_guide_json_asks_before_expensive_steps_and_prints_only_json(tmp_path):
    """--json is about the output format, never consent: in a terminal the question still comes (on stderr)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, "guide", "--recipe", "demo", "--json"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        env={**os.environ, "TERM": "xterm"},
        close_fds=True,
    )
    os.close(slave)
    seen = ""
    deadline = time.monotonic() + 120
    try:
        while "Run setup now" not in seen and time.monotonic() < deadline:
            try:
                seen += os.read(master, 65536).decode(errors="replace")
            except OSError:
                break
        assert "Run setup now" in seen, seen[-2000:]
        os.write(master, b"n\r")
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    doc = json.loads(out)
    assert doc["schema_version"] == 1 and doc["stopped_at"] == "setup"
    assert not (Workspace.open().models / "tiny-llama").exists()


# --- pipes never wrap paths, commands or scripts -------------------------------------------------


def test_long_paths_survive_a_pipe_whole(tmp_path):
    deep = tmp_path / ("a-very-long-folder-name-" * 6) / "workspace"
    proc = repro("run", "offline", "--recipe", "demo", "--dry-run", env={"REPRO_HOME": str(deep), "COLUMNS": "40"})
    assert proc.returncode == 0, proc.stderr
    assert str(deep / "runs" / "demo" / "Offline") in proc.stdout


def test_slurm_dry_run_script_can_be_copied_from_a_pipe():
    _sim_dataset("nd-gb300-v6")
    proc = repro(
        "run",
        "offline",
        "--launcher",
        "slurm",
        "--nodes",
        "2",
        "--recipe",
        "nd-gb300-v6",
        "--backend",
        "sim",
        "--dry-run",
        env={"COLUMNS": "40"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("#!"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("Each VM's results would land in"))
    script = "\n".join(lines[start:end]).rstrip("\n") + "\n"
    as_json = json.loads(
        repro(
            "run",
            "offline",
            "--launcher",
            "slurm",
            "--nodes",
            "2",
            "--recipe",
            "nd-gb300-v6",
            "--backend",
            "sim",
            "--dry-run",
            "--json",
        ).stdout
    )["script"]
    stamp = re.compile(r"\d{8}-\d{6}")  # the rack folder's timestamp differs between the two runs
    submitted = as_json.rstrip("\n") + "\n"
    assert stamp.sub("T", script) == stamp.sub("T", submitted), "the printed script differs from the submitted one"
    syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert syntax.returncode == 0, syntax.stderr
    if shutil.which("shellcheck"):
        check = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, text=True, capture_output=True)
        assert check.returncode == 0, check.stdout


def test_recipes_list_keeps_the_vm_size_whole_in_an_80_column_terminal():
    text = run_in_pty([*CLI, "recipes", "list"], {**os.environ, "COLUMNS": "80", "TERM": "xterm"})
    assert max(len(ln) for ln in text.splitlines()) <= 80
    for size in ("Standard_ND128isr_NDR_GB200_v6", "Standard_ND128isr_GB300_v6", "Standard_ND96isr_H100_v5"):
        assert size in text, text


# --- optional packages, setup offline, wording ---------------------------------------------------


def test_a_missing_optional_package_is_one_line_naming_the_extra(fixtures, tmp_path):
    """The HTML report draws with matplotlib (the report extra); the tables and --json need nothing extra."""
    block = "import sys; sys.modules['plotext'] = None; sys.modules['matplotlib'] = None; "
    for extra in (["--html", str(tmp_path / "r.html")], ["--html", str(tmp_path / "r.html"), "--json"]):
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                block + "from repro.cli import main; main()",
                "report",
                str(fixtures / "azure-nd-gb200-v6-v5.1"),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1] == "Next: pip install 'repro[report]'"
        if "--json" in extra:
            assert "repro[report]" in json.loads(proc.stdout)["error"]["next_command"]
        assert not (tmp_path / "r.html").exists()


def test_setup_dry_run_without_network_plans_from_the_recipe():
    proc = repro(
        "setup",
        "--recipe",
        "nd-h100-v5",
        "--dry-run",
        "--json",
        env={"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"},
    )
    d = json.loads(proc.stdout)["details"]
    # The plan is made either way; it exits 1 exactly when this disk is smaller than the recipe needs.
    assert proc.returncode == (0 if d["free_bytes"] >= d["needed_bytes"] else 1), proc.stderr
    assert d["sizes_from"] == "recipe" and d["download_bytes"] == 138_000_000_000
    assert any("sizes are the recipe's" in n for n in d["notes"])
    files = {f["what"].split()[0] + " " + f["what"].split()[1]: f for f in d["files"]}
    sampled = files["dataset sampled"]
    assert sampled["source"].startswith("https://") and sampled["dest"].endswith(".pkl")
    checks = " ".join(d["checks"])
    assert "b64e66e54b62" in checks and "never downloaded or unpickled" in checks and "trust on first use" not in checks
    assert files["dataset calibration"]["action"] == "derived"


def test_recipes_pin_the_published_validation_checksum():
    for name in ("nd-gb300-v6", "nd-gb200-v6", "nd-h100-v5", "nd-h200-v5", "dgx-h100"):
        pinned = get_recipe(name).dataset.sha256["sampled"]
        assert pinned == "b64e66e54b6267f79eb4f9ccec52d466bab3ac94747ed258c3b0f337ed166fab"


# --- progress: honest totals, ETA and interrupts; heartbeat without a terminal --------------------


class _Counts:
    def __init__(self) -> None:
        self.issued = self.samples_done = self.tokens_done = 0
        self.t0: float | None = None


def test_progress_total_is_loadgens_own_count_and_never_jumps():
    clock = [100.0]
    counts = _Counts()
    p = RunProgress("off", "LoadGen Offline", 110, fixed_total=True, clock=lambda: clock[0])
    assert p.snapshot(counts).total is None
    counts.t0, counts.issued = 100.0, 128
    clock[0] = 110.0
    snap = p.snapshot(counts)
    assert snap.total == 128 and snap.eta_s is None and "ETA estimating" in snap.line("x")
    counts.samples_done, counts.tokens_done = 32, 1024
    snap = p.snapshot(counts)
    assert snap.eta_s == pytest.approx(30.0) and snap.tokens_per_s == pytest.approx(102.4)
    p.interrupted(counts)
    counts.samples_done = 128  # the placeholders that let LoadGen finish
    frozen = p.snapshot(counts)
    assert frozen.done == 32 and frozen.interrupted and frozen.line("x").endswith("interrupted")
    assert fmt_duration(3725) == "1:02:05"


def test_heartbeat_mode_when_stderr_is_not_a_terminal(tmp_path):
    with open(tmp_path / "log", "w") as fh:
        assert choose_mode(None, fh) == "heartbeat"
    assert choose_mode(False) == "off" and choose_mode(True) == "bar"
    assert (
        Snapshot(5, 10, 50, 5.0).line("LoadGen Offline").startswith("LoadGen Offline: 5/10 issued samples done (50.0%)")
    )


@pytest.mark.slow
def test_demo_in_a_terminal_ctrl_c_keeps_the_count_honest():
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, "run", "offline", "--recipe", "demo"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
        close_fds=True,
    )
    os.close(slave)
    buf = ""
    deadline = time.monotonic() + 300
    try:
        while not re.search(r"LoadGen Offline.*\d+/\d+", buf) and time.monotonic() < deadline:
            try:
                buf += re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", os.read(master, 65536).decode(errors="replace"))
            except OSError:
                break
        proc.send_signal(signal.SIGINT)
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                buf += re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", os.read(master, 65536).decode(errors="replace"))
            except OSError:
                break
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert proc.returncode == 130, buf[-2000:]
    last = [m.groups() for m in re.finditer(r"LoadGen Offline\S*\s.*?([\d,]+)/([\d,?]+)", buf)][-1]
    assert "interrupted" in buf.split("LoadGen Offline")[-1], buf[-1500:]
    if last[1] != "?":
        assert int(last[0].replace(",", "")) < int(last[1].replace(",", "")), buf[-1500:]
    assert "Traceback" not in buf


@pytest.mark.slow
@pytest.mark.soak  # three demo runs in a row; one demo run is walked by the test below and by many others
def test_demo_is_valid_three_times_in_a_row_with_heartbeats_and_whole_paths(tmp_path):
    """The flagship command, as a user pipes it: VALID every time (calibrated), heartbeat lines in the log."""
    for i in range(3):
        log = tmp_path / f"stderr-{i}.log"
        proc = repro(
            "run", "offline", "--recipe", "demo", "--json", env={"REPRO_HEARTBEAT_S": "1"}, stderr_path=log, timeout=600
        )
        doc = json.loads(proc.stdout)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert doc["details"]["validity"] == "VALID", (i, doc["verdict"])
        assert doc["verdict"]["status"] != "PASS" and doc["details"]["label"] == "demo"
        beats = [ln for ln in proc.stderr.splitlines() if ln.startswith("[repro] LoadGen Offline: ")]
        assert len(beats) >= 2 and beats[-1].endswith("done"), proc.stderr[-2000:]
        run_json = json.loads((Path(doc["details"]["log_dir"]) / "run.json").read_text())
        assert run_json["demo_calibration"]["target_qps"] == run_json["settings"]["target_qps"]


# --- every hint printed along the README flow works when pasted ----------------------------------


def _hints(text: str) -> list[str]:
    """Commands after 'Next:' (backticked, or the whole hint when it is a bare `repro ...` command)."""
    found = []
    for hint in re.findall(r"Next: (.*)", text):
        ticks = re.findall(r"`(repro [^`]*)`", hint)
        found += ticks or ([hint.strip()] if hint.strip().startswith("repro ") else [])
    for value in re.findall(r'"next_command": "((?:[^"\\]|\\.)*)"', text):
        found += re.findall(r"`(repro [^`]*)`", value) or ([value] if value.startswith("repro ") else [])
    return found


@pytest.mark.slow
def test_every_next_hint_along_the_readme_flow_works_when_pasted(tmp_path):
    first = repro("run", "offline", "--recipe", "demo", timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    run_dir = json.loads(repro("status", "--json").stdout)["run_dir"]
    outputs = [first.stdout + first.stderr]
    for argv in (
        ["status"],
        ["status", "--json"],
        [],
        ["verify", run_dir],
        ["report", run_dir],
        ["--recipe", "demo", "--dry-run"],
        ["doctor", "--recipe", "demo"],
    ):
        proc = repro(*argv, timeout=600)
        outputs.append(proc.stdout + proc.stderr)
    hints = sorted(set(h for out in outputs for h in _hints(out)))
    assert hints, "the flow printed no Next: hint at all"
    for hint in hints:
        argv = shlex.split(hint)
        assert argv[0] == "repro", hint
        proc = repro(*argv[1:], timeout=600)
        assert proc.returncode in (0, 1), f"`{hint}` exited {proc.returncode}: {proc.stderr[-1500:]}"
        assert "No such option" not in proc.stderr and "Usage:" not in proc.stderr, hint
