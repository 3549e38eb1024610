"""A hub (or HF_ENDPOINT mirror) listing is untrusted: a file name must never steer a write outside the model folder."""

from __future__ import annotations

import pytest
from hubserver import HubServer, Repo
from setup_helpers import MODEL_REPO, build_tokenizer_dir, model_files, write_recipe
from typer.testing import CliRunner

from repro.cli import app
from repro.core.ledger import Ledger


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, bytes]:
    return model_files(build_tokenizer_dir(tmp_path_factory.mktemp("tok") / "tok"))


def _hostile_hub(files: dict[str, bytes], name: str, tmp_path, monkeypatch) -> HubServer:
    server = HubServer()
    server.model = server.add(Repo(MODEL_REPO, {**files, name: b'{"overwritten": true}'}))
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    server.recipe = write_recipe(tmp_path, revision=server.model.commit, base_url=server.url)
    return server


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.parametrize("form", ["relative", "absolute", "dot-segment"])
def test_a_listed_name_that_leaves_the_model_folder_fails_setup_before_anything_changes(
    files, form, dry_run, tmp_path, monkeypatch, _isolated_home
):
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    name = {
        # repro-home/models/<model>/ is three folders below tmp_path.
        "relative": "../../../victim.json",
        "absolute": str(victim),
        "dot-segment": "sub/./../../../../victim.json",
    }[form]
    server = _hostile_hub(files, name, tmp_path, monkeypatch)
    with server:
        res = CliRunner().invoke(app, ["setup", "--recipe", str(server.recipe), *(["--dry-run"] if dry_run else [])])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert repr(name) in res.stderr and "leaves the model folder" in res.stderr and "repro setup" in res.stderr
    assert victim.read_text() == "precious"
    assert not server.requests_for(name, "GET")
    models = _isolated_home / "models"
    assert not models.exists() or not any(p.is_file() for p in models.rglob("*"))
    ledger = _isolated_home / "ledger.json"
    assert not ledger.exists() or Ledger.load(ledger).get("setup") is None


def test_a_symlink_inside_the_model_folder_cannot_carry_a_download_outside(
    files, tmp_path, monkeypatch, _isolated_home
):
    outside = tmp_path / "outside"
    outside.mkdir()
    mdir = _isolated_home / "models" / MODEL_REPO.split("/")[-1]
    mdir.mkdir(parents=True)
    (mdir / "linked").symlink_to(outside, target_is_directory=True)
    server = _hostile_hub(files, "linked/config.json", tmp_path, monkeypatch)
    with server:
        res = CliRunner().invoke(app, ["setup", "--recipe", str(server.recipe)])
    assert res.exit_code == 2, res.output
    assert "resolves outside the model folder" in res.stderr
    assert list(outside.iterdir()) == []
