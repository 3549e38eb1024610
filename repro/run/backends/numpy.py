"""A small Llama on numpy: the demo's engine, with no torch.

The demo's model is a few MB (hidden 64, 2 layers); torch's CUDA wheels are 6 GB, and on a GPU VM the hf backend
spent its time in Python launching CUDA kernels (1,746 tokens/s on an H100 against 16,731 on a 2-core CPU). This
backend computes LlamaForCausalLM's forward pass as transformers defines it (RMSNorm, the default rotary
embedding, grouped-query attention with a causal mask and left padding, the SiLU-gated MLP, lm_head) in float32
numpy, with a KV cache and greedy decoding as `generate(do_sample=False, min_new_tokens=1)` does.
tests/test_numpy_backend.py holds it to transformers' own greedy ids and logits on the same weights.
It runs on the CPU wherever it is (a GPU, if any, stays idle), and says so in run.json.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repro.core.errors import InputError
from repro.run.backends.base import BackendContext, BatchQueueBackend, Request

MAX_WEIGHT_BYTES = 2 << 30
"""The numpy runner is for small models: anything larger is a GPU job (`--backend hf` or the recipe's engine)."""
_CONFIG_CAP = 1 << 20
_MASKED = np.float32(-1e30)  # finite, so a query with no key to see (a pad row) gives a uniform row, never NaN
_NEXT = "`repro setup --force` (the demo's model), or `--backend hf` for another model"


@dataclass(frozen=True)
class LlamaShape:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float
    theta: float
    tied: bool
    bos: int | None
    eos: int | None
    pad: int | None


def _int(cfg: dict[str, Any], key: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{key} is {value!r}, not a positive whole number")
    return value


def _token(cfg: dict[str, Any], key: str) -> int | None:
    value = cfg.get(key)
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def read_shape(model_dir: Path) -> LlamaShape:
    """config.json as a Llama this runner computes exactly; anything else is refused, never approximated."""
    path = Path(model_dir) / "config.json"
    try:
        if path.stat().st_size > _CONFIG_CAP:
            raise ValueError("larger than 1 MB")
        cfg = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(cfg, dict):
            raise ValueError("not a JSON object")
        if cfg.get("model_type") != "llama":
            raise ValueError(f"model_type is {cfg.get('model_type')!r}, not 'llama'")
        if cfg.get("hidden_act", "silu") != "silu" or cfg.get("attention_bias") or cfg.get("mlp_bias"):
            raise ValueError("only SiLU MLPs without biases are computed here")
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        if not isinstance(rope, dict) or rope.get("rope_type", rope.get("type", "default")) != "default":
            raise ValueError(f"rope {rope!r}: only the default rotary embedding is computed here")
        theta = rope.get("rope_theta", cfg.get("rope_theta", 10000.0))
        hidden, heads = _int(cfg, "hidden_size"), _int(cfg, "num_attention_heads")
        kv_heads = _int(cfg, "num_key_value_heads", heads)
        head_dim = _int(cfg, "head_dim", hidden // heads) if cfg.get("head_dim") is not None else hidden // heads
        if heads % kv_heads or head_dim % 2 or not isinstance(theta, (int, float)) or theta <= 0:
            raise ValueError("attention heads, KV heads or rope_theta do not fit together")
        return LlamaShape(
            vocab=_int(cfg, "vocab_size"),
            hidden=hidden,
            layers=_int(cfg, "num_hidden_layers"),
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate=_int(cfg, "intermediate_size"),
            eps=float(cfg.get("rms_norm_eps", 1e-6)),
            theta=float(theta),
            tied=bool(cfg.get("tie_word_embeddings", False)),
            bos=_token(cfg, "bos_token_id"),
            eos=_token(cfg, "eos_token_id"),
            pad=_token(cfg, "pad_token_id"),
        )
    except FileNotFoundError:
        raise InputError(f"{path}: not found; this is not a Hugging Face model folder.", _NEXT) from None
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: the numpy backend cannot run this model ({exc}).", _NEXT) from None


def _weights(model_dir: Path, shape: LlamaShape) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise InputError(f"{model_dir}: no *.safetensors weights for the numpy backend.", _NEXT)
    size = sum(f.stat().st_size for f in files)
    if size > MAX_WEIGHT_BYTES:
        raise InputError(
            f"{model_dir}: {size / 1e9:,.1f} GB of weights; the numpy backend runs small models only "
            f"(up to {MAX_WEIGHT_BYTES / 1e9:,.1f} GB) on the CPU.",
            "`--backend hf` (torch) or the recipe's own backend",
        )
    tensors: dict[str, np.ndarray] = {}
    for f in files:
        try:
            tensors.update(load_file(str(f)))
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types for a bad header
            raise InputError(f"{f}: unreadable safetensors file ({str(exc).splitlines()[0]}).", _NEXT) from None
    want = {
        "model.embed_tokens.weight": (shape.vocab, shape.hidden),
        "model.norm.weight": (shape.hidden,),
    }
    if not shape.tied:
        want["lm_head.weight"] = (shape.vocab, shape.hidden)
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    for i in range(shape.layers):
        p = f"model.layers.{i}."
        want |= {
            p + "input_layernorm.weight": (shape.hidden,),
            p + "post_attention_layernorm.weight": (shape.hidden,),
            p + "self_attn.q_proj.weight": (q, shape.hidden),
            p + "self_attn.k_proj.weight": (kv, shape.hidden),
            p + "self_attn.v_proj.weight": (kv, shape.hidden),
            p + "self_attn.o_proj.weight": (shape.hidden, q),
            p + "mlp.gate_proj.weight": (shape.intermediate, shape.hidden),
            p + "mlp.up_proj.weight": (shape.intermediate, shape.hidden),
            p + "mlp.down_proj.weight": (shape.hidden, shape.intermediate),
        }
    for name, dims in want.items():
        got = tensors.get(name)
        if got is None or tuple(got.shape) != dims:
            found = "missing" if got is None else f"shaped {tuple(got.shape)}"
            raise InputError(f"{model_dir}: tensor {name} is {found}, config.json says {dims}.", _NEXT)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items() if k in want}


class _Layer:
    """One decoder layer's weights, transposed once so every projection is `x @ w`; q, k and v in one matrix."""

    def __init__(self, t: dict[str, np.ndarray], i: int) -> None:
        p = f"model.layers.{i}."
        self.ln1 = t[p + "input_layernorm.weight"]
        self.ln2 = t[p + "post_attention_layernorm.weight"]
        attn = [t[p + f"self_attn.{n}_proj.weight"] for n in ("q", "k", "v")]
        self.qkv = np.ascontiguousarray(np.concatenate(attn, axis=0).T)
        self.o = np.ascontiguousarray(t[p + "self_attn.o_proj.weight"].T)
        gate, up = t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"]
        self.gate_up = np.ascontiguousarray(np.concatenate([gate, up], axis=0).T)
        self.down = np.ascontiguousarray(t[p + "mlp.down_proj.weight"].T)


class KVCache:
    """Keys and values of every layer, slot t for token t of the left-padded rows; `valid` marks the real ones."""

    def __init__(self, shape: LlamaShape, rows: int, slots: int) -> None:
        dims = (rows, shape.kv_heads, slots, shape.head_dim)
        self.k = [np.zeros(dims, np.float32) for _ in range(shape.layers)]
        self.v = [np.zeros(dims, np.float32) for _ in range(shape.layers)]
        self.valid = np.zeros((rows, slots), dtype=bool)
        self.length = 0
        self.next_pos = np.zeros(rows, dtype=np.int64)

    def keep(self, rows: np.ndarray) -> None:
        """Only these rows go on (the others have ended): later steps compute nothing for the rest."""
        self.k = [k[rows] for k in self.k]
        self.v = [v[rows] for v in self.v]
        self.valid, self.next_pos = self.valid[rows], self.next_pos[rows]


class LlamaNumpy:
    """LlamaForCausalLM's forward pass in float32 numpy (transformers' modeling_llama.py, eager attention)."""

    def __init__(self, model_dir: Path) -> None:
        self.shape = s = read_shape(model_dir)
        t = _weights(model_dir, s)
        self.embed = t["model.embed_tokens.weight"]
        self.norm = t["model.norm.weight"]
        self.lm_head = np.ascontiguousarray((t["model.embed_tokens.weight"] if s.tied else t["lm_head.weight"]).T)
        self.layers = [_Layer(t, i) for i in range(s.layers)]
        exponent = np.arange(0, s.head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(s.head_dim)
        self.inv_freq = (np.float32(1.0) / (np.float32(s.theta) ** exponent)).astype(np.float32)
        self.scale = np.float32(s.head_dim**-0.5)

    def _rms(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        var = np.mean(x * x, axis=-1, keepdims=True)
        return w * (x / np.sqrt(var + np.float32(self.shape.eps)))

    def _rope(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        freqs = pos[..., None].astype(np.float32) * self.inv_freq
        emb = np.concatenate([freqs, freqs], axis=-1)
        return np.cos(emb)[:, None], np.sin(emb)[:, None]  # (rows, 1, tokens, head_dim): broadcast over heads

    @staticmethod
    def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        half = x.shape[-1] // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rotated * sin

    def _attend(self, layer: _Layer, h: np.ndarray, cache: KVCache, li: int, start: int, bias: np.ndarray, rope):
        """Attention for h (rows * n, hidden): projections as one 2-D product each (a 3-D one is a loop of
        row-vector products in numpy, 2x slower), heads and cache in (rows, heads, slots, head_dim)."""
        s = self.shape
        rows, n = cache.valid.shape[0], h.shape[0] // cache.valid.shape[0]
        qkv = h @ layer.qkv
        q_w, kv_w = s.heads * s.head_dim, s.kv_heads * s.head_dim
        q = qkv[..., :q_w].reshape(rows, n, s.heads, s.head_dim).transpose(0, 2, 1, 3)
        k = qkv[..., q_w : q_w + kv_w].reshape(rows, n, s.kv_heads, s.head_dim).transpose(0, 2, 1, 3)
        v = qkv[..., q_w + kv_w :].reshape(rows, n, s.kv_heads, s.head_dim).transpose(0, 2, 1, 3)
        cos, sin = rope
        q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        end = start + n
        cache.k[li][:, :, start:end] = k
        cache.v[li][:, :, start:end] = v
        keys, values = cache.k[li][:, :, :end], cache.v[li][:, :, :end]
        group = s.heads // s.kv_heads
        qg = q.reshape(rows, s.kv_heads, group, n, s.head_dim)
        scores = (qg @ keys[:, :, None].swapaxes(-1, -2)) * self.scale + bias  # (rows, kv, group, n, end)
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        out = (scores @ values[:, :, None]).reshape(rows, s.heads, n, s.head_dim)
        return out.transpose(0, 2, 1, 3).reshape(rows * n, q_w) @ layer.o

    def _forward(self, ids: np.ndarray, pos: np.ndarray, cache: KVCache) -> np.ndarray:
        """Hidden states (before the final norm) for `ids` (rows, n) at slots cache.length.., attending to every
        earlier real slot."""
        n, start = ids.shape[1], cache.length
        end = start + n
        visible = cache.valid[:, None, :end]  # (rows, 1, end)
        causal = np.arange(end)[None, :] <= np.arange(start, end)[:, None]  # (n, end)
        bias = np.where(visible & causal[None], np.float32(0), _MASKED)[:, None, None]  # (rows, 1, 1, n, end)
        rope = self._rope(pos)
        x = self.embed[ids.reshape(-1)]  # (rows * n, hidden)
        inter = self.shape.intermediate
        for li, layer in enumerate(self.layers):
            x = x + self._attend(layer, self._rms(x, layer.ln1), cache, li, start, bias, rope)
            gu = self._rms(x, layer.ln2) @ layer.gate_up
            gate = gu[:, :inter]
            x = x + ((gate / (np.float32(1) + np.exp(-gate))) * gu[:, inter:]) @ layer.down
        cache.length = end
        return x.reshape(ids.shape[0], n, -1)

    def prefill(self, prompts: Sequence[np.ndarray], max_new: int) -> tuple[np.ndarray, KVCache]:
        """The last prompt token's logits of each row (left-padded as transformers pads), and the cache after it."""
        width = max(len(p) for p in prompts)
        ids = np.full((len(prompts), width), self.shape.pad or 0, dtype=np.int64)
        mask = np.zeros((len(prompts), width), dtype=bool)
        for row, p in enumerate(prompts):
            ids[row, width - len(p) :] = p
            mask[row, width - len(p) :] = True
        cache = KVCache(self.shape, len(prompts), width + max_new)
        cache.valid[:, :width] = mask
        pos = np.where(mask, np.cumsum(mask, axis=1) - 1, 0)
        cache.next_pos = mask.sum(axis=1).astype(np.int64)
        hidden = self._forward(ids, pos, cache)
        return self._rms(hidden[:, -1], self.norm) @ self.lm_head, cache

    def step(self, tokens: np.ndarray, cache: KVCache) -> np.ndarray:
        """The logits after one more token per row."""
        cache.valid[:, cache.length] = True
        pos = cache.next_pos[:, None]
        cache.next_pos = cache.next_pos + 1
        hidden = self._forward(tokens[:, None].astype(np.int64), pos, cache)
        return self._rms(hidden[:, -1], self.norm) @ self.lm_head


def greedy(
    model: LlamaNumpy,
    prompts: Sequence[np.ndarray],
    max_tokens: Sequence[int],
    *,
    eos: int | None,
    on_first: Callable[[list[int]], None] | None = None,
    on_done: Callable[[list[tuple[int, np.ndarray]]], None] | None = None,
    stop: Callable[[], bool] | None = None,
    keep_logits: bool = False,
) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Greedy tokens per prompt, ending at EOS (never the first token, as min_new_tokens=1) or its max_tokens.

    `on_first` gets every row's first token; `on_done` each (row, tokens) as the row ends, so a short answer is
    reported at its end, not its batch's. A row that ends stops being computed: the others' numbers do not change.
    With keep_logits, also every step's logits per row (before the EOS ban), for checking against transformers.
    """
    n = len(prompts)
    limit = [max(1, int(m)) for m in max_tokens]
    logits, cache = model.prefill(prompts, max(limit))
    out: list[list[int]] = [[] for _ in range(n)]
    kept: list[list[np.ndarray]] = [[] for _ in range(n)]
    rows = np.arange(n)
    first = True
    while rows.size:
        if keep_logits:
            for i, r in enumerate(rows.tolist()):
                kept[r].append(logits[i].copy())
        if first and eos is not None:
            logits[:, eos] = -np.inf
        tokens = logits.argmax(axis=-1)
        ended = []
        for i, r in enumerate(rows.tolist()):
            out[r].append(int(tokens[i]))
            if (eos is not None and tokens[i] == eos) or len(out[r]) >= limit[r]:
                ended.append(i)
        if first and on_first is not None:
            on_first([int(t) for t in tokens])
        first = False
        if ended:
            if on_done is not None:
                on_done([(int(rows[i]), np.asarray(out[rows[i]], dtype=np.int32)) for i in ended])
            going = np.setdiff1d(np.arange(rows.size), ended)
            rows, tokens = rows[going], tokens[going]
            if rows.size:
                cache.keep(going)
        if not rows.size:
            break
        if stop is not None and stop():  # Ctrl-C or a failure: the rows so far are answered, as generate() does
            if on_done is not None:
                on_done([(int(r), np.asarray(out[r], dtype=np.int32)) for r in rows.tolist()])
            break
        logits = model.step(tokens, cache)
    return [np.asarray(o, dtype=np.int32) for o in out], kept


_BLAS_THREADS: list[int] = []  # set once per process: see limit_blas_threads
_BLAS_LOCK = threading.Lock()


def limit_blas_threads() -> int:
    """numpy's BLAS to REPRO_CPU_THREADS threads (default 1), once per process, and the number set.

    The demo's matrices are tiny: on a busy 2-core VM a 64x64 by 64x983 product took 8 ms with OpenBLAS's
    threads and 0.07 ms with one; its spinning threads also fight LoadGen's for the cores (as torch's did).
    Only once: OpenBLAS's thread count is not to be changed while another backend's worker (a tune's previous
    probe) may still be inside a product."""
    with _BLAS_LOCK:
        if not _BLAS_THREADS:
            from threadpoolctl import threadpool_limits

            from repro.run.backends.hf import cpu_threads

            threads = cpu_threads()
            threadpool_limits(limits=threads, user_api="blas")
            _BLAS_THREADS.append(threads)
        return _BLAS_THREADS[0]


class NumpyBackend(BatchQueueBackend):
    name = "numpy"

    def __init__(self, model_dir: Path, *, batch_size: int = 64) -> None:
        super().__init__(batch_size)
        from repro.run.backends.hf import check_model_dir

        check_model_dir(model_dir)
        self.model_dir = Path(model_dir)
        self.model: LlamaNumpy | None = None
        self.threads: int | None = None

    def load(self) -> None:
        self.threads = limit_blas_threads()
        self.model = LlamaNumpy(self.model_dir)

    def start(self, sink) -> None:
        if self.model is None:
            self.load()
        super().start(sink)

    def _generate(self, batch: list[Request]) -> None:
        assert self.sink is not None and self.model is not None
        sink = self.sink

        def first(tokens: list[int]) -> None:
            sink.first_tokens([(r.id, t) for r, t in zip(batch, tokens, strict=True)])

        def done(rows: list[tuple[int, np.ndarray]]) -> None:
            sink.completed([(batch[row].id, toks) for row, toks in rows])

        greedy(
            self.model,
            [r.input_ids for r in batch],
            [r.max_tokens for r in batch],
            eos=self.model.shape.eos,
            on_first=first,
            on_done=done,
            stop=self._stopping.is_set,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model_dir": str(self.model_dir),
            "device": "cpu",
            "devices": ["cpu"],
            "batch_size": self.batch_size,
            "runtime": f"numpy {np.__version__}, float32",
            "threads": self.threads,
            "note": "runs on the CPU wherever it is: a GPU on this machine, if any, is not used",
        }


def create(ctx: BackendContext) -> NumpyBackend:
    if ctx.model_dir is None:
        raise InputError("The numpy backend needs a model folder.", "`repro setup`")
    return NumpyBackend(ctx.model_dir)
