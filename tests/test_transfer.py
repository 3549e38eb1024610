"""Issue #36 items 2 and 6: the HF token never leaves the hub's origin, and every transfer ends within its bounds.

Real servers throughout: the local hub (repro/rehearse/hub.py) redirects LFS files to a second server, the "CDN",
as huggingface.co redirects to its CDN hosts; both record whether each request carried an Authorization header.
The CDN is reached as `localhost:<port>` (another host name) or `127.0.0.1:<other port>` (same host, another
port): both are other origins (scheme, host and port must all match), so neither may see the token.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import cli
from hostile_server import TrickleServer
from hubserver import HubServer, Repo
from setup_helpers import MODEL_REPO, build_tokenizer_dir, model_files, write_recipe

from repro.core.errors import ReproError
from repro.core.fsutil import sha256_file
from repro.setup.preprocess import build_from_parquet
from repro.setup.transfer import Limits, TransferError, content_length, download, open_url, token_allowed

TOKEN = "hf_transferTestTokenAAAAAAAAAAAA"
SHARD = "model-00001-of-00002.safetensors"


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict:
    from setup_helpers import N_CALIB, N_SAMPLES, write_parquet

    root = tmp_path_factory.mktemp("assets")
    tok = build_tokenizer_dir(root / "tok")
    pkls = build_from_parquet(
        write_parquet(root / "raw.parquet"), tok, root / "pub", n_samples=N_SAMPLES, calib_size=N_CALIB
    )
    return {"tok": tok, "pkls": pkls}


def _hub_and_cdn(assets, tmp_path, monkeypatch, *, cdn_host: str, status: int = 302, xet: bool = False):
    hub, cdn = HubServer(), HubServer()
    model = hub.add(Repo(MODEL_REPO, model_files(assets["tok"])))
    for name, data in model.files.items():
        if model.is_lfs(name):
            cdn.static[model.etag(name)] = data
    for p in assets["pkls"].values():
        hub.static[p.name] = p.read_bytes()
    cdn_port = cdn.httpd.server_address[1]
    hub.cdn, hub.redirect_status, hub.xet = f"http://{cdn_host}:{cdn_port}", status, xet
    hub.faults.token = TOKEN  # the hub answers nothing without the token: it must reach the hub
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    pins = {role: sha256_file(p) for role, p in assets["pkls"].items()}
    recipe = write_recipe(tmp_path, revision=model.commit, base_url=hub.url, sha256=pins)
    return hub.start(), cdn.start(), model, recipe


@pytest.mark.parametrize("status", [302, 307])
@pytest.mark.parametrize("cdn_host", ["localhost", "127.0.0.1"])
def test_the_cdn_never_sees_the_token(assets, tmp_path, monkeypatch, _isolated_home, cdn_host: str, status: int):
    hub, cdn, model, recipe = _hub_and_cdn(assets, tmp_path, monkeypatch, cdn_host=cdn_host, status=status)
    try:
        res = cli("setup", "--recipe", str(recipe), "--json")
        assert res.exit_code == 0, res.output
        mdir = _isolated_home / "models" / MODEL_REPO.split("/")[-1]
        assert (mdir / SHARD).read_bytes() == model.files[SHARD]
        lfs = {model.etag(n) for n in model.files if model.is_lfs(n) and (mdir / n).is_file()}
        assert len(lfs) >= 3 and {Path(r["path"]).name for r in cdn.log if r["method"] == "GET"} == lfs
        assert not [r for r in cdn.log if r["auth"]], cdn.log  # the CDN never saw an Authorization header
        hub_rows = [r for r in hub.log if not r["path"].startswith("/static/")]
        assert hub_rows and all(r["auth"] for r in hub_rows)  # ...while every hub request carried it
        assert TOKEN not in res.output
    finally:
        hub.stop()
        cdn.stop()


def test_xet_headers_without_xet_support_download_over_http(assets, tmp_path, monkeypatch, _isolated_home):
    """HF_HUB_DISABLE_XET (or no hf_xet): a Xet-backed file comes over plain HTTP from the redirect target."""
    hub, cdn, model, recipe = _hub_and_cdn(assets, tmp_path, monkeypatch, cdn_host="localhost", xet=True)
    try:
        res = cli("setup", "--recipe", str(recipe), "--json")
        assert res.exit_code == 0, res.output
        assert not [r for r in hub.log if "xet-read-token" in r["path"]]  # Xet was not tried
        assert [r for r in cdn.log if r["method"] == "GET"] and not [r for r in cdn.log if r["auth"]]
    finally:
        hub.stop()
        cdn.stop()


def test_xet_headers_with_xet_support_try_xet_then_fall_back(assets, tmp_path, monkeypatch, _isolated_home):
    """hf_xet importable and not disabled: setup goes through hf_hub_download's Xet path (its token refresh reaches
    the hub); this stand-in hub is no Xet service, so that fails and the file comes over HTTP instead. Before,
    huggingface_hub 2.4 made this path an ImportError (`is_xet_available` moved)."""
    pytest.importorskip("hf_xet")
    hub, cdn, model, recipe = _hub_and_cdn(assets, tmp_path, monkeypatch, cdn_host="localhost", xet=True)
    monkeypatch.delenv("HF_HUB_DISABLE_XET")
    try:
        res = cli("setup", "--recipe", str(recipe), "--json")
        assert res.exit_code == 0, res.output
        assert [r for r in hub.log if "xet-read-token" in r["path"]]  # the Xet path was taken first
        via = {Path(f["path"]).name: f["via"] for f in json.loads(res.stdout)["details"]["files"] if "via" in f}
        assert via[SHARD].startswith("http (the Xet transfer failed")
        shard = _isolated_home / "models" / MODEL_REPO.split("/")[-1] / SHARD
        assert shard.read_bytes() == model.files[SHARD]
        assert not [r for r in cdn.log if r["auth"]]
    finally:
        hub.stop()
        cdn.stop()


def test_token_rule_is_the_origin_rule() -> None:
    hub = "https://huggingface.co"
    assert token_allowed("https://huggingface.co/x/resolve/main/a", hub)
    assert token_allowed("https://HUGGINGFACE.co:443/x", hub)
    assert not token_allowed("http://huggingface.co/x", hub)  # scheme downgrade
    assert not token_allowed("https://huggingface.co:8443/x", hub)  # same host, other port
    assert not token_allowed("https://cdn-lfs.hf.co/x", hub)
    assert not token_allowed("https://huggingface.co.evil.example/x", hub)
    assert not token_allowed("https://huggingface.co/x", None)


def test_same_origin_redirect_keeps_the_token_other_origin_drops_it(tmp_path) -> None:
    """open_url itself, hop by hop: a redirect within the hub keeps the token, the next hop off it loses it."""
    other = HubServer().start()
    other.static["blob"] = b"data"
    hub = HubServer().start()
    hub.add(Repo(MODEL_REPO, {"a.safetensors": b"data"}))
    hub.cdn = f"http://localhost:{other.httpd.server_address[1]}"
    hub.static["blob"] = b"data"
    try:
        repo = hub.repos[("model", MODEL_REPO)]
        other.static[repo.etag("a.safetensors")] = b"data"
        url = f"{hub.url}/{MODEL_REPO}/resolve/main/a.safetensors"
        final, resp = open_url("GET", url, token=TOKEN, hub=hub.url, headers={}, limits=Limits(stall_s=5))
        with resp:
            assert resp.status == 200 and resp.read() == b"data"
        assert final.startswith(hub.cdn)
        assert [r["auth"] for r in hub.log] == [True] and [r["auth"] for r in other.log] == [False]
    finally:
        hub.stop()
        other.stop()


# Item 6: every transfer ends within its bound.


def _fails_within(srv: TrickleServer, part: Path, match: str, stall_s: float, bound_s: float, size: int) -> None:
    """A download from `srv` raises one TransferError matching `match`, within `bound_s` seconds."""
    t0 = time.monotonic()
    with pytest.raises(TransferError, match=match):
        download(f"{srv.url}/f", part, expected_size=size, token=None, hub=None, limits=Limits(stall_s=stall_s))
    assert time.monotonic() - t0 < bound_s


def test_a_trickle_of_one_byte_every_5_s_ends_within_the_stall_bound(tmp_path) -> None:
    with TrickleServer("trickle", interval=5.0) as srv:
        _fails_within(srv, tmp_path / "f.incomplete", "no byte for 2 s", stall_s=2, bound_s=2 * 2 + 1, size=10_000)


def test_a_fast_trickle_under_the_rate_floor_is_stopped(tmp_path) -> None:
    """A byte every 0.1 s never trips the socket timeout; the per-window floor stops it within two windows."""
    with TrickleServer("trickle", interval=0.1) as srv:
        _fails_within(srv, tmp_path / "f.incomplete", "trickling", stall_s=1.5, bound_s=2 * 1.5 + 1, size=10_000)
    assert 0 < (tmp_path / "f.incomplete").stat().st_size < 100  # what came is kept for a resume


@pytest.mark.parametrize("mode", ["silent", "drip-headers"])
def test_no_headers_in_one_window_ends_the_request(tmp_path, mode: str) -> None:
    with TrickleServer(mode, interval=0.05) as srv:
        _fails_within(srv, tmp_path / "f.incomplete", "no answer within 1.5 s", stall_s=1.5, bound_s=1.5 + 1, size=100)


def test_an_endless_body_is_cut_at_the_expected_size(tmp_path) -> None:
    part = tmp_path / "f.incomplete"
    with (
        TrickleServer("endless") as srv,
        pytest.raises(TransferError, match="more than the 2,500,000 bytes expected"),
    ):
        download(f"{srv.url}/f", part, expected_size=2_500_000, token=None, hub=None, limits=Limits(stall_s=5))
    assert part.stat().st_size <= 2_500_000


def test_a_longer_announced_body_is_refused_unread(tmp_path) -> None:
    part = tmp_path / "f.incomplete"
    with (
        TrickleServer("long-length", size=1000) as srv,
        pytest.raises(TransferError, match="announces 1,000,000 bytes where 1,000 are expected"),
    ):
        download(f"{srv.url}/f", part, expected_size=1000, token=None, hub=None, limits=Limits(stall_s=5))
    assert part.stat().st_size == 0


def test_a_head_that_stalls_gives_no_size_within_the_bound() -> None:
    with TrickleServer("silent") as srv:
        t0 = time.monotonic()
        assert content_length(f"{srv.url}/f", limits=Limits(stall_s=1)) is None
        assert time.monotonic() - t0 < 2.5


def test_setup_on_a_trickling_dataset_url_ends_with_one_error(assets, tmp_path, monkeypatch, _isolated_home):
    """`repro setup` end to end: the dataset URL trickles; setup stops within the bound, naming the URL."""
    hub, cdn, model, recipe = _hub_and_cdn(assets, tmp_path, monkeypatch, cdn_host="localhost")
    monkeypatch.setenv("REPRO_DOWNLOAD_STALL_S", "1.5")
    with TrickleServer("trickle", interval=0.1, size=50_000) as srv:
        import yaml

        data = yaml.safe_load(recipe.read_text())
        data["dataset"]["urls"]["sampled"] = f"{srv.url}/open_orca.pkl"
        recipe.write_text(yaml.safe_dump(data, sort_keys=False))
        try:
            t0 = time.monotonic()
            res = cli("setup", "--recipe", str(recipe))
            took = time.monotonic() - t0
        finally:
            hub.stop()
            cdn.stop()
    assert res.exit_code == 1, res.output  # a step that failed on the network, not bad input
    assert f"{srv.url}/open_orca.pkl" in res.stderr and "trickling" in res.stderr and "repro setup" in res.stderr
    assert took < 30


def test_a_planted_incomplete_symlink_is_never_written_through(assets, tmp_path, monkeypatch, _isolated_home):
    """Issue #36 item 4: `<file>.incomplete -> /outside` in the model folder: setup refuses, the target is unchanged."""
    hub, cdn, model, recipe = _hub_and_cdn(assets, tmp_path, monkeypatch, cdn_host="localhost")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious")
    mdir = _isolated_home / "models" / MODEL_REPO.split("/")[-1]
    mdir.mkdir(parents=True)
    (mdir / f"{SHARD}.incomplete").symlink_to(outside)
    try:
        res = cli("setup", "--recipe", str(recipe))
    finally:
        hub.stop()
        cdn.stop()
    assert res.exit_code == 2, res.output
    assert f"{SHARD}.incomplete" in res.stderr and "not a plain file" in res.stderr
    assert outside.read_bytes() == b"precious"


