"""The numpy Llama runner against transformers' LlamaForCausalLM on the same weights, and the demo with no torch.

transformers + torch come with the `test` extra; the demo's own install has neither (README command 1).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from repro.core.errors import InputError
from repro.core.workspace import Workspace
from repro.run.backends.base import Request
from repro.run.backends.numpy import LlamaNumpy, NumpyBackend, greedy
from repro.setup.dataset import load_prepared

MAX_NEW = 12
LOGIT_TOL = 1e-4


@pytest.fixture(scope="module")
def demo_paths(tmp_path_factory) -> dict[str, Path]:
    from repro.setup.demo import prepare_demo

    return prepare_demo(Workspace.open(tmp_path_factory.mktemp("demo")))


def _prompts(paths: dict[str, Path]) -> list[np.ndarray]:
    """Short and long demo prompts together, so most rows are left-padded."""
    data = load_prepared(paths["dataset"])
    by_len = sorted((data.prompt(i) for i in range(len(data))), key=len)
    return by_len[:4] + by_len[30:33] + by_len[-3:]


def _transformers_greedy(model_dir: Path, prompts: list[np.ndarray], eos: int | None, pad: int):
    """transformers' own generate(), as the hf backend calls it: left padding, greedy, min_new_tokens=1."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.as_tensor(p.astype(np.int64))
        mask[row, width - len(p) :] = 1
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=MAX_NEW,
            min_new_tokens=1,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=pad,
            output_logits=True,
            return_dict_in_generate=True,
        )
    return out.sequences[:, width:].numpy(), np.stack([lg.float().numpy() for lg in out.logits], axis=1)


def _compare(model_dir: Path, prompts: list[np.ndarray], eos: int | None, pad: int) -> None:
    ref_ids, ref_logits = _transformers_greedy(model_dir, prompts, eos, pad)
    model = LlamaNumpy(model_dir)
    ours, logits = greedy(model, prompts, [MAX_NEW] * len(prompts), eos=eos, keep_logits=True)
    for row, toks in enumerate(ours):
        n = len(toks)
        assert toks.tolist() == ref_ids[row, :n].tolist(), f"row {row}: greedy ids differ"
        if n < MAX_NEW:  # ended at EOS: transformers pads the rest
            assert toks[-1] == eos and (ref_ids[row, n:] == pad).all()
        got = np.stack(logits[row])
        diff = np.abs(got - ref_logits[row, :n]).max()
        assert diff < LOGIT_TOL * max(1.0, np.abs(ref_logits[row, :n]).max()), f"row {row}: logits differ by {diff}"


def test_demo_model_matches_transformers(demo_paths) -> None:
    """The demo's own weights and prompts: identical greedy ids, logits within 1e-4 at every step."""
    _compare(demo_paths["model_dir"], _prompts(demo_paths), eos=2, pad=3)


def test_gqa_tied_model_written_by_transformers_matches(demo_paths, tmp_path: Path) -> None:
    """A folder transformers wrote itself, with grouped-query attention (2 KV heads for 4), tied embeddings, another
    rope_theta, and an end-of-sequence token the model does produce, so rows end early and are dropped mid-batch."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(7)
    config = transformers.LlamaConfig(
        vocab_size=983, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_theta=500000.0, bos_token_id=1, eos_token_id=2, pad_token_id=3,
    )  # fmt: skip
    transformers.LlamaForCausalLM(config).eval().save_pretrained(tmp_path, safe_serialization=True)
    prompts = _prompts(demo_paths)
    first, _ = greedy(LlamaNumpy(tmp_path), prompts, [MAX_NEW] * len(prompts), eos=None)
    eos = int(first[0][3])  # a token row 0 emits at step 4: its row ends there, the others go on
    _compare(tmp_path, prompts, eos=eos, pad=3)


def test_demo_tokenizer_is_the_one_transformers_loads(demo_paths) -> None:
    """The demo's tokenizer files are written without transformers; transformers reads the same ids and text back."""
    transformers = pytest.importorskip("transformers")
    from repro.results.accuracy import FastTokenizerFile
    from repro.setup.dataset import read_builtin_sample
    from repro.setup.demo import _prompt_text

    folder = demo_paths["model_dir"]
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    data = load_prepared(demo_paths["dataset"])
    rows = read_builtin_sample()
    for i, row in enumerate(rows[:16]):
        want = [tok.bos_token_id, *tok.encode(_prompt_text(row), add_special_tokens=False)]
        assert data.prompt(i).tolist() == want
    ids = [data.prompt(i).tolist() + [2, 3] for i in range(len(data))]
    light = FastTokenizerFile.load(folder)
    assert light is not None
    assert light.batch_decode(ids, skip_special_tokens=True) == tok.batch_decode(ids, skip_special_tokens=True)


