"""Issue #44 item 1: a name in a recipe or benchmark file is a name, never a path; nothing is written outside the
workspace.

`dataset.files.sampled: ../../../.bashrc` with a URL serving other bytes once made `repro setup` replace the user's
~/.bashrc. Here every path-like field of a recipe and of a benchmark file is given traversals, absolute paths,
separator and dot look-alikes, control characters and overlong names: `repro recipes validate` and `repro setup`
(against a real local hub) refuse each with exit 2 and one line naming the file and the field, and a decoy HOME
around the workspace is byte-for-byte and mtime-for-mtime what it was. Links planted inside the workspace that
point outside are refused where setup, build and run write.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import CLI, cli
from hubserver import HubServer, Repo
from setup_helpers import MODEL_REPO, N_CALIB, N_SAMPLES, build_tokenizer_dir, model_files, write_parquet, write_recipe

from repro.core.benchmarks import SHIPPED, load_benchmark
from repro.core.names import NAME_MAX, name_problem
from repro.setup.preprocess import build_from_parquet

SAMPLED = f"open_orca_gpt4_tokenized_llama.sampled_{N_SAMPLES}.pkl"
DATASET = load_benchmark("llama2-70b-99").dataset
RAW = DATASET.raw
assert RAW is not None

# Values that are not names, whichever field holds them. `{home}` is the decoy HOME's absolute path.
HOSTILE: list[str] = [
    *("../" * k + ".bashrc" for k in range(1, 8)),
    "..",
    ".",
    "...",
    "../../../../elsewhere/ds",
    "ok/../../x",
    "a/b",
    "sub/",
    "/etc/passwd",
    "{home}/.bashrc",
    "{home}",
    "~/.bashrc",
    "~",
    "\\\\server\\share",
    "..\\..\\x",
    "C:\\x",
    "",
    "x\x00y",
    "x\ny",
    "x\r",
    "\tx",
    "x\x1b[2Jy",
    "x\x7f",
    "x\u0085y",
    "x\u2028y",
    "x\u202egpj.exe",
    "\u2215etc\u2215passwd",  # DIVISION SLASH
    "\u2044x",  # FRACTION SLASH
    "\uff0e\uff0e\uff0f.bashrc",  # FULLWIDTH FULL STOP x2, FULLWIDTH SOLIDUS
    "\u2024\u2024",  # ONE DOT LEADER x2
    "\u0430dmin",  # CYRILLIC a
    ".bashrc",
    "-rf",
    "+x",
    "_x",
    "a b",
    "a;rm",
    "$(id)",
    "a" * (NAME_MAX + 1),
    "b" * 5000,
]

# Recipe fields whose value is joined onto a workspace folder (setup, build-engine, run). Each value is put there
# through `form` (a repository id has an owner part).
RECIPE_FIELDS: dict[str, str] = {
    "dataset.name": "{v}",
    "dataset.files.sampled": "{v}",
    "dataset.files.calibration": "{v}",
    "dataset.calibration_dir": "{v}",
    "dataset.raw.file": "{v}",
    "dataset.raw.repo": "Open-Orca/{v}",
    "model.repo_id": "meta-test/{v}",
    "quantization.output_name": "{v}",
    "benchmark": "{v}",
}
BENCHMARK_FIELDS: dict[str, str] = {
    "dataset.name": "{v}",
    "dataset.files.sampled": "{v}",
    "dataset.calibration_dir": "{v}",
    "dataset.raw.file": "{v}",
    "model.repo_id": "meta-llama/{v}",
    "mlperf_model": "{v}",
    "result_names.0": "{v}",
    "scenarios.Offline.mlperf_model": "{v}",
}
SLASH_OK = {"model.repo_id", "dataset.raw.repo"}  # 'owner/a/b' is still refused, 'owner/' too


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def _value(form: str, raw: str, home: Path) -> str:
    return form.format(v=raw.replace("{home}", str(home)))


def _one_error_line(stderr: str) -> str:
    """The error is one line, followed only by its Next line (progress lines may come before it)."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    at = [i for i, ln in enumerate(lines) if ln.startswith("error:")]
    assert len(at) == 1, stderr
    assert all(ln.startswith("Next:") for ln in lines[at[0] + 1 :]), stderr
    return lines[at[0]]


