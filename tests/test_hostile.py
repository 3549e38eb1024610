"""Issue #16, one test per numbered item: hostile values never reach a shell, shared state is never lost,
and every malformed input is one line and exit 2, never a traceback or a hang.

The Slurm tests run the generated script for real on the local cluster; the ledger tests start real
concurrent processes; the full-disk test mounts a real 1 MB tmpfs (as root; skipped elsewhere).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, slurm_up
from helpers import CLI, one_line_error, write_prepared
from helpers import cli_process as cli

RECIPE = "nd-gb300-v6"
slurm = pytest.mark.skipif(not slurm_up(), reason="no local Slurm cluster (`sudo .ci/start-slurm.sh`)")


def _prepared(home: Path) -> None:
    """A small prepared dataset, which the sim backend replays."""
    from repro.core.recipes import get_recipe

    name = get_recipe(RECIPE).dataset.name
    write_prepared(
        home / "preprocessed" / name, 32, name=name, seed=7, prompt_len=(20, 120), out_len=(10, 200), outputs=None
    )


def _wait_job(job: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True)
        if not q.stdout.strip():
            return
        time.sleep(0.5)
    subprocess.run(["scancel", job])
    pytest.fail(f"Slurm job {job} did not finish in {timeout} s")


# 1. --partition with a newline or extra options ------------------------------------------------------------------


@pytest.mark.parametrize("partition", ["gpu\necho INJECTED", "gpu --account=x", "-p", "gpu;id", "$(id)"])
def test_1_partition_with_a_newline_or_options_is_refused(partition: str, _isolated_home: Path) -> None:
    _prepared(_isolated_home)
    proc = cli(
        "run",
        "offline",
        "--launcher",
        "slurm",
        "--nodes",
        "2",
        "--recipe",
        RECIPE,
        "--backend",
        "sim",
        "--partition",
        partition,
        "--dry-run",
        "--json",
    )
    assert "partition" in one_line_error(proc)
    doc = json.loads(proc.stdout)  # the one JSON error document; the value appears only inside its message string
    assert doc["ok"] is False and "submit_command" not in doc and "script" not in doc
    assert not any(line.strip() == "echo INJECTED" for line in proc.stdout.splitlines())


# 2. install path with $(...), REPRO_HOME with a newline: rendered, linted, and run for real -----------------------


def _hostile_plan(tmp_path: Path, marker: Path, home_name: str) -> object:
    from repro.core.workspace import Workspace
    from repro.run.rack import plan_rack

    home = tmp_path / home_name
    _prepared(home)
    real_bin = Path(sys.executable).with_name("repro")
    evil_bin_dir = tmp_path / f"bin $(touch {marker}) `touch {marker}` ;touch {marker}"
    evil_bin_dir.mkdir(parents=True)
    wrapper = evil_bin_dir / "repro"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'from repro.cli import main; main()' \"$@\"\n")
    wrapper.chmod(0o755)
    assert real_bin.exists() or True
    plan = plan_rack(RECIPE, Workspace.open(home), 1, backend="sim", samples=16, duration_s=1)
    plan.repro_bin = str(wrapper)
    return plan


def _lint(script: str, tmp_path: Path) -> None:
    path = tmp_path / "lint.sh"
    path.write_text(script)
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    if shutil.which("shellcheck"):
        sc = subprocess.run(["shellcheck", "-S", "warning", str(path)], capture_output=True, text=True)
        assert sc.returncode == 0, sc.stdout


@pytest.mark.parametrize("home_name", ["home $(touch MARK) `touch MARK` 'q\" %A", "home\nline2 $(touch MARK)"])
def test_2_hostile_paths_are_quoted_and_lint_clean(tmp_path: Path, home_name: str) -> None:
    from repro.run.rack import render_script

    marker = tmp_path / "INJECTED"
    plan = _hostile_plan(tmp_path, marker, home_name.replace("MARK", str(marker)))
    script = render_script(plan)
    _lint(script, tmp_path)
    assert "\nline2" not in script  # no raw newline from a value
    assert not marker.exists()


@slurm
@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.parametrize("home_name", ["home $(touch MARK) `touch MARK` %A", "home\nline2 $(touch MARK)"])
def test_2_hostile_paths_run_for_real_in_slurm_and_inject_nothing(tmp_path: Path, home_name: str) -> None:
    from repro.run.rack import collect, submit
    from repro.run.rack_folder import task_rows

    marker = tmp_path / "INJECTED"
    plan = _hostile_plan(tmp_path, marker, home_name.replace("MARK", str(marker)))
    os.environ["REPRO_BIN"] = plan.repro_bin
    try:
        job = submit(plan)
    finally:
        os.environ.pop("REPRO_BIN", None)
    _wait_job(job)
    rows = task_rows(plan.rack_dir)
    assert [r.state for r in rows] == ["done"], [r.to_json() for r in rows]
    assert collect(plan.rack_dir, rows).report is not None
    assert not marker.exists(), "a value from a path ran as a command"
    assert not (Path.cwd() / "INJECTED").exists()


def test_2_rerun_failed_validates_rack_json_before_anything_runs(tmp_path: Path, _isolated_home: Path) -> None:
    from repro.core.workspace import Workspace
    from repro.run.rack import plan_rack
    from repro.run.rack_folder import RACK_JSON

    _prepared(_isolated_home)
    plan = plan_rack(RECIPE, Workspace.open(None), 2, backend="sim", samples=16)
    plan.rack_dir.mkdir(parents=True)
    marker = tmp_path / "INJECTED"
    for field, value in (
        ("partition", f"gpu\ntouch {marker}"),
        ("repro_bin", f"/x\x00$(touch {marker})"),
        ("container_image", "--privileged"),
    ):
        (plan.rack_dir / RACK_JSON).write_text(json.dumps(plan.manifest() | {field: value}))
        proc = cli("run", "offline", "--launcher", "slurm", "--rerun-failed", str(plan.rack_dir), "--dry-run")
        assert field in one_line_error(proc)
    assert not marker.exists()


# 3. --container-image never reaches docker as a flag ------------------------------------------------------------


@pytest.mark.parametrize("image", ["--privileged", "-v/:/host", "img $(id)", "img\nid", ""])
def test_3_container_image_is_never_a_flag(image: str, _isolated_home: Path) -> None:
    proc = cli(
        "run",
        "offline",
        "--launcher",
        "slurm",
        "--nodes",
        "1",
        "--recipe",
        RECIPE,
        "--container-image",
        image,
        "--dry-run",
        "--json",
    )
    assert "--container-image" in one_line_error(proc) and "--privileged\n" not in proc.stdout


def test_3_step_containers_and_base_images_are_checked_too() -> None:
    from repro.core.errors import InputError
    from repro.engine.container import RunSpec

    with pytest.raises(InputError, match="not an image name"):
        RunSpec("--privileged", ["true"])
    proc = cli("build-engine", "--recipe", RECIPE, "--base-image", "--privileged", "--dry-run")
    assert "--base-image" in one_line_error(proc)


# 4. sbatch gets an explicit --export: HF_TOKEN stays on the login node --------------------------------------------


@slurm
@pytest.mark.slurm
def test_4_hf_token_is_not_exported_to_the_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from repro.run.slurm import sbatch

    script = tmp_path / "env.sbatch"
    dump = tmp_path / "job-env.txt"
    script.write_text(f"#!/bin/bash\nenv > {dump}\n")
    (tmp_path / "slurm").mkdir()
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue_issue16")
    job = sbatch(script)
    _wait_job(job)
    env = dump.read_text()
    assert "PATH=" in env and "hf_secretvalue_issue16" not in env and "HF_TOKEN" not in env


# 5. escape sequences and HTML from folder names ------------------------------------------------------------------


def test_5_escape_sequences_in_folder_names_never_reach_the_terminal(fixtures: Path, tmp_path: Path) -> None:
    rack = tmp_path / "rack"
    evil = rack / "vm\x1b[2J\x1b]0;pwned\x07 <img src=x onerror=alert(1)>"
    shutil.copytree(fixtures / "azure-nd-gb300-v6-rack" / "ND_GB300_v6_1", evil)
    shutil.copy(fixtures / "azure-nd-gb300-v6-rack" / "ND_GB300_v6.json", rack)
    md = tmp_path / "out.md"  # beside the results, never inside them (issue 29)
    for args in (
        ["verify", str(evil)],
        ["aggregate", str(rack)],
        ["report", str(rack), "--markdown", str(md)],
        ["verify", str(evil / "nothing-here")],
    ):
        proc = cli(*args, env={"TERM": "xterm", "FORCE_COLOR": "1"})
        assert proc.returncode in (0, 1, 2)
        assert "\x1b[2J" not in proc.stdout + proc.stderr and "\x1b]0;" not in proc.stdout + proc.stderr
        assert "\x07" not in proc.stdout + proc.stderr
    text = md.read_text()
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text and "\x1b" not in text


# 6. concurrent runs on one workspace lose no ledger entry ---------------------------------------------------------

_WRITER = """
import sys
from repro.core.ledger import Ledger
path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ledger = Ledger.load(path)
for i in range(n):
    ledger.start(f"{name}-{i}", "h")
    ledger.finish(f"{name}-{i}")
