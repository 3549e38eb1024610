"""Fuzz and property suite (issue #16) over every input a user or a result folder can supply.

Properties, for every generated input: the exit code is 0, 1 or 2; no traceback (no exception escapes the
CLI's error edge); no file outside the output folder changes; generated scripts pass `bash -n` and shellcheck.
Examples are bounded and derandomized so the suite runs in a few minutes on 2 cores; the Slurm script
property (shellcheck per example) is marked slow.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES
from contradicting import BUNDLE_EDITS, VM_EDITS, build
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from repro.cli import app

RECIPE = "nd-gb300-v6"
VM = FIXTURES / "azure-nd-gb300-v6-rack" / "ND_GB300_v6_1"
SYSTEM = FIXTURES / "azure-nd-gb300-v6-rack" / "ND_GB300_v6.json"

FUZZ = settings(
    max_examples=int(os.environ.get("REPRO_FUZZ_EXAMPLES", "50")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)

# Hostile scalars: numbers at the edges, text with shell, terminal and Markdown metacharacters.
NUMBERS = st.one_of(
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e308, -1e308, 10**400]),
)
NASTY_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "$(touch INJECTED)",
            "`touch INJECTED`",
            "a\nb",
            "\x1b[2J",
            "<img src=x onerror=alert(1)>",
            "--privileged",
            "../../etc/passwd",
            "/dev/zero",
            "|",
            "%A",
            "\x00",
            "'\"",
            "nan",
            "inf",
            "",
        ]
    ),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, NASTY_TEXT)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(NASTY_TEXT, inner, max_size=4)),
    max_leaves=12,
)


def _dumps(value: object) -> str:
    return json.dumps(value, allow_nan=True, default=str)


def _tree_digest(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@contextmanager
def sandbox() -> Iterator[Path]:
    """A fresh folder per example, used as the working directory and REPRO_HOME, removed afterwards."""
    old_cwd, old_home = os.getcwd(), os.environ.get("REPRO_HOME")
    root = Path(tempfile.mkdtemp(prefix="repro-fuzz-"))
    (root / "cwd").mkdir()
    os.chdir(root / "cwd")
    os.environ["REPRO_HOME"] = str(root / "home")
    try:
        yield root
    finally:
        os.chdir(old_cwd)
        if old_home is None:
            os.environ.pop("REPRO_HOME", None)
        else:
            os.environ["REPRO_HOME"] = old_home
        shutil.rmtree(root, ignore_errors=True)


def check(args: list[str], root: Path, inputs: Path, allowed: tuple[int, ...] = (0, 1, 2)) -> None:
    """Run the CLI in-process; assert the exit code, no escaped exception, and inputs and cwd untouched."""
    before = _tree_digest(inputs)
    res = CliRunner().invoke(app, args)
    exc = res.exception
    assert exc is None or isinstance(exc, SystemExit), f"{args}: {type(exc).__name__}: {exc}"
    assert res.exit_code in allowed, (args, res.exit_code, res.output[-1500:])
    assert "Traceback" not in res.output
    assert _tree_digest(inputs) == before, f"{args} changed its input folder"
    assert not any((root / "cwd").iterdir()), f"{args} wrote into the working directory"
    assert not (root / "cwd" / "INJECTED").exists() and not (inputs / "INJECTED").exists()


def _vm_copy(root: Path) -> Path:
    dest = root / "in" / "ND_GB300_v6_1"
    shutil.copytree(VM, dest)
    shutil.copy(SYSTEM, root / "in")
    return dest


def _summary(folder: Path) -> Path:
    return next(folder.rglob("mlperf_log_summary.txt"))


# Log files -------------------------------------------------------------------------------------------------------

SUMMARY_KEYS = [
    "Tokens per second",
    "Samples per second",
    "Result is",
    "Scenario",
    "SUT name",
    "min_duration (ms)",
    "Completed tokens per second",
    "Early stopping",
]


@FUZZ
@given(
    edits=st.lists(st.tuples(st.sampled_from(SUMMARY_KEYS), st.one_of(NUMBERS.map(str), NASTY_TEXT)), max_size=5),
    junk=st.binary(max_size=200),
    drop=st.booleans(),
)
def test_summary_log(edits: list[tuple[str, str]], junk: bytes, drop: bool) -> None:
    with sandbox() as root:
        vm = _vm_copy(root)
        path = _summary(vm)
        lines = path.read_text().splitlines()
        for key, value in edits:
            lines = [f"{key}: {value}" if ln.split(":")[0].strip() == key else ln for ln in lines]
        if drop:
            lines = lines[: len(lines) // 2]
        path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + junk)
        check(["verify", str(vm)], root, root / "in")


MLLOG_ENTRY = st.dictionaries(st.sampled_from(["key", "value", "metadata"]), JSON_VALUES).map(_dumps)


@FUZZ
@given(
    entries=st.lists(st.one_of(JSON_VALUES.map(_dumps), MLLOG_ENTRY, st.just("[" * 5000)), max_size=6),
    keep=st.booleans(),
)
def test_detail_log(entries: list[str], keep: bool) -> None:
    with sandbox() as root:
        vm = _vm_copy(root)
        path = next(vm.rglob("mlperf_log_detail.txt"))
        head = path.read_text().splitlines() if keep else []
        path.write_text("\n".join(head + [f":::MLLOG {e}" for e in entries]) + "\n")
        check(["verify", str(vm), "--json"], root, root / "in")


@FUZZ
@given(
    system=st.one_of(
        JSON_VALUES,
        st.dictionaries(st.sampled_from(["accelerators_per_node", "system_name", "number_of_nodes"]), JSON_VALUES),
    ),
    deep=st.integers(0, 3),
)
def test_system_json(system: object, deep: int) -> None:
    with sandbox() as root:
        vm = _vm_copy(root)
        text = _dumps(system) if deep < 3 else '{"accelerators_per_node": ' + "[" * 100_000 + "]" * 100_000 + "}"
        (root / "in" / "ND_GB300_v6.json").write_text(text)
        check(["verify", str(vm)], root, root / "in")
        check(["aggregate", str(root / "in"), "--json"], root, root / "in")


ROUGE_KEYS = st.sampled_from(["rouge1", "rouge2", "rougeL", "gen_len", "tokens_per_sample"])


@FUZZ
@given(text=st.one_of(st.text(max_size=200), st.dictionaries(ROUGE_KEYS, NUMBERS).map(str)))
def test_accuracy_file(text: str) -> None:
    with sandbox() as root:
        vm = _vm_copy(root)
        for acc in vm.rglob("accuracy.txt"):
            acc.write_text(text)
        check(["verify", str(vm)], root, root / "in")


@FUZZ
@given(
    info=st.one_of(
        JSON_VALUES,
        st.fixed_dictionaries(
            {"recipe": NASTY_TEXT},
            optional={
                "scenario": NASTY_TEXT,
                "label": SCALARS,
                "incomplete": SCALARS,
                "status": NASTY_TEXT,
                "gpus": JSON_VALUES,
            },
        ),
    )
)
def test_run_json(info: object) -> None:
    with sandbox() as root:
        vm = _vm_copy(root)
        (_summary(vm).parent / "run.json").write_text(_dumps(info))
        check(["verify", str(vm)], root, root / "in")


@FUZZ
@given(data=st.data(), base=st.sampled_from(["vm", "bundle"]), seed=st.integers(0, 2**32 - 1))
def test_self_contradicting_result_folder_never_passes(data: st.DataObject, base: str, seed: int) -> None:
    """Issue #29 item 2: several disagreements at once between a run's own files (tests/contradicting.py): FAIL,
    NOT A REPRODUCTION or an input error, never a PASS, a traceback or a changed input."""
    edits = VM_EDITS if base == "vm" else BUNDLE_EDITS
    names = data.draw(st.lists(st.sampled_from(sorted(edits)), min_size=1, max_size=3, unique=True))
    with sandbox() as root:
        args = build(root / "in", base, names, random.Random(seed))
        check(args, root, root / "in", allowed=(1, 2))


# Workspace and rack state ----------------------------------------------------------------------------------------

STEP = st.fixed_dictionaries(
    {},
    optional={
        "status": NASTY_TEXT | st.sampled_from(["done", "running", "failed"]),
        "inputs_hash": SCALARS,
        "started": SCALARS,
        "pid": NUMBERS,
        "host": SCALARS,
        "outputs": JSON_VALUES,
        "details": JSON_VALUES,
    },
)


@FUZZ
@given(
    ledger=st.one_of(
        JSON_VALUES,
        st.fixed_dictionaries(
            {"schema_version": SCALARS},
            optional={"steps": st.dictionaries(NASTY_TEXT, STEP, max_size=3), "facts": JSON_VALUES},
        ),
    )
)
def test_ledger(ledger: object) -> None:
    with sandbox() as root:
        home = root / "home"
        home.mkdir()
        (home / "ledger.json").write_text(_dumps(ledger))
        inputs = root / "in"
        inputs.mkdir()
        check(["status", "--recipe", RECIPE, "--json"], root, inputs)
        check(["status"], root, inputs)


RACK_FIELDS = [
    "recipe",
    "recipe_file",
    "nodes",
    "partition",
    "container_image",
    "workspace",
    "repro_bin",
    "jobs",
    "backend",
    "label",
    "samples",
    "duration_s",
    "sim_rate",
    "kind",
]


def _manifest(root: Path) -> dict[str, object]:
    return {
        "kind": "repro-rack",
        "recipe": RECIPE,
        "backend": "sim",
        "label": "simulated",
        "nodes": 2,
        "partition": None,
        "container_image": None,
        "duration_s": None,
        "samples": 16,
        "sim_rate": None,
        "workspace": str(root / "home"),
        "repro_bin": "repro",
        "script": "rack.sbatch",
        "jobs": [],
    }


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(RACK_FIELDS), JSON_VALUES, min_size=1, max_size=3))
def test_rack_json(changes: dict[str, object]) -> None:
    with sandbox() as root:
        rack = root / "in" / "rack"
        rack.mkdir(parents=True)
        (rack / "rack.json").write_text(_dumps(_manifest(root) | changes))
        check(
            ["run", "offline", "--launcher", "slurm", "--rerun-failed", str(rack), "--dry-run", "--json"],
            root,
            root / "in",
        )


# Recipe files ----------------------------------------------------------------------------------------------------


def _recipe_doc() -> dict[str, object]:
    return yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes" / f"{RECIPE}.yaml").read_text())


@FUZZ
@given(
    path=st.lists(
        st.sampled_from(
            [
                "system",
                "model",
                "dataset",
                "trtllm",
                "loadgen",
                "published",
                "name",
                "gpus_per_vm",
                "samples",
                "tp_size",
                "band_pct",
            ]
        ),
        min_size=1,
        max_size=2,
    ),
    value=JSON_VALUES,
    raw=st.one_of(st.none(), st.text(max_size=100), st.just("[" * 10_000)),
)
def test_recipe_file(path: list[str], value: object, raw: str | None) -> None:
    with sandbox() as root:
        inputs = root / "in"
        inputs.mkdir()
        target = inputs / f"{RECIPE}.yaml"
        doc = _recipe_doc()
        node = doc
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node
        if isinstance(node, dict):
            node[path[-1]] = value
        target.write_text(raw if raw is not None else yaml.safe_dump(doc))
        check(["recipes", "validate", str(target)], root, inputs)
        check(["recipes", "show", str(target), "--json"], root, inputs)


# CLI values that reach scripts -----------------------------------------------------------------------------------


@FUZZ
@given(partition=st.one_of(st.none(), NASTY_TEXT), image=st.one_of(st.none(), NASTY_TEXT))
def test_cli_values_reach_no_script_unchecked(partition: str | None, image: str | None) -> None:
    with sandbox() as root:
        inputs = root / "in"
        inputs.mkdir()
        args = ["run", "offline", "--launcher", "slurm", "--nodes", "2", "--recipe", RECIPE, "--dry-run", "--json"]
        args += ["--partition", partition] if partition is not None else []
        args += ["--container-image", image] if image is not None else ["--backend", "sim"]
        check(args, root, inputs)


def _lint(script: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as fh:
        fh.write(script)
    try:
        syntax = subprocess.run(["bash", "-n", fh.name], capture_output=True, text=True)
        assert syntax.returncode == 0, syntax.stderr
        if shutil.which("shellcheck"):
            sc = subprocess.run(["shellcheck", "-S", "warning", fh.name], capture_output=True, text=True)
            assert sc.returncode == 0, sc.stdout
    finally:
        os.unlink(fh.name)


@pytest.mark.slow
@settings(FUZZ, max_examples=int(os.environ.get("REPRO_FUZZ_SCRIPTS", "25")))
@given(
    home=NASTY_TEXT.filter(lambda s: "\x00" not in s and "/" not in s and s not in ("", ".", "..")),
    repro_bin=NASTY_TEXT.filter(lambda s: "\x00" not in s),
    nodes=st.integers(1, 64),
    samples=st.one_of(st.none(), st.integers(1, 10**9)),
)
def test_generated_script_passes_bash_n_and_shellcheck(
    home: str, repro_bin: str, nodes: int, samples: int | None
) -> None:
    from repro.core.recipes import get_recipe
    from repro.run.rack import RackPlan, render_script

    base = Path(tempfile.gettempdir()) / "repro-fuzz-home" / home
    plan = RackPlan(
        get_recipe(RECIPE), base / "racks" / "r", nodes, base, backend="sim", samples=samples, repro_bin=repro_bin
    )
    script = render_script(plan)
    _lint(script)
    benign = render_script(
        RackPlan(
            get_recipe(RECIPE),
            Path("/w/racks/r"),
            nodes,
            Path("/w"),
            backend="sim",
            samples=samples,
            repro_bin="/usr/bin/repro",
        )
    )
    assert len(script.split("\n")) == len(benign.split("\n")), "a value added a line to the script"


# Issue 29: a hub listing is untrusted. Names a mirror could list: traversal in every spelling, absolute paths,
# and arbitrary text. Setup (dry run and real) must exit 0 or 2, write nothing outside the workspace's model
# folder, and never fetch a name that leaves it.
LISTED_NAMES = st.one_of(
    st.sampled_from(
        [
            "../../../victim.json",
            "sub/../../../../victim.json",
            "./../victim.json",
            "..",
            "a/..",
            "/tmp/victim.json",
            "//victim.json",
            "sub//../../victim.json",
            "..\\..\\victim.json",
            "\x1b]52;c;eA==\x07.json",
            "<img src=x onerror=alert(1)>.json",
            "[link=https://e.example/]x[/link].json",
        ]
    ),
    st.lists(st.sampled_from(["..", ".", "sub", "x.json", "", "\u202e", "%2e%2e"]), min_size=1, max_size=6).map(
        "/".join
    ),
)


@pytest.fixture(scope="module")
def hub_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    from setup_helpers import build_tokenizer_dir, model_files

    return model_files(build_tokenizer_dir(tmp_path_factory.mktemp("tok") / "tok"), shard_sizes=(2_000,))


@settings(FUZZ, max_examples=int(os.environ.get("REPRO_FUZZ_HUB", "20")))
@given(names=st.lists(LISTED_NAMES, min_size=1, max_size=3, unique=True), dry_run=st.booleans())
def test_hub_listing_never_writes_outside_the_model_folder(
    hub_files: dict[str, bytes], names: list[str], dry_run: bool
) -> None:
    from hubserver import HubServer, Repo
    from setup_helpers import MODEL_REPO, write_recipe

    with sandbox() as root:
        victim = root / "victim.json"
        victim.write_text("precious")
        outside = _tree_digest(root)
        server = HubServer()
        server.model = server.add(Repo(MODEL_REPO, {**hub_files, **{n: b'{"x": 1}' for n in names}}))
        # a pinned sampled set (the pin itself never matches here): setup gets past its pin check to the downloads
        pins = {"sampled": "0" * 64, "calibration": "unknown"}
        recipe = write_recipe(root / "cwd", revision=server.model.commit, base_url=server.url, sha256=pins)
        env = {"HF_ENDPOINT": server.url, "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(root / "hf-home")}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            with server:
                res = CliRunner().invoke(app, ["setup", "--recipe", str(recipe), *(["--dry-run"] if dry_run else [])])
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        exc = res.exception
        assert exc is None or isinstance(exc, SystemExit), f"{names}: {type(exc).__name__}: {exc}"
        assert res.exit_code in (0, 1, 2), (names, res.exit_code, res.output[-1500:])
        assert victim.read_text() == "precious"
        after = _tree_digest(root)
        changed = {
            p
            for p in set(outside) | set(after)
            if outside.get(p) != after.get(p) and not p.startswith(("home/", "hf-home/", "cwd/"))
        }
        assert not changed, f"{names}: setup changed {changed} outside the workspace"
        models = root / "home" / "models"
        for p in models.rglob("*") if models.exists() else []:
            assert p.resolve().is_relative_to(models.resolve()), p


# ---- issue #36: pickles, redirects, output targets, transfers ----------------------------------------------------

DANGEROUS_GLOBALS = [
    ("os", "system"),
    ("posix", "system"),
    ("subprocess", "Popen"),
    ("builtins", "eval"),
    ("builtins", "exec"),
    ("builtins", "getattr"),
    ("builtins", "__import__"),
    ("builtins", "open"),
    ("functools", "partial"),
    ("operator", "attrgetter"),
    ("copyreg", "_reconstructor"),
    ("pandas", "read_pickle"),
    ("numpy", "load"),
    ("pyarrow.lib", "_restore_array"),
    ("pandas.io.pickle", "read_pickle"),
]


def _payload(module: str, name: str, marker: Path) -> bytes:
    """Protocol 4: GLOBAL module name, args (marker path), REDUCE, wrapped as the value of a DataFrame-ish dict."""

    def short(text: str) -> bytes:
        raw = text.encode()
        return b"\x8c" + bytes([len(raw)]) + raw

    return b"\x80\x04" + short(module) + short(name) + b"\x93" + short(f"touch {marker}") + b"\x85R."


@st.composite
def pickles(draw: st.DrawFn, marker: Path) -> bytes:
    from repro.setup.frame_encode import encode_frame

    kind = draw(st.sampled_from(["frame", "payload", "mutated", "payload-in-frame"]))
    rows = draw(st.integers(0, 5))
    good = encode_frame(
        {
            "input": [draw(st.text(max_size=20)) for _ in range(rows)],
            "tok_input": [draw(st.lists(st.integers(0, 2**31 - 1), max_size=5)) for _ in range(rows)],
        }
    )
    if kind == "frame":
        return good
    module, name = draw(st.sampled_from(DANGEROUS_GLOBALS))
    bad = _payload(module, name, marker)
    if kind == "payload":
        return bad
    if kind == "payload-in-frame":
        cut = draw(st.integers(2, max(2, len(good) - 1)))
        return good[:cut] + bad[2:-1] + good[cut:]  # the payload opcodes spliced into a real frame's stream
    data = bytearray(good)
    for _ in range(draw(st.integers(1, 8))):
        pos = draw(st.integers(0, len(data) - 1))
        data[pos] = draw(st.integers(0, 255))
    return bytes(data)


@pytest.fixture(scope="module")
def decode_server():
    """Each generated pickle is decoded in its own forked child (tests/decode_forkserver.py), which reports how it
    ended: a crash (a signal) is counted, not only a Python call."""
    from decode_fuzz import ForkServer

    server = ForkServer()
    yield server
    server.close()


@settings(FUZZ, max_examples=int(os.environ.get("REPRO_FUZZ_PICKLES", "200")))
@given(data=st.data(), pinned=st.booleans())
def test_generated_pickles_never_run_code(data: st.DataObject, pinned: bool, decode_server) -> None:
    """Whatever the bytes and whether or not their checksum is "pinned": a table or one clean refusal from a child
    that exited (never a signal), and the payload's marker file never appears."""
    import hashlib

    from repro.core.errors import InputError
    from repro.setup.safe_pickle import read_pinned

    with sandbox() as root:
        marker = root / "payload-ran"
        blob = data.draw(pickles(marker))
        path = root / "x.pkl"
        path.write_bytes(blob)
        pin = hashlib.sha256(blob).hexdigest() if pinned else "unknown"
        try:
            checked = read_pinned(path, pin, next_step="x")
        except InputError:
            assert not pinned
        else:
            end = decode_server.decode(checked)
            assert end.get("exit") in (0, 2), end
        assert not marker.exists(), blob