def test_backend_answers_a_row_at_its_eos_and_the_rest_unchanged(demo_paths) -> None:
    """A row that ends early is reported on its own, first; the other rows' tokens are those of the full batch."""
    data = load_prepared(demo_paths["dataset"])
    reqs = [Request(100 + i, i, data.prompt(i), 16) for i in range(4)]

    class Sink:
        def __init__(self) -> None:
            self.first: dict[int, int] = {}
            self.calls: list[dict[int, list[int]]] = []
            self.done = threading.Event()

        def first_tokens(self, events) -> None:
            self.first.update(events)

        def completed(self, events) -> None:
            self.calls.append({i: a.tolist() for i, a in events})
            if sum(len(c) for c in self.calls) == len(reqs):
                self.done.set()

        def failed(self, exc) -> None:
            raise AssertionError(exc)

    def run(eos: int | None) -> Sink:
        be = NumpyBackend(demo_paths["model_dir"], batch_size=4)
        be.load()
        assert be.model is not None
        be.model.shape = dataclasses.replace(be.model.shape, eos=eos)
        sink = Sink()
        be.start(sink)
        be.submit(reqs)
        assert sink.done.wait(60)
        be.close()
        return sink

    full = {i: t for call in run(None).calls for i, t in call.items()}
    assert all(len(t) == 16 for t in full.values())
    eos = full[100][1]
    sink = run(eos)
    got = {i: t for call in sink.calls for i, t in call.items()}
    assert got[100] == full[100][: full[100].index(eos, 1) + 1] and 100 in sink.calls[0]
    late = [i for i, t in full.items() if eos not in t[1:]]
    assert late and all(got[i] == full[i] for i in late) and not set(late) & set(sink.calls[0])
    assert all(sink.first[i] == got[i][0] for i in got)


def _write(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text)


