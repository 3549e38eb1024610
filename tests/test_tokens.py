"""The tokenizer an `--endpoint` run re-tokenizes text with: AutoTokenizer's choice, run by `tokenizers` alone (no
torch: issue 29; no transformers: issue 43), giving transformers' ids.

The folders are Llama tokenizers as the hub and repro write them: Llama-2's legacy tokenizer.json (a normalizer that
prepends and replaces spaces, byte fallback) with and without config.json, with its byte pieces, with `legacy`,
`add_prefix_space: false` or an `added_tokens_decoder` in its config; a byte-level one that still names
`LlamaTokenizer` (AutoTokenizer loads the generic class for it), the rehearsal's word-level tokenizer and the demo's
byte-level BPE.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from standin_util import write_tokenizer

from repro.run.tokens import direct_class

TEXTS = [
    "The quick brown fox",
    " a leading space",
    "Hello, 123 \u00e9\u4e2d!",
    "w10 w11 w12 hello",
    "  two  spaces ",
    "",
    "\n newline\tTab",
    "<s> a </s> b",
    "\u2581lead",
    "Gr\u00fc\u00dfe \u2014 \u00fcn\u00ef",
]
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


def _llama_folder(
    root: Path,
    byte_level: bool = False,
    model_type: str | None = "llama",
    config: dict | None = None,
    byte_pieces: bool = False,
) -> Path:
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
    specials = ["<unk>", "<s>", "</s>"] + ([f"<0x{b:02X}>" for b in range(256)] if byte_pieces else [])
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=200 + len(specials), special_tokens=specials))
    root.mkdir(parents=True)
    tok.save(str(root / "tokenizer.json"))
    if byte_pieces:  # Llama-2's byte pieces are vocabulary, not added tokens
        doc = json.loads((root / "tokenizer.json").read_text())
        doc["added_tokens"] = doc["added_tokens"][:3]
        (root / "tokenizer.json").write_text(json.dumps(doc))
    (root / "tokenizer_config.json").write_text(json.dumps({**LLAMA_CONFIG, **(config or {})}))
    if model_type is not None:
        (root / "config.json").write_text(json.dumps({"model_type": model_type}))
    return root


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokenizers")
    from repro.setup.dataset import read_builtin_sample
    from repro.setup.demo import build_tokenizer

    special = {"content": "<s>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
    decoder = {str(i): {**special, "content": c, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])}
    build_tokenizer(read_builtin_sample(), root / "demo-bpe")
    return {
        "llama-2": _llama_folder(root / "llama-2"),
        "llama-2-no-config": _llama_folder(root / "llama-2-no-config", model_type=None),
        "llama-2-byte-pieces": _llama_folder(root / "llama-2-byte-pieces", byte_pieces=True),
        "llama-2-legacy": _llama_folder(root / "llama-2-legacy", config={"legacy": True}),
        "llama-2-no-prefix": _llama_folder(root / "llama-2-no-prefix", config={"add_prefix_space": False}),
        "llama-2-added-decoder": _llama_folder(root / "llama-2-added", config={"added_tokens_decoder": decoder}),
        "byte-level-llama": _llama_folder(root / "byte-level-llama", byte_level=True),
        "word-level": write_tokenizer(root / "word-level"),
        "demo": root / "demo-bpe",
    }


LOAD = """
import json, sys
sys.modules["transformers"] = None  # README command 1's install has none: `tokenizers` alone must do
from repro.run.tokens import load_tokenizer
out = {}
for name, folder in json.loads(sys.argv[1]).items():
    tok = load_tokenizer([folder])
    ids = [tok.encode(t, add_special_tokens=False) for t in json.loads(sys.argv[2])]
    text = [tok.decode(i, skip_special_tokens=True) for i in ids]
    raw = [tok.decode(i, skip_special_tokens=False) for i in ids]
    out[name] = {"class": tok.kind, "ids": ids, "text": text, "raw": raw, "vocab": tok.get_vocab()}
hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(json.dumps({"tokenizers": out, "torch": "torch" in sys.modules, "peak_mb": int(hwm) / 1024}))
"""


def test_tokenizer_is_autotokenizers_choice_run_without_transformers(folders: dict[str, Path]) -> None:
    """Same class, ids, text and vocabulary as AutoTokenizer, from a process where transformers cannot be imported;
    it never imports torch and stays far under the 500 MB of docs/SECURITY.md (AutoTokenizer's import of torch alone
    made an `--endpoint` run ~800 MB)."""
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
        assert mine["raw"] == [auto.decode(i, skip_special_tokens=False) for i in ids], name
        assert mine["vocab"] == auto.get_vocab(), name
    assert got["tokenizers"]["llama-2"]["class"] == "LlamaTokenizer"
    assert got["tokenizers"]["byte-level-llama"]["class"] == "TokenizersBackend"
    # the rebuilt pipeline is not the file's: a leading space is one piece here, two in the legacy normalizer's
    legacy_file = got["tokenizers"]["llama-2"]["ids"][1]
    from tokenizers import Tokenizer

    as_saved = Tokenizer.from_file(str(folders["llama-2"] / "tokenizer.json"))
    assert as_saved.encode(TEXTS[1], add_special_tokens=False).ids != legacy_file


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


def test_a_tokenizer_only_transformers_can_load_names_its_extra(tmp_path: Path) -> None:
    """Without transformers, a folder `tokenizers` cannot settle (another model type) is one error naming the pip
    install of the extra, not `repro setup`; a folder with no tokenizer files at all is None (setup fetches them)."""
    other = _llama_folder(tmp_path / "mistral", model_type="mistral")
    code = (
        "import sys, json; sys.modules['transformers'] = None\n"
        "from repro.core.errors import InputError\n"
        "from repro.run.tokens import load_tokenizer\n"
        "assert load_tokenizer([sys.argv[2]]) is None\n"
        "try:\n    load_tokenizer([sys.argv[1]])\n"
        "except InputError as e:\n    print(json.dumps([e.message, e.next_command]))\n"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run([sys.executable, "-c", code, str(other), str(empty)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    message, next_command = json.loads(proc.stdout)
    assert "needs the optional package 'transformers'" in message and str(other) in message
    assert next_command == "pip install 'repro[hf]'"


def test_the_rehearsals_tokenizer_files_are_what_transformers_saves(tmp_path: Path) -> None:
    """write_tokenizer (tokenizers only: the light install rehearses) writes byte for byte the files transformers'
    PreTrainedTokenizerFast.save_pretrained writes for the same word-level tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from repro.rehearse.setup_step import VOCAB

    mine = write_tokenizer(tmp_path / "mine")
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(str(tmp_path / "theirs"))
    theirs = sorted(p.name for p in (tmp_path / "theirs").iterdir())
    assert sorted(p.name for p in mine.iterdir()) == theirs
    for name in theirs:
        assert (mine / name).read_bytes() == (tmp_path / "theirs" / name).read_bytes(), name


def test_the_demos_endpoint_accuracy_run_needs_no_transformers(tmp_path: Path) -> None:
    """README command 1's install has no transformers: `repro run offline --recipe demo --endpoint URL --accuracy`
    against a text-only server (the stand-in trtllm-serve: chat answers carry text, no ids) re-tokenizes every
    answer with `tokenizers` and scores it; it said "no tokenizer was found ... repro setup"."""
    import os

    from standin_util import LocalStandin

    blocker = (
        "import sys; [sys.modules.__setitem__(m, None) for m in ('torch', 'transformers', 'pandas', 'pyarrow')]; "
        "from repro.cli import main; sys.argv[0] = 'repro'; main()"
    )
    env = {**os.environ, "HOME": str(tmp_path), "REPRO_HOME": str(tmp_path / "ws")}

    def repro(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", blocker, *args], capture_output=True, text=True, timeout=300, env=env
        )

    assert repro("setup", "--recipe", "demo").returncode == 0
    model = tmp_path / "ws" / "models" / "tiny-llama"
    with LocalStandin(model) as srv:
        srv.wait_bound()
        run = repro("run", "offline", "--recipe", "demo", "--endpoint", srv.url, "--accuracy", "--json")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    log_dir = Path(json.loads(run.stdout)["details"]["log_dir"])
    tokens = json.loads((log_dir / "run.json").read_text())["backend_stats"]["tokens"]
    assert tokens["ids_from_server"] == 0 and tokens["ids_from_tokenizer"] == tokens["samples"] > 0
    assert "rouge1" in (log_dir / "accuracy.txt").read_text()