HOPS = st.lists(
    st.tuples(
        st.sampled_from(["hub", "cdn"]),
        st.sampled_from(["127.0.0.1", "localhost"]),
        st.sampled_from([301, 302, 303, 307, 308]),
        st.booleans(),
    ),
    max_size=5,
)


class _Recorder:
    """Two real HTTP servers (the hub and a CDN) that redirect along a script and record each request's auth."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.seen: list[tuple[str, str, bool]] = []
        self.script: list[tuple[str, str, int, bool]] = []
        rec = self

        def handler(name: str) -> type[BaseHTTPRequestHandler]:
            class H(BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"

                def log_message(self, *a: object) -> None:
                    pass

                def do_GET(self) -> None:
                    rec.seen.append((name, self.headers.get("Host", ""), bool(self.headers.get("Authorization"))))
                    k = int(self.path.rsplit("/", 1)[-1])
                    if k < len(rec.script):
                        server, host, status, relative = rec.script[k]
                        port = rec.ports[server]
                        same = server == name and host == self.headers.get("Host", "").split(":")[0]
                        loc = f"/hop/{k + 1}" if relative and same else f"http://{host}:{port}/hop/{k + 1}"
                        self.send_response(status)
                        self.send_header("Location", loc)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")

            return H

        self.servers = {n: ThreadingHTTPServer(("127.0.0.1", 0), handler(n)) for n in ("hub", "cdn")}
        self.ports = {n: s.server_address[1] for n, s in self.servers.items()}
        import threading

        for s in self.servers.values():
            threading.Thread(target=s.serve_forever, daemon=True).start()

    def close(self) -> None:
        for s in self.servers.values():
            s.shutdown()
            s.server_close()


@pytest.fixture(scope="module")
def redirectors() -> Iterator[_Recorder]:
    rec = _Recorder()
    yield rec
    rec.close()


@settings(FUZZ, max_examples=int(os.environ.get("REPRO_FUZZ_REDIRECTS", "60")))
@given(hops=HOPS)
def test_the_token_only_reaches_the_hubs_own_origin(redirectors: _Recorder, hops: list) -> None:
    """Any chain of redirects between the hub (127.0.0.1:P) and a CDN (another port), by IP or by name: a request
    carries the token exactly when it goes to the hub's origin as HF_ENDPOINT names it."""
    from repro.setup.transfer import Limits, open_url

    redirectors.script, redirectors.seen = list(hops), []
    hub = f"http://127.0.0.1:{redirectors.ports['hub']}"
    _, resp = open_url("GET", f"{hub}/hop/0", token="hf_fuzzTokenAAAA", hub=hub, headers={}, limits=Limits(stall_s=5))
    with resp:
        assert resp.read() == b"ok"
    assert len(redirectors.seen) == len(hops) + 1
    for name, host, auth in redirectors.seen:
        assert auth == (name == "hub" and host == f"127.0.0.1:{redirectors.ports['hub']}"), (hops, redirectors.seen)