"""


def test_6_concurrent_ledger_writers_lose_nothing(tmp_path: Path) -> None:
    from repro.core.ledger import Ledger

    path = tmp_path / "ledger.json"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), f"p{k}", "15"]) for k in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    steps = Ledger.load(path).steps
    assert len(steps) == 60 and all(r.status == "done" for r in steps.values())


@pytest.mark.slow
def test_6_run_offline_and_server_together_keep_both_entries(_isolated_home: Path) -> None:
    from repro.core.ledger import Ledger
    from repro.core.workspace import Workspace

    _prepared(_isolated_home)
    lost = 0
    trials = int(os.environ.get("REPRO_LEDGER_TRIALS", "6"))
    for _ in range(trials):
        Workspace.open(None).ledger_path.unlink(missing_ok=True)
        args = ["--recipe", RECIPE, "--backend", "sim", "--samples", "8", "--json"]
        procs = [
            subprocess.Popen([*CLI, "run", scenario, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for scenario in ("offline", "server")
        ]
        for p in procs:
            p.wait(timeout=120)
        steps = Ledger.load(Workspace.open(None).ledger_path).steps
        lost += sum(steps.get(s) is None or steps[s].status != "done" for s in ("run-offline", "run-server"))
    assert lost == 0, f"{lost} ledger entries lost in {trials} trials"


# 7. stale 'running', the signal that stopped a run, a full disk ---------------------------------------------------


def test_7_stale_running_entry_is_shown_in_status(_isolated_home: Path) -> None:
    import socket

    from repro.core.workspace import Workspace

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ws = Workspace.open(None).ensure()
    ws.ledger_path.write_text(
        json.dumps(
            {
                "schema_version": 2,
                "facts": {},
                "steps": {
                    "setup": {
                        "status": "running",
                        "inputs_hash": "x",
                        "started": "2026-01-01T00:00:00+00:00",
                        "pid": dead.pid,
                        "host": socket.gethostname(),
                    }
                },
            }
        )
    )
    proc = cli("status", "--recipe", RECIPE, "--json")
    setup = json.loads(proc.stdout)["steps"][0]
    assert setup["state"] == "stale" and str(dead.pid) in setup["why"] and "gone" in setup["why"]


def test_7_running_entry_records_pid_and_host(tmp_path: Path) -> None:
    from repro.core.ledger import Ledger

    ledger = Ledger.load(tmp_path / "l.json")
    ledger.start("setup", "h")
    rec = Ledger.load(tmp_path / "l.json").steps["setup"]
    assert rec.pid == os.getpid() and rec.host and rec.stale_reason() is None


@pytest.mark.slow
def test_7_sigterm_is_recorded_as_sigterm_not_ctrl_c(_isolated_home: Path) -> None:
    from repro.core.ledger import Ledger
    from repro.core.workspace import Workspace

    _prepared(_isolated_home)
    proc = subprocess.Popen(
        [
            *CLI,
            "run",
            "offline",
            "--recipe",
            RECIPE,
            "--backend",
            "sim",
            "--duration",
            "60",
            "--sim-rate",
            "200",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ledger_path = Workspace.open(None).ledger_path
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (ledger_path.exists() and "running" in ledger_path.read_text()):
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "SIGTERM" in err and "Traceback" not in err
    rec = Ledger.load(ledger_path).steps["run-offline"]
    assert rec.status == "interrupted" and rec.signal == "SIGTERM" and "Ctrl-C" not in (rec.error or "")
    run_json = json.loads((Path(rec.details["run_dir"]) / "performance" / "run_1" / "run.json").read_text())
    assert run_json["signal"] == "SIGTERM" and "Ctrl-C" not in run_json["error"]


@pytest.fixture
def tiny_disk(tmp_path: Path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("needs root to mount a 1 MB tmpfs")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


@pytest.mark.slow
def test_7_full_disk_leaves_no_empty_logs_or_unmarked_folder(_isolated_home: Path, tiny_disk: Path) -> None:
    from repro.core.ledger import Ledger
    from repro.core.workspace import Workspace

    _prepared(_isolated_home)
    ws = Workspace.open(None).ensure()
    shutil.rmtree(ws.root / "runs", ignore_errors=True)
    (ws.root / "runs").symlink_to(tiny_disk, target_is_directory=True)
    filler = tiny_disk / "filler"
    with open(filler, "wb") as fh:  # leave a few KB: the folder and user.conf fit, LoadGen's logs do not
        fh.write(b"\0" * (1024 * 1024 - 12 * 1024))
    proc = cli("run", "offline", "--recipe", RECIPE, "--backend", "sim", "--samples", "32", timeout=120)
    assert proc.returncode in (1, 2), proc.stderr
    for p in tiny_disk.rglob("*"):
        assert not (p.is_file() and p.stat().st_size == 0), f"0-byte file left: {p}"
        if p.is_dir():
            assert any(p.iterdir()), f"empty folder left: {p}"
    rec = Ledger.load(ws.ledger_path).steps.get("run-offline")
    assert rec is not None and rec.status == "failed" and rec.error


# 8. a custom recipe file travels with the rack --------------------------------------------------------------------


def _custom_recipe(tmp_path: Path) -> Path:
    import yaml

    from repro.core.recipes import get_recipe

    doc = get_recipe(RECIPE).model_dump(mode="json") | {"name": "my-gb300", "title": "My GB300"}
    path = tmp_path / "elsewhere" / "my-gb300.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc))
    return path


def test_8_custom_recipe_is_shipped_in_the_rack_dry_run(tmp_path: Path, _isolated_home: Path) -> None:
    _prepared(_isolated_home)
    recipe = _custom_recipe(tmp_path)
    proc = cli(
        "run",
        "offline",
        "--launcher",
        "slurm",
        "--nodes",
        "1",
        "--recipe",
        str(recipe),
        "--backend",
        "sim",
        "--dry-run",
        "--json",
    )
    script = json.loads(proc.stdout)["script"]
    assert "recipes/my-gb300.yaml" in script and str(recipe) not in script


@slurm
@pytest.mark.slurm
@pytest.mark.slow
def test_8_custom_recipe_runs_on_the_nodes(tmp_path: Path, _isolated_home: Path) -> None:
    _prepared(_isolated_home)
    recipe = _custom_recipe(tmp_path)
    proc = cli(
        "run",
        "offline",
        "--launcher",
        "slurm",
        "--nodes",
        "1",
        "--recipe",
        str(recipe),
        "--backend",
        "sim",
        "--samples",
        "16",
        "--duration",
        "1",
        "--json",
        timeout=170,
    )
    doc = json.loads(proc.stdout)
    assert doc["done"] == 1 and doc["failed"] == [], doc["tasks"]
    rack = Path(doc["rack_dir"])
    assert (rack / "recipes" / "my-gb300.yaml").is_file()
    assert json.loads(next((rack / "vm-00").rglob("run.json")).read_text())["recipe"] == "my-gb300"


# 9. rack.json malformed six ways, and negative nodes ---------------------------------------------------------------

MALFORMED = {
    "no recipe": lambda m: {k: v for k, v in m.items() if k != "recipe"},
    "nodes is text": lambda m: m | {"nodes": "many"},
    "nodes is null": lambda m: m | {"nodes": None},
    "jobs is a dict": lambda m: m | {"jobs": {"job_id": "1"}},
    "job without tasks": lambda m: m | {"jobs": [{"job_id": "1"}]},
    "workspace is a list": lambda m: m | {"workspace": ["/tmp"]},
    "nodes negative": lambda m: m | {"nodes": -3},
    "nodes huge": lambda m: m | {"nodes": 10**12},
    "recipe is a path": lambda m: m | {"recipe": "/etc/passwd"},
    "nested": lambda m: m | {"jobs": json.loads("[" * 50 + "]" * 50)},
}


@pytest.mark.parametrize("form", sorted(MALFORMED))
def test_9_malformed_rack_json_is_one_line(form: str, _isolated_home: Path) -> None:
    from repro.core.workspace import Workspace
    from repro.run.rack import plan_rack
    from repro.run.rack_folder import RACK_JSON

    _prepared(_isolated_home)
    plan = plan_rack(RECIPE, Workspace.open(None), 2, backend="sim", samples=16)
    plan.rack_dir.mkdir(parents=True)
    (plan.rack_dir / RACK_JSON).write_text(json.dumps(MALFORMED[form](plan.manifest())))
    proc = cli("run", "offline", "--launcher", "slurm", "--rerun-failed", str(plan.rack_dir), "--dry-run", "--json")
    assert RACK_JSON in one_line_error(proc) and "--array=0--4" not in proc.stdout


def test_9_deeply_nested_rack_json_is_one_line(_isolated_home: Path, tmp_path: Path) -> None:
    rack = tmp_path / "rack"
    rack.mkdir()
    (rack / "rack.json").write_text('{"kind": "repro-rack", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    one_line_error(cli("run", "offline", "--launcher", "slurm", "--rerun-failed", str(rack), "--dry-run"))


# 10. deep JSON, huge numbers, /dev/zero and FIFOs ------------------------------------------------------------------


def test_10_system_json_nested_100k_levels(fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(fixtures / "azure-nd-gb300-v6-rack" / "ND_GB300_v6_1", run)
    (run / "ND_GB300_v6.json").write_text('{"accelerators_per_node": ' + "[" * 100_000 + "]" * 100_000 + "}")
    proc = cli("verify", str(run), "--recipe", RECIPE)
    assert proc.returncode in (0, 1, 2)


def test_10_ledger_schema_version_1e400(_isolated_home: Path) -> None:
    from repro.core.workspace import Workspace

    ws = Workspace.open(None).ensure()
    ws.ledger_path.write_text('{"schema_version": 1e400, "steps": {}}')
    proc = cli("status", "--recipe", RECIPE)
    assert proc.returncode in (0, 2)
    assert "schema_version" in proc.stderr or "corrupt" in proc.stderr


def test_10_recipes_show_dev_zero_and_a_fifo_do_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    for target in ("/dev/zero", str(fifo), str(tmp_path)):
        proc = cli("recipes", "show", target, timeout=30)
        one_line_error(proc)
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(50 << 20)
    assert "too large" in one_line_error(cli("recipes", "show", str(big), timeout=30))
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_10_logs_that_are_fifos_do_not_hang(fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(fixtures / "azure-nd-gb300-v6-rack" / "ND_GB300_v6_1", run)
    detail = next(run.rglob("mlperf_log_detail.txt"))
    detail.unlink()
    os.mkfifo(detail)
    proc = cli("verify", str(run), "--recipe", RECIPE, timeout=30)
    assert proc.returncode in (0, 1, 2)


# 11. report with inf / 1e308 tokens/s ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "1e308", "nan", "-1e308"])
def test_11_report_with_absurd_tokens_per_s(value: str, fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(fixtures / "azure-nd-gb200-v6-v5.1", run)
    summary = next(run.rglob("mlperf_log_summary.txt"))
    text = summary.read_text().replace("Tokens per second: 52061.6", f"Tokens per second: {value}")
    summary.write_text(text)
    html = str(tmp_path / "r.html")
    for args in (["report", str(run), "--html", html], ["verify", str(run)], ["aggregate", str(run)]):
        assert cli(*args).returncode in (0, 1, 2)


# 12. a 200 MB log: read what is parsed, stream the rest ------------------------------------------------------------

# VmHWM, not ru_maxrss: a child's ru_maxrss starts at its forking parent's resident set (kept across exec), so in a
# 1 GB pytest `before` was 1 GB and up to that much growth read as none.
_PEAK = """
import sys
from repro.results.logfiles import parse_detail
def hwm():
    return int(next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:")))
before = hwm()
parse_detail(__import__("pathlib").Path(sys.argv[1]))
print(before, hwm())
"""


@pytest.mark.slow
def test_12_a_200_mb_log_is_not_held_whole(fixtures: Path, tmp_path: Path) -> None:
    src = next(fixtures.rglob("mlperf_log_detail.txt")).read_bytes()
    big = tmp_path / "mlperf_log_detail.txt"
    filler = b':::MLLOG {"key": "padding", "value": "' + b"x" * 180 + b'", "metadata": {}}\n'
    with open(big, "wb") as fh:
        fh.write(src)
        for _ in range((200 << 20) // (len(filler) * 4096)):
            fh.write(filler * 4096)
    assert big.stat().st_size > 190 << 20
    out = subprocess.run([sys.executable, "-c", _PEAK, str(big)], capture_output=True, text=True, timeout=300, cwd=REPO)
    before, after = map(int, out.stdout.split())
    grown_mb = (after - before) / 1024  # VmHWM is in KiB
    assert grown_mb < 100, f"parsing a 200 MB log raised peak memory by {grown_mb:.0f} MB"


# 13. a run.json whose recipe is a path is not opened ---------------------------------------------------------------


def test_13_recipe_named_by_a_result_file_is_never_a_path(fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(fixtures / "azure-nd-gb200-v6-v5.1", run)
    fifo = tmp_path / "trap.yaml"
    os.mkfifo(fifo)  # opening it for reading would block: the old code hangs here
    perf = next(run.rglob("mlperf_log_summary.txt")).parent
    for recipe in (str(fifo), "/etc/passwd", "../../x.yaml"):
        (perf / "run.json").write_text(json.dumps({"recipe": recipe, "scenario": "Offline"}))
        proc = cli("verify", str(perf), timeout=30)
        assert "Unknown recipe" in one_line_error(proc)
