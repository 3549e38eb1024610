"""The rehearsal's base image: the host's Python, its libraries and /bin/sh, FROM scratch (~20 MB).

No registry is reachable where a rehearsal runs (or a test), so nothing is pulled; the rootfs builds in seconds even
with the vfs storage driver. A stand-in for the TensorRT-LLM base image, never a GPU image.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

SKIP_DIRS = {
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
    "site-packages",
    "dist-packages",
    "__pycache__",
    "config-3.11-x86_64-linux-gnu",
}


def _python() -> Path:
    """The system interpreter (a shared-library-light build), else this one."""
    for cand in ("/usr/bin/python3", sys.executable):
        if Path(cand).exists():
            return Path(os.path.realpath(cand))
    raise RuntimeError("no python3 found")


def _libs(binary: Path) -> set[Path]:
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    libs = set()
    for line in out.splitlines():
        m = re.search(r"(/\S+)\s*\(0x", line)
        if m:
            libs.add(Path(m.group(1)))
    return libs


def _stdlib(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Path(out)


def _add(tar: tarfile.TarFile, path: Path, seen: set[str]) -> None:
    name = str(path).lstrip("/")
    if name in seen:
        return
    for parent in reversed(Path(name).parents[:-1]):
        if str(parent) not in seen:
            info = tarfile.TarInfo(str(parent))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
            seen.add(str(parent))
    real = Path(os.path.realpath(path))
    info = tar.gettarinfo(str(real), arcname=name)
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    with open(real, "rb") as fh:
        tar.addfile(info, fh)
    seen.add(name)


def write_rootfs(dest: Path) -> None:
    python = _python()
    stdlib = _stdlib(python)
    shell = Path(os.path.realpath("/bin/sh"))
    files = {python, shell} | _libs(python) | _libs(shell)
    for root, dirs, names in os.walk(stdlib):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for n in names:
            p = Path(root) / n
            if p.suffix == ".so":
                files |= _libs(p)
            if p.suffix in (".py", ".so"):
                files.add(p)
    seen: set[str] = set()
    with tarfile.open(dest, "w") as tar:
        for f in sorted(files):
            _add(tar, f, seen)
        links = {"bin/sh": str(shell), "usr/bin/python3": str(python)}
        for link, target in links.items():
            if link.lstrip("/") in seen:
                continue
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for d in ("tmp", "workspace", "proc", "sys", "dev", "etc"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            if d not in seen:
                tar.addfile(info)


def base_dockerfile_dir(dest: Path) -> Path:
    """A context with `FROM scratch` + `ADD rootfs.tar /`, built through repro.container.build_image."""
    dest.mkdir(parents=True, exist_ok=True)
    write_rootfs(dest / "rootfs.tar")
    (dest / "Dockerfile").write_text(
        'FROM scratch\nADD rootfs.tar /\nENV PATH=/usr/local/bin:/usr/bin:/bin\nCMD ["python3"]\n', encoding="utf-8"
    )
    return dest


def rootfs_key() -> str:
    python = _python()
    return hashlib.sha256(f"{python}:{python.stat().st_size}:{sys.version}".encode()).hexdigest()[:12]
