"""The guided flow: prompts, skipping from the ledger, interruption and resume; real steps in a pseudo-terminal."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from repro.cli import app
from repro.core.errors import Interrupted
from repro.core.ledger import Ledger
from repro.core.recipes import get_recipe
from repro.core.steps import StepOutcome
from repro.core.workspace import Workspace
from repro.flow.guide import run_guide
from repro.ui.render import renderable

runner = CliRunner()
DEMO = get_recipe("demo")


class _Steps:
    """Small stand-ins that write to the real workspace, for flow logic independent of the real steps."""

    def __init__(self, interrupt_run: bool = False):
        self.calls: list[str] = []
        self.interrupt_run = interrupt_run

    def setup(self, recipe, ws, dry_run):
        self.calls.append("setup")
        (ws.ensure().data / "sample.jsonl").write_text("{}\n")
        return StepOutcome(step="setup", status="done", summary="double")

    def run(self, recipe, ws, dry_run):
        self.calls.append("run-offline")
        if self.interrupt_run:
            raise KeyboardInterrupt
        run_dir = ws.runs / recipe.name / "Offline" / "20260101-000000"
        run_dir.mkdir(parents=True)
        return StepOutcome(step="run-offline", status="done", summary="double", details={"run_dir": str(run_dir)})

    def verify(self, recipe, ws, dry_run):
        self.calls.append("verify")
        return StepOutcome(step="verify", status="done", summary="double verdict")

    def table(self):
        return {"setup": self.setup, "run-offline": self.run, "verify": self.verify}


def _guide(steps: _Steps, answers=None, **kw):
    asked: list[str] = []

    def ask(q: str) -> bool:
        asked.append(q)
        return answers.pop(0)

    out = io.StringIO()
    result = run_guide(
        DEMO,
        "test",
        Workspace.open(),
        steps=steps.table(),
        ask=ask if answers is not None else None,
        show=lambda obj: Console(file=out, width=120).print(renderable(obj)),
        **kw,
    )
    return result, asked, out.getvalue()


def test_asks_before_expensive_steps_and_stops_on_no():
    steps = _Steps()
    result, asked, out = _guide(steps, answers=[True, False], interactive=True)
    assert steps.calls == ["setup"]
    assert len(asked) == 2 and asked[0].startswith("Run setup now") and asked[1].startswith("Run run-offline now")
    assert result.stopped_at == "run-offline" and "repro guide --recipe demo" in result.next_command
    assert "[1/5] doctor" in out and "[4/5] run-offline" in out and "about 1 min" not in out
    assert "LoadGen's 2 s minimum plus model loading" in " ".join(out.split())  # no estimate the demo cannot keep
    assert "starting setup" in out and asked[0] == "Run setup now?"  # said at once; the header is not repeated
    led = Ledger.load(Workspace.open().ledger_path)
    assert led.steps["setup"].status == "done" and led.steps["setup"].details["recipe"] == "demo"
    assert "run-offline" not in led.steps


def test_resume_skips_completed_steps():
    _guide(_Steps(), answers=[True, False], interactive=True)
    steps = _Steps()
    result, asked, out = _guide(steps, answers=[True], interactive=True)
    assert steps.calls == ["run-offline", "verify"]
    assert "already done (ledger)" in out
    assert [o.status for o in result.outcomes] == ["done", "skipped", "skipped", "done", "done"]
    assert result.exit_code == 0 and result.stopped_at is None


def test_interrupt_is_recorded_then_resumed():
    with pytest.raises(Interrupted) as exc:
        _guide(_Steps(interrupt_run=True), yes=True, interactive=True)
    assert exc.value.exit_code == 130 and exc.value.next_command == "repro guide --recipe demo"
    led = Ledger.load(Workspace.open().ledger_path)
    assert led.steps["setup"].status == "done" and led.steps["run-offline"].status == "interrupted"
    steps = _Steps()
    _guide(steps, yes=True, interactive=True)
    assert steps.calls == ["run-offline", "verify"]


def test_yes_and_non_tty_never_ask():
    steps = _Steps()
    result, asked, out = _guide(steps, answers=[], interactive=False)
    assert asked == [] and "not asking" in out and steps.calls == ["setup", "run-offline", "verify"]


def test_dry_run_changes_nothing_through_cli():
    res = runner.invoke(app, ["guide", "--recipe", "demo", "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == 1
    assert [s["status"] for s in doc["steps"]] == ["done", "dry-run", "skipped", "dry-run", "dry-run"]
    assert not Workspace.open().ledger_path.exists()


def test_doctor_failure_stops_the_flow():
    res = runner.invoke(app, ["guide", "--recipe", "nd-gb300-v6", "--yes"])
    assert res.exit_code == 1
    assert "Stopped at doctor" in res.output and "Traceback" not in res.output


def test_unknown_system_without_recipe_points_to_recipe_option():
    res = runner.invoke(app, [])
    assert res.exit_code == 2 and "--recipe" in res.output and "Traceback" not in res.output


# --- real steps in a pseudo-terminal -------------------------------------------------------------


class _Term:
    def __init__(self, args: list[str], env: dict[str, str]):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.buf = ""

    def expect(self, pattern: str, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.buf):
            if time.monotonic() > deadline:
                raise AssertionError(f"did not see {pattern!r}; output so far:\n{self.buf[-3000:]}")
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    raise AssertionError(f"exited {self.proc.returncode} before {pattern!r}:\n{self.buf[-3000:]}")
                self.buf += re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", chunk.decode(errors="replace"))
        return self.buf

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                try:
                    self.buf += re.sub(
                        r"\x1b\[[0-9;?]*[a-zA-Z]", "", os.read(self.master, 65536).decode(errors="replace")
                    )
                except OSError:
                    break
        rc = self.proc.wait(timeout=max(1, deadline - time.monotonic()))
        os.close(self.master)
        return rc


@pytest.mark.slow
def test_guided_demo_in_a_terminal_interrupt_and_resume(tmp_path):
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    args = [sys.executable, "-c", "from repro.cli import main; main()", "guide", "--recipe", "demo"]
    term = _Term(args, env)
    try:
        term.expect(r"Run setup now.*\?")
        term.send("y\r")
        term.expect(r"Run run-offline now.*\?")
        term.send("y\r")
        # Ctrl-C once LoadGen runs (its progress bar is up; the demo's run lasts its 2 s min duration at least),
        # reading the terminal meanwhile: an undrained pty blocks the child's writes and let the flow end first
        term.expect(r"LoadGen Offline")
        term.proc.send_signal(signal.SIGINT)
        rc = term.finish()
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert rc == 130, term.buf[-2000:]
    assert "Traceback" not in term.buf
    led = Ledger.load(Workspace.open().ledger_path)
    assert led.steps["setup"].status == "done"
    assert led.steps["run-offline"].status in ("interrupted", "failed")

    term = _Term(args, env)
    try:
        term.expect(r"\[2/5\] setup")
        term.expect(r"already done \(ledger\)")
        term.expect(r"Run run-offline now again\?")
        term.send("y\r")
        rc = term.finish(timeout=240)
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert rc == 0, term.buf[-3000:]
    out = term.buf
    assert "Run setup now" not in out
    assert "NOT A REPRODUCTION" in out and "All steps finished" in out
    led = Ledger.load(Workspace.open().ledger_path)
    assert all(led.steps[s].status == "done" for s in ("setup", "run-offline", "verify"))
    run_dir = Path(led.steps["run-offline"].details["run_dir"])
    assert (run_dir / "performance" / "run_1" / "mlperf_log_summary.txt").is_file()
    assert led.steps["verify"].details["run_dir"] == str(run_dir)