def _no_raw_control(text: str) -> None:
    bad = [
        hex(ord(ch)) for ch in text if ch != "\n" and (ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u202e")
    ]
    assert not bad, (bad, text[-2000:])


def snapshot(root: Path, skip: tuple[Path, ...]) -> dict[str, tuple[int, int, int, str]]:
    """Every entry under root but `skip`: mode, size, mtime_ns and (files) sha256, links not followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in [*dirnames, *filenames]:
            p = here / name
            st = os.lstat(p)
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else ""
            out[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    st = os.lstat(root)
    out["."] = (st.st_mode, st.st_size, st.st_mtime_ns, "")
    return out


# ---------------------------------------------------------------- the name rule itself


def test_no_hostile_value_is_a_name() -> None:
    assert [v for v in HOSTILE if name_problem(v.replace("{home}", "/home/u")) is None] == []


def test_real_names_are_names() -> None:
    names = [
        SAMPLED,
        "mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl",
        "1M-GPT4-Augmented.parquet",
        "llama2-70b-chat-hf-torch-fp8",
        "a" * NAME_MAX,
        "x..y",
    ]
    assert {n: name_problem(n) for n in names} == dict.fromkeys(names)


# ---------------------------------------------------------------- `repro recipes validate`


def _recipe_data(tmp_path: Path) -> dict[str, Any]:
    data = yaml.safe_load(write_recipe(tmp_path, revision="0" * 40, base_url="http://127.0.0.1:9").read_text())
    data["dataset"]["raw"] = RAW.model_dump()
    return data


def _values(field: str) -> list[str]:
    return [v for v in HOSTILE if not (field in SLASH_OK and v == "a/b")]


def _validate_all(paths: list[Path], env: dict[str, str] | None = None) -> list[str]:
    """`repro recipes validate` of every file at once: exit 2, each one's error (one line), no raw control char."""
    res = cli("recipes", "validate", *map(str, paths), "--json", env=env)
    assert res.exit_code == 2, res.output
    rows = json.loads(res.stdout)["recipes"]
    assert [r["path"] for r in rows] == [str(p) for p in paths] and not any(r["valid"] for r in rows)
    plain = cli("recipes", "validate", *map(str, paths), env={**(env or {}), "COLUMNS": "200"})
    assert plain.exit_code == 2
    _no_raw_control(plain.output)
    errors = [r["error"] for r in rows]
    assert not [e for e in errors if "\n" in e or "\r" in e]
    return errors


@pytest.mark.parametrize("field", list(RECIPE_FIELDS))
def test_recipes_validate_refuses_a_path_in_every_recipe_field(field: str, tmp_path: Path) -> None:
    paths = []
    for i, raw in enumerate(_values(field)):
        data = _recipe_data(tmp_path)
        _set(data, field, _value(RECIPE_FIELDS[field], raw, tmp_path))
        path = tmp_path / str(i) / "test-h200.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        paths.append(path)
    for path, error in zip(paths, _validate_all(paths), strict=True):
        assert error.startswith(f"{path}: field '{field}'"), error


def test_a_scenarios_own_checkpoint_name_is_a_name_too(tmp_path: Path) -> None:
    """A per-scenario block (405B Server's own checkpoint) is merged onto the base and held to the same rule."""
    src = Path(__file__).resolve().parents[1] / "recipes" / "nd-gb200-v6-405b.yaml"
    paths = []
    for i, raw in enumerate(_values("quantization.output_name")):
        data = yaml.safe_load(src.read_text(encoding="utf-8"))
        data["scenarios"]["Server"]["quantization"]["output_name"] = _value("{v}", raw, tmp_path)
        path = tmp_path / str(i) / src.name
        path.parent.mkdir()
        path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        paths.append(path)
    for path, error in zip(paths, _validate_all(paths), strict=True):
        named = ("scenarios.Server: output_name", "field 'scenarios.Server.quantization.output_name'")
        assert error.startswith(f"{path}: ") and any(n in error for n in named), error


def _benchmark_file(folder: Path, name: str, field: str | None = None, value: Any = None) -> Path:
    data = yaml.safe_load((SHIPPED / "llama2-70b-99.yaml").read_text(encoding="utf-8"))
    data["name"] = name
    if field is not None:
        _set(data, field, value)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("field", list(BENCHMARK_FIELDS))
def test_a_benchmark_file_with_a_path_in_any_field_is_refused(field: str, tmp_path: Path) -> None:
    paths, benches = [], []
    for i, raw in enumerate(_values(field)):
        value = _value(BENCHMARK_FIELDS[field], raw, tmp_path)
        benches.append(_benchmark_file(tmp_path / "benchmarks", f"hostile-bench-{i}", field, value))
        data = _recipe_data(tmp_path)
        data["benchmark"] = f"hostile-bench-{i}"
        path = tmp_path / str(i) / "test-h200.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        paths.append(path)
    errors = _validate_all(paths, env={"REPRO_BENCHMARKS_PATH": str(tmp_path / "benchmarks")})
    for path, bench, error in zip(paths, benches, errors, strict=True):
        assert error.startswith(f"{path}: field 'benchmark': {bench}: field '{field}'"), error


# ---------------------------------------------------------------- `repro setup` against a real local hub


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The hub with the tiny model, the raw parquet and the two published pickles under /static/."""
    root = tmp_path_factory.mktemp("assets")
    tok = build_tokenizer_dir(root / "tok")
    pq = write_parquet(root / RAW.file)
    pkls = build_from_parquet(pq, tok, root / "published", n_samples=N_SAMPLES, calib_size=N_CALIB)
    server = HubServer()
    server.model = server.add(Repo(MODEL_REPO, model_files(tok, (200_000,))))
    server.add(Repo(RAW.repo, {RAW.file: pq.read_bytes()}, repo_type="dataset"))
    for p in pkls.values():
        server.static[p.name] = p.read_bytes()
    server.pins = {role: hashlib.sha256(p.read_bytes()).hexdigest() for role, p in pkls.items()}
    server.static["other-bytes.pkl"] = b"# replaced by repro\n"
    with server:
        yield server


class Decoy:
    """A HOME with a workspace inside it: every file around the workspace is the user's and must not change."""

    def __init__(self, tmp_path: Path):
        self.top = tmp_path
        self.home = tmp_path / "home"
        self.ws = self.home / "work" / "ws"
        self.hf = tmp_path / "hf-home"
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / "work").mkdir()
        (self.home / ".bashrc").write_text("# the user's own\nexport PATH=$HOME/bin:$PATH\n")
        (self.home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA user\n")
        (tmp_path / "elsewhere").mkdir()
        (self.home / "work" / "notes.txt").write_text("mine\n")
        (tmp_path / "recipes").mkdir()
        self.before = self.now()

    def now(self) -> dict[str, tuple[int, int, int, str]]:
        return snapshot(self.top, (self.ws, self.hf, self.top / "recipes"))

    def env(self, hub: HubServer) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "REPRO_HOME": str(self.ws),
            "HF_ENDPOINT": hub.url,
            "HF_HUB_DISABLE_XET": "1",
            "HF_HOME": str(self.hf),
        }

    def unchanged(self) -> None:
        after = self.now()
        changed = sorted(k for k in set(self.before) | set(after) if self.before.get(k) != after.get(k))
        assert not changed, changed


