"""The in-container entrypoint: runs one build step, streams its output and returns its exit code.

Standard library only at import time, so it also runs in the tiny test image; ModelOpt, torch and
pandas are imported only by the steps that need them, which exist only in the TensorRT-LLM image.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path


def _say(msg: str) -> None:
    print(f"[repro-entry] {msg}", flush=True)


def cmd_selftest(args: argparse.Namespace) -> int:
    """Proves the image, the entrypoint and the workspace mount work, without a GPU."""
    info = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "pid": os.getpid(),
        "repro_home": os.environ.get("REPRO_HOME"),
        "nvidia_visible_devices": os.environ.get("NVIDIA_VISIBLE_DEVICES"),
    }
    _say("selftest " + json.dumps(info, sort_keys=True))
    if args.write:
        out = Path(args.write)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(json.dumps(info, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, out)
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    """Runs a step command as a child; SIGTERM/SIGINT reach it, so `docker stop` ends the step, not just PID 1."""
    argv = [a for a in args.argv if a != "--"] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        _say("exec: no command given")
        return 2
    _say("step: " + " ".join(argv))
    started = time.time()
    try:
        child = subprocess.Popen(argv)
    except FileNotFoundError:
        _say(f"exec: command not found: {argv[0]}")
        return 127

    def forward(signum, _frame):
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    _say(f"step exited with code {code} after {time.time() - started:.1f} s")
    return code if code >= 0 else 128 - code


def cmd_prepare_calib(args: argparse.Namespace) -> int:
    """MLPerf's preprocess_data.py step (calibration `input` as a `text` parquet) is done by `repro setup` on the
    host, from checksum-pinned data decoded by repro's own decoder in a confined child. Here the parquet is only
    checked: the container never unpickles a calibration file (a pickle can run code), whatever sits beside it."""
    out = Path(args.output_dir)
    if (out / "data.parquet").is_file():
        _say(f"calibration set already prepared: {out}")
        return 0
    _say(
        f"{out / 'data.parquet'} is missing; `repro setup` writes it (the calibration pickle {args.pkl} is never "
        "unpickled in the container). Run `repro setup`, then build again."
    )
    return 2


def cmd_hf_quantize(args: argparse.Namespace) -> int:
    """ModelOpt PTQ to an HF checkpoint as NVIDIA's MLPerf hf_quantize.py does, calibrated on the OpenOrca 1k set."""
    import copy
    import random

    import modelopt.torch.quantization as mtq
    import numpy as np
    import pandas as pd
    import torch
    from modelopt.torch.export import export_hf_checkpoint
    from transformers import AutoModelForCausalLM, AutoTokenizer

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[args.dtype]
    tokenizer = AutoTokenizer.from_pretrained(
        args.model_dir, model_max_length=args.tokenizer_max_seq_length, padding_side="left"
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, torch_dtype=dtype, device_map="auto").eval()
    texts = list(pd.read_parquet(Path(args.calib_dataset))["text"])[: args.calib_size]
    _say(f"calibrating {args.qformat} on {len(texts)} samples")

    configs = {"nvfp4": mtq.NVFP4_DEFAULT_CFG, "fp8": mtq.FP8_DEFAULT_CFG}
    if args.qformat not in configs:
        _say(f"hf-quantize: unsupported --qformat {args.qformat}")
        return 2
    cfg = copy.deepcopy(configs[args.qformat])
    if args.kv_cache_dtype == "fp8":
        cfg["quant_cfg"] = {**cfg["quant_cfg"], **mtq.FP8_KV_CFG["quant_cfg"]}

    def forward_loop(m):
        for i in range(0, len(texts), args.batch_size):
            batch = tokenizer(
                texts[i : i + args.batch_size],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=args.calib_max_seq_length,
            ).to(m.device)
            with torch.no_grad():
                m(**batch)

    model = mtq.quantize(model, cfg, forward_loop)
    out = Path(args.output_dir)
    tmp = out.with_name(out.name + ".partial")
    with torch.inference_mode():
        export_hf_checkpoint(model, export_dir=str(tmp))
    tokenizer.save_pretrained(str(tmp))
    if out.exists():
        import shutil

        shutil.rmtree(out)
    os.replace(tmp, out)
    _say(f"wrote quantized checkpoint {out}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="container_entry", description="repro's in-container step runner.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("selftest", help="Print the environment and optionally write it to a file.")
    s.add_argument("--write", help="Path (inside the container) for a JSON copy.")
    s.set_defaults(fn=cmd_selftest)
    e = sub.add_parser("exec", help="Run a step command and return its exit code.")
    e.add_argument("argv", nargs=argparse.REMAINDER)
    e.set_defaults(fn=cmd_exec)
    c = sub.add_parser("prepare-calib", help="Turn the calibration pickle into the parquet folder.")
    c.add_argument("--pkl", required=True)
    c.add_argument("--output_dir", required=True)
    c.set_defaults(fn=cmd_prepare_calib)
    q = sub.add_parser("hf-quantize", help="ModelOpt PTQ to an HF checkpoint (PyTorch backend path).")
    q.add_argument("--model_dir", required=True)
    q.add_argument("--output_dir", required=True)
    q.add_argument("--calib_dataset", required=True)
    q.add_argument("--calib_size", type=int, default=1024)
    q.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    q.add_argument("--qformat", default="nvfp4")
    q.add_argument("--kv_cache_dtype", default=None, choices=[None, "fp8"])
    q.add_argument("--batch_size", type=int, default=1)
    q.add_argument("--calib_max_seq_length", type=int, default=512)
    q.add_argument("--tokenizer_max_seq_length", type=int, default=2048)
    q.add_argument("--seed", type=int, default=1234)
    q.set_defaults(fn=cmd_hf_quantize)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
