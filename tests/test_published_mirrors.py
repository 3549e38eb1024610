"""The published index against the results repositories it was read from, where they are fetched (the search
tool's `fetch`, under $REPRO_RESULTS_MIRRORS as owner+name/repo): the build script rebuilds the shipped rows byte for
byte, and every indexed result, in its repository's own layout, verifies as itself. Slow; skipped without the
repositories."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from repro.core.published import INDEX_405B_CSV, INDEX_CSV, INDEX_DSR1_CSV, PublishedResult, load_index
from repro.results.verify import verify_dir

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "build_published_index.py"
# No default: a test reads outside the repository only where the person running it names the folder.
MIRRORS = Path(os.environ["REPRO_RESULTS_MIRRORS"]) if os.environ.get("REPRO_RESULTS_MIRRORS") else None
V41 = ("mlcommons/inference_results_v4.1", "198fc46799b3328b36ee4bcbdebfa2db5a8e6183")
V51 = ("mlcommons/inference_results_v5.1", "965182b03376a00fcae415c54e560e1c83937932")
V60 = ("gbeezybez/inference_results_v6.0", "232fbf90fceb1d55b633030556fb02deddb4517b")
V50 = ("ntuhpc/mlperf_inference_results_v5.0", "cf354115915ea369f05db424b051da8c5bf957dc")  # mirror, stored files
V50_STORED = REPO / "tests" / "fixtures" / "stored" / "v5.0"


def _mirror(repo: str) -> Path:
    """The fetched repository's git folder, or a skip saying what to set."""
    if MIRRORS is None:
        pytest.skip("set REPRO_RESULTS_MIRRORS to the folder of the fetched results repositories (owner+name/repo)")
    git_dir = MIRRORS / repo.replace("/", "+") / "repo"
    if not git_dir.is_dir() or shutil.which("git") is None:
        pytest.skip(f"{repo} is not fetched under {MIRRORS}")
    return git_dir


def _rebuild(round_: str, repo: str, commit: str, *extra: str) -> bytes:
    git_dir = _mirror(repo)
    args = [sys.executable, str(SCRIPT), str(git_dir), "--git-dir", "--round", round_, "--repo", repo]
    args += ["--commit", commit, *extra]
    return subprocess.run(args, check=True, capture_output=True, timeout=600).stdout


def _rebuild_v50_405b() -> bytes:
    """v5.0 has no fetchable snapshot (too many files): its 405B rows come from the files read one by one from the
    stored mirror and kept under tests/fixtures/stored/v5.0 (SOURCE.json there gives the command)."""
    args = [sys.executable, str(SCRIPT), str(V50_STORED), "--benchmark", "llama3.1-405b", "--round", "v5.0"]
    args += ["--repo", V50[0], "--commit", V50[1], "--kind", "stored-file-index", "--header"]
    args += [
        "--systems-elsewhere",
        str(V50_STORED / "elsewhere"),
        "--table",
        str(V50_STORED / "results-table-405b.json"),
        "--table-only-rows",
        "--table-repo",
        "mlcommons/cm4mlperf-results@9f4870796f1b79d071ef63061ade15e4d285b938",
    ]
    return subprocess.run(args, check=True, capture_output=True, timeout=600).stdout


