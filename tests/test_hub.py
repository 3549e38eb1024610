"""repro.hub against the local hub server: plan (metadata + access check), verification, resumable streaming."""

from __future__ import annotations

import hashlib

import pytest
from hubserver import HubServer, Repo, git_blob_sha1

from repro.core.errors import ReproError
from repro.setup import hub


@pytest.fixture
def server(monkeypatch):
    srv = HubServer()
    srv.add(Repo("org/m", {"config.json": b'{"a": 1}', "w.safetensors": bytes(range(256)) * 5000, "notes.txt": b"x"}))
    monkeypatch.setenv("HF_ENDPOINT", srv.url)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    with srv:
        yield srv


def test_plan_filters_and_carries_checksums(server):
    plan = hub.plan_model("org/m", "main", ["*.json", "*.safetensors"], None)
    repo = server.repos[("model", "org/m")]
    assert plan.commit == repo.commit
    files = {f.path: f for f in plan.files}
    assert set(files) == {"config.json", "w.safetensors"}
    assert files["w.safetensors"].sha256 == hashlib.sha256(repo.files["w.safetensors"]).hexdigest()
    assert files["config.json"].sha256 is None and files["config.json"].blob_id == git_blob_sha1(b'{"a": 1}')


def test_verify_uses_sha256_or_git_blob_sha1(server, tmp_path):
    plan = hub.plan_model("org/m", "main", ["*"], None)
    for f in plan.files:
        result = hub.fetch_file(plan, f, tmp_path, None)
        assert result.action == "downloaded" and hub.verify_file(result.path, f)
    cfg = next(f for f in plan.files if f.path == "config.json")
    (tmp_path / "config.json").write_bytes(b'{"a": 2}')
    assert not hub.verify_file(tmp_path / "config.json", cfg)


def test_unknown_revision_and_gated(server):
    with pytest.raises(ReproError, match="no revision"):
        hub.plan_model("org/m", "0" * 40, ["*"], None)
    server.repos[("model", "org/m")].gated = True
    with pytest.raises(ReproError, match=f"request access at {server.url}/org/m"):
        hub.plan_model("org/m", "main", ["*"], None)


def test_unreachable_hub(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(ReproError, match="Cannot reach"):
        hub.plan_model("org/m", "main", ["*"], None)