def test_http_errors_are_one_sentence(tmp_path) -> None:
    srv = HubServer().start()
    try:
        with pytest.raises(ReproError, match=r"not found \(HTTP 404\)"):
            download(f"{srv.url}/static/nothing", tmp_path / "x.incomplete", expected_size=10, token=None, hub=None)
    finally:
        srv.stop()
    assert json.dumps({"ok": True})


def test_downloads_go_through_the_environments_proxy(tmp_path, monkeypatch) -> None:
    """HTTP_PROXY is honoured as urllib honours it: the request goes to the proxy with the absolute URL."""
    import threading
    import urllib.request
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    origin = HubServer().start()
    origin.static["f"] = b"through the proxy"
    seen: list[str] = []

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.path)
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # not through itself
            with direct.open(self.path) as up:
                body = up.read()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    url = f"http://localhost:{origin.httpd.server_address[1]}/static/f"
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    try:
        download(url, tmp_path / "f.incomplete", expected_size=17, token=None, hub=None, limits=Limits(stall_s=5))
    finally:
        proxy.shutdown()
        proxy.server_close()
        origin.stop()
    assert seen == [url] and (tmp_path / "f.incomplete").read_bytes() == b"through the proxy"


@pytest.mark.parametrize("mode", ["trickle", "drip-headers"])
def test_a_trickling_hub_api_ends_setup_within_the_bound(tmp_path, monkeypatch, _isolated_home, mode: str) -> None:
    """The hub's own API (the listing huggingface_hub fetches) trickling or dripping its headers: setup stops
    within two stall windows with one error naming the endpoint, instead of planning for ever."""
    monkeypatch.setenv("REPRO_DOWNLOAD_STALL_S", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    with TrickleServer(mode, interval=0.3, size=100_000) as srv:
        monkeypatch.setenv("HF_ENDPOINT", srv.url)
        recipe = write_recipe(tmp_path, revision="a" * 40, base_url=srv.url, sha256={"sampled": "0" * 64})
        t0 = time.monotonic()
        res = cli("setup", "--recipe", str(recipe))
        took = time.monotonic() - t0
    assert res.exit_code in (1, 2), res.output
    assert srv.url in res.stderr and "no complete answer within 2 s" in res.stderr
    assert took < 2 * 1 + 3