def test_numpy_backend_refuses_what_it_does_not_compute(demo_paths, tmp_path: Path) -> None:
    import shutil

    bad = tmp_path / "m"
    shutil.copytree(demo_paths["model_dir"], bad)
    cfg = json.loads((bad / "config.json").read_text())
    _write(bad, "config.json", json.dumps({**cfg, "model_type": "mistral"}))
    with pytest.raises(InputError, match=r"config.json: the numpy backend cannot run this model \(model_type"):
        LlamaNumpy(bad)
    _write(bad, "config.json", json.dumps({**cfg, "rope_parameters": {"rope_type": "llama3", "factor": 8.0}}))
    with pytest.raises(InputError, match="only the default rotary embedding"):
        LlamaNumpy(bad)
    _write(bad, "config.json", json.dumps({**cfg, "num_hidden_layers": 3}))
    with pytest.raises(InputError, match=r"tensor model\.layers\.2\..* is missing"):
        LlamaNumpy(bad)
    _write(bad, "config.json", json.dumps(cfg))
    (bad / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(InputError, match="unreadable safetensors file") as err:
        LlamaNumpy(bad)
    assert "repro setup --force" in err.value.next_command


@pytest.mark.slow
def test_demo_runs_with_neither_torch_nor_transformers(tmp_path: Path) -> None:
    """README command 1's install has no torch and no transformers: the demo builds, runs, verifies and scores
    accuracy with both made unimportable, and its verdict names the CPU as the accelerator."""
    blocker = (
        "import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None; "
        "from repro.cli import main; sys.argv[0] = 'repro'; main()"
    )
    env = {**os.environ, "HOME": str(tmp_path), "REPRO_HOME": str(tmp_path / "ws")}
    for args in (
        ["run", "offline", "--recipe", "demo", "--json"],
        ["run", "offline", "--recipe", "demo", "--accuracy"],
    ):
        proc = subprocess.run(
            [sys.executable, "-c", blocker, *args], capture_output=True, text=True, timeout=300, env=env
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        if "--json" in args:
            doc = json.loads(proc.stdout)
            assert doc["details"]["backend"] == "numpy" and doc["verdict"]["status"] == "NOT A REPRODUCTION"
            checks = {c["name"]: c for c in doc["verdict"]["checks"]}
            assert "numpy backend ran on the CPU" in checks["accelerator"]["detail"]
            info = json.loads((Path(doc["details"]["log_dir"]) / "run.json").read_text())
            assert info["backend_details"]["device"] == "cpu" and info["backend_details"]["threads"] >= 1
        else:
            assert "accuracy: rouge1 " in " ".join(proc.stdout.split())


def test_hf_without_torch_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """The light install has no torch: `--backend hf` names the extra to install before any run folder exists."""
    blocker = "import sys; sys.modules['torch'] = None; from repro.cli import main; sys.argv[0] = 'repro'; main()"
    env = {**os.environ, "HOME": str(tmp_path), "REPRO_HOME": str(tmp_path / "ws")}
    argv = [sys.executable, "-c", blocker, "run", "offline", "--recipe", "demo", "--backend", "hf", "--samples", "8"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "Next: pip install 'repro[hf]'", proc.stderr
    assert "optional package 'torch'" in proc.stderr
    assert not (tmp_path / "ws" / "runs").exists() or not any((tmp_path / "ws" / "runs").rglob("run.json"))


@pytest.mark.slow
def test_demo_on_a_gpu_vm_names_the_cpu_it_ran_on(tmp_path: Path) -> None:
    """On an H100 VM (the rehearsal's stand-in NVML reporting one) the demo still runs on the CPU: run.json says so,
    and verify's rows agree: the accelerator is the CPU, the GPU idle, the per-accelerator unit a CPU (issue #34: it
    printed "1 CPU" beside "accelerator: NVIDIA H100 80GB HBM3")."""
    from repro.rehearse.rehearsal import STANDIN_DIR

    h100 = {"name": "NVIDIA H100 80GB HBM3", "count": 1, "memory_mib": 81559, "compute_capability": "9.0",
            "driver": "580.159.04", "cuda": 13000}  # fmt: skip
    path = os.pathsep.join(p for p in (str(STANDIN_DIR / "nvml"), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "STANDIN_GPUS": json.dumps(h100), "REPRO_HOME": str(tmp_path / "ws")}
    repro = [sys.executable, "-c", "import sys; from repro.cli import main; sys.argv[0] = 'repro'; main()"]
    proc = subprocess.run([*repro, "run", "offline", "--recipe", "demo", "--samples", "16", "--json"],
                          capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    log_dir = Path(json.loads(proc.stdout)["details"]["log_dir"])
    info = json.loads((log_dir / "run.json").read_text())
    assert info["gpus"]["names"] == [h100["name"]], info["gpus"]
    assert info["backend_details"]["device"] == "cpu" and "GPU on this machine" in info["backend_details"]["note"]
    proc = subprocess.run([*repro, "verify", str(log_dir), "--json"], capture_output=True, text=True, timeout=120,
                          env=env)  # fmt: skip
    doc = json.loads(proc.stdout)
    checks = {c["name"]: c for c in (doc.get("verdict") or doc)["checks"]}
    accel = checks["accelerator"]["detail"]
    assert accel.startswith("CPU (run.json: the numpy backend ran on the CPU") and "H100 80GB HBM3 idle" in accel
    text = subprocess.run([*repro, "verify", str(log_dir)], capture_output=True, text=True, timeout=120,
                          env={**env, "COLUMNS": "200"}).stdout  # fmt: skip
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert any(r.startswith("│ tokens/s per CPU │") for r in rows), text
    assert any("1 CPU (run.json: one CPU)" in r for r in rows), text
    assert not any("per GPU" in r for r in rows), text
