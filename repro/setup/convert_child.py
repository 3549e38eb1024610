"""The confined conversion child: pinned pickle bytes on stdin -> prepared files in one folder (issue #43 item 2).

Started only by repro/setup/convert.py, as a fresh interpreter (`python -I`, an environment built from nothing,
no inherited descriptors, in a new network namespace where the host allows one). Its first act is to lower its own
limits (address space, CPU seconds, file size, open files, no core file), before it reads a byte of the pickle;
then it decodes with repro's own decoder (frame_decode.py: no pandas, no numpy unpickling), writes what the job
asks for into the folder it was given, and prints one JSON line. Exit status: 0 done, 2 refused (the JSON says
why), 4 out of memory, 6 past its file-size limit (CPython ignores SIGXFSZ, so a write fails), 5 anything else;
a signal (SIGSEGV, SIGXCPU, SIGXFSZ, SIGKILL) is read by the parent.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_REFUSED, EXIT_MEMORY, EXIT_UNEXPECTED, EXIT_FSIZE = 0, 2, 4, 5, 6
CALIB_SEED = 12345  # processorca.py: sampled_df.sample(n=calibration_subset_size, random_state=12345)

_LIMITS = {
    "as_bytes": resource.RLIMIT_AS,
    "cpu_s": resource.RLIMIT_CPU,
    "fsize_bytes": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
    "core_bytes": resource.RLIMIT_CORE,
}


def apply_limits(limits: dict[str, int]) -> None:
    """Lower soft and hard limits together: the child cannot raise them back. The CPU limit's hard one is 5 s
    later, so the soft one ends the child with SIGXCPU (its own signal) rather than SIGKILL at the same tick."""
    for key, which in _LIMITS.items():
        if key in limits:
            value = int(limits[key])
            _, hard = resource.getrlimit(which)
            top = value + 5 if which == resource.RLIMIT_CPU else value
            if hard != resource.RLIM_INFINITY:
                value, top = min(value, hard), min(top, hard)
            resource.setrlimit(which, (value, top))


def _read_input(size: int) -> bytes:
    data = sys.stdin.buffer.read(size + 1)
    if len(data) != size:
        raise ValueError(f"expected {size:,} bytes on stdin, got {len(data):,}")
    return data


def table_digest(table: Any) -> str:
    """A checksum of what the harness uses (prompt text and tokens, reference output), whatever wrote the pickle."""
    h = hashlib.sha256()
    names = [c for c in ("input", "tok_input", "output") if c in table]
    for row in table.rows(names):
        h.update(json.dumps([row[c] for c in names], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def _prepared(table: Any, job: dict[str, Any], out: Path) -> dict[str, Any]:
    """The harness's files from the table, read by the benchmark's own module (repro/core/families/: its columns)."""
    from repro.core.families import load_family
    from repro.setup.dataset import write_prepared_files

    where = job["family"]
    rows = load_family(str(where["name"]), where.get("beside")).read_dataset(table, Path(job["source"]))
    files = write_prepared_files(
        out, rows.prompts, rows.output_lens, rows.outputs, source=job["source"], metrics=rows.sample_kinds
    )
    return {"samples": len(rows.prompts), "files": files}


def _calibration(table: Any, spec: dict[str, Any], job: dict[str, Any], out: Path) -> dict[str, Any]:
    from repro.core.errors import InputError
    from repro.core.fsutil import atomic_write_bytes, sha256_file
    from repro.setup.parquet import text_parquet

    rows = table
    if spec.get("draw"):
        n = int(spec["samples"])
        if n > len(table):
            raise InputError(
                f"{job['source']}: calibration size {n} exceeds the {len(table)} samples.",
                "check the recipe's dataset.calibration_samples",
            )
        rows = table.sample(n, CALIB_SEED)
    column = str(spec.get("column", "input"))  # the benchmark module's column of prompt texts
    if column not in rows:
        raise InputError(
            f"{job['source']}: column '{column}' is missing; not MLPerf's set.", "delete it, then `repro setup`"
        )
    target = out / spec["dir"] / "data.parquet"
    atomic_write_bytes(target, text_parquet([str(t) for t in rows.values(column)]))
    return {"file": f"{spec['dir']}/data.parquet", "sha256": sha256_file(target), "rows": len(rows)}


def convert(job: dict[str, Any], data: bytes) -> dict[str, Any]:
    from repro.setup.frame_decode import decode_table

    table = decode_table(data)
    out = Path(job["out"])
    result: dict[str, Any] = {
        "rows": len(table),
        "columns": list(table.columns),
        "environment": sorted(os.environ),
        "interfaces": _interfaces(),
        "pandas_imported": "pandas" in sys.modules,
    }
    if job.get("prepared"):
        result["prepared"] = _prepared(table, job, out)
    if job.get("calibration"):
        result["calibration"] = _calibration(table, job["calibration"], job, out)
    if job.get("digest"):
        result["digest"] = table_digest(table)
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["cpu_s"] = round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 2)
    return result


def _interfaces() -> list[str] | None:
    """The network interfaces this process sees (in a fresh network namespace: only 'lo')."""
    import socket

    try:
        return sorted(name for _, name in socket.if_nameindex())
    except OSError:
        return None


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run_job(job: dict[str, Any], data: bytes) -> tuple[int, dict[str, Any]]:
    """(exit status, the JSON answer) for one job on bytes already read: what `main` does after its limits."""
    from repro.core.errors import InputError
    from repro.setup.pickle_vm import Refused

    try:
        return EXIT_OK, {"ok": convert(job, data)}
    except Refused as exc:
        return EXIT_REFUSED, {"refused": str(exc)}
    except InputError as exc:
        return EXIT_REFUSED, {"refused": exc.message, "next": exc.next_command}
    except MemoryError:
        return EXIT_MEMORY, {"memory": True}
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            return EXIT_FSIZE, {"fsize": True}
        return EXIT_UNEXPECTED, {"unexpected": f"OSError {errno.errorcode.get(exc.errno or 0, exc.errno)}"}
    except Exception as exc:  # noqa: BLE001 - one line for the parent, which names the file; never a traceback
        return EXIT_UNEXPECTED, {"unexpected": type(exc).__name__}


def main(argv: list[str]) -> int:
    job = json.loads(argv[1])
    apply_limits(job.get("limits", {}))
    try:
        data = _read_input(int(job["size"]))
    except MemoryError:
        _say({"memory": True})
        return EXIT_MEMORY
    except (ValueError, OSError) as exc:
        _say({"unexpected": str(exc)})
        return EXIT_UNEXPECTED
    code, answer = run_job(job, data)
    _say(answer)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
