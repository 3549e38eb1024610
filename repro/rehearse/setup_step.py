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

from repro.core.benchmarks import Benchmark
from repro.core.errors import ReproError
from repro.core.recipes import Recipe
from repro.core.workspace import Workspace

VOCAB = 300  # the tiny model's word-level vocabulary: '<unk>', '<s>', '</s>', then 'w3' ... 'w299'
TOKEN = "hf_reHearsalStandInTokenNotASecret"  # accepted by the rehearsal's local hub only
HUB_ENV = ("HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_DISABLE_XET", "HF_HUB_OFFLINE")


def write_tokenizer(folder: Path, size: int = VOCAB) -> Path:
    """The tiny model's tokenizer (word-level: 'w17' <-> 17), saved the way `repro setup` leaves one: the files
    transformers' `save_pretrained` writes for it (byte for byte), written with `tokenizers` alone, since README
    command 1's install, which rehearses, has no transformers."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, size)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    tok.post_processor = processors.TemplateProcessing(single="$A", pair="$A $B:1", special_tokens=[])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "backend": "tokenizers",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "model_max_length": int(1e30),
        "tokenizer_class": "TokenizersBackend",
        "unk_token": "<unk>",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
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


def tiny_dataset(prompts: list[list[int]], out_len: int, bench: Benchmark) -> dict[str, bytes]:
    """MLPerf's dataset pickles in the benchmark's own columns (its module's `stand_in`, repro/core/families/),
    written by repro's own DataFrame-pickle writer (the opcodes and globals pandas writes for object and int64
    columns; no pandas needed, so the light install rehearses)."""
    from repro.setup.frame_encode import encode_frame as pkl

    stand_in = bench.spec.stand_in
    if stand_in is None:
        raise ReproError(f"benchmark {bench.name}'s module {bench.module} has no stand-in dataset to rehearse with")
    texts = [" ".join(f"w{t}" for t in p) for p in prompts]
    return {role: pkl(columns) for role, columns in stand_in(prompts, texts, out_len).items()}


def setup_recipe(
    recipe: Recipe, urls: dict[str, str], data: dict[str, bytes], samples: int, lists: dict[str, str]
) -> Recipe:
    """The recipe with the stand-in data's facts: mirror URLs, checksums, sample count and sizes.

    Each pin the real benchmark has is kept, over the stand-in's own bytes (this rehearsal made them): a published
    SHA-256 or MD5 becomes the stand-in's, MLCommons' .md5 list is the mirror's `lists[role]` (which lists the
    stand-in's MD5), and a file the benchmark leaves unpinned stays unpinned, so setup takes the same path as on a
    GPU VM (llama2's calibration set is derived from the sampled set, never unpickled; llama3.1-405b's files are
    placed as the R2 downloader leaves them and checked against the published MD5 and the list)."""
    from repro.core.benchmarks import Md5Pin
    from repro.setup.download import pinned_sha256

    md5 = {}
    for role, pin in recipe.dataset.md5.items():
        mine = hashlib.md5(data[role], usedforsecurity=False).hexdigest()
        md5[role] = Md5Pin(
            value=mine if pin.value is not None else None,
            sources=pin.sources,
            list_url=lists.get(role) if pin.list_url is not None else None,
            note=pin.note,
        )
    dataset = recipe.dataset.model_copy(
        update={
            "urls": urls,
            "sha256": {
                role: hashlib.sha256(b).hexdigest() if pinned_sha256(recipe, role) else "unknown"
                for role, b in data.items()
            },
            "md5": md5,
            "samples": samples,
            "calibration_samples": 8,
        }
    )
    model = recipe.model.model_copy(update={"size_gb": 0.001})
    return recipe.model_copy(update={"dataset": dataset, "model": model, "disk_needed_gb": 0.01})


def _mirror(hub: Any, url: str, body: bytes) -> str:
    """The mirror URL of a real one on the local hub (same host and path under /static/), serving `body`."""
    real = urlparse(url)
    key = f"{real.netloc}{real.path}"
    hub.static[key] = body
    return f"{hub.url}/static/{key}"


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
    from repro.setup.download import dataset_file, run_setup
    from repro.setup.pins import has_pin

    data = tiny_dataset(prompts, out_len, recipe.bench)
    placed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="repro-rehearse-model-") as tmp, HubServer() as hub:
        files = tiny_model_files(vocab, write_tokenizer(Path(tmp) / "tok", vocab))
        repo = hub.add(Repo(recipe.model.repo_id, files, commit=recipe.model.revision, gated=True))
        urls = {role: _mirror(hub, url, data[role]) for role, url in recipe.dataset.urls.items()}
        # MLCommons' md5sum list beside each .uri, as `md5sum` writes it, over the stand-in's bytes: one list for
        # every file it covers (DeepSeek-R1's sampled and calibration pickles share one)
        listed: dict[str, str] = {}
        for role, pin in recipe.dataset.md5.items():
            if pin.list_url is not None:
                line = f"{hashlib.md5(data[role], usedforsecurity=False).hexdigest()}  {recipe.dataset.files[role]}\n"
                listed[pin.list_url] = listed.get(pin.list_url, "") + line
        mirrored = {url: _mirror(hub, url, body.encode()) for url, body in listed.items()}
        lists = {role: mirrored[pin.list_url] for role, pin in recipe.dataset.md5.items() if pin.list_url is not None}
        rec = setup_recipe(recipe, urls, data, len(prompts), lists)
        for role, fname in recipe.dataset.files.items():
            if role not in urls and role in recipe.dataset.r2_uri:  # what MLCommons' R2 downloader leaves there
                dest = dataset_file(ws, rec, fname)
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
        "derived_from_sampled": sorted(role for role in rec.dataset.files if not has_pin(rec, role)),
        "dataset_pins": out.details.get("dataset_pins", {}),
        "notes": out.details.get("notes", []),
        "model_dir": out.details.get("model_dir"),
        "prepared_dir": out.details.get("prepared_dir"),
    }
