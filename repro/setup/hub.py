"""Model and file downloads from the hub, resumable across runs and verified against the hub's metadata.

huggingface_hub >= 1.x deletes its temporary file when a download is interrupted, so a Ctrl-C on a 138 GB
model would start over. Here huggingface_hub answers the metadata (listing, sizes, sha256, the HEAD that
resolves a file to its CDN location) and each file streams through repro/setup/transfer.py (the token only on
the hub's own origin, redirects followed by hand, stall and size bounds) into `<file>.incomplete` next to its
destination; the marker survives a crash or Ctrl-C, the next run resumes it with a Range request, and the file is
only renamed into place once its sha256 matches. Xet-backed files go through `hf_hub_download` when hf_xet is
usable (its chunk cache resumes by itself), and over plain HTTP (the hub serves them there too) when it is not
or when the Xet transfer fails.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, cast

from repro.core.errors import InputError, ReproError, StepFailed
from repro.core.secrets import redact_url

INCOMPLETE = ".incomplete"
DEFAULT_ENDPOINT = "https://huggingface.co"


def endpoint() -> str:
    """Read at call time: huggingface_hub freezes HF_ENDPOINT when it is imported."""
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def shown_endpoint() -> str:
    """The endpoint as printed and stored: an HF_ENDPOINT with user:password@ is named without them."""
    return redact_url(endpoint())


def model_page(repo_id: str) -> str:
    return f"{shown_endpoint()}/{repo_id}"


def get_token() -> str | None:
    """HF_TOKEN, else the token `hf auth login` stored; the value never leaves this process except as a header."""
    from huggingface_hub import get_token as hf_get_token

    return hf_get_token()


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    sha256: str | None
    blob_id: str | None

    @property
    def checksum(self) -> str:
        return f"sha256:{self.sha256}" if self.sha256 else f"git-sha1:{self.blob_id}"


@dataclass(frozen=True)
class ModelPlan:
    repo_id: str
    revision: str
    commit: str
    files: list[RemoteFile]
    repo_type: str = "model"

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def _hub_error(exc: BaseException, repo_id: str, revision: str) -> ReproError | None:
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(exc, GatedRepoError) and exc.response is not None and exc.response.status_code == 401:
        return ReproError(
            f"{repo_id} is gated and no Hugging Face token was sent: request access at {model_page(repo_id)} "
            "with your account, then log in here.",
            "`hf auth login` (or set HF_TOKEN), then `repro setup`",
        )
    if isinstance(exc, GatedRepoError):
        return ReproError(
            f"{repo_id} is gated and this Hugging Face account has no access yet: request access at "
            f"{model_page(repo_id)}, then run `repro setup` again.",
            "`repro setup`",
        )
    if isinstance(exc, RevisionNotFoundError):
        return ReproError(
            f"{repo_id} has no revision '{revision}'.", "check `model.revision` in the recipe, then `repro setup`"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return ReproError(
            f"Model '{repo_id}' was not found on {shown_endpoint()} (wrong id, or the token cannot see it).",
            "check `model.repo_id` in the recipe (`repro recipes show`), log in with `hf auth login`, then "
            "`repro setup`",
        )
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            return ReproError(
                "The Hugging Face token was refused (revoked or mistyped).",
                "create a new token, `hf auth login` (or set HF_TOKEN), then `repro setup`",
            )
        return ReproError(f"The hub at {shown_endpoint()} answered HTTP {status} for {repo_id}.", "`repro setup` again")
    return None


def _network_error(exc: BaseException) -> ReproError | None:
    """huggingface_hub's HTTP client (httpx or its httpx2 fork, by version) raises its own transport errors."""
    transport = {
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "TimeoutException",
        "RemoteProtocolError",
        "ReadError",
    }
    if isinstance(exc, ConnectionError) or (
        type(exc).__module__.split(".")[0].startswith("httpx") and type(exc).__name__ in transport
    ):
        return ReproError(
            f"Cannot reach {shown_endpoint()} ({type(exc).__name__}).",
            "check the network (or HF_ENDPOINT), then `repro setup`; finished files are kept",
        )
    return None


