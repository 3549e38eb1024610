"""`repro setup` end to end against a real local hub server: download, resume, checksums, access, disk, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli, cli_process
from hubserver import HubServer, Repo
from setup_helpers import MODEL_REPO, N_CALIB, N_SAMPLES, build_tokenizer_dir, model_files, write_parquet, write_recipe

from repro.core.benchmarks import load_benchmark
from repro.core.fsutil import sha256_file
from repro.core.ledger import Ledger
from repro.setup.preprocess import build_from_parquet

_RAW = load_benchmark("llama2-70b-99").dataset.raw
assert _RAW is not None
RAW_REPO, RAW_FILE = _RAW.repo, _RAW.file
SHARD = "model-00001-of-00002.safetensors"
TOKEN = "hf_goodtokenAAAAAAAAAAAA"


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("assets")
    tok = build_tokenizer_dir(root / "tok")
    pq = write_parquet(root / RAW_FILE)
    pkls = build_from_parquet(pq, tok, root / "published", n_samples=N_SAMPLES, calib_size=N_CALIB)
    return {"tok": tok, "parquet": pq, "pkls": pkls}


@pytest.fixture
def hub(assets, monkeypatch, tmp_path):
    server = HubServer()
    model = server.add(Repo(MODEL_REPO, model_files(assets["tok"])))
    server.add(Repo(RAW_REPO, {RAW_FILE: assets["parquet"].read_bytes(), "README.md": b"raw"}, repo_type="dataset"))
    for p in assets["pkls"].values():
        server.static[p.name] = p.read_bytes()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    server.model = model
    pins = {role: sha256_file(p) for role, p in assets["pkls"].items()}
    server.recipe = write_recipe(tmp_path, revision=model.commit, base_url=server.url, sha256=pins)
    with server:
        yield server


def ledger(home: Path) -> Ledger:
    return Ledger.load(home / "ledger.json")


def model_path(home: Path, name: str) -> Path:
    return home / "models" / MODEL_REPO.split("/")[-1] / name


def test_dry_run_lists_files_sizes_sources_and_changes_nothing(hub, _isolated_home):
    res = cli("setup", "--recipe", str(hub.recipe), "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["status"] == "dry-run"
    rows = {Path(r["dest"]).name: r for r in out["details"]["files"]}
    assert rows[SHARD]["size"] == 2_500_000 and rows[SHARD]["action"] == "download"
    assert rows[SHARD]["source"].startswith(f"{hub.url}/{MODEL_REPO}/resolve/{hub.model.commit}/")
    assert "README.md" not in rows and "pytorch_model.bin" not in rows
    assert rows[f"open_orca_gpt4_tokenized_llama.sampled_{N_SAMPLES}.pkl"]["size"] == len(
        hub.static[f"open_orca_gpt4_tokenized_llama.sampled_{N_SAMPLES}.pkl"]
    )
    assert out["details"]["revision"] == hub.model.commit
    assert not _isolated_home.exists()
    assert not hub.requests_for(SHARD, "GET")


def test_setup_downloads_verifies_records_and_skips_on_rerun(hub, _isolated_home):
    res = cli("setup", "--recipe", str(hub.recipe), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["status"] == "done"
    shard = model_path(_isolated_home, SHARD)
    assert shard.read_bytes() == hub.model.files[SHARD]
    assert not list(_isolated_home.rglob("*.incomplete"))
    rec = ledger(_isolated_home).get("setup")
    assert rec.status == "done" and rec.details["revision"] == hub.model.commit
    arts = {Path(a.path).name: a for a in rec.outputs}
    assert arts[SHARD].revision == hub.model.commit and arts[SHARD].size == 2_500_000 and arts[SHARD].verify()
    assert arts["config.json"].source == f"hf://{MODEL_REPO}/config.json"
    assert str(shard) in rec.details["fetched_at"]
    assert (_isolated_home / "preprocessed" / "mlperf-openorca" / "manifest.json").exists()
    import pandas as pd

    calib = pd.read_parquet(
        _isolated_home / "preprocessed" / "mlperf-openorca" / "mlperf_llama2_openorca_calibration_1k" / "data.parquet"
    )
    assert list(calib.columns) == ["text"] and len(calib) == N_CALIB
    from repro.setup.dataset import load_prepared

    assert len(load_prepared(_isolated_home / "preprocessed" / "mlperf-openorca")) == N_SAMPLES

    gets = len(hub.requests_for(SHARD, "GET"))
    again = json.loads(cli("setup", "--recipe", str(hub.recipe), "--json").stdout)
    assert again["status"] == "skipped"
    assert {f["action"] for f in again["details"]["files"]} == {"verified"}
    assert len(hub.requests_for(SHARD, "GET")) == gets


def test_dropped_connection_resumes_with_range(hub, _isolated_home):
    hub.faults.drop_after[SHARD] = 1_200_000
    res = cli("setup", "--recipe", str(hub.recipe), "--json")
    assert res.exit_code == 0, res.output
    ranges = [r["range"] for r in hub.requests_for(SHARD, "GET")]
    assert ranges == [None, "bytes=1200000-"]  # every byte that arrived is kept and the resume starts there
    assert model_path(_isolated_home, SHARD).read_bytes() == hub.model.files[SHARD]


def test_bad_checksum_from_server_is_refetched(hub, _isolated_home):
    hub.faults.corrupt[SHARD] = 1
    out = json.loads(cli("setup", "--recipe", str(hub.recipe), "--json").stdout)
    actions = {Path(f["path"]).name: f["action"] for f in out["details"]["files"]}
    assert actions[SHARD] == "refetched"
    assert model_path(_isolated_home, SHARD).read_bytes() == hub.model.files[SHARD]


def test_corrupted_local_file_is_redownloaded(hub, _isolated_home):
    assert cli("setup", "--recipe", str(hub.recipe)).exit_code == 0
    shard = model_path(_isolated_home, SHARD)
    data = bytearray(shard.read_bytes())
    data[1000] ^= 0xFF
    shard.write_bytes(bytes(data))
    out = json.loads(cli("setup", "--recipe", str(hub.recipe), "--json").stdout)
    actions = {Path(f["path"]).name: f["action"] for f in out["details"]["files"]}
    assert out["status"] == "done" and actions[SHARD] == "downloaded"
    assert shard.read_bytes() == hub.model.files[SHARD]


def test_half_written_file_from_a_crash_is_resumed_or_replaced(hub, _isolated_home):
    shard = model_path(_isolated_home, SHARD)
    shard.parent.mkdir(parents=True)
    Path(f"{shard}.incomplete").write_bytes(hub.model.files[SHARD][:123_456])
    other = model_path(_isolated_home, "model-00002-of-00002.safetensors")
    Path(f"{other}.incomplete").write_bytes(b"garbage" * 100)
    out = json.loads(cli("setup", "--recipe", str(hub.recipe), "--json").stdout)
    actions = {Path(f["path"]).name: f for f in out["details"]["files"]}
    assert actions[SHARD]["action"] == "resumed" and actions[SHARD]["resumed_bytes"] == 123_456
    assert "bytes=123456-" in [r["range"] for r in hub.requests_for(SHARD, "GET")]
    assert shard.read_bytes() == hub.model.files[SHARD]
    assert other.read_bytes() == hub.model.files[other.name]


def test_gated_repo_says_where_to_request_access(hub, monkeypatch, _isolated_home):
    """Without a token the hub answers 401 and the message says to log in (before: only "request access")."""
    hub.model.gated = True
    res = cli("setup", "--recipe", str(hub.recipe))
    assert res.exit_code == 2 and hub.errors[-1] == 401
    assert f"request access at {hub.url}/{MODEL_REPO}" in res.stderr and "repro setup" in res.stderr
    assert "no Hugging Face token was sent" in res.stderr and "hf auth login" in res.stderr
    assert "Traceback" not in res.output
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    res = cli("setup", "--recipe", str(hub.recipe))
    assert res.exit_code == 2 and hub.errors[-1] == 403 and "has no access yet" in res.stderr
    assert not (_isolated_home / "models").exists()


def test_wrong_model_id(hub, tmp_path, _isolated_home):
    recipe = (
        write_recipe(
            tmp_path / "r", name="wrong-id", repo_id="meta-test/does-not-exist", revision="main", base_url=hub.url
        )
        if (tmp_path / "r").mkdir() is None
        else None
    )
    res = cli("setup", "--recipe", str(recipe))
    assert res.exit_code == 2
    assert "meta-test/does-not-exist" in res.stderr and "not found" in res.stderr and "model.repo_id" in res.stderr


def test_revoked_token_is_refused_and_never_printed_or_stored(hub, monkeypatch, _isolated_home):
    hub.faults.token = TOKEN
    bad = "hf_revokedBBBBBBBBBBBBBB"
    monkeypatch.setenv("HF_TOKEN", bad)
    res = cli("setup", "--recipe", str(hub.recipe))
    assert res.exit_code == 2
    assert "token was refused" in res.stderr and "hf auth login" in res.stderr
    assert bad not in res.output
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    res = cli("setup", "--recipe", str(hub.recipe), "--json")
    assert res.exit_code == 0, res.output
    assert all(r["auth"] for r in hub.log if not r["path"].startswith("/static/"))
    assert not any(r["auth"] for r in hub.log if r["path"].startswith("/static/"))
    for p in _isolated_home.rglob("*"):
        if p.is_file() and p.stat().st_size < 5_000_000:
            assert TOKEN.encode() not in p.read_bytes() and bad.encode() not in p.read_bytes(), p


def test_not_enough_disk_space_stops_before_downloading(hub, tmp_path, _isolated_home):
    (tmp_path / "big").mkdir()
    recipe = write_recipe(
        tmp_path / "big", name="huge", revision=hub.model.commit, base_url=hub.url, disk_needed_gb=10_000_000
    )
    res = cli("setup", "--recipe", str(recipe))
    assert res.exit_code == 2
    assert "Not enough free disk space" in res.stderr and "--workspace" in res.stderr
    assert not hub.requests_for(SHARD, "GET")
    dry = json.loads(cli("setup", "--recipe", str(recipe), "--dry-run", "--json").stdout)
    assert "NOT ENOUGH DISK SPACE" in dry["summary"]


def _fill_when_download_starts(part: Path, filler: Path) -> None:
    """Another process filling the disk once the download is under way."""
    deadline = time.monotonic() + 30
    while not part.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def test_disk_full_during_download(hub, tmp_path, monkeypatch):
    import threading

    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root")
    try:
        home = mnt / "home"
        monkeypatch.setenv("REPRO_HOME", str(home))
        hub.faults.slow[SHARD] = 0.002
        filler = threading.Thread(
            target=_fill_when_download_starts, args=(Path(f"{model_path(home, SHARD)}.incomplete"), mnt / "filler")
        )
        filler.start()
        res = cli("setup", "--recipe", str(hub.recipe))
        filler.join(timeout=30)
        assert res.exit_code == 2, res.output
        assert "disk filled up" in res.stderr and "repro setup" in res.stderr
        assert not model_path(home, SHARD).exists()
        assert ledger(home).get("setup").status in ("failed", "running")
        (mnt / "filler").unlink()
        hub.faults.slow.clear()
        assert cli("setup", "--recipe", str(hub.recipe)).exit_code == 0
        assert model_path(home, SHARD).read_bytes() == hub.model.files[SHARD]
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _setup_stopped_mid_download(hub, home: Path, sig: signal.Signals) -> tuple[subprocess.Popen, str, Path]:
    """`repro setup` in its own process, sent `sig` once a shard is part-way down (the hub streams it slowly)."""
    hub.faults.slow[SHARD] = 0.01
    env = {**os.environ, "REPRO_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from repro.cli import main; main()", "setup", "--recipe", str(hub.recipe)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    part = Path(f"{model_path(home, SHARD)}.incomplete")
    deadline = time.monotonic() + 60
    while (
        not (part.exists() and part.stat().st_size >= 1 << 20) and time.monotonic() < deadline and proc.poll() is None
    ):
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return proc, err, part


def test_sigterm_outside_run_exits_143_and_keeps_the_partial(hub, _isolated_home):
    """scancel/`docker stop`/kill on any command, not only `repro run`: 143 (Ctrl-C is 130), no traceback."""
    proc, err, part = _setup_stopped_mid_download(hub, _isolated_home, signal.SIGTERM)
    assert proc.returncode == 143, (proc.returncode, err)
    assert "Traceback" not in err and "repro setup" in err
    assert part.exists() and 0 < part.stat().st_size < 2_500_000
    rec = ledger(_isolated_home).get("setup")
    assert rec.status == "interrupted" and rec.signal == "SIGTERM" and "the user" not in (rec.error or "")


def test_ctrl_c_keeps_partial_and_restart_resumes(hub, _isolated_home):
    proc, err, part = _setup_stopped_mid_download(hub, _isolated_home, signal.SIGINT)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "repro setup" in err
    kept = part.stat().st_size
    assert 0 < kept < 2_500_000
    assert ledger(_isolated_home).get("setup").status == "interrupted"
    hub.faults.slow.clear()
    out = json.loads(cli("setup", "--recipe", str(hub.recipe), "--json").stdout)
    actions = {Path(f["path"]).name: f for f in out["details"]["files"]}
    assert actions[SHARD]["action"] == "resumed" and actions[SHARD]["resumed_bytes"] == kept
    assert model_path(_isolated_home, SHARD).read_bytes() == hub.model.files[SHARD]


def test_rebuild_and_fetch_give_the_same_checksum(hub, _isolated_home):
    res = cli("setup", "--recipe", str(hub.recipe), "--dataset-source", "both", "--json")
    assert res.exit_code == 0, res.output
    comp = json.loads(res.stdout)["details"]["comparison"]
    assert comp["same_file"] and comp["same_content"]
    assert set(comp["roles"]) == {"sampled", "calibration"}
    rec = ledger(_isolated_home).get("setup")
    raw = [a for a in rec.outputs if a.path.endswith(RAW_FILE)][0]
    assert raw.revision == hub.repos[("dataset", RAW_REPO)].commit


def test_rebuild_rejects_a_parquet_with_missing_columns(hub, assets, tmp_path, _isolated_home):
    bad = write_parquet(tmp_path / "bad.parquet", drop=("system_prompt",))
    hub.repos[("dataset", RAW_REPO)].files[RAW_FILE] = bad.read_bytes()
    res = cli("setup", "--recipe", str(hub.recipe), "--dataset-source", "rebuild")
    assert res.exit_code == 2
    assert RAW_FILE in res.stderr and "system_prompt" in res.stderr and "repro setup" in res.stderr
    assert ledger(_isolated_home).get("setup").status == "failed"


def test_demo_recipe_dry_run_is_labelled_and_downloads_nothing(_isolated_home):
    res = cli("setup", "--recipe", "demo", "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["status"] == "dry-run" and out["details"]["label"] == "demo" and "no downloads" in out["summary"]
    assert not _isolated_home.exists()


# Issue #36 item 1: no downloaded pickle runs code.


def _payload_pickle(marker: Path) -> bytes:
    """A DataFrame pickle whose loading runs `os.system` to create `marker`: what a hostile bucket would serve."""
    import pandas as pd

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    df = pd.DataFrame({"tok_input": [[1], Payload()]})
    df.columns = pd.Index(["tok_input"], dtype=object)
    import pickle

    return pickle.dumps(df, protocol=4)


def _serve_payload(hub, tmp_path: Path, *, pin_it: bool) -> tuple[Path, Path]:
    marker = tmp_path / "payload-ran"
    name = f"open_orca_gpt4_tokenized_llama.sampled_{N_SAMPLES}.pkl"
    hub.static[name] = _payload_pickle(marker)
    import hashlib

    import yaml

    data = yaml.safe_load(hub.recipe.read_text())
    data["dataset"]["sha256"]["sampled"] = hashlib.sha256(hub.static[name]).hexdigest() if pin_it else "unknown"
    hub.recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    return marker, hub.recipe


def test_unpinned_sampled_set_is_refused_before_anything_is_downloaded(hub, tmp_path, _isolated_home):
    marker, recipe = _serve_payload(hub, tmp_path, pin_it=False)
    res = cli("setup", "--recipe", str(recipe))
    assert res.exit_code == 2, res.output
    assert "dataset.sha256.sampled is not pinned" in res.stderr and "can run code" in res.stderr
    assert "--dataset-source rebuild" in res.stderr
    assert not marker.exists()
    assert not hub.requests_for(SHARD, "GET") and not [
        r for r in hub.log if "/static/" in r["path"] and r["method"] == "GET"
    ]


def test_payload_pinned_by_a_hostile_recipe_is_refused_by_the_unpickler(hub, tmp_path, _isolated_home):
    marker, recipe = _serve_payload(hub, tmp_path, pin_it=True)
    res = cli("setup", "--recipe", str(recipe))
    assert res.exit_code == 2, res.output
    assert "posix.system" in res.stderr and "nothing in the file was run" in res.stderr
    assert "Traceback" not in res.stderr
    assert not marker.exists()
    assert ledger(_isolated_home).get("setup").status == "failed"


HOSTILE = Path(__file__).parent / "fixtures" / "pickles" / "hostile"


def _serve_pinned_sampled(hub, data: bytes) -> str:
    """The hub serves `data` as the sampled set and the recipe pins it (what a hostile recipe + mirror could do)."""
    import hashlib

    import yaml

    name = f"open_orca_gpt4_tokenized_llama.sampled_{N_SAMPLES}.pkl"
    hub.static[name] = data
    recipe = yaml.safe_load(hub.recipe.read_text())
    recipe["dataset"]["sha256"]["sampled"] = hashlib.sha256(data).hexdigest()
    hub.recipe.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return name


def test_a_pinned_heap_write_pickle_is_refused_in_its_own_process_exit_2(hub, _isolated_home):
    """Issue #43: the pickle that made pandas 3.1.1 write out of bounds (a segfault after a "clean" refusal), pinned
    by the recipe: `repro setup`, in its own process, refuses it in one line, exit 2; nothing is prepared."""
    name = _serve_pinned_sampled(hub, (HOSTILE / "heapwrite_slice_1e9.pkl").read_bytes())
    proc = cli_process("setup", "--recipe", str(hub.recipe), env={"REPRO_HOME": str(_isolated_home)}, timeout=600)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and name in errors[0] and "BlockManager" in errors[0], proc.stderr[-2000:]
    assert "nothing in the file was run" in errors[0]
    assert not (_isolated_home / "preprocessed" / "mlperf-openorca").exists()
    assert not [p for p in (_isolated_home / "preprocessed").glob(".*")]  # no staging folder left behind
    assert ledger(_isolated_home).get("setup").status == "failed"


def test_a_decoder_that_crashes_is_one_error_naming_the_file(hub, _isolated_home, monkeypatch):
    """The child really crashes (numpy's own setstate on the object-array pickle, run in place of repro's decoder):
    setup says which file could not be decoded and why, exit 2, and the prepared folder is not touched."""
    from repro.setup import convert

    name = _serve_pinned_sampled(hub, (HOSTILE / "numpy_object_slots.pkl").read_bytes())
    plain = [sys.executable, "-I", "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"]
    monkeypatch.setattr(convert, "child_argv", lambda: plain)
    res = cli("setup", "--recipe", str(hub.recipe))
    assert res.exit_code == 2, res.output
    assert f"the dataset file {_isolated_home / 'data' / 'mlperf-openorca' / name} could not be decoded" in " ".join(
        res.stderr.split()
    )
    assert "the decoder was killed by SIG" in res.stderr and "nothing was written" in res.stderr
    assert not (_isolated_home / "preprocessed" / "mlperf-openorca").exists()


def test_the_conversion_is_recorded_and_not_repeated(hub, _isolated_home):
    """The prepared files, the calibration parquet and the confinement are in the manifest and the ledger; a second
    setup decodes nothing (the manifest records these very source pickles)."""
    assert cli("setup", "--recipe", str(hub.recipe)).exit_code == 0
    folder = _isolated_home / "preprocessed" / "mlperf-openorca"
    manifest = json.loads((folder / "manifest.json").read_text())
    calib = manifest["calibration"]
    assert calib["sha256"] == sha256_file(folder / calib["file"]) and calib["file"].endswith("/data.parquet")
    assert manifest["conversion"]["network"] == ledger(_isolated_home).get("setup").details["conversion"]["network"]
    assert manifest["conversion"]["as_bytes"] >= 2 << 30 and manifest["conversion"]["core_bytes"] == 0
    arts = {Path(a.path).name: a for a in ledger(_isolated_home).get("setup").outputs}
    assert arts["data.parquet"].sha256 == calib["sha256"] and arts["input_ids.npy"].verify()
    before = (folder / "manifest.json").stat().st_mtime_ns
    res = cli("setup", "--recipe", str(hub.recipe), "--force", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["details"]["conversion"]["converted"] is False
    assert (folder / "manifest.json").stat().st_mtime_ns == before


def test_unpinned_calibration_is_derived_from_the_sampled_set_not_fetched(hub, assets, _isolated_home):
    """MLCommons publishes no checksum for the calibration pickle: its rows come from the pinned sampled set as
    processorca.py draws them, and they equal the published calibration file's rows."""
    import pandas as pd
    import yaml

    data = yaml.safe_load(hub.recipe.read_text())
    data["dataset"]["sha256"]["calibration"] = "unknown"
    hub.recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    dry = json.loads(cli("setup", "--recipe", str(hub.recipe), "--dry-run", "--json").stdout)
    row = [r for r in dry["details"]["files"] if r["what"].startswith("dataset calibration")][0]
    assert row["action"] == "derived" and "processorca" in row["source"]
    res = cli("setup", "--recipe", str(hub.recipe), "--json")
    assert res.exit_code == 0, res.output
    assert not [r for r in hub.log if "calibration" in r["path"]]
    calib_name = f"open_orca_gpt4_tokenized_llama.calibration_{N_CALIB}.pkl"
    assert not (_isolated_home / "data" / "mlperf-openorca" / calib_name).exists()
    parquet = _isolated_home / "preprocessed" / "mlperf-openorca" / "mlperf_llama2_openorca_calibration_1k"
    published = pd.read_pickle(assets["pkls"]["calibration"])  # made by pandas' own sample(), read by pandas
    assert pd.read_parquet(parquet / "data.parquet")["text"].tolist() == list(published["input"])
    checks = json.loads(res.stdout)["details"]["checks"]
    assert any("never downloaded or unpickled" in c for c in checks)


def test_a_second_setup_in_the_same_workspace_is_refused_naming_the_first(hub, _isolated_home):
    """Issue #36 item 8: two `repro setup` at once used to write the same files, both fail and blame the hub. The
    second is refused at once, naming the first (its pid); the first finishes undisturbed."""
    hub.faults.slow[SHARD] = 0.005
    env = {**os.environ, "REPRO_HOME": str(_isolated_home)}
    first = subprocess.Popen(
        [sys.executable, "-c", "from repro.cli import main; main()", "setup", "--recipe", str(hub.recipe)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    part = Path(f"{model_path(_isolated_home, SHARD)}.incomplete")
    deadline = time.monotonic() + 60
    while not part.exists() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    assert first.poll() is None, first.communicate()
    second = cli("setup", "--recipe", str(hub.recipe))
    hub.faults.slow.clear()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert second.exit_code == 2, second.output
    assert f"pid {first.pid}" in second.stderr and "already working in" in second.stderr
    assert "hub" not in second.stderr.lower() and "repro status" in second.stderr
    assert model_path(_isolated_home, SHARD).read_bytes() == hub.model.files[SHARD]
    assert ledger(_isolated_home).get("setup").status == "done"
