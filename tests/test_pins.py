"""Dataset pins from sources other than the download (#43 item 3): the 405B sampled set's published MD5 (AMD's v5.1
resource_checker.py), MLCommons' .md5 list served beside each .uri, and the bytes must agree; Llama-2's sampled set
is held to its SHA-256 and its published MD5 both.

Setup runs for real against the local hub the rehearsal uses (repro/rehearse/hub.py): the gated model under the
recipe's repo id, MLCommons' lists under their real host and path, the pickles placed in the data folder as the R2
downloader leaves them. The stand-in data is tiny, so the recipe setup reads carries the test's pins (the MD5 of
the test's bytes, the mirror's list URL) and sizes, as the rehearsal's does; every other field is the shipped
recipe's, and no SHA-256 is pinned by hand.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hubserver import HubServer, Repo

from repro.core.errors import InputError, ReproError
from repro.core.ledger import Ledger
from repro.core.recipes import Recipe, get_recipe
from repro.core.workspace import Workspace
from repro.rehearse.rehearsal import OUT_LEN, VOCAB, tiny_prompts
from repro.rehearse.setup_step import _mirror, hub_env, setup_recipe, tiny_dataset, tiny_model_files, write_tokenizer
from repro.setup.download import check_pins, checksum_policy, data_dir, run_setup
from repro.setup.pins import parse_md5_list
from repro.setup.transfer import TransferError, fetch_small, secure_url

R405 = "nd-gb200-v6-405b"


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


class Stage:
    """The local hub with the recipe's model, MLCommons' lists mirrored, and a workspace to set up into."""

    def __init__(self, hub: HubServer, root: Path, name: str = R405) -> None:
        self.hub = hub
        self.recipe = get_recipe(name)
        self.data = tiny_dataset(tiny_prompts(), OUT_LEN, self.recipe.bench)
        files = tiny_model_files(VOCAB, write_tokenizer(root / "tok"))
        hub.add(Repo(self.recipe.model.repo_id, files, commit=self.recipe.model.revision))
        self.urls = {r: _mirror(hub, u, self.data[r]) for r, u in self.recipe.dataset.urls.items()}
        self.lists = {
            role: self.serve_list(role, f"{md5(self.data[role])}  {self.recipe.dataset.files[role]}\n".encode())
            for role, pin in self.recipe.dataset.md5.items()
            if pin.list_url is not None
        }
        self.ws = Workspace.open(root / "ws")
        self.rec = setup_recipe(self.recipe, self.urls, self.data, len(tiny_prompts()), self.lists)
        self.folder = data_dir(self.ws, self.rec)

    def serve_list(self, role: str, body: bytes) -> str:
        url = self.recipe.dataset.md5[role].list_url
        assert url is not None
        return _mirror(self.hub, url, body)

    def place(self, overrides: dict[str, bytes] | None = None) -> None:
        """What the R2 downloader leaves in the data folder: each pickle (and, with `-d`, its list)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for role, fname in self.recipe.dataset.files.items():
            if role not in self.recipe.dataset.urls:
                (self.folder / fname).write_bytes((overrides or {}).get(role, self.data[role]))

    def with_published(self, role: str, value: str) -> Recipe:
        md5s = dict(self.rec.dataset.md5)
        md5s[role] = md5s[role].model_copy(update={"value": value})
        return self.rec.model_copy(update={"dataset": self.rec.dataset.model_copy(update={"md5": md5s})})

    def setup(self, rec: Recipe | None = None) -> Any:
        with hub_env(self.hub.url, None):
            return run_setup(rec or self.rec, self.ws)

    def list_gets(self) -> int:
        return sum(1 for r in self.hub.log if r["path"].endswith(".md5") and r["method"] == "GET")


@pytest.fixture
def stage(tmp_path: Path):
    with HubServer() as hub:
        yield Stage(hub, tmp_path)


