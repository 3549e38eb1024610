"""Rich views of the step outcomes, doctor, status and the guided flow."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from repro.core.fmt import clause, join_sentences
from repro.core.steps import StepOutcome
from repro.flow.doctor import DoctorReport
from repro.flow.guide import GuideNote, GuidePlan, GuideResult
from repro.flow.status import StatusReport
from repro.ui.wrap import Prose, Words

_OUTCOME_STYLE = {"done": "green", "skipped": "cyan", "dry-run": "yellow", "failed": "bold red"}
_CHECK_STYLE = {"PASS": "green", "WARN": "yellow", "FAIL": "bold red", "SKIP": "dim"}
_STATE_STYLE = {
    "done": "green",
    "stale": "yellow",
    "failed": "bold red",
    "interrupted": "red",
    "running": "cyan",
    "to do": "white",
    "not needed": "dim",
}


def step_outcome(o: StepOutcome) -> Prose:
    return Prose(Text.from_markup(f"[{_OUTCOME_STYLE[o.status]}]{o.status}[/] {escape(o.step)}: {escape(o.summary)}"))


class _DoctorChecks:
    """A table where it fits; in a narrower terminal one line per check, so a path in a detail is never cut
    inside a table cell (prose still wraps between words)."""

    WIDE = 120

    def __init__(self, r: DoctorReport):
        self.r = r

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        r = self.r
        title = f"repro doctor: recipe {r.recipe or '(none)'}"
        if options.max_width >= self.WIDE:
            t = Table(title=title, title_justify="left")
            for col in ("check", "status", "detail", "fix"):
                t.add_column(col, overflow="fold")
            for c in r.checks:
                t.add_row(Text(c.name), Text(c.level, style=_CHECK_STYLE[c.level]), Words(c.detail), Words(c.fix or ""))
            yield t
            return
        yield Text(title, style="italic")
        for c in r.checks:
            line = Text(f"{c.level:<4} ", style=_CHECK_STYLE[c.level])
            line.append(f"{c.name}: " + join_sentences(c.detail, f"Fix: {c.fix}" if c.fix else None), style="")
            yield Prose(line)


def doctor_report(r: DoctorReport) -> Group:
    t = _DoctorChecks(r)
    style = _CHECK_STYLE["WARN" if r.verdict == "WARN" else r.verdict]
    summary = (
        f"[{style}]{r.verdict}[/]: {len(r.failed)} failed, "
        f"{sum(c.level == 'WARN' for c in r.checks)} warnings, "
        f"{sum(c.level == 'PASS' for c in r.checks)} passed, "
        f"{sum(c.level == 'SKIP' for c in r.checks)} skipped. "
        + join_sentences(
            f"Recipe: {escape(r.recipe or '(none)')} — {escape(clause(r.recipe_reason))}",
            "Fix the FAIL rows, then `repro doctor` again" if r.failed else None,
        )
    )
    return Group(t, Prose(Text.from_markup(summary)))


def status_report(r: StatusReport) -> Group:
    name = r.recipe.name if r.recipe else "(unknown recipe)"
    t = Table(title=f"Workspace {r.workspace}, recipe {name}", title_justify="left")
    # names, states and timestamps never wrap (an ISO time cut at `+00:` / `00` reads as another time); why does
    for col in ("step", "state", "finished", "why"):
        t.add_column(col, no_wrap=col != "why")
    for s in r.states:
        t.add_row(s.step, Text(s.state, style=_STATE_STYLE[s.state]), s.finished or "", Words(s.why))
    lines: list[Table | Text] = [t]
    if r.recipe and r.recipe.demo:
        lines.append(Text("Demo recipe: its runs are labelled demo and are never a reproduction.", style="yellow"))
    if r.other_runs:
        others = Table(title="Other runs (outside the main flow)", title_justify="left")
        for col in ("run", "state", "finished", "why"):
            others.add_column(col, no_wrap=col != "why")
        for s in r.other_runs:
            others.add_row(s.step, Text(s.state, style=_STATE_STYLE[s.state]), s.finished or "", Words(s.why))
        lines.append(others)
    return Group(*lines)


def guide_result(r: GuideResult) -> Group:
    t = Table(title=f"Guided flow, recipe {r.recipe}" + (f" [{r.label}]" if r.label else ""), title_justify="left")
    # each step's summary (paths included) was printed whole as it finished; the table only recaps
    for col in ("step", "result", "verdict"):
        t.add_column(col, no_wrap=True)
    for o in r.outcomes:
        t.add_row(o.step, o.status, str(o.details.get("verdict") or ""))
    end = f"Stopped at {r.stopped_at}." if r.stopped_at else "All steps finished."
    return Group(t, Text(end, style="bold"))


def guide_plan(p: GuidePlan) -> Table:
    t = Table(title=p.title, title_justify="left")
    for col in ("#", "step", "state", "disk", "time"):
        t.add_column(col, no_wrap=col in ("#", "step", "state"))
    for i, (step, state, disk, time) in enumerate(p.rows, 1):
        t.add_row(str(i), step, state, Words(disk), Words(time))
    return t


def guide_note(n: GuideNote) -> Prose:
    return Prose(n.text, style=n.style or "")