OUTPUT_SHAPES = ["missing", "regular", "fifo", "socket", "symlink-to-file", "symlink-to-stdout", "dangling", "dir"]


@settings(FUZZ, max_examples=int(os.environ.get("REPRO_FUZZ_OUTPUTS", "24")))
@given(shape=st.sampled_from(OUTPUT_SHAPES), option=st.sampled_from(["--html", "--markdown"]))
def test_report_outputs_never_replace_what_is_not_a_regular_file(shape: str, option: str) -> None:
    import socket
    import stat

    with sandbox() as root:
        out = root / "out" / "report.x"
        out.parent.mkdir()
        victim = root / "victim.txt"
        victim.write_text("precious")
        if shape == "regular":
            out.write_text("old")
        elif shape == "fifo":
            os.mkfifo(out)
        elif shape == "socket":
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(out))
            s.close()
        elif shape == "symlink-to-file":
            out.symlink_to(victim)
        elif shape == "symlink-to-stdout":
            out.symlink_to("/dev/stdout")
        elif shape == "dangling":
            out.symlink_to(root / "nowhere")
        elif shape == "dir":
            out.mkdir()
        before = os.lstat(out) if shape != "missing" else None
        res = CliRunner().invoke(app, ["report", str(FIXTURES / "azure-nd-gb300-v6-rack"), option, str(out)])
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
        assert victim.read_text() == "precious"
        if shape in ("missing", "regular"):
            assert res.exit_code == 1, res.output[-1500:]  # written; the rack's verdict (a FAIL VM) is the exit
            assert stat.S_ISREG(os.lstat(out).st_mode) and out.read_text() != "old"
        else:
            assert res.exit_code == 2, res.output[-1500:]
            after = os.lstat(out)
            assert before is not None and (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
        assert sorted(p.name for p in out.parent.iterdir()) == ["report.x"]


@settings(FUZZ, max_examples=int(os.environ.get("REPRO_FUZZ_TRANSFERS", "12")))
@given(
    mode=st.sampled_from(["trickle", "silent", "drip-headers", "endless", "long-length"]),
    interval=st.sampled_from([0.05, 0.3, 2.0]),
    size=st.integers(1, 200_000),
)
def test_every_transfer_ends_within_its_bound(mode: str, interval: float, size: int) -> None:
    """Whatever the hostile server does: done or one error within two stall windows (plus slack), never more than
    the expected bytes on disk; only a complete body finishes."""
    import time

    from hostile_server import TrickleServer

    from repro.core.errors import ReproError
    from repro.setup.transfer import Limits, download

    stall = 0.6
    with sandbox() as root, TrickleServer(mode, interval=interval, size=size) as srv:
        part = root / "f.incomplete"
        t0 = time.monotonic()
        try:
            download(f"{srv.url}/f", part, expected_size=size, token=None, hub=None, limits=Limits(stall_s=stall))
            finished = True
        except ReproError:
            finished = False
        assert time.monotonic() - t0 < 2 * stall + 1.5, mode
        assert part.stat().st_size <= size
        if finished:  # only an honest (if slow) body can finish, and then it is whole
            assert mode == "trickle" and part.stat().st_size == size
