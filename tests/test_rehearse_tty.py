"""`repro rehearse` in a real terminal (tmux, 80x24), as a user on an 80-column VM console sees it (issue 37 item 2
and its done-when): the result table keeps every column, no number is split from its unit, no word, path or
command is cut by the terminal, the live bar keeps >= 20 cells with its projection (and its unit) on a line of
its own. One rehearsal (nd-gb300-v6, the default and among the fastest, about a minute) serves every assertion;
the renderers it found wrong are checked here too, without a terminal, in the fast lane."""

from __future__ import annotations

import io
import re
import shutil
import time
from pathlib import Path

import pytest
from rich.console import Console

from repro.core.fmt import UNITS, wrap_words
from repro.run.progress import ReadyWait, RunProgress, for_terminal

UNIT_FIRST = re.compile(
    r"^\s*[│┃]?\s*(?:" + "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True)) + r")(?![\w/])"
)
BAR = re.compile(r"^LoadGen (Offline|Server) (\S+) ")


def _split_unit(a: str, b: str) -> bool:
    """Line `a` ends in a number and line `b` starts with its unit (`600` / `s`)."""
    return bool(re.search(r"\d$", a.rstrip(" │")) and UNIT_FIRST.match(b))


def assert_nothing_cut(lines: list[str], width: int = 80) -> None:
    """`lines`: what the terminal holds, its own wraps joined back (tmux -J). A line wider than the terminal was cut
    by the terminal: only a whole command (`Next: ...`, `repro ...`) or a lone path may be, never prose. No line ends
    in a number whose unit starts the next; no ISO time is cut at its offset; no cell is cut with …."""
    for line in lines:
        if len(line) > width:
            assert line.startswith(("Next: ", "repro ")) or " " not in line.strip(), line
        assert "…" not in line, line
    for a, b in zip(lines, lines[1:], strict=False):
        assert not _split_unit(a, b), (a, b)
        assert not re.search(r"\d{2}:\d{2}:\d{2}[+-]\d{2}:?$", a.rstrip(" │")), (a, b)


# ---------------------------------------------------------------- the renderers, fast


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_status_line_on_a_terminal_breaks_between_words_and_keeps_numbers_with_units(monkeypatch) -> None:
    """The `[repro]` lines (a server wait, a heartbeat) went to the terminal as one long line: at 80 columns it cut
    `conn`/`ection` and `so f`/`ar`. On a terminal they now break between words; in a pipe they stay one line."""
    monkeypatch.setenv("COLUMNS", "80")
    wait = _Tty()
    ReadyWait(stream=wait)("http://127.0.0.1:30001", "refused", 1800.0)
    lines = wait.getvalue().splitlines()
    assert len(lines) == 2 and all(len(line) <= 80 for line in lines), lines
    assert " ".join(lines) == (
        "[repro] waiting for http://127.0.0.1:30001: nothing is listening there yet (connection refused); "
        "0:30:00 left (--ready-timeout), Ctrl-C stops the run"
    )
    beat = "LoadGen Offline: 448/448 issued samples done (100.0%), 521 tokens/s so far, elapsed 0:00:07, done"
    for width in range(20, 81):
        monkeypatch.setenv("COLUMNS", str(width))
        out = for_terminal(_Tty(), "[repro] " + beat).splitlines()
        assert " ".join(out) == "[repro] " + beat
        assert all(len(line) <= width or " " not in line for line in out), (width, out)
        assert "521 tokens/s" in "\n".join(out) and "448/448 issued" in " ".join(out)
        assert not any(_split_unit(a, b) for a, b in zip(out, out[1:], strict=False)), out
    pipe = io.StringIO()
    ReadyWait(stream=pipe)("http://127.0.0.1:30001", "refused", 1800.0)
    assert len(pipe.getvalue().splitlines()) == 1
    with RunProgress("heartbeat", "LoadGen Offline", 10, fixed_total=True, interval_s=60, stream=pipe):
        pass
    assert all(line.startswith("[repro] ") for line in pipe.getvalue().splitlines())


