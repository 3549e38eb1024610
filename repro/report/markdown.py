"""The report's sections as Markdown (charts are HTML-only; their data is in the tables beside them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from repro.core.textsafe import md_cell, md_code
from repro.report.sections import sections
from repro.report.tables import Chart, Paragraph, Table

if TYPE_CHECKING:
    from repro.report.model import Report


def _table(t: Table) -> list[str]:
    lines = [
        "| " + " | ".join(md_cell(c.name) for c in t.columns) + " |",
        "|" + "|".join("---:" if c.numeric else "---" for c in t.columns) + "|",
    ]
    for i, row in enumerate(t.rows):
        cells = [md_cell(v) for v in row]
        if i < len(t.row_class) and t.row_class[i] == "own":
            cells[0] = f"**{cells[0]}**"
        lines.append("| " + " | ".join(cells) + " |")
    if t.footnotes:
        lines += [""] + [f"[{n}] {md_code(text)}  " for n, text in enumerate(t.footnotes, 1)]
    return lines


def render_markdown(report: Report) -> str:
    lines = [f"# {md_cell(report.title)}", ""]
    if report.banner:
        lines += [f"> **{md_cell(report.banner)}**", ""]
    lines += [report.headline]
    for section in sections(report):
        lines += ["", f"## {section.heading}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                lines += _table(block) + [""]
            elif isinstance(block, Paragraph):
                if section.heading in ("Notes", "Sources"):
                    lines.append(f"- {md_code(block.text) if block.code else md_cell(block.text)}")
                else:
                    lines += [md_code(block.text) if block.code else md_cell(block.text), ""]
            elif isinstance(block, Chart):
                continue
    return "\n".join(line.rstrip() if not line.endswith("  ") else line for line in lines).rstrip() + "\n"
