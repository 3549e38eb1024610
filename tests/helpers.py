"""One place for what many tests build: prepared datasets, the word tokenizer, the CLI (in-process, in a subprocess,
in a terminal) and copies of published bundles. Every CLI runner here fails the test on a traceback."""

from __future__ import annotations

import json
import os
import re
import resource
import select
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

CLI = [sys.executable, "-c", "from repro.cli import main; main()"]
"""The console script as a subprocess argv prefix (PYTHONPATH decides which tree it runs)."""
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


# ---------------------------------------------------------------- datasets and tokenizers


def write_prepared(
    folder: Path,
    n: int = 64,
    *,
    name: str,
    seed: int = 0,
    prompt_len: tuple[int, int] = (8, 64),
    vocab: int = 32000,
    out_len: int | tuple[int, int] = (20, 400),
    outputs: str | None = "reference {i}",
    prompts: Sequence[Sequence[int]] | None = None,
    source: str = "test",
) -> Path:
    """A prepared dataset as `repro setup` leaves it: `n` random prompts (ids 3..vocab-1, lengths in `prompt_len`)
    drawn before the output lengths from one seeded generator, or the `prompts` given. `out_len` is one length for
    every sample or a range; `outputs` formats each reference with `i` (index) and `p` (prompt), None for none."""
    rng = np.random.default_rng(seed)
    if prompts is None:
        prompts = [rng.integers(3, vocab, size=int(rng.integers(*prompt_len))).tolist() for _ in range(n)]
    count = len(prompts)
    olens = [out_len] * count if isinstance(out_len, int) else rng.integers(*out_len, size=count).tolist()
    refs = None if outputs is None else [outputs.format(i=i, p=p) for i, p in enumerate(prompts)]
    from repro.setup.dataset import save_prepared

    save_prepared(folder, name, prompts, olens, refs, source=source)
    return folder


def word_tokenizer(folder: Path) -> Any:
    """The stand-in's word-level tokenizer ('w17' <-> 17), saved to `folder` and loaded as the harness loads one."""
    from repro.rehearse.rehearsal import write_tokenizer
    from repro.run.tokens import load_tokenizer

    return load_tokenizer([write_tokenizer(folder)])


# ---------------------------------------------------------------- the CLI


def cli(*args: str, env: dict[str, str] | None = None) -> Any:
    """`repro ARGS` in this process (Typer's runner); a traceback or an escaped exception fails the test."""
    from typer.testing import CliRunner

    from repro.cli import app

    res = CliRunner().invoke(app, list(args), env=env)
    assert "Traceback" not in res.output, res.output[-3000:]
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def memory_cap() -> None:
    """4 GB of address space: a CLI that reads /dev/zero whole fails fast instead of exhausting a shared machine."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def cli_process(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, debug: bool = False
) -> subprocess.CompletedProcess[str]:
    """`repro ARGS` in its own process under the memory cap. A traceback fails the test unless `debug` (--debug
    prints one on purpose)."""
    proc = subprocess.run(
        [*CLI, *(["--debug"] if debug else []), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=memory_cap,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    if not debug:
        assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    return proc


def one_line_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The process failed with `code` and its stderr starts with one `error:` line; returns stderr."""
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines and lines[0].startswith("error:"), proc.stderr
    return proc.stderr


def assert_one_error(err: str) -> None:
    """One `error:` line, then at most the `Next:` line with one command."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[0].startswith("error: ") and len(lines) <= 2, err
    assert len(lines) == 1 or lines[1].startswith("Next: "), err


def run_in_pty(argv: Sequence[str], env: dict[str, str], *, size: tuple[int, int] | None = None) -> str:
    """Run `argv` with a terminal as stdin/stdout/stderr until it closes it; its output without escape sequences
    or carriage returns. `size` (rows, columns) sets the terminal's size."""
    import pty

    master, slave = pty.openpty()
    if size is not None:
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
    proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return ANSI.sub("", out.decode(errors="replace")).replace("\r", "")


# ---------------------------------------------------------------- published bundles


def copy_bundle(fixtures: Path, rel: str, dst: Path) -> Path:
    """A writable copy of one published folder (fixtures/<rel>) at `dst`."""
    shutil.copytree(fixtures / rel, dst)
    return dst


ACCURACY_OF = "azure-nd-gb200-v6-v5.1/llama2-70b-99/Offline/accuracy/accuracy.txt"
"""A real published accuracy.txt (Azure ND GB200 v6, MLPerf v5.1: rouge1 44.7494, 24,576 samples) that meets the
99% and the 99.9% Llama-2-70B targets alike."""