def test_shipped_pins_cite_what_they_were_read_from() -> None:
    """The 405B sampled set: AMD's MD5 with the four submissions that carry it and MLCommons' list URL; its
    calibration file: the list and the sentence saying no independent checksum exists; Llama-2: SHA-256 and MD5."""
    bench = get_recipe(R405).bench
    sampled, calib = bench.dataset.md5["sampled"], bench.dataset.md5["calibration"]
    assert sampled.value == "25d9f2085bbcacb07554cd7f4af303c9"
    assert sampled.list_url == "https://inference.mlcommons-storage.org/metadata/llama3-1-405b-dataset-8313.md5"
    for key in sampled.sources:
        src = bench.sources[key]
        assert src.repo == "mlcommons/inference_results_v5.1" and src.path.endswith("resource_checker.py")
        assert src.commit == "965182b03376a00fcae415c54e560e1c83937932" and sampled.value in src.note
    assert {bench.sources[k].path.split("/")[1] for k in sampled.sources} == {"AMD", "Dell", "GigaComputing", "ASUSTeK"}
    assert calib.value is None and calib.list_url and "no checksum" in calib.note
    llama2 = get_recipe("nd-gb300-v6")
    assert llama2.dataset.md5["sampled"].value == "5fe8be0a7ce5c3c9a028674fd24b00d5"
    assert llama2.dataset.sha256["sampled"].startswith("b64e66e5")
    lines = checksum_policy(llama2)
    assert any("SHA-256 pinned" in line and "MD5 5fe8be0a7ce5" in line for line in lines), lines
    check_pins(get_recipe(R405), "fetch")  # pinned: no recipe copy is needed


def test_405b_setup_needs_no_copy_and_records_the_verified_sha256(stage: Stage) -> None:
    """The published MD5, the list and the bytes agree: setup unpickles both files, records their SHA-256 in the
    ledger and the prepared manifest, says once that calibration has no independent checksum; a second setup checks
    the file against the recorded SHA-256 and does not fetch the lists again."""
    stage.place()
    out = stage.setup()
    assert out.status == "done"
    pins = out.details["dataset_pins"]
    for role in stage.recipe.dataset.files:
        sha = hashlib.sha256(stage.data[role]).hexdigest()
        assert pins[role]["sha256"] == sha and pins[role]["md5"] == pins[role]["list_md5"] == md5(stage.data[role])
        assert pins[role]["list_from"] == "https" and pins[role]["list_url"] == stage.lists[role]
    assert (
        pins["sampled"]["published_md5"] == md5(stage.data["sampled"]) and pins["calibration"]["published_md5"] is None
    )
    calib = stage.recipe.dataset.files["calibration"]
    assert out.details["notes"] == [f"dataset calibration ({calib}): {stage.recipe.dataset.md5['calibration'].note}"]
    rec = Ledger.load(stage.ws.ledger_path).get("setup")
    assert rec is not None and rec.details["dataset_pins"] == pins
    assert {a.path: a.sha256 for a in rec.outputs}[str(stage.folder / stage.recipe.dataset.files["sampled"])] == (
        pins["sampled"]["sha256"]
    )
    manifest = json.loads((Path(out.details["prepared_dir"]) / "manifest.json").read_text())
    assert manifest["source_sha256"] == pins["sampled"]["sha256"]
    gets = stage.list_gets()
    again = stage.setup()
    assert again.details["dataset_pins"] == pins and stage.list_gets() == gets


def test_a_file_whose_md5_differs_is_refused_naming_both_sums(stage: Stage) -> None:
    """Other bytes placed as the sampled set: the error names the file's MD5 and the published one with its
    sources; nothing is unpickled or prepared, and the CLI exits 2."""
    other = stage.data["sampled"] + b"\x00"
    stage.place({"sampled": other})
    with pytest.raises(InputError) as err:
        stage.setup()
    msg = err.value.message
    assert f"MD5 {md5(other)} differs from {md5(stage.data['sampled'])}, published by amd-resource-checker" in msg
    assert "not unpickled" in msg and err.value.next_command.startswith("delete ")
    assert not (stage.ws.preprocessed / stage.rec.dataset.name / "manifest.json").exists()


def test_the_list_and_the_published_md5_must_agree(stage: Stage) -> None:
    """MLCommons' list gives another MD5 than the benchmark's published one, which the bytes match: the sources
    disagree, so neither is trusted; a file with no published MD5 is held to the list (the calibration file)."""
    stage.place()
    sampled, calib = (stage.recipe.dataset.files[r] for r in ("sampled", "calibration"))
    mine = md5(stage.data["sampled"])
    stage.serve_list("sampled", f"{'1' * 32}  {sampled}\n".encode())
    with pytest.raises(InputError, match=f"gives MD5 {'1' * 32}, the benchmark file's published {mine}") as err:
        stage.setup()
    assert "the two sources disagree" in err.value.message
    stage.serve_list("sampled", f"{mine}  {sampled}\n".encode())
    stage.serve_list("calibration", f"{'1' * 32}  {calib}\n".encode())
    with pytest.raises(InputError, match=f"MD5 {md5(stage.data['calibration'])} differs from {'1' * 32}, MLCommons"):
        stage.setup()


