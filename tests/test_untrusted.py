"""Issue #29 (items 3-8): a server, a terminal, shared storage and option values can each be hostile.

Every test runs the real CLI in a subprocess (or a real HTTP server on 127.0.0.1, real concurrent processes)
and fails on commit 11be551.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import assert_one_error, memory_cap, one_line_error
from helpers import cli_process as cli
from hostile_server import HostileServer


def debug_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The CLI with --debug, whose traceback on stderr is expected (cli() treats one as a failure)."""
    return cli(*args, env=env, timeout=timeout, debug=True)


# ---- item 7: one line, exit 2, for every bad value at the option edge ----------------------------------------

BAD_OPTIONS = [
    ("--duration", "nan"),
    ("--duration", "inf"),
    ("--duration", "1e308"),
    ("--duration", "-1"),
    ("--ready-timeout", "inf"),
    ("--ready-timeout", "nan"),
    ("--ready-timeout", "0"),
    ("--ready-timeout", "-1"),
    ("--sim-rate", "nan"),
    ("--sim-rate", "0"),
    ("--sim-rate", "-1"),
    ("--endpoint", "http://127.0.0.1:99999"),
    ("--endpoint", "http://127.0.0.1:abc"),
    ("--endpoint", "http://[::1"),
    ("--endpoint", "file:///etc/passwd"),
]


@pytest.mark.parametrize("scenario", ["offline", "server"])
@pytest.mark.parametrize("option,value", BAD_OPTIONS, ids=[f"{o}={v}" for o, v in BAD_OPTIONS])
def test_7_bad_option_value_is_one_line_exit_2(scenario: str, option: str, value: str, tmp_path: Path) -> None:
    proc = cli("run", scenario, "--recipe", "demo", "--workspace", str(tmp_path), "--dry-run", option, value)
    err = one_line_error(proc)
    assert_one_error(err)
    assert option in err
    assert not any(tmp_path.iterdir()), "a refused value wrote into the workspace"


@pytest.mark.parametrize("value", ["1e400", "nan", "0", "-5", "soon"])
def test_7_heartbeat_env_out_of_range(value: str, tmp_path: Path) -> None:
    proc = cli(
        "run",
        "offline",
        "--recipe",
        "demo",
        "--workspace",
        str(tmp_path),
        "--dry-run",
        env={"REPRO_HEARTBEAT_S": value},
    )
    err = one_line_error(proc)
    assert "REPRO_HEARTBEAT_S" in err
    assert_one_error(err)


@pytest.mark.parametrize(
    "body,problem",
    [
        (b"time_s,gpu_index,watts\n0,0,100\n1,0,\xff\xfe\n", "not ASCII"),
        (b"time_s,gpu_index,watts\n0,0,100\n1,0," + b"9" * (128 << 10) + b"\n", "longer than"),
        (b"time_s,gpu_index,watts\n0,0,100\n1,0,nan\n", "finite"),
        (b"time_s,gpu_index,watts\n0,0,100\n1,0,inf\n", "finite"),
        (b"time_s,gpu_index,watts\n0,0,1e308\n1,0,1e308\n", "no energy"),
        (b"time_s,gpu_index,watts\n5,0,100\n1,0,100\n", "backwards"),
    ],
    ids=["invalid-utf8", "128KB-field", "nan-watts", "inf-watts", "overflow", "backwards"],
)
def test_7_bad_power_csv_is_an_input_error(body: bytes, problem: str, tmp_path: Path) -> None:
    from repro.core.errors import InputError
    from repro.run.power import read_power

    (tmp_path / "power.csv").write_bytes(body)
    with pytest.raises(InputError) as exc:
        read_power(tmp_path)
    assert str(tmp_path / "power.csv") in exc.value.message and problem in exc.value.message


# ---- item 6: no secret in output or files ----------------------------------------------------------------------