def test_a_word_longer_than_the_line_keeps_its_own_line_whole() -> None:
    path = "/tmp/ws/rehearsal/nd-gb300-v6/reports/nd-gb300-v6-offline-20261127-162201.html"
    assert wrap_words(f"report [rehearsal]: wrote {path}", 40) == ["report [rehearsal]: wrote", path]
    assert wrap_words("needs ≥ 600 s", 9) == ["needs ≥", "600 s"]


def _render(obj: object, width: int = 80) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, soft_wrap=True, highlight=False, markup=False).print(
        obj, crop=False
    )
    return out.getvalue().splitlines()


def test_a_plain_message_never_folds_a_path(monkeypatch) -> None:
    """A rehearsal step's line (`report [rehearsal]: wrote PATH`) went through Rich as plain text, which folded the
    path at column 80 (`...-16220` / `1.html`): a path that cannot be pasted. Shown text now wraps as prose."""
    from repro.ui import output

    path = "/tmp/ui80/ws/rehearsal/nd-gb300-v6/reports/nd-gb300-v6-offline-20261127-162201.html"
    buf = _Tty()
    monkeypatch.setitem(output._consoles, "err_console", Console(file=buf, width=80, color_system=None))
    output.show_err(f"report [rehearsal]: wrote {path}")
    assert buf.getvalue().splitlines() == ["report [rehearsal]: wrote", path]


def test_the_rehearsal_view_keeps_each_verify_command_whole_on_its_line() -> None:
    """Each verify step's command was wrapped as prose (`repro verify` / PATH / `--recipe ...`): now it is one
    no-wrap line a user can copy, its verdict under it; the report's path is whole."""
    from repro.rehearse.result import RehearsalResult, Scaling
    from repro.ui.rehearse import rehearsal_result

    run_dir = "/tmp/pytest-of-someone/pytest-1/test_x0/ws/rehearsal/nd-gb300-v6/runs/nd-gb300-v6/Offline/20261127-1"
    result = RehearsalResult("nd-gb300-v6", Path("/tmp/ws"), Scaling(1 / 400, 0.17, 67.8), "img")
    command = f"repro verify {run_dir} --recipe nd-gb300-v6"
    result.verify = [{"command": command, "verdict": "NOT A REPRODUCTION", "label": "rehearsal", "exit_code": 1,
                      "as_rehearsal": True}]  # fmt: skip
    html = "/tmp/pytest-of-someone/pytest-1/test_x0/ws/rehearsal/nd-gb300-v6/reports/nd-gb300-v6-offline-1.html"
    result.report = [{"written": True, "label": "rehearsal", "html": html}]
    lines = _render(rehearsal_result(result))
    at = lines.index(command)
    assert lines[at + 1].strip() == "NOT A REPRODUCTION [rehearsal], exit 1"
    assert html in lines
    assert_nothing_cut(lines)


def test_the_projection_under_the_bar_names_its_unit() -> None:
    from repro.run.projection import Projection

    assert Projection(376.0, 0.2, 0.5, None).text == "projected: 376 tokens/s ±0.2%"
    assert Projection(520.0, 0.2, 0.5, (57_760.0, 63_840.0)).text == (
        "below band: 520 tokens/s ±0.2%, band 57,760–63,840 tokens/s"
    )


# ---------------------------------------------------------------- a real rehearsal at 80x24


@pytest.fixture(scope="module")
def rehearsal_screen(client, tmp_path_factory) -> dict:
    """`repro rehearse` in tmux at 80x24 to its end: every line since the start (terminal wraps joined back), the
    bar frames seen while it ran, the workspace."""
    from test_tmux_flow import Tmux

    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    tmp = tmp_path_factory.mktemp("rehearse_tty")
    ws = tmp / "ws"
    env = {"REPRO_HOME": str(ws), "REPRO_IMDS_URL": "http://127.0.0.1:9/metadata/instance", "TERM": "xterm"}
    term = Tmux(tmp, tmp, env, args=("rehearse", "--recipe", "nd-gb300-v6"))
    frames: list[str] = []
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and "EXIT=" not in (screen := term.screen()):
            frames += [line for line in screen.splitlines() if BAR.match(line)]
            time.sleep(0.2)
        term.expect(r"EXIT=\d+", timeout=30)
        lines = term.history()
    finally:
        term.close()
    return {"lines": lines, "frames": frames, "ws": ws}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.soak  # one whole rehearsal in a terminal (about a minute); the views are checked above, in seconds
