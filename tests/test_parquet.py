"""The calibration parquet `repro setup` writes without pyarrow (repro/setup/parquet.py), read back by what reads it
in the recipe image: pandas' read_parquet of the folder (container_entry.py hf-quantize) and pyarrow's reader; the
rows are pandas' own `to_parquet` rows of the same texts."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.setup.parquet import PAGE_BYTES, text_parquet

TEXTS = [
    "[INST] Summarize the news [/INST]",
    "Gr\u00fc\u00dfe \u2014 \u00fcn\u00ef\u00e7\u00f6d\u00e9 \U0001f600",
    "",
    "a\nb\tc",
]


def _pandas_rows(texts: list[str]) -> list[str]:
    buf = io.BytesIO()
    pd.DataFrame({"text": texts}).to_parquet(buf, index=False)
    return list(pd.read_parquet(io.BytesIO(buf.getvalue()))["text"])


def test_the_quantizers_reader_gets_pandas_rows(tmp_path: Path) -> None:
    texts = TEXTS * 300 + ["x" * (3 * PAGE_BYTES)]  # several pages, one value larger than a page
    folder = tmp_path / "calibration"
    folder.mkdir()
    (folder / "data.parquet").write_bytes(text_parquet(texts))
    read = pd.read_parquet(folder)  # as container_entry.py reads --calib_dataset
    assert list(read.columns) == ["text"] and list(read["text"]) == _pandas_rows(texts) == texts
    meta = pq.ParquetFile(folder / "data.parquet").metadata
    assert meta.num_rows == len(texts) and meta.num_row_groups == 1 and meta.num_columns == 1
    assert str(pq.read_schema(folder / "data.parquet").field("text").type) == "string"


def test_no_rows_is_an_empty_table() -> None:
    table = pq.read_table(io.BytesIO(text_parquet([])))
    assert table.num_rows == 0 and table.column_names == ["text"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(), max_size=40))
def test_any_texts_round_trip(texts: list[str]) -> None:
    assert pq.read_table(io.BytesIO(text_parquet(texts))).column("text").to_pylist() == texts
