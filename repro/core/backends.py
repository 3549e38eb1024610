"""The backends `repro run` can drive, as data: one registration per backend.

The recipe schema's `backend:` choices, the CLI's `--backend` choices and every question the run path asks
about a backend (does it load the model, start servers, stream, need a tokenizer?) read this one list, so a
new backend is its module under `repro/run/backends/` (with a `create(ctx)` function) plus one line here.
"""

from __future__ import annotations

from dataclasses import dataclass

from repro.core.errors import InputError


@dataclass(frozen=True)
class BackendSpec:
    name: str
    """What `--backend` takes; also the module `repro.run.backends.<name>` that builds it."""
    recipe_names: tuple[str, ...]
    """How recipes spell it (`backend:` in recipes/*.yaml)."""
    label: str | None = None
    """Every run it drives carries this label (a simulator never reproduces anything)."""
    needs_model: bool = False
    """Loads the model folder on this VM (the run checks the folder before starting)."""
    needs_tokenizer: bool = False
    """Turns text answers back into token ids with the model's tokenizer."""
    starts_servers: bool = False
    """repro starts inference servers for it, unless the user names running ones (--endpoint)."""
    streams: bool = False
    """Streams tokens in the Server scenario, so first-token times are the server's."""
    returns_ids: bool = True
    """Hands back token ids itself (False: text, re-tokenized)."""
    options: tuple[str, ...] = ()
    """Run options only this backend takes (RunOptions field names)."""
    requires: tuple[str, ...] = ()
    """Optional packages it imports (an extra's, core/extras.py): checked before a run writes anything."""

    def check_installed(self) -> None:
        """Raise ModuleNotFoundError for the first required package that is missing (explained as its pip extra)."""
        import importlib.util

        for module in self.requires:
            if importlib.util.find_spec(module) is None:
                raise ModuleNotFoundError(f"No module named '{module}'", name=module)


BACKENDS: tuple[BackendSpec, ...] = (
    BackendSpec("sim", ("sim",), label="simulated", options=("sim_rate",)),
    BackendSpec("numpy", ("numpy",), needs_model=True),
    BackendSpec("hf", ("hf",), needs_model=True, requires=("torch", "transformers")),
    BackendSpec(
        "trtllm",
        ("trtllm-serve-pytorch", "trtllm-engine"),
        needs_tokenizer=True,
        starts_servers=True,
        streams=True,
        returns_ids=False,
        options=("endpoints", "served_model"),
    ),
)

NAMES: tuple[str, ...] = tuple(b.name for b in BACKENDS)
RECIPE_BACKENDS: tuple[str, ...] = tuple(n for b in BACKENDS for n in b.recipe_names)
CHOICES = "|".join(NAMES)


def backend_spec(name: str) -> BackendSpec:
    """The registration for a `--backend` name; an unknown one is a usage error naming the choices."""
    for b in BACKENDS:
        if b.name == name:
            return b
    raise InputError(
        f"Unknown backend '{name}'; choose one of {', '.join(NAMES)}.", "`repro run offline --backend sim`"
    )


def recipe_backend(recipe_backend_name: str) -> BackendSpec:
    """The backend a recipe's `backend:` value runs on."""
    for b in BACKENDS:
        if recipe_backend_name in b.recipe_names:
            return b
    return backend_spec(recipe_backend_name)