SECRET = "S3cretPass"


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _no_secret_under(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_6_hf_endpoint_userinfo_is_redacted_in_setup_dry_run(json_flag: list[str], tmp_path: Path) -> None:
    env = {"HF_ENDPOINT": f"http://user:{SECRET}@127.0.0.1:{_closed_port()}"}
    proc = cli("setup", "--recipe", "nd-gb300-v6", "--workspace", str(tmp_path), "--dry-run", *json_flag, env=env)
    # 1 where this disk is smaller than the recipe's 600 GB (the dry run says so); never a crash or an input error.
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert "127.0.0.1" in proc.stdout + proc.stderr  # the endpoint is still named, without its password


def test_6_unreachable_hub_error_and_debug_traceback_are_redacted(tmp_path: Path) -> None:
    env = {"HF_ENDPOINT": f"http://user:{SECRET}@127.0.0.1:{_closed_port()}"}
    proc = debug_cli("setup", "--recipe", "nd-gb300-v6", "--workspace", str(tmp_path), "--yes", env=env)
    assert proc.returncode == 2 and "Cannot reach http://***@127.0.0.1" in proc.stderr, proc.stderr
    assert "ReproError" in proc.stderr  # --debug did print the traceback
    assert SECRET not in proc.stdout + proc.stderr
    _no_secret_under(tmp_path)


def test_6_endpoint_userinfo_never_reaches_run_json_or_the_terminal(tmp_path: Path) -> None:
    url = f"http://admin:{SECRET}@127.0.0.1:{_closed_port()}"
    ws = tmp_path / "ws"
    proc = debug_cli(
        "run",
        "offline",
        "--recipe",
        "demo",
        "--workspace",
        str(ws),
        "--endpoint",
        url,
        "--ready-timeout",
        "1",
        "--samples",
        "2",
        timeout=300,
    )
    assert proc.returncode != 0 and "http://***@127.0.0.1" in proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    runs = list(ws.rglob("run.json"))
    assert runs, "the failed run left no run.json to check"
    _no_secret_under(ws)
    dry = cli("run", "offline", "--recipe", "demo", "--workspace", str(ws), "--endpoint", url, "--dry-run", "--json")
    assert dry.returncode == 0 and SECRET not in dry.stdout + dry.stderr


# ---- item 5: nothing printed or written is an injection --------------------------------------------------------


def test_5_debug_traceback_never_sends_an_escape_sequence(tmp_path: Path) -> None:
    osc52 = "\x1b]52;c;cm0gLXJmIH4K\x07"
    missing = tmp_path / f"run{osc52}"
    proc = debug_cli("verify", str(missing))
    assert proc.returncode == 2 and "Traceback" not in proc.stdout
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr, repr(proc.stderr)
    assert "\\x1b]52" in proc.stderr


MARKUP = "[link=https://evil.example/]click[/link][blink]x"
COLOR_ENV = {"TERM": "xterm-256color", "FORCE_COLOR": "1"}


def test_5_rich_markup_in_the_ledger_is_shown_as_text_in_status(tmp_path: Path) -> None:
    import json

    from repro.core.ledger import Ledger

    ws = tmp_path / "ws"
    ws.mkdir()
    ledger = Ledger.load(ws / "ledger.json")
    ledger.start("setup", "h", recipe="demo")
    ledger.finish("setup")
    doc = json.loads((ws / "ledger.json").read_text())
    doc["steps"]["setup"]["finished"] = MARKUP
    (ws / "ledger.json").write_text(json.dumps(doc))
    proc = cli("status", "--recipe", "demo", "--workspace", str(ws), env=COLOR_ENV)
    out = proc.stdout + proc.stderr
    assert "\x1b]8;" not in out and "\x1b[5m" not in out, repr(out)  # no OSC 8 hyperlink, no blink
    assert "[link=https://evil.example/]click[/link]" in out


def test_5_rich_markup_in_task_json_is_shown_as_text_in_the_rack_view() -> None:
    from repro.run.rack_folder import TaskRow
    from repro.ui.output import make_console
    from repro.ui.rack import task_table

    row = TaskRow(0, f"vm-{MARKUP}", "failed", job_id="7", host=MARKUP, reason=MARKUP)
    manifest = {"recipe": MARKUP, "nodes": 1, "label": MARKUP}
    console = make_console()  # the console every command prints with
    with console.capture() as cap:
        console.print(task_table([row], manifest, Path(f"/racks/{MARKUP}")))
    out = cap.get()
    assert "\x1b]8;" not in out and "\x1b[5m" not in out, repr(out)
    assert out.count("[link=https://evil.example/]click[/link]") >= 3, out


def test_5_the_cli_console_reads_no_markup_from_data() -> None:
    from repro.ui.output import make_console

    console = make_console()
    with console.capture() as cap:
        console.print(MARKUP)
    assert cap.get().strip() == MARKUP


BIDI = ["\u202e", "\u202a", "\u2066", "\u2069", "\u200b", "\u200f", "\ufeff", "\u2028"]


@pytest.mark.parametrize("ch", BIDI, ids=[f"U+{ord(c):04X}" for c in BIDI])
def test_5_bidi_and_zero_width_characters_are_shown_escaped(ch: str, tmp_path: Path) -> None:
    from repro.core.textsafe import md_cell, terminal_safe

    assert ch not in terminal_safe(f"run{ch}exe.txt") and f"\\u{ord(ch):04x}" in terminal_safe(f"a{ch}b")
    assert ch not in md_cell(f"a{ch}b")
    missing = tmp_path / f"run{ch}gnp.txt"
    proc = cli("verify", str(missing))
    assert proc.returncode == 2 and ch not in proc.stderr and f"\\u{ord(ch):04x}" in proc.stderr, repr(proc.stderr)


def _rack_copy(fixtures: Path, root: Path, names: list[str]) -> Path:
    import shutil

    root.mkdir(parents=True)
    for name in names:
        shutil.copytree(fixtures / "azure-nd-gb300-v6-rack" / "ND_GB300_v6_1", root / name)
        # the system JSON goes in the results root, where the layout keeps it (a "/" in a name nests folders)
        shutil.copy(fixtures / "azure-nd-gb300-v6-rack" / "ND_GB300_v6.json", (root / name).parent)
    return root


def test_5_markdown_notes_and_cells_carry_no_html_or_links(fixtures: Path, tmp_path: Path) -> None:
    evil = ["vm <img src=x onerror=alert(1)>", "vm [x](javascript:alert(1))", "vm ![i](http://e.example/p.png)"]
    rack = _rack_copy(fixtures, tmp_path / "rack", evil)  # three copies of one log: each note names two folders
    for args, md in (
        (["aggregate", str(rack), "--recipe", "nd-gb300-v6", "--markdown"], tmp_path / "agg.md"),
        (["report", str(rack), "--recipe", "nd-gb300-v6", "--markdown"], tmp_path / "rep.md"),
    ):
        proc = cli(*args, str(md))
        assert proc.returncode in (0, 1), proc.stderr
        text = md.read_text()
        assert "counted once" in text or args[0] == "report"  # aggregate's notes name the folders
        assert "<img" not in text, text
        live = re.sub(r"`[^`\n]*`", "", text)  # a code span shows its text as it is
        assert not re.search(r"(?<!\\)\]\((javascript|http)", live), text  # no live link or image
        if args[0] == "aggregate":
            assert "&lt;img src=x onerror=alert(1)&gt;" in text and "\\[x\\](javascript:alert(1))" in text


def test_5_mathtext_in_a_folder_name_is_text_in_the_html_charts(fixtures: Path, tmp_path: Path) -> None:
    rack = _rack_copy(fixtures, tmp_path / "rack", ["vm $\\frac{1}{$", "vm2 $x^$"])
    for i, target in enumerate((rack / "vm $\\frac{1}{$", rack)):  # one VM: its folder name labels the charts
        html = tmp_path / f"r{i}.html"
        proc = cli("report", str(target), "--recipe", "nd-gb300-v6", "--html", str(html))
        assert proc.returncode in (0, 1), proc.stderr
        assert html.stat().st_size > 1000


def test_5_report_markdown_onto_its_own_input_is_refused(fixtures: Path, tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(fixtures / "azure-nd-gb200-v6-v5.1", run)
    summary = next(run.rglob("mlperf_log_summary.txt"))
    before = summary.read_bytes()
    for flag in ("--markdown", "--html"):
        err = one_line_error(cli("report", str(run), flag, str(summary)))
        assert "input" in err and str(run) in err
        assert summary.read_bytes() == before
    one_line_error(cli("report", str(run), "--markdown", str(run / "report.md")))
    assert not (run / "report.md").exists()


def test_5_aggregate_markdown_onto_the_system_json_is_refused(fixtures: Path, tmp_path: Path) -> None:
    rack = _rack_copy(fixtures, tmp_path / "rack", ["ND_GB300_v6_1"])
    system = rack / "ND_GB300_v6.json"
    before = system.read_bytes()
    err = one_line_error(cli("aggregate", str(rack), "--markdown", str(system)))
    assert "input" in err and system.read_bytes() == before
    elsewhere = cli("aggregate", str(rack), "--recipe", "nd-gb300-v6", "--markdown", str(tmp_path / "r.md"))
    assert elsewhere.returncode in (0, 1), elsewhere.stderr

    # The system JSON is read from beside the run folder, not inside it: still an input, still never an output.
    vm = rack / "ND_GB300_v6_1"
    for flag in ("--html", "--markdown"):
        err = one_line_error(cli("report", str(vm), flag, str(system)))
        assert "read" in err and system.read_bytes() == before


# ---- item 4: memory bounded by what is parsed (the ledger, power.csv, recipes) ---------------------------------

# The peak of this interpreter's own memory (VmHWM): ru_maxrss is kept across exec, so a child forked from a
# 1 GB pytest reports 1 GB before it has run a line (Linux's exec_mmap folds the old mm's high-water mark into it).
PEAK = """
import sys
from repro.cli import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print("PEAK_MB", int(hwm) / 1024, "RC", code, file=sys.stderr)
"""


def peak_cli(*args: str, timeout: float = 300) -> tuple[float, int, str]:
    """Peak RSS (MB) of one CLI command in a fresh interpreter, its exit code and its output (stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-c", PEAK, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=memory_cap,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    match = re.search(r"PEAK_MB ([\d.]+) RC (\S+)", proc.stderr)
    assert match, proc.stderr[-2000:]
    return float(match[1]), int(match[2]) if match[2].isdigit() else 0, proc.stdout + proc.stderr


def test_4_peak_memory_is_the_commands_own_not_the_test_runners(tmp_path: Path) -> None:
    """A child forked from a large pytest (the whole suite reached 1.1 GB) reports its own peak, not pytest's."""
    ballast = bytearray(b"\x01") * (600 << 20)  # resident: every page written
    peak, code, _ = peak_cli("status", "--recipe", "demo", "--workspace", str(tmp_path / "ws"))
    assert len(ballast) == 600 << 20 and code == 0
    assert peak < 300, f"`repro status` on an empty workspace measured {peak:.0f} MB beside a 600 MB parent"


def test_4_a_60_mb_ledger_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with open(ws / "ledger.json", "w") as fh:
        fh.write('{"schema_version": 2, "steps": {}, "facts": {"pad": [')
        fh.write("0.5," * (15 << 20))
        fh.write("0.5]}}")
    assert (ws / "ledger.json").stat().st_size > 60 << 20
    peak, code, err = peak_cli("status", "--recipe", "demo", "--workspace", str(ws))
    assert peak < 500, f"status on a 60 MB ledger peaked at {peak:.0f} MB"
    assert "ledger" in err


_POWER = """
import json, sys
from pathlib import Path
from repro.run.power import read_power
def hwm():
    return int(next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:")))
before = hwm()
s = read_power(Path(sys.argv[1]))
print(json.dumps({"grown_kb": hwm() - before, "gpus": s.gpus, "samples": s.samples, "energy_j": s.energy_j,
                  "file_bytes": s.file_bytes, "window_s": s.window_s}))
"""


@pytest.mark.slow
def test_4_a_150_mb_power_csv_is_summed_in_bounded_memory(tmp_path: Path) -> None:
    """Measured in a child (VmHWM): in-process, a pytest whose peak was already higher hid any growth."""
    import json

    chunk = "".join(f"1.000000000000,{g},300.000000000000\n" for g in range(8)) * 4096  # ~1.2 MB
    lines = 0
    with open(tmp_path / "power.csv", "w") as fh:
        fh.write("time_s,gpu_index,watts\n" + "".join(f"0,{g},300\n" for g in range(8)))
        for _ in range(140):
            fh.write(chunk)
            lines += 8 * 4096
        fh.write("".join(f"2,{g},300\n" for g in range(8)))
    assert (tmp_path / "power.csv").stat().st_size > 150_000_000
    proc = subprocess.run([sys.executable, "-c", _POWER, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    # read in bounded time too (issue #36 item 9): the first MAX_POWER_BYTES only, and the summary says so
    from repro.run.power import MAX_POWER_BYTES

    with open(tmp_path / "power.csv", "rb") as fh:
        head = fh.read(MAX_POWER_BYTES)
    rows_in_window = head.count(b"\n") - 1  # whole rows after the header, give or take the rows at the cut
    assert got["gpus"] == 8 and rows_in_window <= got["samples"] <= rows_in_window + 8 < lines + 16
    assert got["file_bytes"] == (tmp_path / "power.csv").stat().st_size and got["window_s"] == pytest.approx(1.0)
    assert got["energy_j"] == pytest.approx(8 * 300 * 1)
    assert got["grown_kb"] / 1024 < 50, f"reading power.csv raised peak RSS by {got['grown_kb'] / 1024:.0f} MB"


def _laughs_recipe(tmp_path: Path) -> Path:
    from conftest import REPO

    src = (REPO / "recipes" / "nd-gb300-v6.yaml").read_text()
    lines = ['    lol0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"    lol{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    path = tmp_path / "nd-gb300-v6.yaml"
    path.write_text(src.replace("  serve_extra_options:\n", "  serve_extra_options:\n" + "\n".join(lines) + "\n", 1))
    return path


@pytest.mark.parametrize(
    "args",
    [["recipes", "validate", "{r}"], ["recipes", "show", "{r}"], ["run", "offline", "--recipe", "{r}", "--dry-run"]],
    ids=["validate", "show", "run-dry-run"],
)
def test_4_billion_laughs_recipe_is_refused(args: list[str], tmp_path: Path) -> None:
    recipe = _laughs_recipe(tmp_path)
    argv = [a.replace("{r}", str(recipe)) for a in args]
    proc = cli(*argv, "--workspace", str(tmp_path / "ws"), timeout=60) if args[0] == "run" else cli(*argv, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1000:], proc.stderr[-1000:])
    assert "alias" in proc.stdout + proc.stderr
    assert "valid" not in proc.stdout.replace("not valid", "") or "alias" in proc.stdout


# ---- item 8: a shared workspace ---------------------------------------------------------------------------------

_PREPARE = """
import sys, time
from pathlib import Path
from repro.core.workspace import Workspace
from repro.setup.demo import prepare_demo
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.005)
paths = prepare_demo(Workspace.open(Path(sys.argv[1])))
print(paths["model_dir"])
"""


@pytest.mark.slow
def test_8_two_demo_builds_in_a_fresh_workspace_both_succeed(tmp_path: Path) -> None:
    import time

    ws = tmp_path / "ws"
    start = str(time.time() + 3)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PREPARE, str(ws), start], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()[-3000:]
    model = ws / "models" / "tiny-llama"
    assert (model / "config.json").exists() and (model / "tokenizer.json").exists()
    assert not [p.name for p in (ws / "models").iterdir() if p.name.startswith(".")], "a temp build folder was left"


def test_8_stale_ledger_temp_files_are_removed_on_the_next_save(tmp_path: Path) -> None:
    from repro.core.ledger import Ledger

    path = tmp_path / "ledger.json"
    Ledger.load(path).save()
    stale = [tmp_path / ".ledger.json.k1ll3d.tmp", tmp_path / ".ledger.json.abc_12.tmp"]
    for s in stale:
        s.write_text("{half")
    other = tmp_path / ".other.json.x.tmp"
    other.write_text("not ours")
    ledger = Ledger.load(path)
    ledger.start("setup", "h")
    ledger.save()
    assert not any(s.exists() for s in stale) and other.exists()
    assert Ledger.load(path).get("setup") is not None


# ---- item 3: a server that stalls or lies never hangs or exhausts repro ----------------------------------------


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One workspace with the demo model and data built, shared by the server tests (the build takes a while)."""
    from repro.core.workspace import Workspace
    from repro.setup.demo import prepare_demo

    ws = tmp_path_factory.mktemp("demo-ws")
    prepare_demo(Workspace.open(ws))
    return ws


@pytest.fixture(scope="module")
def honest_peak(demo_ws: Path) -> float:
    """Peak RSS of the same run against an honest server (the baseline the hostile servers are held to)."""
    _, peak, code, err, _ = _hostile_run(demo_ws, "honest")
    assert code == 0, err[-2000:]
    return peak


def _run_json_naming(ws: Path, url: str) -> dict:
    import json

    for path in sorted(ws.rglob("run.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        doc = json.loads(path.read_text())
        if url in json.dumps(doc.get("command")):
            return doc
    raise AssertionError(f"no run.json for {url}")


def _endpoint_run(ws: Path, url: str, scenario: str = "offline", *extra: str) -> tuple[float, int, str, float]:
    import time

    t0 = time.monotonic()
    peak, code, err = peak_cli(
        "run",
        scenario,
        "--recipe",
        "demo",
        "--workspace",
        str(ws),
        "--endpoint",
        url,
        "--samples",
        "4",
        "--stall-timeout",
        "3",
        "--ready-timeout",
        "30",
        *extra,
        timeout=240,
    )
    return peak, code, err, time.monotonic() - t0


def _hostile_run(ws: Path, mode: str, scenario: str = "offline") -> tuple[HostileServer, float, int, str, float]:
    """One `repro run --endpoint` against a HostileServer in `mode`: (the server, peak MB, exit code, stderr, s)."""
    with HostileServer(mode) as srv:
        return (srv, *_endpoint_run(ws, srv.url, scenario))


STALLS = {
    "silent": "sent nothing for 3 s",
    "short-content-length": "sent nothing for 3 s",
    "drip-headers": "status line and headers within 3 s",
    "endless-body": "larger than",
    "huge-content-length": "Content-Length of 10,000,000,000 bytes",
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(STALLS))
def test_3_a_server_that_stalls_or_lies_ends_the_run_failed(mode: str, demo_ws: Path, honest_peak: float) -> None:
    srv, peak, code, err, took = _hostile_run(demo_ws, mode)
    assert srv.real_requests >= 1, "the hostile answer was never asked for"
    assert code == 1, err[-2000:]
    assert srv.url in err and STALLS[mode] in err, err[-2000:]
    assert took < 90, f"the run took {took:.0f} s to give up"
    assert peak < honest_peak + 64, f"peak RSS {peak:.0f} MB against {honest_peak:.0f} MB for an honest server"
    doc = _run_json_naming(demo_ws, srv.url)
    assert doc["status"] == "failed" and srv.url in doc["error"] and STALLS[mode] in doc["error"]
    assert doc["label"] == "demo"


@pytest.mark.slow
def test_3_an_honest_endpoint_run_peaks_under_500_mb(honest_peak: float) -> None:
    """The whole `run --endpoint` process, tokenizer included (AutoTokenizer imported torch: 826 MB on 11be551+)."""
    assert honest_peak < 500, f"an --endpoint run against an honest server peaked at {honest_peak:.0f} MB"


@pytest.mark.slow
def test_3_an_event_stream_that_never_ends_is_a_stall(demo_ws: Path, honest_peak: float) -> None:
    srv, peak, code, err, took = _hostile_run(demo_ws, "sse-no-done", "server")
    assert code == 1 and srv.url in err and "sent nothing for 3 s" in err, err[-2000:]
    assert took < 90 and peak < honest_peak + 64


@pytest.mark.slow
def test_3_outputs_past_max_tokens_are_clipped(demo_ws: Path) -> None:
    srv, _, code, err, _ = _hostile_run(demo_ws, "inflated")
    assert code == 0, err[-2000:]
    doc = _run_json_naming(demo_ws, srv.url)
    tokens = doc["backend_stats"]["tokens"]
    assert tokens["clipped_samples"] == 4 and tokens["clipped_tokens"] == 4 * 32 * 4
    assert doc["measured_by_harness"]["tokens"] == 4 * 32  # not 5x: max_tokens of the demo is 32
    assert any("longer than max_tokens" in w for w in doc["backend_stats"]["warnings"])


@pytest.mark.slow
def test_3_usage_that_disagrees_with_the_ids_is_a_warning_and_a_verify_check(demo_ws: Path) -> None:
    srv, _, code, err, _ = _hostile_run(demo_ws, "usage-lies")
    assert code == 0, err[-2000:]
    doc = _run_json_naming(demo_ws, srv.url)
    count = doc["backend_stats"]["tokens"]["loadgen_count"]
    assert count["source"] == "server token ids" and count["tokens"] == 4 * 32
    assert count["other_source"] == "server usage.completion_tokens" and count["other_differs_pct"] == 200.0
    assert any("token counts disagree" in w for w in doc["backend_stats"]["warnings"])
    assert "warning: token counts disagree in 4 of 4 samples" in err  # shown when the run ends, too
    proc = cli("verify", doc["run_dir"], "--json")
    verdict = json.loads(proc.stdout)
    check = next(c for c in verdict["checks"] if c["name"] == "token count")
    assert check["ok"] is False and "server token ids" in check["detail"] and "+200.0%" in check["detail"]
