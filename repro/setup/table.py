"""The table a dataset pickle decodes to: column name -> values, with no pandas anywhere (issue #43).

MLPerf's dataset pickles are pandas DataFrames; repro reads only their columns, in row order. A `Table` is that
and nothing more: each column is a list (text, token-id lists, numbers: whatever the pickle's object column held,
rebuilt by repro's own decoder) or a numpy array (a numeric column, built from raw bytes of a checked dtype). It
offers the few operations setup needs: a column, the rows, and pandas' `DataFrame.sample(n, random_state=seed)`
row choice, reproduced exactly (numpy's RandomState, as pandas' `sample` calls it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Column = list[Any] | np.ndarray


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    data: dict[str, Column]
    index: range | list[int]
    """The pickle's row labels (a RangeIndex or an integer index); rows are used by position."""

    def __post_init__(self) -> None:
        n = len(self.index)
        if tuple(self.data) != self.columns or any(len(v) != n for v in self.data.values()):
            raise ValueError("a Table's columns must all have one value per row")

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, name: object) -> bool:
        return name in self.data

    def __getitem__(self, name: str) -> Column:
        return self.data[name]

    def values(self, name: str) -> list[Any]:
        """A column as Python values (numbers from a numeric column as int/float/bool)."""
        col = self.data[name]
        return col.tolist() if isinstance(col, np.ndarray) else list(col)

    def rows(self, names: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        names = list(self.columns if names is None else names)
        cols = [self.values(n) for n in names]
        for i in range(len(self)):
            yield {n: c[i] for n, c in zip(names, cols, strict=True)}

    def take(self, positions: Sequence[int], *, reset_index: bool = True) -> Table:
        """The rows at these positions, in this order (pandas' `.iloc[positions]`, then `reset_index(drop=True)`)."""
        pos = [int(p) for p in positions]
        data: dict[str, Column] = {}
        for name, col in self.data.items():
            data[name] = col[np.asarray(pos, dtype=np.intp)] if isinstance(col, np.ndarray) else [col[p] for p in pos]
        index: range | list[int] = range(len(pos)) if reset_index else [list(self.index)[p] for p in pos]
        return Table(self.columns, data, index)

    def sample(self, n: int, random_state: int) -> Table:
        """`DataFrame.sample(n=n, random_state=random_state).reset_index(drop=True)` as pandas 1.3-3.x compute it:
        `np.random.RandomState(seed).choice(len, size=n, replace=False)` (pandas/core/sample.py `sample`)."""
        if not 0 <= n <= len(self):
            raise ValueError(f"cannot take {n} rows from {len(self)}")
        positions = np.random.RandomState(random_state).choice(len(self), size=n, replace=False)
        return self.take(positions.tolist())
