"""Peak memory of handling one long text answer from `--endpoint` (issue #36 item 7; figure in docs/SECURITY.md).

    cd <checkout> && PYTHONPATH=$PWD python benchmarks/text_answer_memory.py [--mb 8] [--max-tokens 1024]

Side by side, each in a fresh interpreter with the demo's byte-level BPE loaded as `run --endpoint` loads a
tokenizer: the reference tokenizes the whole answer and keeps its first max_tokens ids (what repro did before),
repro calls TrtllmBackend.output_ids (a prefix is tokenized). Each prints its peak (VmHWM) above the resident size
just before the answer is handled, and both agree on the ids.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

CHILD = """
import hashlib, json, sys
from pathlib import Path
def status(key):
    return int(next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith(key + ":")))
from repro.setup.demo import build_tokenizer
from repro.setup.dataset import read_builtin_sample
from repro.run.tokens import load_tokenizer
side, folder, mb, max_tokens = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
build_tokenizer(read_builtin_sample(), folder)
tok = load_tokenizer([folder])
words = "the model answers the question because seven green lights ".split()
size = int(mb * (1 << 20))
text = " ".join(words[i % len(words)] for i in range(size // 4 + 10))[:size]
tok.encode("warm up", add_special_tokens=False)
rss = status("VmRSS")
if side == "reference":
    ids = [int(t) for t in tok.encode(text, add_special_tokens=False)][:max_tokens]
else:
    from repro.run.backends.trtllm import TrtllmBackend
    ids = TrtllmBackend(["http://127.0.0.1:9"], tokenizer=tok).output_ids(None, text, None, max_tokens).tolist()
digest = hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]
print(json.dumps({"extra_mb": (status("VmHWM") - rss) / 1024, "ids": len(ids), "digest": digest}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=8.0)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--smoke", action="store_true", help="a 0.2 MB answer, to check the script runs")
    args = ap.parse_args()
    mb = 0.2 if args.smoke else args.mb
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        for side in ("reference", "repro"):
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, side, f"{tmp}/{side}", str(mb), str(args.max_tokens)],
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
            )
            got[side] = json.loads(proc.stdout.splitlines()[-1])
            print(f"{side}: +{got[side]['extra_mb']:,.1f} MB peak, {got[side]['ids']} ids ({got[side]['digest']})")
    same = got["reference"]["digest"] == got["repro"]["digest"]
    ratio = got["reference"]["extra_mb"] / max(got["repro"]["extra_mb"], 0.1)
    ref, ours = got["reference"]["extra_mb"], got["repro"]["extra_mb"]
    print(f"{mb:g} MB answer: reference +{ref:,.1f} MB, repro +{ours:,.1f} MB, ratio {ratio:.1f}x, same ids: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
