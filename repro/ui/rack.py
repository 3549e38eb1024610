"""Rich views of a rack run: the live task table while Slurm runs, and the result with its rack table."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from repro.core.fmt import fmt_num
from repro.run.rack_folder import SCRIPT, RackResult, TaskRow
from repro.ui.output import console, info
from repro.ui.render import renderable

_STYLE = {
    "pending": "dim",
    "running": "cyan",
    "done": "green",
    "failed": "bold red",
    "cancelled": "yellow",
    "missing": "bold red",
}


def task_table(rows: list[TaskRow], manifest: dict[str, Any], rack_dir: Path) -> Table:
    label = f" [{manifest['label'].upper()}]" if manifest.get("label") else ""
    if manifest.get("shape") == "one-system":
        scenario, nodes = manifest.get("scenario"), manifest["nodes"]
        what = f"System run{label}: {manifest['recipe']} {scenario}, one system of {nodes} nodes"
    else:
        what = f"Rack run{label}: {manifest['recipe']} x {manifest['nodes']} VMs"
    t = Table(title=f"{what} ({rack_dir})")
    for col in ("VM", "job", "state", "host", "tokens/s", "note"):
        t.add_column(col, justify="right" if col == "tokens/s" else "left")
    for r in rows:
        t.add_row(
            r.vm,
            f"{r.job_id}_{r.index}" if r.job_id else "-",
            Text(r.state, style=_STYLE.get(r.state, "")),
            r.host or "",
            fmt_num(r.tokens_per_s) if r.tokens_per_s is not None else "",
            Text(r.reason or (f"exit {r.exit_code}" if r.exit_code else "")),
        )
    return t


def system_result(result: RackResult) -> Group:
    """A system's job: its dry run (every node's servers and ranks, the LoadGen node, each srun step), or its row
    and the verdict of the one run."""
    m = result.manifest
    label = f" [{m['label']}]" if m.get("label") else ""
    if result.dry_run:
        return Group(
            Text(
                f"dry run{label}: {m['recipe']} {m.get('scenario')} as one system of {m['nodes']} nodes; would write "
                f"{result.rack_dir / 'system.sbatch'} and submit it with:",
                style="yellow",
            ),
            Text("  " + shlex.join(result.submit_command)),
            Text("What runs where (node names are the job's hosts once it runs):"),
            *[Text("  " + line) for line in result.plan_lines],
            Text("Each server is one srun step, one task per GPU, started from node 0:"),
            *[Text(f"  {step['instance']}: " + shlex.join(step["argv"])) for step in result.steps],
            Syntax(result.script or "", "bash", theme="ansi_dark", word_wrap=False),
            *([Text(_image_route(m, result.rack_dir))] if m.get("container_image") else []),
            *([Text("Before submitting, repro runs:")] if result.image_commands else []),
            *[Text("  " + shlex.join(c)) for c in result.image_commands],
        )
    parts: list[Any] = [task_table(result.rows, m, result.rack_dir)]
    if result.report is not None:
        parts.append(renderable(result.report))
    elif result.report_error:
        parts.append(Text(f"No verdict: {result.report_error}", style="bold red"))
    return Group(*parts)


def rack_result(result: RackResult) -> Group:
    m = result.manifest
    if m.get("shape") == "one-system":
        return system_result(result)
    if result.dry_run:
        label = f" [{m['label']}]" if m.get("label") else ""
        return Group(
            Text(f"dry run{label}: would write {result.rack_dir / SCRIPT} and submit it with:", style="yellow"),
            Text("  " + " ".join(shlex.quote(c) for c in result.submit_command)),
            Syntax(result.script or "", "bash", theme="ansi_dark", word_wrap=False),
            Text(
                f"Each VM's results would land in {result.rack_dir}/vm-NN/ "
                "(the folder must be on storage every node sees)."
            ),
            *([Text(_image_route(m, result.rack_dir))] if m.get("container_image") else []),
            *(
                [Text("Before submitting, repro runs (a .partial file is renamed once whole):")]
                if result.image_commands
                else []
            ),
            *[Text("  " + shlex.join(c)) for c in result.image_commands],
        )
    parts: list[Any] = [task_table(result.rows, m, result.rack_dir)]
    if result.report is not None:
        parts.append(renderable(result.report))
    elif result.report_error:
        parts.append(Text(f"No rack table: {result.report_error}", style="bold red"))
    if result.failed:
        names = ", ".join(r.vm for r in result.failed)
        parts.append(
            Text(
                f"{len(result.failed)} VM(s) not summed ({names}). Re-run only those: {result.rerun_command}",
                style="bold red",
            )
        )
    return Group(*parts)


class ConsoleRack:
    """A live table on a terminal; one line per task state change anywhere else (nohup, Slurm, pipes)."""

    def __init__(self, live: bool | None = None) -> None:
        self.live = console.is_terminal if live is None else live

    def note(self, text: str) -> None:
        info(text)

    def change(self, row: TaskRow) -> None:
        if not self.live:
            info(f"{row.vm}: {row.state}" + (f" ({row.reason})" if row.reason and row.state != "done" else ""))

    @contextmanager
    def watch(
        self, rows: list[TaskRow], manifest: dict[str, Any], rack_dir: Path
    ) -> Iterator[Callable[[list[TaskRow]], None]]:
        if not self.live:
            yield lambda _rows: None
            return
        with Live(task_table(rows, manifest, rack_dir), console=console, refresh_per_second=4, transient=True) as view:
            yield lambda new: view.update(task_table(new, manifest, rack_dir))


def _image_route(m: dict[str, Any], rack_dir: Path) -> str:
    image = m["container_image"]
    if m.get("shape") == "one-system":
        where = f"{rack_dir}/image/ (enroot import, once)" if m.get("image_source") == "enroot" else "its registry"
        return f"Every rank runs in {image} through pyxis (srun --container-image), from {where}."
    if m.get("image_source") == "enroot":
        pyxis = " pyxis is on this cluster; repro does not need it." if m.get("pyxis") else ""
        return (
            f"Each node runs repro on its host, which starts its trtllm-serve servers with enroot: repro imports "
            f"{image} once into {rack_dir}/image/ as an enroot squashfs file; each node creates its enroot container "
            f"from it (enroot create), starts each server in it (enroot start) and removes it after.{pyxis}"
        )
    if m.get("image_source") == "archive":
        return (
            f"Each node runs repro on its host, which starts its trtllm-serve containers from {image}: repro saves the "
            f"image into {rack_dir}/image/ (docker save) and each node loads it once (docker load)."
        )
    pushed = f"repro pushes {m['push_from']} as {image}; " if m.get("push_from") else ""
    return (
        f"Each node runs repro on its host, which starts its trtllm-serve containers from {image}: {pushed}"
        "each node pulls it once (docker pull)."
    )
