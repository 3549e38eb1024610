"""A fork server for the decoder fuzz (issue #43 item 5): every decode runs in its own child, and its end is counted.

Started fresh by tests (`python -I decode_forkserver.py [--no-pandas]`), it holds no secrets and no threads. For
each case it reads an 8-byte length and the pickle bytes from stdin, forks, and the grandchild does exactly what
repro's conversion child does after reading its input (repro/setup/convert_child.py: `apply_limits` with
`convert.limits_for(size)`, then `run_job`: decode, write the prepared files and the calibration parquet into a
fresh folder, digest). The server waits for it and prints one JSON line: the exit status, or the signal that ended
it (SIGSEGV, SIGABRT, ...), and the grandchild's answer. `--no-pandas` makes `import pandas` fail in the server
before anything is imported: the decoder must not need it. `--plain-pickle` runs `pickle.loads` instead (the
check that a crash is counted).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import sys
import tempfile

if "--no-pandas" in sys.argv:
    sys.modules["pandas"] = None  # type: ignore[assignment]  # `import pandas` now raises ImportError
sys.path.append(sys.argv[1])  # the repro checkout the test runs from

import repro.core.families.llama2_70b  # noqa: E402,F401 - the reader the prepared step runs (OpenOrca columns)
import repro.setup.dataset  # noqa: E402,F401 - imported once here, not in each forked case
import repro.setup.frame_decode  # noqa: E402,F401
import repro.setup.parquet  # noqa: E402,F401
from repro.setup.convert import limits_for  # noqa: E402
from repro.setup.convert_child import apply_limits, run_job  # noqa: E402

HANG_S = 60
"""A case still running after this is ended by SIGALRM, and counted as a hang."""
OPENORCA = {"name": "llama2_70b", "beside": None}
"""The benchmark module whose reader the prepared step runs (repro/core/families/): the fuzz's tables are OpenOrca's."""


PLAIN = "--plain-pickle" in sys.argv
"""Run `pickle.loads` (pandas' and numpy's own code) instead of repro's decoder: shows the counting sees crashes."""


def _grandchild(data: bytes, out: str, pipe: int) -> None:
    limits = limits_for(len(data))
    apply_limits(limits)
    signal.alarm(min(HANG_S, limits["wall_s"]))
    if PLAIN:
        import pickle

        pickle.loads(data)
        os._exit(0)
    job = {"source": "fuzz.pkl", "out": out, "prepared": True, "digest": True, "family": OPENORCA}
    job["calibration"] = {"dir": "calibration", "samples": 1, "draw": True}
    code, answer = run_job(job, data)
    answer["pandas_imported"] = "pandas" in sys.modules and sys.modules["pandas"] is not None
    os.write(pipe, json.dumps(answer).encode()[:60000])
    os._exit(code)


def serve() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout
    while True:
        head = stdin.read(8)
        if len(head) < 8:
            return
        data = stdin.read(struct.unpack("<Q", head)[0])
        out = tempfile.mkdtemp(prefix="repro-fuzz-")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                _grandchild(data, out, w)
            finally:
                os._exit(70)
        os.close(w)
        answer = b""
        while chunk := os.read(r, 65536):
            answer += chunk
        os.close(r)
        _, status = os.waitpid(pid, 0)
        shutil.rmtree(out, ignore_errors=True)
        if os.WIFSIGNALED(status):
            end = {"signal": signal.Signals(os.WTERMSIG(status)).name}
        else:
            end = {"exit": os.WEXITSTATUS(status)}
        try:
            end["answer"] = json.loads(answer) if answer else None
        except ValueError:
            end["answer"] = None
        stdout.write(json.dumps(end) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve()
