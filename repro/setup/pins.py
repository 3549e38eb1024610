"""Dataset pins from sources other than the download: which checksum covers each dataset file, and the checks.

A file is pinned by a SHA-256 in the benchmark (Llama-2's sampled set: MLCommons' endpoints repository), by an MD5
published somewhere other than the download (AMD's v5.1 resource_checker.py, for the 405B and Llama-2 sampled sets),
and/or by MLCommons' md5sum list served beside the dataset's .uri, which the R2 downloader checks
(mlcommons/r2-downloader @ 239a355 mlc-r2-downloader.sh:636-646, 722-752). Every pin a file has must hold: the
published MD5, the list's entry and the bytes agree, or the file is refused naming the sums and where each came
from. The SHA-256 of the verified bytes goes into the ledger (later setups check the file against it and skip the
list) and into the prepared set's manifest (later runs read only the prepared files).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from repro.core.errors import InputError, ReproError
from repro.core.recipes import Recipe
from repro.core.safeio import open_regular, read_bytes_bounded

MAX_LIST_BYTES = 1 << 20  # an md5sum list names a few files: 92 bytes for the 405B set
_LINE = re.compile(r"^([0-9a-fA-F]{32})[ \t]+\*?(.+)$")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Verified:
    """What a dataset file was checked against, for the ledger and setup's output."""

    role: str
    sha256: str
    md5: str
    published_md5: str | None
    published_by: tuple[str, ...]
    list_url: str | None
    list_from: str | None  # "https", or the path of the copy the R2 downloader left beside the file
    list_md5: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "sha256": self.sha256,
            "md5": self.md5,
            "published_md5": self.published_md5,
            "published_by": list(self.published_by),
            "list_url": self.list_url,
            "list_from": self.list_from,
            "list_md5": self.list_md5,
        }


def published_sha256(recipe: Recipe, role: str) -> str | None:
    """The benchmark's (or recipe's) published SHA-256 for a dataset file, or None."""
    value = recipe.dataset.sha256.get(role)
    return None if value in (None, "", "unknown") else str(value)


def has_pin(recipe: Recipe, role: str) -> bool:
    """A checksum from outside this download covers the file: a published SHA-256, or an md5 entry (a published
    value and/or MLCommons' list)."""
    return published_sha256(recipe, role) is not None or role in recipe.dataset.md5


def independent(recipe: Recipe, role: str) -> bool:
    """Pinned by a source other than the bucket the file comes from (a published SHA-256 or MD5 value)."""
    pin = recipe.dataset.md5.get(role)
    return published_sha256(recipe, role) is not None or (pin is not None and pin.value is not None)


def digests(path: Path) -> tuple[str, str]:
    """(md5, sha256) of a regular file (never a FIFO or device), in one read."""
    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    with open_regular(path) as fh:
        while chunk := fh.read(_CHUNK):
            md5.update(chunk)
            sha.update(chunk)
    return md5.hexdigest(), sha.hexdigest()


