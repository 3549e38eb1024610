"""`repro setup`: model and dataset into the workspace, each file verified and recorded in the ledger.

Plan first (hub metadata doubles as the access check, then the disk check), then fetch file by file:
a file that verifies is kept, a partial one is resumed, a bad checksum is fetched again. The dataset
comes from MLPerf's published pickles ('fetch'), or is rebuilt from the raw OpenOrca parquet the way
processorca.py does ('rebuild'); 'both' does both and compares their checksums.
"""

from __future__ import annotations

import errno
import hashlib
import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repro.core.clock import now_iso
from repro.core.errors import InputError, Interrupted, ReproError, StepFailed, stop_signal
from repro.core.fsutil import confined, sha256_file
from repro.core.ledger import Artifact, Ledger
from repro.core.recipes import Recipe
from repro.core.secrets import redact_url
from repro.core.steplock import step_lock
from repro.core.steps import StepOutcome, StepStatus
from repro.core.workspace import Workspace
from repro.setup import hub, pins

STEP = "setup"
DatasetSource = Literal["fetch", "rebuild", "both"]
Pinned = dict[str, tuple[Path, str]]  # role -> (file, the SHA-256 it must have to be unpickled)


@dataclass
class PlanRow:
    what: str
    source: str
    dest: Path
    size: int | None
    action: str

    def __post_init__(self) -> None:
        self.source = redact_url(self.source)  # shown and stored: a recipe URL or HF_ENDPOINT may carry user:password@

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "source": self.source,
            "dest": str(self.dest),
            "size": self.size,
            "action": self.action,
        }


