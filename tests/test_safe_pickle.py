"""Issues #36 item 1 and #43 item 1: no pickle runs code, and no pandas/numpy code ever sees a pickle's bytes.

A file is decoded only when a pinned SHA-256 matches it, and then by repro's own decoder: the pickle's globals map to
inert stubs (derived from real pickles of MLPerf's columns written by pandas 1.3.5 to 3.1.1, tests/fixtures/pickles/)
and repro rebuilds the table itself. Each real pickle decodes to what pandas itself reads from it."""

from __future__ import annotations

import hashlib
import io
import math
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from repro.core.errors import InputError
from repro.setup import frame_decode
from repro.setup.frame_decode import ALLOWED, decode_table
from repro.setup.frame_encode import encode_frame
from repro.setup.pickle_vm import Refused, Stub
from repro.setup.safe_pickle import loads_table, read_pinned

PICKLES = Path(__file__).parent / "fixtures" / "pickles"
REAL = sorted(p for p in PICKLES.glob("pandas-*.pkl") if "pyarrow" not in p.name)
PYARROW = sorted(PICKLES.glob("pandas-*-pyarrow.*.pkl"))


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


def _plain(v):
    """What pandas hands back, as plain Python (numpy arrays and scalars to lists and numbers, NaN comparable)."""
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    return "NaN" if isinstance(v, float) and math.isnan(v) else v


def _globals(data: bytes) -> set[tuple[str, str]]:
    """Every global a pickle names, read off its opcodes (pickletools, tracking the memo): nothing is executed."""
    import pickletools

    found, stack, memo = set(), [], {}
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"):
            stack.append(arg)
        elif op.name == "MEMOIZE":
            memo[len(memo)] = stack[-1] if stack else None
        elif op.name in ("BINPUT", "LONG_BINPUT"):
            memo[arg] = stack[-1] if stack else None
        elif op.name in ("BINGET", "LONG_BINGET"):
            stack.append(memo.get(arg))
        elif op.name == "STACK_GLOBAL":
            found.add((stack[-2], stack[-1]))
            stack.append(None)
        elif op.name == "GLOBAL":
            found.add(tuple(arg.split(" ", 1)))
            stack.append(None)
        else:
            stack.append(None)
    return found


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_pandas_pickles_decode_to_what_pandas_reads(path: Path) -> None:
    """pandas 1.3.5 ... 3.1.1, numpy 1.21 ... 2.4, protocols 2/4/5: every column and row label equal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        reference = pd.read_pickle(path)
    table = decode_table(path.read_bytes())
    assert table.columns == tuple(reference.columns)
    assert list(table.index) == list(reference.index)
    for c in reference.columns:
        assert _plain(table.values(c)) == _plain(reference[c].tolist()), c


def test_the_allowlist_is_exactly_what_real_pickles_name_and_every_entry_is_repros_own_stub() -> None:
    seen: set[tuple[str, str]] = set()
    for path in REAL:
        seen |= _globals(path.read_bytes())
    admitted = {k for k, stub in ALLOWED.items() if not stub.refusal}
    assert admitted == seen, (admitted - seen, seen - admitted)
    for stub in ALLOWED.values():
        assert issubclass(stub, Stub) and stub.__module__ == frame_decode.__name__


@pytest.mark.parametrize("path", PYARROW[:2], ids=lambda p: p.name)
def test_pyarrow_backed_columns_are_refused_by_name(path: Path) -> None:
    with pytest.raises(Refused, match="pandas.arrays.ArrowStringArray: a column stored by pyarrow"):
        decode_table(path.read_bytes())


def test_decoding_resolves_no_global_and_imports_no_pandas() -> None:
    """In a fresh interpreter with an audit hook: decoding every real pickle raises no `pickle.find_class` event
    (nothing is looked up by pickle at all) and leaves pandas unimported, so the pandas version cannot matter."""
    code = f"""
import sys
events = []
sys.addaudithook(lambda e, a: events.append(e) if e == "pickle.find_class" else None)
from pathlib import Path
from repro.setup.frame_decode import decode_table
n = 0
for p in sorted(Path({str(PICKLES)!r}).glob("pandas-*.pkl")):
    if "pyarrow" not in p.name:
        decode_table(p.read_bytes()); n += 1