def parse_md5_list(data: bytes, source: str) -> dict[str, str]:
    """file name -> MD5 from an md5sum-format list ('hash  path', '*' for binary mode, an optional './'), keyed by
    the path's last part, as the R2 downloader places files; a name listed twice with two sums is refused."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{source}: not a UTF-8 md5sum list") from None
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        name = PurePosixPath(m.group(2).strip()).name
        value = m.group(1).lower()
        if out.get(name, value) != value:
            raise ValueError(f"{source}: lists {name} twice with two different sums")
        out[name] = value
    if not out:
        raise ValueError(f"{source}: not an md5sum list (no 'hash  file' line)")
    return out


def _list_name(url: str) -> str:
    return PurePosixPath(urlsplit(url).path).name


def listed_md5(url: str, fname: str, folder: Path) -> tuple[str, str]:
    """(the list's MD5 of `fname`, where the list came from): MLCommons' list over HTTPS, else the copy the R2
    downloader left in its download folder (it fetches the list there, over HTTPS, before the files)."""
    from repro.setup.transfer import fetch_small

    why = ""
    try:
        return parse_md5_list(fetch_small(url, MAX_LIST_BYTES), url)[fname], "https"
    except KeyError:
        why = f"{url} lists no {fname}"
    except (ReproError, ValueError) as exc:
        why = exc.message if isinstance(exc, ReproError) else str(exc)
    placed = folder / _list_name(url)
    try:
        listed = parse_md5_list(read_bytes_bounded(placed, MAX_LIST_BYTES, what="md5sum list"), str(placed))
    except FileNotFoundError:
        raise InputError(
            f"MLCommons' checksum list for {fname} could not be read ({why.rstrip('.')}), and no copy of it "
            f"({placed.name}) is in {folder}.",
            f"run MLCommons' R2 downloader with `-d {folder}` (it leaves {placed.name} there), or check the network, "
            "then `repro setup`",
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{placed}: not a readable md5sum list ({exc}).", f"delete {placed.name}, then `repro setup`"
        ) from None
    if fname not in listed:
        raise InputError(f"{placed}: lists no {fname}; it is not this dataset's list.", "delete it, then `repro setup`")
    return listed[fname], str(placed)


def _sources_text(recipe: Recipe, role: str) -> str:
    pin = recipe.dataset.md5[role]
    return ", ".join(pin.sources) + " (the benchmark file's md5." + role + ")"


def verify(
    recipe: Recipe, role: str, path: Path, recorded: dict[str, Any] | None = None, *, dest: Path | None = None
) -> Verified:
    """Every pin of one dataset file, or an InputError naming both sums and where each came from. `recorded` is what
    an earlier setup verified for this role: when its SHA-256 and MD5 sources still match, the list is not fetched.
    `dest` is where the file goes when `path` is its partial download (messages and the list's entry name it)."""
    md5, sha = digests(path)
    path = dest or path
    pin = recipe.dataset.md5.get(role)
    published = published_sha256(recipe, role)
    if published is not None and sha != published:
        raise InputError(
            f"{path}: SHA-256 {sha} differs from {published}, the benchmark file's dataset.sha256.{role}; it is not "
            "the published file and was not unpickled.",
            f"delete {path.name}, then `repro setup`",
        )
    if pin is not None and pin.value is not None and md5 != pin.value:
        raise InputError(
            f"{path}: MD5 {md5} differs from {pin.value}, published by {_sources_text(recipe, role)}; it is not the "
            "published file and was not unpickled.",
            f"delete {path.name}, then `repro setup`",
        )
    list_md5 = list_from = None
    if pin is not None and pin.list_url is not None:
        again = recorded or {}
        if again.get("sha256") == sha and again.get("list_url") == pin.list_url and again.get("list_md5") == md5:
            list_md5, list_from = md5, str(again.get("list_from"))
        else:
            list_md5, list_from = listed_md5(pin.list_url, path.name, path.parent)
            where = (
                pin.list_url if list_from == "https" else f"{list_from} (the R2 downloader's copy of {pin.list_url})"
            )
            if pin.value is not None and list_md5 != pin.value:
                raise InputError(
                    f"{path.name}: MLCommons' list {where} gives MD5 {list_md5}, the benchmark file's published "
                    f"{pin.value} ({_sources_text(recipe, role)}): the two sources disagree, so neither is trusted "
                    "and the file was not unpickled.",
                    "`pip install -U repro` (a newer benchmark file may carry MLCommons' new set), then `repro setup`",
                )
            if list_md5 != md5:
                raise InputError(
                    f"{path}: MD5 {md5} differs from {list_md5}, MLCommons' list {where}; it is not the published "
                    "file and was not unpickled.",
                    f"delete {path.name}, then `repro setup`",
                )
    return Verified(
        role,
        sha,
        md5,
        pin.value if pin is not None else None,
        tuple(pin.sources) if pin is not None else (),
        pin.list_url if pin is not None else None,
        list_from,
        list_md5,
    )


def unverified_notes(recipe: Recipe) -> list[str]:
    """The one statement per fetched file that no checksum independent of its bucket covers (the 405B calibration)."""
    out = []
    for role, fname in recipe.dataset.files.items():
        pin = recipe.dataset.md5.get(role)
        if pin is not None and not independent(recipe, role):
            out.append(f"dataset {role} ({fname}): {pin.note}")
    return out


def policy(recipe: Recipe, role: str, fname: str) -> str | None:
    """One line of `checksums:` for a pinned file, or None when no pin covers it."""
    pin = recipe.dataset.md5.get(role)
    published = published_sha256(recipe, role)
    parts = []
    if published is not None:
        parts.append(f"SHA-256 pinned in the benchmark file ({published[:12]}…)")
    if pin is not None and pin.value is not None:
        parts.append(f"MD5 {pin.value[:12]}… published by {', '.join(pin.sources)}")
    if pin is not None and pin.list_url is not None:
        parts.append(f"MLCommons' md5sum list {_list_name(pin.list_url)} (fetched over HTTPS)")
    if not parts:
        return None
    lead = "" if independent(recipe, role) else "no checksum independent of MLCommons' bucket; "
    return (
        f"dataset {role} ({fname}): {lead}{' and '.join(parts)}, all checked before the file is read, then decoded "
        "once by repro's own decoder (no pandas) in a confined child; the SHA-256 of the verified bytes is recorded "
        "and checked on later setups"
    )
