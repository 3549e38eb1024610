"""The rehearsal's setup step: `repro setup`'s own code (repro/setup/download.py, hub.py) against a local hub that
speaks the Hugging Face protocol with the recipe's real repo id and revision, gated as the hub gates Llama 2 (401
without a token, 403 until the license is accepted, 200 after), holding the tiny model; the dataset comes from a
local mirror that keeps the real file names and URL paths.

What is stood in is data, not code: the model and dataset are tiny, so the recipe copy setup reads carries their
sizes, sample count and checksums; repo id, revision, file names and allow patterns stay the recipe's.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from repro.core.errors import ReproError
from repro.core.recipes import Recipe
from repro.core.workspace import Workspace

VOCAB = 300  # the tiny model's word-level vocabulary: '<unk>', '<s>', '</s>', then 'w3' ... 'w299'
TOKEN = "hf_reHearsalStandInTokenNotASecret"  # accepted by the rehearsal's local hub only
HUB_ENV = ("HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_DISABLE_XET", "HF_HUB_OFFLINE")


def write_tokenizer(folder: Path, size: int = VOCAB) -> Path:
    """The tiny model's tokenizer (word-level: 'w17' <-> 17), saved the way `repro setup` leaves one."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, size)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(folder))
    return folder


def tiny_model_files(vocab: int, tokenizer_dir: Path) -> dict[str, bytes]:
    """The tiny model as a hub repo holds it: tokenizer files, config.json and one safetensors shard whose header
    says it is a rehearsal stand-in (no tensors: nothing loads weights in a rehearsal)."""
    files = {p.name: p.read_bytes() for p in tokenizer_dir.iterdir() if p.is_file()}
    files["config.json"] = json.dumps(
        {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab, "repro": "rehearsal"}
    ).encode()
    header = json.dumps({"__metadata__": {"format": "pt", "repro": "rehearsal stand-in, no tensors"}}).encode()
    files["model-00001-of-00001.safetensors"] = struct.pack("<Q", len(header)) + header
    files["README.md"] = b"# rehearsal stand-in (not downloaded: not in allow_patterns)\n"
    return files


def tiny_dataset(prompts: list[list[int]], out_len: int, fmt: str = "mlperf-openorca-pkl") -> dict[str, bytes]:
    """MLPerf's two pickles in the benchmark's columns, pickled with object columns as MLPerf's pandas wrote them,
    so setup's DataFrame-only unpickler reads them. OpenOrca (llama2-70b): tok_input, tok_input_length, output;
    calibration: input. llama3.1-405b: input, tok_input, tok_input_len, gt_output and each sample's metric (rouge,
    niah_em, qa_em in turn, as the real set mixes them); calibration: input, tok_input, tok_input_len."""
    import pandas as pd

    from repro.setup.safe_pickle import dataframe_pickle_bytes as pkl

    texts = [" ".join(f"w{t}" for t in p) for p in prompts]
    if fmt == "mlperf-llama3.1-405b-pkl":
        kinds = ["rouge", "niah_em", "qa_em"]
        sampled = pd.DataFrame(
            {
                "input": texts,
                "tok_input": prompts,
                "tok_input_len": [len(p) for p in prompts],
                "gt_output": [" ".join(["w3"] * out_len)] * len(prompts),
                "metric": [kinds[i % 3] for i in range(len(prompts))],
            }
        )
        calibration = pd.DataFrame(
            {"input": texts[:8], "tok_input": prompts[:8], "tok_input_len": [len(p) for p in prompts[:8]]}
        )
        return {"sampled": pkl(sampled), "calibration": pkl(calibration)}
    sampled = pd.DataFrame(
        {
            "input": texts,
            "tok_input": prompts,
            "tok_input_length": [len(p) for p in prompts],
            "output": [" ".join(["w3"] * out_len)] * len(prompts),
            "tok_output_length": [out_len] * len(prompts),
        }
    )
    return {"sampled": pkl(sampled), "calibration": pkl(pd.DataFrame({"input": texts[:8]}))}


