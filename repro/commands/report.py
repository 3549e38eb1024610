"""`repro report` (issue #8): published tables, plots and measured power from your runs."""

from __future__ import annotations

from ..errors import ReproError
from ..options import JsonOpt


def report(json: JsonOpt = False) -> None:
    """Compare your runs with every published result, with plots, business and efficiency figures."""
    raise ReproError("`repro report` is not built yet.", "see issue #8")
