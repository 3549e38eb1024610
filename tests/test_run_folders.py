"""Run folders of runs started in the same second (rack nodes on one shared workspace, two shells): each its own."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from repro.core.clock import stamp_order
from repro.core.workspace import Workspace
from repro.run.layout import new_run_dir, run_dirs

STARTS = 4


def _start_at(root: str, at: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    time.sleep(max(0.0, at - time.time()))
    try:
        out.put(str(new_run_dir(Workspace.open(Path(root)), "demo", "Offline")))
    except OSError as exc:  # the failure before: FileExistsError in all but one
        out.put(f"error: {exc!r}")


def _start_together(root: Path) -> list[str]:
    """STARTS processes, each making its run folder at one instant just after a second begins."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    at = int(time.time()) + 1.2
    procs = [ctx.Process(target=_start_at, args=(str(root), at, out)) for _ in range(STARTS)]
    for p in procs:
        p.start()
    got = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    return got


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws").ensure()
    for _ in range(5):  # a loaded machine can spread the starts over two seconds: then try again
        root = ws.runs / "demo" / "Offline"
        got = _start_together(ws.root)
        assert not [g for g in got if g.startswith("error")], got
        if len({Path(g).name[:15] for g in got}) == 1:
            break
        for g in got:
            Path(g).rmdir()
    else:
        raise AssertionError(f"never {STARTS} starts in one second: {got}")
    stamp = Path(got[0]).name[:15]
    assert sorted(Path(g).name for g in got) == sorted([stamp] + [f"{stamp}-{n}" for n in range(2, STARTS + 1)])
    assert all(Path(g).is_dir() and not any(Path(g).iterdir()) for g in got)
    assert sorted(root.iterdir()) == sorted(Path(g) for g in got)


def test_newest_run_folder_is_the_last_one_made(tmp_path: Path) -> None:
    """`…-10` is newer than `…-9` (a plain sort says otherwise): pairing and the guide read the newest."""
    ws = Workspace.open(tmp_path / "ws").ensure()
    base = ws.runs / "demo" / "Offline"
    for name in ["20261125-100000", *(f"20261125-100001{'' if n == 1 else f'-{n}'}" for n in range(1, 11))]:
        (base / name).mkdir(parents=True)
    newest = run_dirs(ws, "demo", "Offline")
    assert [p.name for p in newest[:3]] == ["20261125-100001-10", "20261125-100001-9", "20261125-100001-8"]
    assert newest[-2:] == [base / "20261125-100001", base / "20261125-100000"]
    assert stamp_order(Path("notes")) < stamp_order(base / "20261125-100000")
