"""How a core result looks to a person: a lazy map from result classes to their Rich views.

Core modules return plain data (with `to_json()` for machines); this is the one place that turns them into
Rich renderables. Keys are class paths so the CLI imports a view module only when a command shows that result.
"""

from __future__ import annotations

import importlib
from typing import Any

_VIEWS: dict[str, str] = {
    "repro.core.steps.StepOutcome": "repro.ui.flow:step_outcome",
    "repro.flow.doctor.DoctorReport": "repro.ui.flow:doctor_report",
    "repro.flow.status.StatusReport": "repro.ui.flow:status_report",
    "repro.flow.guide.GuideResult": "repro.ui.flow:guide_result",
    "repro.flow.guide.GuidePlan": "repro.ui.flow:guide_plan",
    "repro.flow.guide.GuideNote": "repro.ui.flow:guide_note",
    "repro.report.model.Report": "repro.ui.report:report",
    "repro.report.explain.Explanation": "repro.ui.explain:explanation",
    "repro.results.verify.Verdict": "repro.ui.results:render_verdict",
    "repro.results.aggregate.RackReport": "repro.ui.results:render_rack",
    "repro.results.series.Series": "repro.ui.results:render_series",
    "repro.results.attest_verify.Verification": "repro.ui.attest:verification",
    "repro.run.rack_folder.RackResult": "repro.ui.rack:rack_result",
    "repro.run.tune.TuneResult": "repro.ui.tune:tune_result",
    "repro.rehearse.result.RehearsalResult": "repro.ui.rehearse:rehearsal_result",
}


def renderable(obj: Any) -> Any:
    """The Rich view of a result; objects with no registered view (text, Rich objects, command views) pass through."""
    spec = _VIEWS.get(f"{type(obj).__module__}.{type(obj).__qualname__}")
    if spec is None:
        return obj
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)(obj)