def _hostile_recipe(decoy: Decoy, hub: HubServer, field: str, value: str) -> Path:
    folder = decoy.top / "recipes"
    path = write_recipe(folder, revision=hub.model.commit, base_url=hub.url, sha256=dict(hub.pins))
    data = yaml.safe_load(path.read_text())
    data["dataset"]["urls"]["sampled"] = f"{hub.url}/static/other-bytes.pkl"
    data["dataset"]["sha256"]["sampled"] = hashlib.sha256(hub.static["other-bytes.pkl"]).hexdigest()
    data["dataset"]["raw"] = RAW.model_dump()
    _set(data, field, value)
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


SETUP_VALUES = [
    *("../" * k + ".bashrc" for k in range(1, 7)),
    "../../../../elsewhere/ds",
    "{home}/.bashrc",
    "{home}/.ssh",
    "\uff0e\uff0e\uff0f.bashrc",
    "..",
    "x\ny",
]


@pytest.mark.parametrize("field", [f for f in RECIPE_FIELDS if f not in ("benchmark", "dataset.raw.repo")])
def test_setup_with_a_path_in_a_recipe_writes_nothing_outside(field: str, served: HubServer, tmp_path: Path) -> None:
    decoy = Decoy(tmp_path)
    seen = len(served.log)
    for raw in SETUP_VALUES:
        recipe = _hostile_recipe(decoy, served, field, _value(RECIPE_FIELDS[field], raw, decoy.home))
        res = cli("setup", "--recipe", str(recipe), "--yes", env=decoy.env(served))
        assert res.exit_code == 2, (raw, res.output)
        line = _one_error_line(res.stderr)
        assert line.startswith(f"error: {recipe}: field '{field}'"), line
        _no_raw_control(res.output)
        assert "delete" not in res.output and "remove" not in res.output
        decoy.unchanged()
    assert not [r for r in served.log[seen:] if r["method"] == "GET"], "a hostile recipe downloaded something"