@pytest.mark.slow
def test_the_build_script_rebuilds_the_shipped_rows_from_the_fetched_repositories() -> None:
    """scripts/build_published_index.py --git-dir on the fetched results repositories (the commits sources.json
    names) writes published-llama3.1-405b.csv (its v5.0 rows from the saved stored files), the v4.1, v5.1 and
    v6.0 rows of published-llama2-70b.csv, and the v5.1 and v6.0 rows of published-deepseek-r1.csv (its v6.1 rows:
    tests/test_published_deepseek_r1.py), byte for byte. Needs the repositories fetched under
    $REPRO_RESULTS_MIRRORS (owner+name/repo), as the search tool's `fetch` lays them out."""
    table = ("--table", "summary_results.json")
    l405 = _rebuild_v50_405b()  # the header and the v5.0 rows, from the saved stored files (no fetched repo)
    l405 += _rebuild("v5.1", *V51, "--benchmark", "llama3.1-405b", *table)
    l405 += _rebuild("v6.0", *V60, "--benchmark", "llama3.1-405b", *table)
    assert l405 == INDEX_405B_CSV.read_bytes()
    dsr1 = _rebuild("v5.1", *V51, "--benchmark", "deepseek-r1", *table, "--header")
    dsr1 += _rebuild("v6.0", *V60, "--benchmark", "deepseek-r1", *table)
    shipped_dsr1 = INDEX_DSR1_CSV.read_bytes().splitlines(keepends=True)
    assert dsr1 == b"".join(line for line in shipped_dsr1 if not line.startswith(b"v6.1,"))
    # each line with its own ending: these rounds' rows end in CRLF, the v5.0 and v6.1 rows between them in LF
    shipped = INDEX_CSV.read_bytes().splitlines(keepends=True)
    for round_, source, extra in (("v4.1", V41, ()), ("v5.1", V51, table), ("v6.0", V60, table)):
        want = b"".join(line for line in shipped if line.startswith(round_.encode() + b","))
        assert _rebuild(round_, *source, *extra, "--crlf") == want, round_


def _as_published(row: PublishedResult, git_dir: Path, commit: str, into: Path) -> Path:
    """The row's result folder in its repository's own layout under `into`: its summary and detail logs,
    accuracy.txt and system JSON, read from the fetched repository with `git archive`."""
    folder = str(Path(row.source_path).parents[2])
    files = [f"{folder}/performance/run_1/mlperf_log_{k}.txt" for k in ("summary", "detail")]
    files += [f"{folder}/accuracy/accuracy.txt", f"{row.division}/{row.submitter}/systems/{row.system_folder}.json"]
    tar = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", commit, "--", *files], check=True, capture_output=True
    ).stdout
    base = into / f"inference_results_{row.round}"  # the round is read from the path, as in a clone
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(base, filter="data")
    return base / folder


@pytest.mark.slow
@pytest.mark.parametrize(
    ("family", "round_"),
    [
        ("llama2-70b", "v4.1"),
        ("llama2-70b", "v5.1"),
        ("llama2-70b", "v6.0"),
        ("llama3.1-405b", "v5.1"),
        ("llama3.1-405b", "v6.0"),
    ],
)
def test_every_indexed_result_verifies_as_itself(tmp_path: Path, family: str, round_: str) -> None:
    """Each indexed result of a round, taken from the fetched repository in its own layout, is recognised as its
    own record and PASSes with the index's per-accelerator figure, +0.0% where no recipe is detected (a recipe's
    figure is rounded). A result whose accuracy run covered fewer samples than the round's others (v5.1 AMD
    8xMI325X_2xEPYC_9575F_2: 100) FAILs on that, and only on that. Skipped where the repository is not fetched."""
    repo, commit = {"v4.1": V41, "v5.1": V51, "v6.0": V60}[round_]
    git_dir = _mirror(repo)
    rows = [r for r in load_index().rows if r.round == round_ and r.benchmark_name.split("-")[:2] == family.split("-")]
    full = Counter(r.gen_num for r in rows).most_common(1)[0][0]
    failures = []
    for r in rows:
        v = verify_dir(_as_published(r, git_dir, commit, tmp_path / r.benchmark))
        mine = v.record is not None and v.record.row.key == r.key and v.per_gpu == r.per_accelerator
        short = r.gen_num is not None and r.gen_num < full
        if short:
            ok = mine and v.status == "FAIL" and any(f"{r.gen_num} samples" in x for x in v.reasons)
        else:
            ok = mine and v.status == "PASS" and (v.deviation_pct == 0.0 or v.recipe is not None)
            ok = ok and abs(v.deviation_pct or 0.0) < 0.01
        if not ok:
            failures.append(f"{r.key}: {v.status} {v.per_gpu} {v.deviation_pct} {v.reasons[:2]}")
    assert not failures, "\n".join(failures)