@dataclass
class SetupPlan:
    recipe: Recipe
    ws: Workspace
    model: hub.ModelPlan | None
    rows: list[PlanRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def download_bytes(self) -> int:
        return sum(r.size or 0 for r in self.rows if r.action not in ("keep", "place", "verify"))  # placed: not ours


STEP_CMD = "repro setup"


def model_dir(ws: Workspace, recipe: Recipe) -> Path:
    """models/<last part of the repo id>: the schema holds the id to names, confined() to the folder."""
    return confined(ws.models, ws.models / recipe.model.repo_id.split("/")[-1], step=STEP_CMD)


def data_dir(ws: Workspace, recipe: Recipe) -> Path:
    return confined(ws.data, ws.data / recipe.dataset.name, step=STEP_CMD)


def dataset_file(ws: Workspace, recipe: Recipe, fname: str) -> Path:
    """Where a dataset file named by the recipe is placed: inside data/<dataset>/, never a link."""
    return confined(ws.data, data_dir(ws, recipe) / fname, step=STEP_CMD)


def prepared_dir(ws: Workspace, recipe: Recipe) -> Path:
    return confined(ws.preprocessed, ws.preprocessed / recipe.dataset.name, step=STEP_CMD)


def raw_dir(ws: Workspace, recipe: Recipe) -> Path:
    """data/raw/<repo>/, where a rebuild's raw parquet goes."""
    src = recipe.dataset.raw
    assert src is not None
    return confined(ws.data, ws.data / "raw" / src.repo.split("/")[-1], step=STEP_CMD)


def inputs_hash(recipe: Recipe, source: str) -> str:
    blob = json.dumps(
        {
            "model": recipe.model.model_dump(mode="json"),
            "dataset": recipe.dataset.model_dump(mode="json"),
            "source": source,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _local_action(dest: Path, size: int | None) -> str:
    part = hub.incomplete_path(dest)
    if dest.is_file() and (size is None or dest.stat().st_size == size):
        return "keep"
    if part.is_file():
        return f"resume from {part.stat().st_size:,} bytes"
    return "download"


def _url_size(url: str) -> int | None:
    """Content-Length from a HEAD without credentials (the HF token is never sent off the hub), bounded in time and
    capped: a dataset URL's own claim of more than transfer.MAX_UNLISTED_BYTES is not believed."""
    import os

    from repro.setup.transfer import MAX_UNLISTED_BYTES, content_length

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return None
    size = content_length(url)
    return size if size is not None and 0 <= size <= MAX_UNLISTED_BYTES else None


def plan_setup(recipe: Recipe, ws: Workspace, token: str | None, source: DatasetSource = "fetch") -> SetupPlan:
    model = hub.plan_model(recipe.model.repo_id, recipe.model.revision, recipe.model.allow_patterns, token)
    plan = SetupPlan(recipe, ws, model)
    mdir = model_dir(ws, recipe)
    for f in model.files:
        plan.rows.append(
            PlanRow(
                f"model {f.path}",
                f"{hub.shown_endpoint()}/{model.repo_id}/resolve/{model.commit}/{f.path}",
                hub.inside(mdir, f),
                f.size,
                _local_action(mdir / f.path, f.size),
            )
        )
    plan.rows += _dataset_rows(recipe, ws, source, _fetched_row)
    plan.rows += _local_rows(recipe, ws, source)
    plan.notes += official_source_notes(recipe, ws, source) + (
        pins.unverified_notes(recipe) if source != "rebuild" else []
    )
    return plan


def _fetched_row(recipe: Recipe, role: str, fname: str, dest: Path) -> PlanRow:
    """A pinned dataset file: from its URL (size asked with a HEAD), or placed by the R2 downloader and checked."""
    url = recipe.dataset.urls.get(role)
    if not url and role in recipe.dataset.r2_uri:
        return PlanRow(
            f"dataset {role} (placed by the R2 downloader, checked)",
            recipe.dataset.r2_uri[role],
            dest,
            recipe.dataset.size_bytes.get(role),
            "verify" if dest.is_file() else "place",
        )
    if not url:
        raise InputError(
            f"recipe {recipe.name}: dataset.urls has no '{role}' entry to fetch {fname} from.",
            "`repro setup --dataset-source rebuild`, or add the URL to the recipe",
        )
    return PlanRow(f"dataset {role}", url, dest, _url_size(url), _local_action(dest, None))


def _recipe_row(recipe: Recipe, role: str, fname: str, dest: Path) -> PlanRow:
    """A pinned dataset file as the recipe alone describes it (no HEAD: the network is not asked)."""
    if role not in recipe.dataset.urls and role in recipe.dataset.r2_uri:
        return _fetched_row(recipe, role, fname, dest)
    url = recipe.dataset.urls.get(role, "(no URL in the recipe)")
    return PlanRow(f"dataset {role}", url, dest, None, _local_action(dest, None))


def _dataset_rows(
    recipe: Recipe, ws: Workspace, source: DatasetSource, row: Callable[[Recipe, str, str, Path], PlanRow]
) -> list[PlanRow]:
    """One row per dataset file the fetch path needs; an unpinned file is derived or refused, never fetched."""
    if source not in ("fetch", "both"):
        return []
    rows = []
    for role, fname in recipe.dataset.files.items():
        dest = dataset_file(ws, recipe, fname)
        rows.append(row(recipe, role, fname, dest) if pins.has_pin(recipe, role) else _derived_row(recipe, role, dest))
    return rows


def pinned_sha256(recipe: Recipe, role: str) -> str | None:
    """The recipe's published SHA-256 for a dataset file, or None (setup/pins.py has every pin a file may have)."""
    return pins.published_sha256(recipe, role)


def _derived_row(recipe: Recipe, role: str, dest: Path) -> PlanRow:
    """An unpinned file is not downloaded: the calibration set is derived from the pinned sampled set where the
    benchmark draws it so (processorca's rule); any other unpinned file is refused when setup runs (check_pins)."""
    derived = role == "calibration" and recipe.dataset.calibration_from_sampled
    what = "derived from the sampled set (processorca.py, seed 12345)" if derived else "refused"
    return PlanRow(f"dataset {role} (no published SHA-256: not downloaded)", what, dest, None, what.split(" ")[0])


def check_pins(recipe: Recipe, source: DatasetSource) -> None:
    """Before anything is downloaded: a fetched sampled set must have a published checksum, since it is unpickled;
    so must a calibration file the benchmark does not draw from the sampled set; a rebuild needs raw data."""
    ds = recipe.dataset
    if source in ("rebuild", "both") and ds.raw is None:
        raise InputError(
            f"recipe {recipe.name}: benchmark {recipe.benchmark} publishes no raw data to rebuild {ds.name} from "
            "(MLCommons publishes only the processed set); nothing was downloaded.",
            "`repro setup --dataset-source fetch`",
        )
    if source == "rebuild":
        return
    unpinned = [
        role
        for role in ds.files
        if not pins.has_pin(recipe, role) and not (role == "calibration" and ds.calibration_from_sampled)
    ]
    if not unpinned:
        return
    if ds.raw is None:
        fname = ", ".join(ds.files[r] for r in unpinned)
        fetches = " and ".join(
            f"`bash <(curl -s {R2_DOWNLOADER}) {uri}`"
            for uri in dict.fromkeys(ds.r2_uri[r] for r in unpinned if r in ds.r2_uri)
        )
        raise InputError(
            f"recipe {recipe.name}: no checksum of {fname} is published (neither in the benchmark file nor as an "
            "MLCommons md5 list it names), and repro unpickles only files a pinned checksum covers (a pickle can "
            "run code); nothing was downloaded.",
            f"fetch with {fetches or 'its published source'} (md5-checked), then {pin_snippet(recipe, unpinned)}",
        )
    if pins.has_pin(recipe, "sampled"):
        return
    fname = recipe.dataset.files.get("sampled", "the sampled set")
    raise InputError(
        f"recipe {recipe.name}: dataset.sha256.sampled is not pinned, so {fname} would be unpickled unchecked (a "
        "pickle can run code); nothing was downloaded.",
        "`repro setup --dataset-source rebuild` (rebuilds it from the raw OpenOrca parquet), or "
        + pin_snippet(recipe, ["sampled"]),
    )


def pin_snippet(recipe: Recipe, roles: list[str]) -> str:
    """What to write, where, to pin files by hand: the whole copy (its name is its file's name) with every role."""
    from repro.core.recipes import is_registry_recipe, recipes_dir

    copy = f"{recipe.name}-pinned"
    where = f"{recipes_dir() / recipe.name}.yaml" if is_registry_recipe(recipe) else "the recipe file"
    pinned = ", ".join(f"{r}: <sha256sum of {recipe.dataset.files[r]}>" for r in roles)
    return (
        f"copy {where} to {copy}.yaml, change its line 'name: {recipe.name}' to 'name: {copy}', add the line "
        f"'dataset: {{sha256: {{{pinned}}}}}', then `repro setup --recipe {copy}.yaml`"
    )


R2_DOWNLOADER = "https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/mlc-r2-downloader.sh"


def official_source_notes(recipe: Recipe, ws: Workspace, source: DatasetSource) -> list[str]:
    """The MLCommons download beside the pinned mirror: files placed in the data folder are checked, not fetched."""
    uris = list(dict.fromkeys(recipe.dataset.r2_uri.values()))  # the benchmark file's R2 metadata URIs
    if not uris or source == "rebuild":
        return []
    folder = data_dir(ws, recipe)
    runs = " and ".join(f"`bash <(curl -s {R2_DOWNLOADER}) -d {folder} {uri}`" for uri in uris)
    return [
        f"The dataset also comes from MLCommons' own source (the benchmark's README): run {runs} (it leaves "
        f"MLCommons' .md5 list beside the files), `gzip -dk` any .pkl.gz there; `repro setup` then checks each file "
        "against every checksum the benchmark pins and fetches it only when it does not match"
        + (
            " (a calibration file without a published sha256 is never read: its rows are derived from the sampled set)."
            if recipe.dataset.calibration_from_sampled
            else "."
        )
    ]


def _local_rows(recipe: Recipe, ws: Workspace, source: DatasetSource) -> list[PlanRow]:
    """The rows every plan shares: the raw parquet for a rebuild, and the prepared arrays made locally."""
    rows = []
    src = recipe.dataset.raw
    if source in ("rebuild", "both") and src is not None:
        dest = confined(ws.data, raw_dir(ws, recipe) / src.file, step=STEP_CMD)
        url = f"{hub.shown_endpoint()}/datasets/{src.repo}/resolve/{src.revision}/{src.file}"
        rows.append(PlanRow(f"raw data {src.file}", url, dest, None, _local_action(dest, None)))
    prepared = prepared_dir(ws, recipe)
    action = "keep" if (prepared / "manifest.json").exists() else "write"
    rows.append(PlanRow("prepared arrays", "made locally from the sampled set", prepared, None, action))
    return rows


def recipe_plan(recipe: Recipe, ws: Workspace, source: DatasetSource, why: str) -> SetupPlan:
    """A dry run's plan from the recipe alone, when the hub cannot be asked: sizes are the recipe's, not the hub's."""
    plan = SetupPlan(recipe, ws, None)
    size_gb = recipe.model.size_gb
    size = int(float(size_gb) * 1e9) if isinstance(size_gb, (int, float)) else None
    mdir = model_dir(ws, recipe)
    plan.rows.append(
        PlanRow(
            f"model {recipe.model.repo_id} ({', '.join(recipe.model.allow_patterns)})",
            f"{hub.shown_endpoint()}/{recipe.model.repo_id}/tree/{recipe.model.revision}",
            mdir,
            size,
            "keep or resume" if mdir.is_dir() else "download",
        )
    )
    plan.rows += _dataset_rows(recipe, ws, source, _recipe_row)
    plan.rows += _local_rows(recipe, ws, source)
    plan.notes += official_source_notes(recipe, ws, source) + (
        pins.unverified_notes(recipe) if source != "rebuild" else []
    )
    plan.notes.append(
        f"The hub was not asked ({why}): this plan comes from the recipe, so the sizes are the recipe's "
        f"(model.size_gb = {size_gb}), dataset sizes are unknown, and the exact file list and revision "
        "are checked when `repro setup` runs."
    )
    return plan


def checksum_policy(recipe: Recipe) -> list[str]:
    """Which files are checked against a published digest, and which only against the one recorded at first download."""
    lines = [f"model files: the size and SHA-256 the hub publishes for {recipe.model.repo_id} at the pinned revision"]
    for role, fname in recipe.dataset.files.items():
        line = pins.policy(recipe, role, fname)
        if line is not None:
            lines.append(line)
        elif role == "calibration" and recipe.dataset.calibration_from_sampled:
            lines.append(
                f"dataset {role} ({fname}): no published checksum, so it is never downloaded or unpickled; its "
                "rows are derived from the pinned sampled set as processorca.py draws them (seed 12345)"
            )
        elif recipe.dataset.raw is not None:
            lines.append(f"dataset {role} ({fname}): no published checksum: refused unless rebuilt from the raw data")
        else:
            lines.append(f"dataset {role} ({fname}): no published checksum: refused until one is pinned in the recipe")
    return lines


def check_disk(plan: SetupPlan) -> tuple[int, int]:
    """Room for everything the recipe will need later (quantized checkpoint, engine) too, minus what is already here."""
    mdir = model_dir(plan.ws, plan.recipe)
    present = hub.present_bytes(mdir, plan.model.files) if plan.model else 0
    need = max(int(plan.recipe.disk_needed_gb * 1e9) - present, plan.download_bytes - present, 0)
    return need, hub.free_bytes(plan.ws.root)


def _ledger_times(ledger: Ledger) -> dict[str, str]:
    rec = ledger.get(STEP)
    return dict(rec.details.get("fetched_at", {})) if rec else {}


def _ledger_pins(ledger: Ledger) -> dict[str, Any]:
    """What the last finished setup verified, role by role (the SHA-256 of the bytes and the pins they met)."""
    rec = ledger.get(STEP)
    pinned = rec.details.get("dataset_pins") if rec is not None and rec.status == "done" else None
    return dict(pinned) if isinstance(pinned, dict) else {}


def _fetch_model(
    plan: SetupPlan, token: str | None, progress: Any, times: dict[str, str]
) -> tuple[list[Artifact], list[dict]]:
    assert plan.model is not None
    mdir = model_dir(plan.ws, plan.recipe)
    artifacts, files = [], []
    for f in plan.model.files:
        result = hub.fetch_file(plan.model, f, mdir, token, progress)
        key = str(result.path)
        if result.action != "verified" or key not in times:
            times[key] = now_iso()
        sha = f.sha256 or sha256_file(result.path)
        artifacts.append(
            Artifact(
                path=key,
                size=f.size,
                sha256=sha,
                source=f"hf://{plan.model.repo_id}/{f.path}",
                revision=plan.model.commit,
            )
        )
        files.append(
            {
                "path": key,
                "size": f.size,
                "action": result.action,
                "resumed_bytes": result.resumed_bytes,
                "via": result.via,
            }
        )
    return artifacts, files


def _fetch_url(url: str, dest: Path, check: Callable[[Path, Path], pins.Verified], progress: Any) -> tuple[str, Any]:
    """Published dataset file: kept when every pin holds (`check`), else fetched and checked; a second bad download
    is the check's error, naming the sums and their sources."""
    if dest.is_file() and not dest.is_symlink():
        try:
            return "verified", check(dest, dest)
        except InputError:
            pass
    dest.unlink(missing_ok=True)
    part = hub.incomplete_path(dest)
    for attempt in (1, 2):
        size = _url_size(url)
        if size is None:
            raise StepFailed(
                f"{url}: the server did not answer with the file (HEAD failed).",
                "check the network and `dataset.urls` in the recipe, then `repro setup`",
            )
        resumed = hub.stream_to(
            url, dest, expected_size=size, token=None, progress=progress, label=dest.name, hub_headers=False
        )
        try:
            verified = check(part, dest)
        except InputError as exc:
            part.unlink(missing_ok=True)
            if attempt == 2:
                raise StepFailed(f"{exc.message} (after a fresh download from {url})", exc.next_command) from None
            continue
        part.replace(dest)
        return ("refetched" if attempt == 2 else "resumed" if resumed else "downloaded"), verified
    raise AssertionError("unreachable")


def _fetch_dataset(
    recipe: Recipe, ws: Workspace, progress: Any, times: dict[str, str], recorded: dict[str, Any]
) -> tuple[dict[str, tuple[Path, str, str]], dict[str, pins.Verified]]:
    """The pinned dataset files, each checked against every pin it has (setup/pins.py); an unpinned one is not
    downloaded (see check_pins and _prepare). `recorded`: what the last setup verified, role by role."""
    out, verified = {}, {}
    for role, fname in recipe.dataset.files.items():
        if not pins.has_pin(recipe, role):
            continue
        dest = dataset_file(ws, recipe, fname)
        earlier = recorded.get(role) if isinstance(recorded.get(role), dict) else None

        def check(path: Path, shown: Path, role: str = role, earlier: dict[str, Any] | None = earlier) -> pins.Verified:
            return pins.verify(recipe, role, path, earlier, dest=shown)

        url = recipe.dataset.urls.get(role)
        if url is None:  # published only through the R2 downloader: the file the user placed, checked
            if not (dest.is_file() and not dest.is_symlink()):
                raise InputError(
                    f"{dest}: not there, and benchmark {recipe.benchmark} publishes no direct URL for {fname}.",
                    next(iter(official_source_notes(recipe, ws, "fetch")), "place the file there, then `repro setup`"),
                )
            action, v = "verified", check(dest, dest)
        else:
            action, v = _fetch_url(url, dest, check, progress)
        if action != "verified" or str(dest) not in times:
            times[str(dest)] = now_iso()
        out[role] = (dest, v.sha256, action)
        verified[role] = v
    return out, verified


def _rebuild_dataset(
    recipe: Recipe, ws: Workspace, token: str | None, progress: Any, out_dir: Path, times: dict[str, str]
) -> tuple[Pinned, Artifact]:
    from repro.setup.preprocess import build_from_parquet

    src = recipe.dataset.raw
    assert src is not None  # check_pins refused a rebuild without raw data
    raw = hub.plan_model(src.repo, src.revision, [src.file], token, repo_type="dataset")
    result = hub.fetch_file(raw, raw.files[0], raw_dir(ws, recipe), token, progress)
    times.setdefault(str(result.path), now_iso())
    raw_art = Artifact(
        path=str(result.path),
        size=raw.files[0].size,
        sha256=raw.files[0].sha256 or sha256_file(result.path),
        source=f"hf://datasets/{src.repo}/{src.file}",
        revision=raw.commit,
    )
    built = build_from_parquet(
        result.path,
        model_dir(ws, recipe),
        out_dir,
        n_samples=recipe.dataset.samples,
        calib_size=recipe.dataset.calibration_samples,
    )
    pinned = {}
    for role, p in built.items():
        times[str(p)] = now_iso()
        pinned[role] = (p, sha256_file(p))  # written by this run a moment ago: its own pin
    return pinned, raw_art


def _prepare(recipe: Recipe, ws: Workspace, files: Pinned) -> tuple[list[Artifact], dict[str, Any]]:
    """Prepared arrays for the harness, plus the calibration parquet (`text` column) the quantizer reads: converted
    once from the pinned pickles in a confined child (repro/setup/prepare.py); without a pinned calibration file
    the calibration rows are drawn from the sampled set as processorca.py draws them."""
    from repro.setup.prepare import prepare_dataset

    return prepare_dataset(recipe, prepared_dir(ws, recipe), files)


def _demo(recipe: Recipe, ws: Workspace, dry_run: bool) -> StepOutcome:
    if dry_run:
        return StepOutcome(
            step=STEP,
            status="dry-run",
            summary="demo: would build the tiny Llama model and the built-in "
            f"OpenOrca sample locally under {ws.root} (no downloads)",
            details={"demo": True, "label": "demo", "workspace": str(ws.root)},
        )
    from repro.setup.demo import prepare_demo

    ledger = Ledger.load(ws.ledger_path)
    h = inputs_hash(recipe, "demo")
    ledger.start(STEP, h, recipe=recipe.name, recipe_hash=recipe.hash(), label="demo")
    paths = prepare_demo(ws)
    files = [p for key in ("model_dir", "dataset") for p in sorted(Path(paths[key]).rglob("*")) if p.is_file()]
    arts = [Artifact.of(p, source="demo (built locally)", revision="local") for p in files]
    ledger.finish(STEP, arts, label="demo", model_dir=str(paths["model_dir"]), dataset=str(paths["dataset"]))
    return StepOutcome(
        step=STEP,
        status="done",
        summary=f"demo: tiny model and sample dataset ready in {ws.root} (demo, not a reproduction)",
        details={
            "demo": True,
            "label": "demo",
            "model_dir": str(paths["model_dir"]),
            "dataset": str(paths["dataset"]),
            "files": [{"path": a.path, "size": a.size} for a in arts],
        },
    )


def _dry_run_outcome(plan: SetupPlan, need: int, free: int) -> StepOutcome:
    rows = [r.to_json() for r in plan.rows]
    short = " NOT ENOUGH DISK SPACE." if free < need else ""
    whose = "" if plan.model is not None else " (the recipe's size, the hub was not asked)"
    return StepOutcome(
        step=STEP,
        status="dry-run",
        summary=f"would fetch {plan.download_bytes / 1e9:,.2f} GB{whose} for {plan.recipe.name} into {plan.ws.root}; "
        f"{free / 1e9:,.1f} GB free, {need / 1e9:,.1f} GB needed.{short}",
        details={
            "recipe": plan.recipe.name,
            "workspace": str(plan.ws.root),
            "revision": plan.model.commit if plan.model else None,
            "download_bytes": plan.download_bytes,
            "free_bytes": free,
            "needed_bytes": need,
            "files": rows,
            "sizes_from": "hub" if plan.model is not None else "recipe",
            "notes": plan.notes,
            "checks": checksum_policy(plan.recipe),
        },
    )


def run_setup(
    recipe: Recipe,
    ws: Workspace,
    *,
    dry_run: bool = False,
    yes: bool = True,
    force: bool = False,
    source: DatasetSource = "fetch",
    progress: Callable[[], ContextManager[Any]] | None = None,
    confirm: Callable[[str], bool] | None = None,
) -> StepOutcome:
    if recipe.demo:
        return _demo(recipe, ws, dry_run)
    if recipe.reference_only:
        raise InputError(
            f"recipe {recipe.name} is reference-only (a published system nobody runs through repro).",
            "`repro recipes list` and pick a runnable recipe",
        )
    token = hub.get_token()
    if dry_run:
        try:
            plan = plan_setup(recipe, ws, token, source)
        except hub.UnsafeListing:
            raise
        except ReproError as exc:
            plan = recipe_plan(recipe, ws, source, exc.message.rstrip("."))
        try:
            check_pins(recipe, source)
        except InputError as exc:
            plan.notes.append(f"{exc.message} Next: {exc.next_command}")
        need, free = check_disk(plan)
        return _dry_run_outcome(plan, need, free)
    plan = plan_setup(recipe, ws, token, source)
    need, free = check_disk(plan)
    if free < need:
        raise ReproError(
            f"Not enough free disk space under {ws.root}: {free / 1e9:,.1f} GB free, {need / 1e9:,.1f} GB needed "
            f"(recipe {recipe.name} disk_needed_gb={recipe.disk_needed_gb:g}, less what is already there).",
            "free space or use `--workspace` on a larger disk (e.g. the local NVMe), then `repro setup`",
        )
    check_pins(recipe, source)
    ask = not yes and confirm is not None and sys.stdin.isatty()
    if ask and confirm is not None and not confirm(f"Download {plan.download_bytes / 1e9:,.1f} GB into {ws.root}?"):
        return StepOutcome(step=STEP, status="skipped", summary="cancelled before downloading", details={})
    ws.ensure()
    with step_lock(ws.root, STEP, "`repro setup`"):
        return _fetch_all(recipe, ws, plan, token, source, force, progress)


def _fetch_all(
    recipe: Recipe,
    ws: Workspace,
    plan: SetupPlan,
    token: str | None,
    source: DatasetSource,
    force: bool,
    progress: Callable[[], ContextManager[Any]] | None,
) -> StepOutcome:
    """Everything setup writes, under the workspace's setup lock: model, dataset, prepared arrays, ledger."""
    ledger = Ledger.load(ws.ledger_path)
    h = inputs_hash(recipe, source)
    was_done = (rec := ledger.get(STEP)) is not None and rec.status == "done" and rec.inputs_hash == h and not force
    times = _ledger_times(ledger)
    recorded = _ledger_pins(ledger)
    ledger.start(STEP, h, recipe=recipe.name, recipe_hash=recipe.hash(), source=source, fetched_at=times)
    try:
        with (progress or nullcontext)() as bars:
            arts, files = _fetch_model(plan, token, bars, times)
            details: dict[str, Any] = {
                "recipe": recipe.name,
                "repo_id": recipe.model.repo_id,
                "revision": plan.model.commit if plan.model is not None else None,
                "model_dir": str(model_dir(ws, recipe)),
                "dataset_source": source,
            }
            fetched: dict[str, tuple[Path, str, str]] = {}
            if source in ("fetch", "both"):
                fetched, verified = _fetch_dataset(recipe, ws, bars, times, recorded)
                details["dataset_pins"] = {role: v.to_json() for role, v in verified.items()}
                if notes := pins.unverified_notes(recipe):
                    details["notes"] = notes
                for role, (p, sha, action) in fetched.items():
                    arts.append(
                        Artifact(
                            path=str(p),
                            size=p.stat().st_size,
                            sha256=sha,
                            source=recipe.dataset.urls.get(role) or recipe.dataset.r2_uri.get(role, "placed by hand"),
                        )
                    )
                    files.append({"path": str(p), "size": p.stat().st_size, "action": action, "resumed_bytes": 0})
            dataset_files: Pinned = {role: (v[0], v[1]) for role, v in fetched.items()}
            if source in ("rebuild", "both"):
                out_dir = dataset_file(ws, recipe, "rebuilt") if source == "both" else data_dir(ws, recipe)
                built, raw_art = _rebuild_dataset(recipe, ws, token, bars, out_dir, times)
                arts.append(raw_art)
                arts += [
                    Artifact.of(
                        p,
                        source=f"rebuilt from {(raw_art.source or '').rsplit('/', 1)[-1]} (processorca.py)",
                        revision=raw_art.revision,
                    )
                    for p, _ in built.values()
                ]
                files += [
                    {"path": str(p), "size": p.stat().st_size, "action": "rebuilt", "resumed_bytes": 0}
                    for p, _ in built.values()
                ]
                if source == "both":
                    details["comparison"] = compare_sources(dataset_files, built)
                else:
                    dataset_files = built
        prepared_arts, details["conversion"] = _prepare(recipe, ws, dataset_files)
        arts += prepared_arts
        details.update(
            prepared_dir=str(prepared_dir(ws, recipe)), files=files, fetched_at=times, checks=checksum_policy(recipe)
        )
        ledger.finish(STEP, arts, **details)
    except KeyboardInterrupt as stop:
        by = "the user" if (sig := stop_signal(stop)) == "SIGINT" else sig
        _record_failure(ledger, f"interrupted by {by}; partial files are kept as *.incomplete", signal=sig)
        raise Interrupted(
            "Interrupted; partial downloads are kept as *.incomplete and resume on the next run.", "`repro setup`"
        ) from None
    except OSError as exc:
        _record_failure(ledger, f"{exc.strerror or exc} ({exc.filename or ''})")
        if exc.errno == errno.ENOSPC:
            raise ReproError(
                f"The disk filled up while writing {exc.filename or ws.root}; the partial file is kept as "
                "*.incomplete.",
                "free space (or use `--workspace` on a larger disk), then `repro setup` resumes",
            ) from None
        raise
    except ReproError as exc:
        _record_failure(ledger, exc.message)
        raise
    except BaseException as exc:
        _record_failure(ledger, f"{type(exc).__name__}: {exc}")
        raise
    mismatch = details.get("comparison", {}).get("same_content") is False
    fresh = [f for f in files if f["action"] not in ("verified",)]
    status: StepStatus = "failed" if mismatch else ("skipped" if was_done and not fresh else "done")
    total = sum(f["size"] for f in files)
    revision = plan.model.commit if plan.model is not None else "unknown"
    summary = (
        f"{len(files)} files ({total / 1e9:,.2f} GB) verified in {ws.root}; revision {revision[:12]}; "
        f"{len(fresh)} fetched or rebuilt this run"
    )
    if mismatch:
        summary = "the rebuilt dataset differs from the published one: " + summary
    return StepOutcome(step=STEP, status=status, summary=summary, details=details)


def _record_failure(ledger: Ledger, error: str, *, signal: str | None = None) -> None:
    """Best effort: on a full disk even the ledger cannot be written, and the original error matters more."""
    with suppress(OSError):
        ledger.fail(STEP, error, signal=signal)


def compare_sources(fetched: Pinned, rebuilt: Pinned) -> dict[str, Any]:
    """Same file bytes, and (independently of pandas' pickle format) same prompts, tokens and references."""
    from repro.setup.prepare import content_digest

    roles = {}
    for role in sorted(set(fetched) & set(rebuilt)):
        roles[role] = {
            "fetched_sha256": fetched[role][1],
            "rebuilt_sha256": rebuilt[role][1],
            "fetched_content_sha256": content_digest(*fetched[role]),
            "rebuilt_content_sha256": content_digest(*rebuilt[role]),
        }
    return {
        "roles": roles,
        "same_file": all(r["fetched_sha256"] == r["rebuilt_sha256"] for r in roles.values()),
        "same_content": all(r["fetched_content_sha256"] == r["rebuilt_content_sha256"] for r in roles.values()),
    }