def setup_recipe(recipe: Recipe, urls: dict[str, str], data: dict[str, bytes], samples: int) -> Recipe:
    """The recipe with the stand-in data's facts: mirror URLs, checksums, sample count and sizes.

    A file the real recipe pins (a published SHA-256) is pinned here to the stand-in's own bytes, which this
    rehearsal made; a file the real recipe leaves unpinned stays unpinned, so setup takes the same path as on a
    GPU VM (the calibration set is derived from the sampled set, never unpickled). A benchmark with no published
    checksum and no raw data (llama3.1-405b) is set up on a VM by pinning the R2 downloader's files in a copy of the
    recipe, as setup's refusal says: the stand-in takes that step with its own bytes."""
    from repro.setup.download import pinned_sha256

    user_pins = recipe.dataset.raw is None
    dataset = recipe.dataset.model_copy(
        update={
            "urls": urls,
            "sha256": {
                role: hashlib.sha256(b).hexdigest() if (user_pins or pinned_sha256(recipe, role)) else "unknown"
                for role, b in data.items()
            },
            "samples": samples,
            "calibration_samples": 8,
        }
    )
    model = recipe.model.model_copy(update={"size_gb": 0.001})
    return recipe.model_copy(update={"dataset": dataset, "model": model, "disk_needed_gb": 0.01})


@contextmanager
def hub_env(endpoint: str, token: str | None) -> Iterator[None]:
    """This process talks to the local hub, with this token or none (a token `hf auth login` stored stays unread),
    and gets its own environment back after."""
    from huggingface_hub import constants

    saved = {k: os.environ.get(k) for k in HUB_ENV}
    saved_path = constants.HF_TOKEN_PATH
    with tempfile.TemporaryDirectory(prefix="repro-rehearse-hf-") as home:
        try:
            for k in HUB_ENV:
                os.environ.pop(k, None)
            os.environ["HF_ENDPOINT"] = endpoint
            os.environ["HF_HUB_DISABLE_XET"] = "1"
            if token:
                os.environ["HF_TOKEN"] = token
            constants.HF_TOKEN_PATH = str(Path(home) / "token")
            yield
        finally:
            constants.HF_TOKEN_PATH = saved_path
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def gated_setup(recipe: Recipe, ws: Workspace, prompts: list[list[int]], out_len: int, vocab: int) -> dict[str, Any]:
    """Setup three times as a user meets the gate: no token (401), a token before the license is accepted (403),
    then after (200, files downloaded and verified). Each refusal's message is kept; the token never is."""
    from repro.rehearse.hub import HubServer, Repo
    from repro.setup.download import data_dir, run_setup

    data = tiny_dataset(prompts, out_len, recipe.dataset.format)
    placed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="repro-rehearse-model-") as tmp, HubServer() as hub:
        files = tiny_model_files(vocab, write_tokenizer(Path(tmp) / "tok", vocab))
        repo = hub.add(Repo(recipe.model.repo_id, files, commit=recipe.model.revision, gated=True))
        urls = {}
        for role, url in recipe.dataset.urls.items():
            real = urlparse(url)
            key = f"{real.netloc}{real.path}"
            hub.static[key] = data[role]
            urls[role] = f"{hub.url}/static/{key}"
        rec = setup_recipe(recipe, urls, data, len(prompts))
        for role, fname in recipe.dataset.files.items():
            if role not in urls and role in recipe.dataset.r2_uri:  # what MLCommons' R2 downloader leaves there
                dest = data_dir(ws, rec) / fname
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data[role])
                placed.append(fname)
        attempts: list[dict[str, Any]] = []
        for attempt, token in (("no token", None), ("token, license not accepted", TOKEN)):
            seen = len(hub.errors)
            with hub_env(hub.url, token):
                try:
                    run_setup(rec, ws)
                    attempts.append({"attempt": attempt, "http": 200, "refused": False, "message": ""})
                except ReproError as exc:
                    http = hub.errors[seen] if len(hub.errors) > seen else None
                    attempts.append({"attempt": attempt, "http": http, "refused": True, "message": exc.message})
        repo.accepted.add(TOKEN)
        with hub_env(hub.url, TOKEN):
            out = run_setup(rec, ws)
        attempts.append({"attempt": "token, license accepted", "http": 200, "refused": False, "message": out.summary})
        downloads = [r["path"] for r in hub.log if "/resolve/" in r["path"] and r["method"] == "GET"]
        fetched = sorted({Path(r["path"]).name for r in hub.log if "/static/" in r["path"] and r["method"] == "GET"})
    return {
        "label": "stand-in hub",
        "repo_id": recipe.model.repo_id,
        "revision": recipe.model.revision,
        "attempts": attempts,
        "status": out.status,
        "model_files": sorted(p.rsplit("/", 1)[-1] for p in downloads),
        "dataset_files": fetched,
        "dataset_placed": sorted(placed),
        "derived_from_sampled": sorted(role for role, sha in rec.dataset.sha256.items() if sha == "unknown"),
        "model_dir": out.details.get("model_dir"),
        "prepared_dir": out.details.get("prepared_dir"),
    }