def test_rehearsal_at_80x24_keeps_its_table_whole_and_nothing_cut(rehearsal_screen) -> None:
    lines: list[str] = rehearsal_screen["lines"]
    text = "\n".join(lines)
    assert "EXIT=0" in text, "\n".join(lines[-60:])
    assert "Traceback" not in text
    # the result table: every column, both runs, each row whole
    header = next(line for line in lines if line.startswith("┃") and "scenario" in line)
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["scenario", "node", "LoadGen", "verdict", "samples/s"]
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in lines if re.match(r"│ \d\. ", line)]
    assert [r[0] for r in rows] == ["1. Offline", "2. Server"], rows
    for row in rows:
        assert row[1:4] == ["-", "VALID", "NOT A REPRODUCTION [rehearsal]"], row
        assert re.fullmatch(r"\d[\d,]*\.\d\d", row[4]), row
    assert all(len(line) <= 80 for line in lines if line[:1] in "┏┃┡│└"), "a table wider than the terminal"
    # each run folder is on screen whole and is the folder the run wrote; the table's samples/s is its own
    folders = [line.strip() for n, line in enumerate(lines) if lines[n - 1].endswith("run folder:") and n]
    folders += [m.group(1) for line in lines if (m := re.match(r"\d\. run folder: (/\S+)$", line))]
    assert len(folders) == 2, text[-3000:]
    for folder, row in zip(folders, rows, strict=True):
        assert Path(folder).is_dir() and row[0].endswith(Path(folder).parent.name), (folder, row)
        summary = next(Path(folder).rglob("mlperf_log_summary.txt")).read_text()
        rate = float(re.search(r"^(?:Completed s|S)amples per second\s*:\s*([\d.]+)", summary, re.M).group(1))  # type: ignore[union-attr]
        assert row[4] == f"{rate:,.2f}", (row, rate)
    # every path on screen is whole (it exists), each verify command is one line
    for path in re.findall(r"(/tmp/\S+)", text):
        assert Path(path.rstrip(":;,.)")).exists(), f"broken path on screen: {path}"
    assert sum(line.startswith("repro verify /") and line.endswith("--recipe nd-gb300-v6") for line in lines) == 2
    # no prose cut by the terminal, no number without its unit, no …
    assert_nothing_cut(lines)
    assert [line for line in lines if line.startswith("Next: ")] == [
        "Next: repro rehearse --recipe nd-gb300-v6 --nodes 2"
    ]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.soak  # one whole rehearsal in a terminal (about a minute); the views are checked above, in seconds
def test_rehearsal_at_80x24_draws_a_live_bar_of_20_cells_with_the_projection_below(rehearsal_screen) -> None:
    frames: list[str] = rehearsal_screen["frames"]
    lines: list[str] = rehearsal_screen["lines"]
    seen = {m.group(1) for f in frames if (m := BAR.match(f))}
    assert seen == {"Offline", "Server"}, frames
    assert all(len(BAR.match(f).group(2)) >= 20 for f in frames), frames  # type: ignore[union-attr]
    counts = {m.group(1) for f in frames if (m := re.search(r" ([\d,]+)/[\d,]+ ", f))}
    assert len(counts) >= 3, frames  # live: it counted up while the runs ran
    assert not any("a progress line every" in line for line in lines)  # a terminal gets the bar, not heartbeats
    assert not any(BAR.match(line) and "projected" in line for line in lines)
    projections = [line.strip() for line in lines if line.strip().startswith("projected:")]
    assert projections and all(re.match(r"projected: [\d,]+ tokens/s ±", p) for p in projections), projections
    # the stand-in runs at a scaled rate: the recipe's published band is never its yardstick
    assert not any(re.match(r"\s*(below band|above band|on track|at the edge):", line) for line in lines)
