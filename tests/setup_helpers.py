"""Shared builders for the setup/hub/preprocess tests: a tiny tokenizer, an OpenOrca-shaped parquet, a test recipe."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
MODEL_REPO = "meta-test/Tiny-2-chat-hf"
N_SAMPLES, N_CALIB = 8, 4
ORIGINS = ("cot", "flan", "niv", "t0")
WORDS = [
    "the",
    "a",
    "model",
    "answer",
    "question",
    "because",
    "river",
    "city",
    "number",
    "seven",
    "green",
    "light",
    "table",
    "reason",
    "people",
    "first",
]


def raw_rows(seed: int = 7) -> list[dict[str, str]]:
    """Six good rows per origin plus rows each MLPerf filter must drop (tagged in their id)."""
    rnd = random.Random(seed)
    rows = []
    for origin in ORIGINS:
        for i in range(6):
            rows.append(
                {
                    "id": f"{origin}.good{i}",
                    "system_prompt": "You are a helpful assistant." if i % 2 else "",
                    "question": " ".join(rnd.choice(WORDS) for _ in range(8 + i)),
                    "response": " ".join(rnd.choice(WORDS) for _ in range(12 + i)),
                }
            )
    rows += [
        {
            "id": "flan.dropnonenglish",
            "system_prompt": "",
            "question": "Qu'est-ce que c'est? élève",
            "response": "une réponse assez longue ici",
        },
        {"id": "cot.dropshort", "system_prompt": "", "question": "Is the river green?", "response": "a"},
        {
            "id": "niv.dropbadprompt",
            "system_prompt": "Explain how you used the definition to come up with the answer.",
            "question": "the first reason",
            "response": "the people answer the question because seven",
        },
        {
            "id": "t0.droplong",
            "system_prompt": "",
            "question": " ".join(["river"] * 1100),
            "response": "the model answer is seven",
        },
    ]
    return rows


def write_parquet(path: Path, rows: list[dict[str, str]] | None = None, drop: tuple[str, ...] = ()) -> Path:
    import pandas as pd

    df = pd.DataFrame(rows or raw_rows())
    df = df.drop(columns=list(drop))
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(path, index=False)
    return path


def build_tokenizer_dir(out: Path) -> Path:
    from repro.setup.demo import build_tokenizer

    rows = raw_rows()
    build_tokenizer([{**r, "question": r["question"][:200]} for r in rows], out)
    return out


def model_files(tokenizer_dir: Path, shard_sizes: tuple[int, ...] = (2_500_000, 200_000)) -> dict[str, bytes]:
    rnd = random.Random(11)
    files = {p.name: p.read_bytes() for p in tokenizer_dir.iterdir() if p.is_file()}
    n = len(shard_sizes)
    for i, size in enumerate(shard_sizes, 1):
        files[f"model-{i:05d}-of-{n:05d}.safetensors"] = rnd.randbytes(size)
    files["config.json"] = b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}'
    files["tokenizer.model"] = hashlib.sha256(b"spm").digest() * 8
    files["README.md"] = b"# not downloaded: not in allow_patterns\n"
    files["pytorch_model.bin"] = b"\0" * 1000
    return files


def write_recipe(
    folder: Path,
    *,
    name: str = "test-h200",
    repo_id: str = MODEL_REPO,
    revision: str,
    base_url: str,
    disk_needed_gb: float = 0.001,
    sha256: dict | None = None,
) -> Path:
    data = yaml.safe_load((REPO_ROOT / "recipes" / "nd-h200-v5.yaml").read_text())
    data["name"] = name
    data["model"] = {"repo_id": repo_id, "revision": revision, "size_gb": 0.001}
    ds = data["dataset"] = {}
    ds.update(
        samples=N_SAMPLES,
        calibration_samples=N_CALIB,
        files={
            "sampled": f"open_orca_gpt4_tokenized_llama.sampled_{N_SAMPLES}.pkl",
            "calibration": f"open_orca_gpt4_tokenized_llama.calibration_{N_CALIB}.pkl",
        },
        sha256=sha256 or {"sampled": "unknown", "calibration": "unknown"},
    )
    ds["urls"] = {role: f"{base_url}/static/{fname}" for role, fname in ds["files"].items()}
    data["disk_needed_gb"] = disk_needed_gb
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
