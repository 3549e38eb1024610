"""Issue #36 item 1: no pickle runs code. A file is unpickled only when a pinned SHA-256 matches it, and then only
through an unpickler that admits the globals a plain DataFrame needs (derived from real pandas 1.5.3 and 2.0.3
pickles of MLPerf's columns, tests/fixtures/pickles/)."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import warnings
from pathlib import Path

import pandas as pd
import pytest

from repro.core.errors import InputError
from repro.setup.safe_pickle import ALLOWED, dataframe_pickle_bytes, load_dataframe, loads_dataframe, read_pinned

PICKLES = Path(__file__).parent / "fixtures" / "pickles"


class Payload:
    """A pickle whose loading runs `os.system` (writes a marker file): what a hostile mirror would serve."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _payload_frame(marker: Path) -> bytes:
    """A real DataFrame pickle with the payload hidden in one cell of the tok_input column."""
    df = pd.DataFrame({"input": pd.Series(["a", "b"], dtype=object), "tok_input": [[1], Payload(marker)]})
    df.columns = pd.Index(["input", "tok_input"], dtype=object)
    return pickle.dumps(df, protocol=4)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Recorder(pickle.Unpickler):
    """A plain unpickler (with pandas' own renames of old class paths) that records every global it is asked for."""

    seen: set[tuple[str, str]]

    def find_class(self, module: str, name: str):
        from pandas.compat.pickle_compat import _class_locations_map

        self.seen.add((module, name))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # numpy 2 renamed numpy.core; old pickles name it
            return super().find_class(*_class_locations_map.get((module, name), (module, name)))


@pytest.mark.parametrize("path", sorted(PICKLES.glob("*.pkl")), ids=lambda p: p.name)
def test_pandas_1_and_2_pickles_of_mlperf_columns_load_and_need_only_the_allowlist(path: Path) -> None:
    data = path.read_bytes()
    rec = _Recorder(io.BytesIO(data))
    rec.seen = set()
    reference = rec.load()
    assert rec.seen <= set(ALLOWED), rec.seen - set(ALLOWED)
    df = load_dataframe(path, _sha(data))
    assert df.equals(reference)
    assert df["tok_input"].map(len).tolist() == df["tok_input_length"].tolist()


def test_every_allowed_global_is_needed_by_some_pickle_we_read() -> None:
    """The allowlist is no wider than what pandas 1.5.3/2.0.3 (MLPerf's files) and repro's own writer use."""
    seen: set[tuple[str, str]] = set()
    own = dataframe_pickle_bytes(pd.read_pickle(PICKLES / "pandas-1.5.3.sampled.pkl"))
    for data in [p.read_bytes() for p in PICKLES.glob("*.pkl")] + [own]:
        rec = _Recorder(io.BytesIO(data))
        rec.seen = set()
        rec.load()
        seen |= rec.seen
    numpy2_frombuffer = {("numpy._core.numeric", "_frombuffer")}  # numpy 2 writing protocol 5 numeric arrays
    assert set(ALLOWED) - seen <= numpy2_frombuffer


def test_payload_with_unpinned_checksum_is_refused_before_it_is_read(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    pkl = tmp_path / "open_orca_gpt4_tokenized_llama.calibration_1000.pkl"
    pkl.write_bytes(_payload_frame(marker))
    for pin in (None, "unknown"):
        with pytest.raises(InputError) as err:
            load_dataframe(pkl, pin, next_step="`repro setup --dataset-source rebuild`")
        assert str(pkl) in err.value.message and "no published SHA-256" in err.value.message
        assert "--dataset-source rebuild" in (err.value.next_command or "")
    assert not marker.exists()


def test_payload_pinned_to_its_own_checksum_is_still_refused_by_the_unpickler(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    data = _payload_frame(marker)
    pkl = tmp_path / "sampled.pkl"
    pkl.write_bytes(data)
    with pytest.raises(InputError) as err:
        load_dataframe(pkl, _sha(data))
    assert "posix.system" in err.value.message and "refused without running it" in err.value.message
    assert not marker.exists()
    assert pickle.loads(data) is not None and marker.exists()  # the payload is real: plain pickle runs it


@pytest.mark.parametrize(
    "module,name",
    [("builtins", "eval"), ("builtins", "getattr"), ("subprocess", "Popen"), ("pyarrow.lib", "_restore_array")],
)
def test_globals_outside_the_allowlist_are_never_looked_up(module: str, name: str) -> None:
    def short(text: str) -> bytes:
        return b"\x8c" + bytes([len(text)]) + text.encode()  # SHORT_BINUNICODE

    data = b"\x80\x04" + short(module) + short(name) + b"\x93)R."  # STACK_GLOBAL, (), REDUCE, STOP
    with pytest.raises(InputError, match=f"{module}.{name}"):
        loads_dataframe(data, source="x.pkl", next_step="`repro setup`")


def test_numpy_reconstruct_only_in_the_form_numpy_writes() -> None:
    """`_reconstruct(ndarray, (10**12,), ...)` would allocate a terabyte; numpy itself only writes shape (0,)."""
    import numpy as np

    good = dataframe_pickle_bytes(pd.DataFrame({"tok_input": np.array([[1], [2]], dtype=object).tolist()}))
    assert loads_dataframe(good, source="x.pkl", next_step="`repro setup`")["tok_input"].tolist() == [[1], [2]]
    bad = good.replace(b"K\x00\x85", b"J\x00\x10\xa5\xd4\x85", 1)  # shape (0,) -> (3567587328,)
    assert bad != good
    with pytest.raises(InputError, match="not a readable DataFrame pickle"):
        loads_dataframe(bad, source="x.pkl", next_step="`repro setup`")


def test_a_wrong_checksum_names_the_file_and_both_digests(tmp_path: Path) -> None:
    pkl = tmp_path / "s.pkl"
    pkl.write_bytes(dataframe_pickle_bytes(pd.DataFrame({"input": ["a"]})))
    with pytest.raises(InputError) as err:
        load_dataframe(pkl, "0" * 64)
    assert str(pkl) in err.value.message and "is not the pinned 0000000000000000" in err.value.message


def test_symlink_fifo_and_non_frame_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.pkl"
    data = dataframe_pickle_bytes(pd.DataFrame({"input": ["a"]}))
    real.write_bytes(data)
    link = tmp_path / "link.pkl"
    link.symlink_to(real)
    with pytest.raises(InputError, match="cannot be opened as a plain file"):
        read_pinned(link, _sha(data), next_step="`repro setup`")
    fifo = tmp_path / "fifo.pkl"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_pinned(fifo, _sha(data), next_step="`repro setup`")
    with pytest.raises(InputError, match="holds a list, not a DataFrame"):
        loads_dataframe(pickle.dumps([1, 2]), source="x.pkl", next_step="`repro setup`")


def test_repro_writes_pickles_its_own_reader_admits() -> None:
    df = pd.DataFrame({"input": ["a", "b"], "tok_input": [[1, 2], [3]], "n": [2, 1]}).iloc[[1, 0]]
    back = loads_dataframe(dataframe_pickle_bytes(df), source="x", next_step="y")
    assert back.to_dict("records") == df.reset_index(drop=True).to_dict("records")
