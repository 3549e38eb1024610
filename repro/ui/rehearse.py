"""The view of `repro rehearse`: each run's validity and verdict, under the rehearsal label."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from repro.ui.wrap import Prose


def runs_table(runs: list[dict[str, Any]]) -> list[Any]:
    """The runs as a table fitted to the terminal (a column that does not fit is dropped, least useful first, and
    named), then each run folder whole on its own line: a path cut with `…` cannot be pasted."""
    from repro.report.tables import ALWAYS, Column
    from repro.report.tables import Table as Data
    from repro.ui.fit import fitted

    if not runs:
        return []
    # the verdict says what happened; LoadGen's validity is part of it; the node matters on a rack only
    columns = [
        Column(name, numeric=name == "samples/s", keep=keep)
        for name, keep in (("scenario", ALWAYS), ("node", 2), ("LoadGen", 4), ("verdict", 8), ("samples/s", 6))
    ]
    rows = []
    for n, r in enumerate(runs, 1):
        rate = r["samples_per_s"]
        rows.append(
            [
                f"{n}. {r['scenario']}",
                r.get("node", "-"),
                r["validity"],
                f"{r['verdict']} [{r['label']}]",
                "-" if rate is None else f"{rate:,.2f}",
            ]
        )
    out: list[Any] = []

    class _Fitted:
        def __rich_console__(self, console: Any, options: Any) -> Any:
            yield from fitted(Data(columns, rows), options, "--json")

    out.append(_Fitted())
    for n, r in enumerate(runs, 1):
        out.append(Prose(f"{n}. run folder: {r['run_dir']}"))
    return out


def _whole(text: str, style: str = "") -> Text:
    """A command on a line of its own that never wraps: copying the screen line gives all of it."""
    line = Text(text, style=style)
    line.no_wrap, line.overflow = True, "ignore"
    return line


def rehearsal_result(result: Any) -> Group:
    head = Text(f"[REHEARSAL, NOT A REPRODUCTION] {result.recipe}", style="bold yellow")
    lines: list[Any] = [
        head,
        Prose(f"scaling: {result.scaling.text(result.scenarios)}"),
        Text(f"image: {result.image}"),
    ]
    if result.doctor:
        doc = result.doctor
        gpus = doc["gpus"]
        seen = f"{len(gpus)} x {gpus[0]['name']}, driver {doc['driver']}" if gpus else "no GPU"
        checks = ", ".join(f"{k} {v}" for k, v in doc["gpu_checks"].items())
        style = "green" if doc["gpus_as_recipe"] else "red"
        lines.append(Prose(f"doctor [{doc['label']}]: {seen}; {checks}", style=style))
    if result.setup:
        su = result.setup
        gate = "; ".join(f"{a['attempt']}: HTTP {a['http']}" for a in su["attempts"])
        style = "green" if su["gate_as_hub"] else "red"
        lines.append(Prose(f"setup [{su['label']}] {su['repo_id']} @ {su['revision'][:12]}: {gate}", style=style))
    if result.device_requests:
        asks = "; ".join(
            f"{s['server']}: GPUs {','.join(d['DeviceIDs'])}"
            for s in result.device_requests
            for d in s["device_requests"]
        )
        lines.append(Prose(f"Docker device requests on the VM (recorded, not sent here): {asks}"))
    if result.dry_run:
        lines.append(Prose(f"would run, in {result.workspace}: {', '.join(result.steps)}"))
        return Group(*lines)
    lines += runs_table(result.runs)
    if result.rack:
        rack = result.rack
        total = rack["total_tokens_per_s"]
        lines.append(
            Prose(
                f"rack {rack['rack_dir']}: {rack['counted']} of {result.nodes} nodes summed"
                + (f", total {total:,.2f} tokens/s [rehearsal]" if total is not None else "")
                + f"; Slurm job IDs: {', '.join(rack['jobs'])}; still running: {', '.join(rack['left_jobs']) or 'none'}"
            )
        )
    for v in result.verify:
        verdict = (
            v["verdict"] if isinstance(v["verdict"], str) else ", ".join(f"{k} {s}" for k, s in v["verdict"].items())
        )
        style = "green" if v["as_rehearsal"] else "red"
        # the command whole on its own line (a wrapped one cannot be pasted), its verdict under it
        lines += [_whole(v["command"]), Prose(f"  {verdict} [{v['label']}], exit {v['exit_code']}", style=style)]
    for rep in result.report:
        style = "green" if rep["written"] else "red"
        lines.append(Prose(f"report [{rep['label']}]: {rep['html'] if rep['written'] else rep['error']}", style=style))
    if result.left_containers:
        lines.append(Prose(f"containers left behind: {', '.join(result.left_containers)}", style="red"))
    else:
        lines.append(Text("no server container left behind"))
    return Group(*lines)
