"""`repro` alone in a real terminal (tmux, 80x24) on a machine without a GPU: the front door offers the CPU demo,
the run draws a live bar, the flow ends in a verdict and one pasteable `Next:` line, and no line breaks a
word, a number, a path or a command (issue 25, items 6, 16, 17, 19, 20)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repro.core.ledger import Ledger
from repro.core.workspace import Workspace

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


class Tmux:
    def __init__(
        self, tmp: Path, cwd: Path, env: dict[str, str], columns: int = 80, rows: int = 24, args: tuple[str, ...] = ()
    ):
        self.sock = str(tmp / "tmux.sock")
        cmd = " ".join(
            ["env", "-u", "COLUMNS", "-u", "LINES", *(f"{k}={shlex.quote(v)}" for k, v in env.items())]
            + [shlex.quote(sys.executable), "-c", shlex.quote("from repro.cli import main; main()")]
            + [shlex.quote(a) for a in args]
        )
        after = "echo EXIT=$?; stty -a | grep -o -- ' -*echo '; sleep 600"
        self._tmux("new-session", "-d", "-x", str(columns), "-y", str(rows), "-c", str(cwd), f"{cmd}; {after}")
        self._tmux("set-option", "-g", "history-limit", "10000")

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True, check=True).stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p")

    def history(self) -> list[str]:
        """Every line since the start, lines the terminal wrapped joined back (as copying them would)."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-").rstrip("\n").splitlines()

    def expect(self, pattern: str, timeout: float = 240) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = "\n".join(self.history())
            if re.search(pattern, text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} on screen:\n" + "\n".join(self.history()[-40:]))

    def send(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


@pytest.mark.slow
def test_repro_alone_at_80x24_without_a_gpu_reaches_a_verdict_with_a_live_bar(tmp_path):
    ws = tmp_path / "ws"
    env = {"REPRO_HOME": str(ws), "REPRO_IMDS_URL": "http://127.0.0.1:9/metadata/instance", "TERM": "xterm"}
    term = Tmux(tmp_path, tmp_path, env)
    try:
        term.expect(r"Run it\s+now\? \[y/n\]", timeout=120)
        term.send("y", "Enter")
        term.expect(r"Run setup now\? \[y/n\]")
        term.send("y", "Enter")
        term.expect(r"Run run-offline now\? \[y/n\]")
        term.send("y", "Enter")
        frames: list[str] = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and "EXIT=" not in (screen := term.screen()):
            frames += [line for line in screen.splitlines() if line.startswith("LoadGen Offline")]
            time.sleep(0.3)
        term.expect(r"EXIT=\d+", timeout=120)
        lines = term.history()
    finally:
        term.close()
    text = "\n".join(lines)
    assert "EXIT=0" in text, text[-3000:]
    assert "Traceback" not in text
    # a live bar: at least two different frames, counting up to LoadGen's total
    counts = {m.group(1) for f in frames if (m := re.search(r" ([\d,]+)/[\d,]+ ", f))}
    assert len(counts) >= 2, frames
    assert not any("a progress line every" in line for line in lines)

    led = Ledger.load(Workspace.open(ws).ledger_path)
    run_dir = led.steps["run-offline"].details["run_dir"]
    assert all(led.steps[s].status == "done" for s in ("setup", "run-offline", "verify"))
    # the verdict, and one Next: line that is a whole command naming the real run folder
    assert "NOT A REPRODUCTION" in text and "All steps finished." in text
    nexts = [line.removeprefix("Next: ") for line in lines if line.startswith("Next: ")]
    assert nexts == [shlex.join(["repro", "report", run_dir, "--html", "report.html", "--recipe", "demo"])]
    # nothing the user copies is broken: paths, prompts, figures
    for path in re.findall(r"(/\S+)", text):
        if path.startswith(str(tmp_path)):
            assert Path(path.rstrip(":;,.)")).exists(), f"broken path on screen: {path}"
    assert run_dir in text
    assert text.count("[y/n]") == 3
    tps = led.steps["run-offline"].details["tokens_per_s"]
    assert f"{tps:,.1f}" in text
    # prose is wrapped by repro at word boundaries: only no-wrap lines (commands, paths) run past column 80
    for line in lines:
        if len(line) > 80:
            assert line.startswith("Next: ") or " " not in line.strip(), line
    for a, b in zip(lines, lines[1:], strict=False):
        assert not (re.search(r"\d[,.]$", a) and re.match(r"\d", b)), (a, b)


@pytest.mark.parametrize(("keys", "what"), [("C-d", "end of input"), ("C-c", "Ctrl-C")])
def test_cancel_at_the_front_door_prompt_is_one_line_and_exit_130(tmp_path, keys, what):
    env = {"REPRO_HOME": str(tmp_path / "ws"), "REPRO_IMDS_URL": "http://127.0.0.1:9/", "TERM": "xterm"}
    term = Tmux(tmp_path, tmp_path, env)
    try:
        term.expect(r"Run it\s+now\? \[y/n\]", timeout=120)
        term.send(keys)
        term.expect(r"EXIT=\d+", timeout=60)
        lines = term.history()
    finally:
        term.close()
    text = "\n".join(lines)
    assert "EXIT=130" in text, text
    errors = [line for line in lines if "error:" in line]
    assert errors == [f"error: Cancelled at the prompt ({what}); nothing was started."], text
    assert "Traceback" not in text and "Aborted" not in text and "kept in the ledger" not in text
    assert not (tmp_path / "ws" / "ledger.json").exists()


def test_without_a_terminal_the_front_door_prints_the_one_command_to_run(tmp_path):
    env = {"REPRO_HOME": str(tmp_path / "ws"), "REPRO_IMDS_URL": "http://127.0.0.1:9/", "PATH": "/usr/bin:/bin"}
    cli = [sys.executable, "-c", "from repro.cli import main; main()"]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == "Next: repro run offline --recipe demo"
    doc = json.loads(subprocess.run([*cli, "--json"], capture_output=True, text=True, timeout=120, env=env).stdout)
    assert doc["error"]["next_command"] == "repro run offline --recipe demo"


def test_ctrl_c_during_the_bar_leaves_one_final_frame(tmp_path):
    """The tty echoed `^C` behind Rich's back; on a full-width bar that wrapped the cursor, so the last live frame
    stayed on screen with the final one under it (issue 25 item 20). Echo is back on once repro exits."""
    env = {"REPRO_HOME": str(tmp_path / "ws"), "REPRO_IMDS_URL": "http://127.0.0.1:9/", "TERM": "xterm"}
    term = Tmux(tmp_path, tmp_path, env, args=("run", "offline", "--recipe", "demo"))
    try:
        term.expect(r"LoadGen Offline .* [1-9][\d,]*/[\d,]+ ", timeout=180)
        time.sleep(1)
        term.send("C-c")
        term.expect(r"EXIT=\d+\n.*echo", timeout=120)
        lines = term.history()
    finally:
        term.close()
    text = "\n".join(lines)
    assert "EXIT=130" in text, text
    bars = [line for line in lines if line.startswith("LoadGen Offline")]
    assert len(bars) == 1, text
    assert bars[0].rstrip().endswith("interrupted"), bars
    assert "^C" not in text
    assert " echo " in text and " -echo " not in text, text


# ---------------------------------------------------------------- issue 37: one story at 80x24
UNIT_AFTER_NUMBER = re.compile(r"^\s*[│┃]?\s*(s|ms|min|GB|MB|%|GPUs?|CPUs?|tokens/s|queries/s)\b")


def _screen_checks(lines: list[str]) -> None:
    """Every table keeps its columns (none cut with …, none left out), no number is split from its unit, the bar
    keeps >= 20 cells."""
    text = "\n".join(lines)
    assert "too narrow for" not in text, text
    for line in lines:
        if line.startswith("┃"):
            assert "…" not in line, line
    for a, b in zip(lines, lines[1:], strict=False):
        ends_in_number = re.search(r"\d[│ ]*$", a.rstrip(" │"))
        assert not (ends_in_number and UNIT_AFTER_NUMBER.match(b)), (a, b)
        assert not re.search(r"\d{2}:\d{2}:\d{2}\+\d{2}:$", a.rstrip(" │")), (a, b)  # an ISO time cut in two


def _status_next(ws: Path) -> str:
    cli = [sys.executable, "-c", "from repro.cli import main; main()", "status", "--json"]
    env = {"REPRO_HOME": str(ws), "REPRO_IMDS_URL": "http://127.0.0.1:9/", "PATH": "/usr/bin:/bin"}
    return str(
        json.loads(subprocess.run(cli, capture_output=True, text=True, timeout=120, env=env).stdout)["next_command"]
    )


def _nexts(lines: list[str]) -> list[str]:
    return [line.removeprefix("Next: ").strip() for line in lines if line.startswith("Next: ")]


def _bar_frames(term: Tmux, until: str, timeout: float = 300) -> list[str]:
    frames: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not re.search(until, (screen := term.screen())):
        frames += [line for line in screen.splitlines() if re.match(r"LoadGen Offline \S+ [\d,]+/[\d,]+ ", line)]
        time.sleep(0.2)
    return frames


def _interrupt_mid_bar(term: Tmux) -> list[str]:
    term.expect(r"LoadGen Offline \S+ [1-9][\d,]*/[\d,]+ ", timeout=240)
    term.send("C-c")
    term.expect(r"EXIT=\d+", timeout=60)
    return term.history()


@pytest.mark.slow
def test_one_story_at_80x24_after_a_run_and_after_ctrl_c(tmp_path):
    """Issue 37 done-when: the guided flow, a run and Ctrl-C at 80x24: status, the run and the guided flow name the
    same next command each time, tables keep their columns, no number loses its unit, the bar keeps >= 20 cells."""
    ws = tmp_path / "ws"
    env = {"REPRO_HOME": str(ws), "REPRO_IMDS_URL": "http://127.0.0.1:9/metadata/instance", "TERM": "xterm"}

    # 1. `repro` alone: the front door, setup, the run with its bar, verify; then status names the flow's Next
    term = Tmux(tmp_path, tmp_path, env)
    try:
        term.expect(r"Run it\s+now\? \[y/n\]", timeout=120)
        term.send("y", "Enter")
        term.expect(r"Run setup now\? \[y/n\]")
        term.send("y", "Enter")
        term.expect(r"Run run-offline now\? \[y/n\]")
        term.send("y", "Enter")
        frames = _bar_frames(term, r"EXIT=\d+")
        term.expect(r"EXIT=\d+", timeout=120)
        lines = term.history()
    finally:
        term.close()
    assert "EXIT=0" in "\n".join(lines), "\n".join(lines[-40:])
    assert frames and all(len(re.match(r"LoadGen Offline (\S+) ", f).group(1)) >= 20 for f in frames), frames
    assert any("projected" in line for line in lines)  # the projection is on its own line, not in the bar's
    assert not any(line.startswith("LoadGen Offline") and "projected" in line for line in lines)
    _screen_checks(lines)
    flow_next = _nexts(lines)
    assert len(flow_next) == 1 and flow_next[0].startswith("repro report ")
    assert _status_next(ws) == flow_next[0]

    # 2. `repro run offline` interrupted mid-bar: its Next is what status names
    term = Tmux(tmp_path, tmp_path, env, args=("run", "offline", "--recipe", "demo"))
    try:
        lines = _interrupt_mid_bar(term)
    finally:
        term.close()
    assert "EXIT=130" in "\n".join(lines)
    run_next = _nexts(lines)
    assert run_next == ["repro run offline --recipe demo"], lines[-20:]
    assert _status_next(ws) == run_next[0]

    # 3. the guided flow resumes the interrupted run (asks once, "again"), is interrupted: status names its Next
    term = Tmux(tmp_path, tmp_path, env, args=("guide", "--recipe", "demo"))
    try:
        term.expect(r"Run run-offline now again\? \[y/n\]", timeout=120)
        term.send("y", "Enter")
        lines = _interrupt_mid_bar(term)
    finally:
        term.close()
    assert "EXIT=130" in "\n".join(lines)
    assert not any("running it again" in line for line in lines)
    guide_next = _nexts(lines)
    assert guide_next == ["repro guide --recipe demo"], lines[-20:]
    assert _status_next(ws) == guide_next[0]

    # 4. a run to the end: its verdict counts as verify; its Next is status's; status's table keeps its columns
    term = Tmux(tmp_path, tmp_path, env, args=("run", "offline", "--recipe", "demo"))
    try:
        term.expect(r"EXIT=\d+", timeout=300)
        lines = term.history()
    finally:
        term.close()
    assert "EXIT=0" in "\n".join(lines)
    _screen_checks(lines)
    header = next(line for line in lines if line.startswith("┃ check"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["check", "result", "detail"]
    run_next = _nexts(lines)
    assert len(run_next) == 1 and run_next[0].startswith("repro report ")
    assert _status_next(ws) == run_next[0]
    term = Tmux(tmp_path, tmp_path, env, args=("status",))
    try:
        term.expect(r"EXIT=\d+", timeout=120)
        lines = term.history()
    finally:
        term.close()
    _screen_checks(lines)
    header = next(line for line in lines if line.startswith("┃ step"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["step", "state", "finished", "why"]
    assert sum(bool(re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", line)) for line in lines) >= 2
    assert [s for s in _nexts(lines)] == run_next


@pytest.mark.slow
def test_ctrl_c_on_a_server_run_at_80x24_is_back_within_10_s(tmp_path):
    """Issue 37 item 6 as a user meets it: Ctrl-C typed in the terminal (SIGINT to the whole foreground group, not
    one signal to one process) on a demo Server run with a 300 s schedule gives the prompt back within 10 s, one
    final frame marked interrupted, the partial logs named and marked, and a Next line that is one whole command."""
    ws = tmp_path / "ws"
    env = {"REPRO_HOME": str(ws), "REPRO_IMDS_URL": "http://127.0.0.1:9/", "TERM": "xterm"}
    term = Tmux(tmp_path, tmp_path, env, args=("run", "server", "--recipe", "demo", "--duration", "300"))
    try:
        term.expect(r"LoadGen Server \S+ [1-9][\d,]*/[\d,]+ ", timeout=240)
        time.sleep(2)
        sent = time.monotonic()
        term.send("C-c")
        term.expect(r"EXIT=\d+", timeout=120)
        took = time.monotonic() - sent
        lines = term.history()
    finally:
        term.close()
    text = "\n".join(lines)
    assert "EXIT=130" in text, text
    assert took < 10, f"the prompt came back {took:.1f} s after Ctrl-C"
    bars = [line for line in lines if line.startswith("LoadGen Server")]
    assert len(bars) == 1 and bars[0].rstrip().endswith("interrupted"), bars
    assert len(re.match(r"LoadGen Server (\S+) ", bars[0]).group(1)) >= 20, bars
    assert "Traceback" not in text and "^C" not in text
    (run_json,) = ws.glob("runs/demo/Server/*/performance/run_1/run.json")
    info = json.loads(run_json.read_text())
    assert info["status"] == "interrupted" and info["incomplete"] is True
    assert str(run_json.parent) in " ".join(text.split()), text  # the partial logs are named, whole
    assert _nexts(lines) == ["repro run server --recipe demo --duration 300"]
    _screen_checks(lines)
    status = subprocess.run(
        [sys.executable, "-m", "repro", "status", "--json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(status.stdout)["next_command"] == "repro run server --recipe demo --duration 300", status.stdout
