"""The tokenizer an `--endpoint` run re-tokenizes text with: AutoTokenizer's choice, loaded without torch (issue 29).

The folders are Llama tokenizers as the hub and repro write them: Llama-2's legacy tokenizer.json (a normalizer that
prepends and replaces spaces, byte fallback) with and without config.json, a byte-level one that still names
`LlamaTokenizer` (AutoTokenizer loads the generic class for it), and repro's own word-level demo tokenizer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from standin_util import write_tokenizer

from repro.run.tokens import direct_class

TEXTS = ["The quick brown fox", " a leading space", "Hello, 123 \u00e9\u4e2d!", "w10 w11 w12 hello"]
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "[INST] Summarize: the news today [/INST]",
    "Hello, world! Numbers 12345.",
] * 20
LLAMA_CONFIG = {
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "pad_token": None,
    "clean_up_tokenization_spaces": False,
    "legacy": False,
    "tokenizer_class": "LlamaTokenizer",
}


def _llama_folder(root: Path, byte_level: bool = False, model_type: str | None = "llama") -> Path:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=not byte_level, fuse_unk=not byte_level))
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence(
            [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        )
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"]))
    root.mkdir(parents=True)
    tok.save(str(root / "tokenizer.json"))
    (root / "tokenizer_config.json").write_text(json.dumps(LLAMA_CONFIG))
    if model_type is not None:
        (root / "config.json").write_text(json.dumps({"model_type": model_type}))
    return root


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokenizers")
    return {
        "llama-2": _llama_folder(root / "llama-2"),
        "llama-2-no-config": _llama_folder(root / "llama-2-no-config", model_type=None),
        "byte-level-llama": _llama_folder(root / "byte-level-llama", byte_level=True),
        "demo": write_tokenizer(root / "demo"),
    }


LOAD = """
import json, sys
from repro.run.tokens import load_tokenizer
out = {}
for name, folder in json.loads(sys.argv[1]).items():
    tok = load_tokenizer([folder])
    ids = [tok.encode(t, add_special_tokens=False) for t in json.loads(sys.argv[2])]
    text = [tok.decode(i, skip_special_tokens=True) for i in ids]
    out[name] = {"class": type(tok).__name__, "ids": ids, "text": text}
hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(json.dumps({"tokenizers": out, "torch": "torch" in sys.modules, "peak_mb": int(hwm) / 1024}))
"""


def test_tokenizer_is_autotokenizers_choice_loaded_without_torch(folders: dict[str, Path]) -> None:
    """Same class, ids and text as AutoTokenizer; the loading process never imports torch and stays far under the
    500 MB of docs/SECURITY.md (AutoTokenizer's import of torch alone made an `--endpoint` run ~800 MB)."""
    proc = subprocess.run(
        [sys.executable, "-c", LOAD, json.dumps({k: str(v) for k, v in folders.items()}), json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["torch"] is False
    assert got["peak_mb"] < 500, f"loading the tokenizers peaked at {got['peak_mb']:.0f} MB"

    from transformers import AutoTokenizer

    for name, folder in folders.items():
        auto = AutoTokenizer.from_pretrained(str(folder))
        mine = got["tokenizers"][name]
        ids = [auto.encode(t, add_special_tokens=False) for t in TEXTS]
        assert mine["class"] == type(auto).__name__, name
        assert mine["ids"] == ids, name
        assert mine["text"] == [auto.decode(i, skip_special_tokens=True) for i in ids], name
    assert got["tokenizers"]["llama-2"]["class"] == "LlamaTokenizer"
    assert got["tokenizers"]["byte-level-llama"]["class"] == "TokenizersBackend"


def test_anything_but_a_plain_llama_tokenizer_is_left_to_autotokenizer(tmp_path: Path) -> None:
    other = _llama_folder(tmp_path / "mistral", model_type="mistral")
    remote = _llama_folder(tmp_path / "remote")
    cfg = json.loads((remote / "tokenizer_config.json").read_text())
    (remote / "tokenizer_config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoTokenizer": ["x.Tok", None]}}))
    named = _llama_folder(tmp_path / "named")
    (named / "tokenizer_config.json").write_text(json.dumps({**cfg, "tokenizer_class": "CodeLlamaTokenizer"}))
    broken = _llama_folder(tmp_path / "broken")
    (broken / "config.json").write_text("{not json")
    assert [direct_class(f) for f in (other, remote, named, broken)] == [None, None, None, None]
    assert direct_class(_llama_folder(tmp_path / "plain")) == "LlamaTokenizer"