def test_setup_with_a_hostile_benchmark_file_writes_nothing_outside(served: HubServer, tmp_path: Path) -> None:
    decoy = Decoy(tmp_path)
    for field in ("dataset.name", "dataset.files.sampled", "dataset.calibration_dir", "mlperf_model"):
        for raw in SETUP_VALUES:
            bench = _benchmark_file(
                tmp_path / "recipes" / "b", "evil-bench", field, raw.replace("{home}", str(decoy.home))
            )
            recipe = _hostile_recipe(decoy, served, "benchmark", "evil-bench")
            env = {**decoy.env(served), "REPRO_BENCHMARKS_PATH": str(bench.parent)}
            res = cli("setup", "--recipe", str(recipe), "--yes", env=env)
            assert res.exit_code == 2, (field, raw, res.output)
            line = _one_error_line(res.stderr)
            assert line.startswith(f"error: {recipe}: field 'benchmark': {bench}: field '{field}'"), line
            decoy.unchanged()


@pytest.mark.parametrize(
    "field,value",
    [("dataset.files.sampled", "../../../../.bashrc"), ("dataset.name", "../../../../elsewhere/ds")],
)
def test_the_reported_recipes_in_a_real_process(field: str, value: str, served: HubServer, tmp_path: Path) -> None:
    """The two recipes of the report, as a user runs them (a console process, a HOME with a .bashrc)."""
    decoy = Decoy(tmp_path)
    recipe = _hostile_recipe(decoy, served, field, value)
    env = {**os.environ, **decoy.env(served), "COLUMNS": "80"}
    for argv in (["recipes", "validate", str(recipe)], ["setup", "--recipe", str(recipe), "--yes"]):
        proc = subprocess.run([*CLI, *argv], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        if argv[0] == "setup":
            line = _one_error_line(proc.stderr)
            assert line.startswith(f"error: {recipe}: field '{field}'") and "is a path, not a name" in line, line
            assert "delete" not in proc.stderr
    decoy.unchanged()
    assert not (tmp_path / "elsewhere" / "ds").exists() and not (decoy.ws / "data").exists()


# ---------------------------------------------------------------- links planted in the workspace


def _good_recipe(decoy: Decoy, hub: HubServer) -> Path:
    folder = decoy.top / "recipes"
    return write_recipe(folder, revision=hub.model.commit, base_url=hub.url, sha256=dict(hub.pins))


CALIB_DIR = DATASET.calibration_dir
PLANTS = {
    "data folder": (f"data/{DATASET.name}", "dir"),
    "dataset file": (f"data/{DATASET.name}/{SAMPLED}", "bashrc"),
    "prepared folder": (f"preprocessed/{DATASET.name}", "dir"),
    "calibration folder": (f"preprocessed/{DATASET.name}/{CALIB_DIR}", "dir"),
    "model folder": (f"models/{MODEL_REPO.split('/')[-1]}", "dir"),
    "model file": (f"models/{MODEL_REPO.split('/')[-1]}/config.json", "bashrc"),
    "partial download": (f"data/{DATASET.name}/{SAMPLED}.incomplete", "bashrc"),
    "looping data folder": (f"data/{DATASET.name}", "loop"),
}


@pytest.mark.parametrize("plant", list(PLANTS))
def test_a_link_planted_in_the_workspace_is_never_written_through(
    plant: str, served: HubServer, tmp_path: Path
) -> None:
    decoy = Decoy(tmp_path)
    recipe = _good_recipe(decoy, served)
    rel, kind = PLANTS[plant]
    link = decoy.ws / rel
    for folder in ("models", "data", "preprocessed", "engines", "runs"):
        (decoy.ws / folder).mkdir(parents=True, exist_ok=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    if kind == "dir":
        link.symlink_to(decoy.home, target_is_directory=True)
    elif kind == "loop":
        link.symlink_to(link.name)
    else:
        link.symlink_to(decoy.home / ".bashrc")
    decoy.before = decoy.now()
    res = cli("setup", "--recipe", str(recipe), "--yes", env=decoy.env(served))
    assert res.exit_code == 2, res.output
    line = _one_error_line(res.stderr)
    _no_raw_control(res.output)
    assert str(link) in res.stderr or str(link.parent) in res.stderr, res.stderr
    # Only paths inside the workspace (or the recipe) are named: nothing tells the user to delete their own files.
    for path in re.findall(r"(/[^\s:;,'`()]+)", res.stderr[res.stderr.index("error:") :]):
        assert Path(path.rstrip(".")).is_relative_to(decoy.ws) or path.startswith(str(recipe)), (path, line)
    decoy.unchanged()
    assert link.is_symlink()


def test_a_link_in_runs_is_refused_by_run(tmp_path: Path, served: HubServer) -> None:
    decoy = Decoy(tmp_path)
    (decoy.ws / "runs").mkdir(parents=True)
    (decoy.ws / "runs" / "demo").symlink_to(decoy.home, target_is_directory=True)
    decoy.before = decoy.now()
    res = cli("run", "offline", "--recipe", "demo", "--dry-run", env=decoy.env(served))
    assert res.exit_code == 2, res.output
    assert str(decoy.ws / "runs" / "demo") in _one_error_line(res.stderr)
    decoy.unchanged()


def test_a_link_in_engines_is_refused_by_build_engine(tmp_path: Path, served: HubServer) -> None:
    decoy = Decoy(tmp_path)
    (decoy.ws / "engines").mkdir(parents=True)
    (decoy.ws / "engines" / "nd-h200-v5").symlink_to(decoy.home, target_is_directory=True)
    decoy.before = decoy.now()
    res = cli("build-engine", "--recipe", "nd-h200-v5", "--dry-run", env=decoy.env(served))
    assert res.exit_code == 2, res.output
    assert str(decoy.ws / "engines" / "nd-h200-v5") in _one_error_line(res.stderr)
    decoy.unchanged()


def test_shipped_recipes_and_benchmarks_still_validate() -> None:
    res = cli("recipes", "validate", "--json")
    assert res.exit_code == 0, res.output
    assert all(r["valid"] for r in json.loads(res.stdout)["recipes"])