def test_an_unreadable_list_falls_back_to_the_r2_downloaders_copy(stage: Stage) -> None:
    """The list URL answers a login page (Cloudflare Access) or 404: the copy the R2 downloader left beside the
    files is used and named; with no copy, the refusal says how to get one."""
    stage.place()
    stage.serve_list("sampled", b"<html><body>Sign in with Cloudflare Access</body></html>")
    stage.hub.static.pop(stage.lists["calibration"].split("/static/", 1)[1])
    with pytest.raises(InputError) as err:
        stage.setup()
    assert "could not be read" in err.value.message and "-d " in err.value.next_command
    for role, fname in stage.recipe.dataset.files.items():
        name = stage.lists[role].rsplit("/", 1)[-1]
        (stage.folder / name).write_text(f"{md5(stage.data[role])}  ./{fname}\n")
    out = stage.setup()
    assert out.status == "done"
    for role in ("sampled", "calibration"):
        assert out.details["dataset_pins"][role]["list_from"] == str(stage.folder / stage.lists[role].rsplit("/")[-1])


def test_a_file_changed_after_setup_is_checked_again(stage: Stage) -> None:
    """The SHA-256 recorded at the first setup is what later setups compare: other bytes are checked against every
    pin again (and refused), not taken for the verified file."""
    stage.place()
    stage.setup()
    stage.place({"calibration": stage.data["calibration"] + b" "})
    with pytest.raises(InputError, match="differs from .*MLCommons' list"):
        stage.setup()


def test_llama2_is_held_to_its_sha256_and_its_published_md5(tmp_path: Path) -> None:
    """nd-gb300-v6 fetches its sampled set from the mirror URL: a file matching the SHA-256 pin but not the
    published MD5 (the two pins disagree) is refused after a fresh download, naming both MD5s."""
    with HubServer() as hub:
        stage = Stage(hub, tmp_path, "nd-gb300-v6")
        assert stage.setup().details["dataset_pins"]["sampled"]["published_md5"] == md5(stage.data["sampled"])
        (stage.folder / stage.recipe.dataset.files["sampled"]).unlink()
        with pytest.raises(ReproError) as err:
            stage.setup(stage.with_published("sampled", "2" * 32))
    assert f"MD5 {md5(stage.data['sampled'])} differs from {'2' * 32}" in err.value.message
    assert "after a fresh download" in err.value.message


def test_md5sum_lists_parse_as_md5sum_writes_them() -> None:
    assert parse_md5_list(b"25d9f2085bbcacb07554cd7f4af303c9  a.pkl\n", "x") == {
        "a.pkl": "25d9f2085bbcacb07554cd7f4af303c9"
    }
    assert parse_md5_list(b"25D9F2085BBCACB07554CD7F4AF303C9 *./d/a.pkl\r\n", "x") == {
        "a.pkl": "25d9f2085bbcacb07554cd7f4af303c9"
    }
    for bad in (b"<html>", b"\xff\xfe", b"a.pkl 25d9"):
        with pytest.raises(ValueError):
            parse_md5_list(bad, "x")
    with pytest.raises(ValueError, match="twice"):
        parse_md5_list(b"0" * 32 + b"  a\n" + b"1" * 32 + b"  d/a\n", "x")


def test_a_list_is_fetched_over_https_on_every_hop() -> None:
    """https, or plain http to this machine only; a redirect to plain http elsewhere is refused before it is
    requested; an oversized answer is not read past its cap."""
    assert secure_url("https://inference.mlcommons-storage.org/metadata/x.md5") and secure_url("http://127.0.0.1:9/x")
    assert not secure_url("http://inference.mlcommons-storage.org/metadata/x.md5") and not secure_url("ftp://x/y")

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if self.path == "/big":
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"0" * 5000)
                return
            self.send_response(302)
            self.send_header("Location", "http://mirror.example.invalid/x.md5")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(TransferError, match="mirror.example.invalid/x.md5: refused \\(not https\\)"):
            fetch_small(f"{base}/x.md5", 4096)
        with pytest.raises(TransferError, match="more than 4,096 bytes"):
            fetch_small(f"{base}/big", 4096)
    finally:
        server.shutdown()
        server.server_close()
