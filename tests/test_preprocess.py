"""The processorca.py rebuild on a small OpenOrca-shaped parquet: filters, sampling, determinism, bad input."""

from __future__ import annotations

import pytest
from setup_helpers import ORIGINS, build_tokenizer_dir, write_parquet

from repro.core.errors import InputError
from repro.core.fsutil import sha256_file
from repro.setup.prepare import content_digest
from repro.setup.preprocess import (
    RESPONSE_INIT_TOKEN,
    build_from_parquet,
    calibration_frame,
    filtered_frame,
    load_tokenizer,
    read_raw,
)
from repro.setup.safe_pickle import loads_table


def _table(path):
    return loads_table(path.read_bytes(), source=str(path), next_step="x")


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


def test_filters_drop_what_processorca_drops(tok, tmp_path):
    df = filtered_frame(read_raw(write_parquet(tmp_path / "raw.parquet")), load_tokenizer(tok), 1024)
    ids = set(df["id"])
    assert not any("drop" in i for i in ids)
    assert "niv.good0" not in ids and "t0.good0" not in ids  # empty system prompt is a bad prompt for niv/t0 only
    assert {"cot.good0", "flan.good0", "niv.good1"} <= ids
    assert all(t[-1] == RESPONSE_INIT_TOKEN for t in df["tok_input"])
    assert (df["tok_input_length"] == df["tok_input"].map(len)).all()


def test_rebuild_is_deterministic_and_samples_equally_per_origin(tok, tmp_path):
    pq = write_parquet(tmp_path / "raw.parquet")
    a = build_from_parquet(pq, tok, tmp_path / "a", n_samples=8, calib_size=4)
    b = build_from_parquet(pq, tok, tmp_path / "b", n_samples=8, calib_size=4)
    assert {k: sha256_file(v) for k, v in a.items()} == {k: sha256_file(v) for k, v in b.items()}
    assert content_digest(a["sampled"], sha256_file(a["sampled"])) == content_digest(
        b["sampled"], sha256_file(b["sampled"])
    )
    import pandas as pd

    sampled = pd.read_pickle(a["sampled"])  # repro's writer, read back by pandas itself
    assert sampled["origin"].value_counts().to_dict() == {o: 2 for o in ORIGINS}
    calib = pd.read_pickle(a["calibration"])
    assert len(calib) == 4 and set(calib["id"]) <= set(sampled["id"])
    assert calib.equals(calibration_frame(sampled, 4, a["sampled"]))  # processorca's rule, from the sampled set
    # repro's own decoder reads both as pandas does, and draws the same calibration rows without pandas
    table = _table(a["sampled"])
    assert table.columns == tuple(sampled.columns)
    assert all(table.values(c) == sampled[c].tolist() for c in sampled.columns)
    assert table.sample(4, 12345).values("id") == calib["id"].tolist() == _table(a["calibration"]).values("id")


def test_other_seed_data_changes_the_checksum(tok, tmp_path):
    from setup_helpers import raw_rows

    a = build_from_parquet(write_parquet(tmp_path / "a.parquet"), tok, tmp_path / "a", n_samples=8, calib_size=4)
    b = build_from_parquet(
        write_parquet(tmp_path / "b.parquet", raw_rows(seed=8)), tok, tmp_path / "b", n_samples=8, calib_size=4
    )
    assert content_digest(a["sampled"], sha256_file(a["sampled"])) != content_digest(
        b["sampled"], sha256_file(b["sampled"])
    )


def test_missing_columns_are_named(tok, tmp_path):
    pq = write_parquet(tmp_path / "raw.parquet", drop=("question", "response"))
    with pytest.raises(InputError) as err:
        build_from_parquet(pq, tok, tmp_path / "out", n_samples=8, calib_size=4)
    assert str(pq) in err.value.message and "question, response" in err.value.message
    assert not (tmp_path / "out").exists()


def test_too_few_rows_per_origin(tok, tmp_path):
    with pytest.raises(InputError, match="usable rows"):
        build_from_parquet(write_parquet(tmp_path / "raw.parquet"), tok, tmp_path / "out", n_samples=40, calib_size=4)


def test_not_a_parquet(tok, tmp_path):
    bad = tmp_path / "raw.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="not a readable parquet"):
        read_raw(bad)