def plan_model(
    repo_id: str, revision: str, allow_patterns: list[str], token: str | None, repo_type: str = "model"
) -> ModelPlan:
    """Ask the hub which files match and their sizes and checksums; this is also the access check."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import filter_repo_objects

    from repro.setup.transfer import Limits, deadline

    try:
        with deadline(Limits.from_env(), f"{shown_endpoint()} (listing {repo_id})"):
            info = HfApi(endpoint=endpoint(), token=token).repo_info(
                repo_id, revision=revision, repo_type=repo_type, files_metadata=True
            )
    except ReproError:
        raise
    except Exception as exc:  # noqa: BLE001 - translated below or re-raised
        mapped = _hub_error(exc, repo_id, revision) or _network_error(exc)
        if mapped is None:
            raise
        raise mapped from None
    siblings = {s.rfilename: s for s in (getattr(info, "siblings", None) or [])}
    wanted = sorted(filter_repo_objects(siblings, allow_patterns=allow_patterns))
    for name in wanted:
        check_listed_name(name, repo_id)
    if not wanted:
        raise InputError(
            f"{repo_id}@{revision}: no file matches {allow_patterns}.",
            "check `model.allow_patterns` in the recipe, then `repro setup`",
        )
    files = [
        RemoteFile(p, int(siblings[p].size or 0), getattr(siblings[p].lfs, "sha256", None), siblings[p].blob_id)
        for p in wanted
    ]
    return ModelPlan(repo_id, revision, str(info.sha), files, repo_type)


class UnsafeListing(InputError):
    """The hub listed a file whose name would be written outside the model folder: never planned around."""


def check_listed_name(name: object, repo_id: str) -> str:
    """A file name from a hub listing becomes a path under the model folder: a mirror must not steer it outside."""
    text = name if isinstance(name, str) else ""
    pure = PurePosixPath(text)
    bad = (
        not text
        or "\\" in text
        or "\0" in text
        or pure.is_absolute()
        or PureWindowsPath(text).drive != ""
        or any(part in ("..", ".", "") for part in text.split("/"))
    )
    if bad:
        raise UnsafeListing(
            f"The hub at {shown_endpoint()} lists a file for {repo_id} whose name leaves the model folder: "
            f"{name!r}; nothing was downloaded or deleted.",
            "unset HF_ENDPOINT (or point it at a trusted mirror), then run: repro setup",
        )
    return text


def inside(root: Path, remote: RemoteFile) -> Path:
    """The destination of a listed file, refused when symlinks already on disk would carry it outside root."""
    dest = Path(root) / check_listed_name(remote.path, "this model")
    base = Path(root).resolve()
    if not dest.resolve().is_relative_to(base):
        raise UnsafeListing(
            f"{dest}: resolves outside the model folder {base} (a symlink on the way); nothing was written.",
            "remove that symlink, then run: repro setup",
        )
    return dest


def file_digest(path: Path, remote: RemoteFile, chunk: int = 1 << 20) -> str:
    """The digest the hub publishes for this file: LFS sha256, or the git blob sha1 for small files."""
    h = hashlib.sha256() if remote.sha256 else hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def verify_file(path: Path, remote: RemoteFile) -> bool:
    path = Path(path)
    if not path.is_file() or path.stat().st_size != remote.size:
        return False
    want = remote.sha256 or remote.blob_id
    return want is None or file_digest(path, remote) == want


def incomplete_path(dest: Path) -> Path:
    return dest.with_name(dest.name + INCOMPLETE)


class RichBar:
    """The tqdm subset hf_hub_download and repro's own transfers drive, reporting into one Rich Progress task."""

    def __init__(self, progress: Any, label: str, total: int | None = None, initial: int = 0, **_: Any):
        self.progress, self.n = progress, initial
        self.task = progress.add_task(label, total=total, completed=initial) if progress is not None else None

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.task is not None:
            self.progress.update(self.task, advance=n)

    def close(self) -> None:
        pass

    def __enter__(self) -> RichBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def stream_to(
    url: str,
    dest: Path,
    *,
    expected_size: int,
    token: str | None,
    progress: Any = None,
    label: str | None = None,
    hub_headers: bool = True,
) -> int:
    """Download url into dest's `.incomplete` marker, resuming what an earlier run left; returns bytes resumed.

    The token goes only to the hub's own origin (`hub_headers`), never to a CDN a redirect points at."""
    from repro.setup.transfer import download

    part = incomplete_path(dest)
    try:
        st = os.lstat(part)
        initial = st.st_size if stat.S_ISREG(st.st_mode) and st.st_size <= expected_size else 0
    except FileNotFoundError:
        initial = 0
    bar = RichBar(progress, label or dest.name, total=expected_size, initial=initial)
    return download(
        url,
        part,
        expected_size=expected_size,
        token=token if hub_headers else None,
        hub=endpoint() if hub_headers else None,
        progress=bar.update,
    )


@dataclass
class FileResult:
    path: Path
    remote: RemoteFile
    action: str  # verified | downloaded | resumed | refetched
    resumed_bytes: int = 0
    via: str = "http"  # http | xet | http after a failed Xet transfer (why)