def add_accuracy(fixtures: Path, run_dir: Path) -> Path:
    """Give a copied performance run (published or ours) the accuracy.txt a PASS needs, where verify looks for it:
    RUN_DIR/accuracy/ beside performance/run_N, else the run's own folder. Returns the file."""
    target = run_dir.parent.parent / "accuracy" if run_dir.parent.name == "performance" else run_dir
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fixtures / ACCURACY_OF, target / "accuracy.txt")
    return target / "accuracy.txt"


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    """Replace `old` (which must be there) in a copied log."""
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count))


def edit_json(path: Path, **changes: object) -> None:
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


def edit_detail(path: Path, key: str, value: object) -> None:
    """Set `key`'s value in a copied mlperf_log_detail.txt (the line must be there), so an edit of the summary
    leaves the two files agreeing: a test of the verdict on another figure is not refused as a contradiction."""
    text = path.read_text()
    pattern = re.compile(r'("key": "' + re.escape(key) + r'", "value": )("[^"]*"|[^,]+)')
    assert pattern.search(text), f"{key} not in {path}"
    path.write_text(pattern.sub(lambda m: m.group(1) + json.dumps(value), text))


def as_another_run(bundle: Path, i: int) -> Path:
    """Make a copied bundle's performance run another run of the same configuration, as a repeated run is: LoadGen's
    start time `i` minutes later and its minimum latency `i` ns longer (summary and detail alike), throughput as it
    was. A plain copy is the same run again, and counts once (#44 item 3). Returns the bundle."""
    for summary in Path(bundle).rglob("performance/*/mlperf_log_summary.txt"):
        detail = summary.with_name("mlperf_log_detail.txt")
        m = re.search(r"^Min latency \(ns\)\s*: (\d+)$", summary.read_text(), re.M)
        assert m, summary
        edit(summary, m.group(0), m.group(0).replace(m.group(1), str(int(m.group(1)) + i)))
        if detail.is_file():
            edit_detail(detail, "result_min_latency_ns", int(m.group(1)) + i)
            stamp = re.search(r'"key": "test_datetime", "value": "([^"]+)"', detail.read_text())
            if stamp:
                from datetime import datetime, timedelta

                later = datetime.fromisoformat(stamp.group(1).replace("Z", "+00:00")) + timedelta(minutes=i)
                edit_detail(detail, "test_datetime", later.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return Path(bundle)


def drop_detail(path: Path, *keys: str) -> None:
    """Remove the lines logging `keys` from a copied mlperf_log_detail.txt."""
    lines = path.read_text().splitlines(True)
    path.write_text("".join(ln for ln in lines if not any(f'"key": "{k}"' in ln for k in keys)))


def read_csv_rows(path: Path) -> tuple[list[dict[str, str]], list[str]]:
    """An index CSV's rows and its header, for a test that edits a copy of it."""
    import csv

    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader), list(reader.fieldnames or [])


def write_csv_rows(
    path: Path, fields: Sequence[str], rows: Sequence[dict[str, str]], extrasaction: str = "raise"
) -> Path:
    """Write `rows` under the header `fields`, as the published index files are written."""
    import csv

    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(fields), extrasaction=extrasaction)  # type: ignore[arg-type]
        writer.writeheader()
        writer.writerows(rows)
    return path


def toy_benchmark(metric: dict[str, Any], module: str | None = None) -> dict[str, Any]:
    """A toy benchmark file's contents: llama2-70b-99's shape with its own name, model key, result-folder name,
    limits and accuracy (one `metric`), and its own `module` where given (else llama2-70b's); the model and dataset
    sections are a placeholder, which a recipe overrides."""
    import yaml

    from repro.core import benchmarks as B

    data = yaml.safe_load((B.SHIPPED / "llama2-70b-99.yaml").read_text())
    data.update(name="toy-echo", title="Toy echo (test)", mlperf_model="toy-echo", result_names=["toy-echo"])
    data.update(rounds=["v0.1"], demo=True, **({"module": module} if module else {}))
    data["generation"]["max_new_tokens"] = 8
    data["accuracy"].update(samples=24576, tokens_per_sample={"reference": 500.0, "band": [0.9, 1.1]})
    data["accuracy"]["metrics"] = [metric]
    offline = {"min_duration_ms": 1000, "min_query_count": 16, "performance_sample_count": 16}
    data["scenarios"] = {"Offline": {**offline, "min_samples_per_query": 700_000, "sources": ["mlperf-conf"]}}
    return data