print(n, len(events), "pandas" in sys.modules, "pyarrow" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == [str(len(REAL)), "0", "False", "False"], out.stderr


def test_repros_writer_is_read_by_pandas_and_by_repro_alike() -> None:
    cols = {
        "input": ["a", "b\u2019c", "x" * 300],
        "tok_input": [[1, 2, 29871], [3, 70000], list(range(1500))],
        "tok_input_length": [3, 2, 1500],
        "gt_output": [None, "y", "z"],
        "score": [1.5, float("nan"), 2.0],
    }
    data = encode_frame(cols)
    df = pd.read_pickle(io.BytesIO(data))
    table = decode_table(data)
    assert list(df.columns) == list(table.columns) == list(cols)
    assert str(df["tok_input_length"].dtype) == "int64" and df["input"].dtype == object
    for c, want in cols.items():
        assert _plain(df[c].tolist()) == _plain(table.values(c)) == _plain(want)
    assert _globals(data) <= set(ALLOWED)  # the globals and opcodes pandas writes, nothing else


def test_payload_with_unpinned_checksum_is_refused_before_it_is_read(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    pkl = tmp_path / "open_orca_gpt4_tokenized_llama.calibration_1000.pkl"
    pkl.write_bytes(_payload_frame(marker))
    for pin in (None, "unknown"):
        with pytest.raises(InputError) as err:
            read_pinned(pkl, pin, next_step="`repro setup --dataset-source rebuild`")
        assert str(pkl) in err.value.message and "no published SHA-256" in err.value.message
        assert "--dataset-source rebuild" in (err.value.next_command or "")
    assert not marker.exists()


def test_payload_pinned_to_its_own_checksum_is_still_refused_by_the_decoder(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    data = _payload_frame(marker)
    with pytest.raises(InputError) as err:
        loads_table(read_pinned(_write(tmp_path / "s.pkl", data), _sha(data), next_step="x"), source="s", next_step="x")
    assert "posix.system" in err.value.message and "nothing in the file was run" in err.value.message
    assert not marker.exists()
    assert pickle.loads(data) is not None and marker.exists()  # the payload is real: plain pickle runs it


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "module,name",
    [("builtins", "eval"), ("builtins", "getattr"), ("subprocess", "Popen"), ("pyarrow.lib", "_restore_array")],
)
def test_globals_outside_the_allowlist_are_never_looked_up(module: str, name: str) -> None:
    def short(text: str) -> bytes:
        return b"\x8c" + bytes([len(text)]) + text.encode()  # SHORT_BINUNICODE

    data = b"\x80\x04" + short(module) + short(name) + b"\x93)R."  # STACK_GLOBAL, (), REDUCE, STOP
    with pytest.raises(InputError, match=f"{module}.{name}"):
        loads_table(data, source="x.pkl", next_step="`repro setup`")


def test_numpy_reconstruct_only_in_the_form_numpy_writes() -> None:
    """`_reconstruct(ndarray, (10**12,), ...)` would allocate a terabyte; numpy itself only writes shape (0,)."""
    good = encode_frame({"tok_input": [[1], [2]]})
    assert loads_table(good, source="x.pkl", next_step="`repro setup`").values("tok_input") == [[1], [2]]
    bad = good.replace(b"K\x00\x85", b"J\x00\x10\xa5\xd4\x85", 1)  # shape (0,) -> (3567587328,)
    assert bad != good
    with pytest.raises(InputError, match="a numpy array record in a form numpy never writes"):
        loads_table(bad, source="x.pkl", next_step="`repro setup`")


def test_a_wrong_checksum_names_the_file_and_both_digests(tmp_path: Path) -> None:
    pkl = _write(tmp_path / "s.pkl", encode_frame({"input": ["a"]}))
    with pytest.raises(InputError) as err:
        read_pinned(pkl, "0" * 64, next_step="`repro setup`")
    assert str(pkl) in err.value.message and "is not the pinned 0000000000000000" in err.value.message


def test_symlink_fifo_and_non_frame_are_refused(tmp_path: Path) -> None:
    data = encode_frame({"input": ["a"]})
    real = _write(tmp_path / "real.pkl", data)
    link = tmp_path / "link.pkl"
    link.symlink_to(real)
    with pytest.raises(InputError, match="cannot be opened as a plain file"):
        read_pinned(link, _sha(data), next_step="`repro setup`")
    fifo = tmp_path / "fifo.pkl"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_pinned(fifo, _sha(data), next_step="`repro setup`")
    with pytest.raises(InputError, match="holds a list, not a DataFrame"):
        loads_table(pickle.dumps([1, 2]), source="x.pkl", next_step="`repro setup`")


def test_table_sample_draws_the_rows_pandas_draws() -> None:
    """processorca.py's calibration draw, `sample(n, random_state=12345)`, without pandas: the same rows."""
    df = pd.DataFrame({"id": [f"r{i}" for i in range(1000)], "n": list(range(1000))})
    table = decode_table(encode_frame({c: df[c].tolist() for c in df.columns}))
    for n, seed in ((1, 12345), (17, 12345), (512, 12345), (1000, 1337)):
        assert table.sample(n, seed).values("id") == df.sample(n=n, random_state=seed)["id"].tolist()