def fetch_file(
    plan: ModelPlan, remote: RemoteFile, dest_dir: Path, token: str | None, progress: Any = None
) -> FileResult:
    """One file: keep it if it verifies, resume a partial, re-fetch once on a checksum mismatch."""
    dest = inside(dest_dir, remote)
    if verify_file(dest, remote):
        return FileResult(dest, remote, "verified")
    dest.unlink(missing_ok=True)
    action = "downloaded"
    for attempt in (1, 2):
        resumed, via = _download_one(plan, remote, dest, token, progress)
        if resumed:
            action = "resumed"
        if verify_file(incomplete_path(dest), remote):
            os.replace(incomplete_path(dest), dest)
            return FileResult(dest, remote, "refetched" if attempt == 2 else action, resumed, via)
        incomplete_path(dest).unlink(missing_ok=True)
    raise StepFailed(
        f"{dest}: checksum still differs from the hub's {remote.checksum} after a fresh download.",
        "`repro setup` again; if it persists, report the file to the model's maintainers",
    )


def _download_one(plan: ModelPlan, remote: RemoteFile, dest: Path, token: str | None, progress: Any) -> tuple[int, str]:
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    url = hf_hub_url(plan.repo_id, remote.path, revision=plan.commit, repo_type=plan.repo_type, endpoint=endpoint())
    from repro.setup.transfer import Limits, deadline

    try:
        with deadline(Limits.from_env(), f"{shown_endpoint()} (metadata of {remote.path})"):
            meta = get_hf_file_metadata(url, token=token)
        if meta.commit_hash and meta.commit_hash != plan.commit:
            raise StepFailed(
                f"{plan.repo_id}/{remote.path}: the hub served commit {meta.commit_hash}, expected {plan.commit}.",
                "`repro setup` again",
            )
        if meta.xet_file_data is not None and _xet_enabled():
            try:
                hf_hub_download(
                    plan.repo_id,
                    remote.path,
                    revision=plan.commit,
                    repo_type=plan.repo_type,
                    local_dir=_root_of(dest, remote),
                    token=token,
                    endpoint=endpoint(),
                    tqdm_class=cast(Any, partial(RichBar, progress, remote.path)),
                )
                os.replace(dest, incomplete_path(dest))
                return 0, "xet"
            except Exception as exc:  # noqa: BLE001 - access errors are raised; a failed Xet transfer falls back
                if _hub_error(exc, plan.repo_id, plan.revision) is not None and _is_access_error(exc):
                    raise
                via = f"http (the Xet transfer failed: {type(exc).__name__})"
        else:
            via = "http"
        resumed = stream_to(
            meta.location, dest, expected_size=remote.size, token=token, progress=progress, label=remote.path
        )
        return resumed, via
    except ReproError:
        raise
    except Exception as exc:  # noqa: BLE001 - translated below or re-raised
        mapped = _hub_error(exc, plan.repo_id, plan.revision) or _network_error(exc)
        if mapped is None:
            raise
        raise mapped from None


def _root_of(dest: Path, remote: RemoteFile) -> Path:
    root = dest
    for _ in Path(remote.path).parts:
        root = root.parent
    return root


def _xet_enabled() -> bool:
    """Whether hf_xet can be used: HF_HUB_DISABLE_XET unset and the package importable. huggingface_hub moved
    `is_xet_available` between releases (2.4 no longer exports it from `utils`), so ask importlib directly."""
    if os.environ.get("HF_HUB_DISABLE_XET", "").lower() in ("1", "true", "yes", "on"):
        return False
    import importlib.util

    try:
        return importlib.util.find_spec("hf_xet") is not None
    except (ImportError, ValueError):
        return False


def _is_access_error(exc: BaseException) -> bool:
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    status = getattr(getattr(exc, "response", None), "status_code", None)
    return isinstance(exc, GatedRepoError | RepositoryNotFoundError | RevisionNotFoundError) or status in (401, 403)


def free_bytes(path: Path) -> int:
    """Free space on the filesystem that will hold path (which may not exist yet)."""
    p = Path(path)
    while not p.exists():
        p = p.parent
    return shutil.disk_usage(p).free


def present_bytes(dest_dir: Path, files: list[RemoteFile]) -> int:
    """Bytes already on disk for these files (finished or partial), which need no new space."""
    total = 0
    for f in files:
        dest = inside(dest_dir, f)
        for p in (dest, incomplete_path(dest)):
            if p.is_file():
                total += min(p.stat().st_size, f.size)
    return total
