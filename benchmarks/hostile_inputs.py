"""Count what hostile input does to whichever `repro` is importable (issue #16; numbers in docs/SECURITY.md).

    cd <checkout> && PYTHONPATH=$PWD python benchmarks/hostile_inputs.py [--per-kind 40] [--ledger-trials 20]

Run it from the checkout whose `repro` you want to measure (python puts the working directory first on
sys.path). For each kind of untrusted input it feeds seeded random hostile values to the CLI in-process and
counts: inputs tried, tracebacks (an exception that escaped the CLI's error edge, or an exit code other than
0/1/2/130), hangs (no answer in 20 s), and injections (the rack script, run under bash with the job's
variables, created a marker file). With --ledger-trials it also starts `run offline` and `run server` together
on one workspace that many times and counts the ledger entries lost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures" / "published" / "azure-nd-gb300-v6-rack"
RECIPE = "nd-gb300-v6"
ATOMS = [
    "$(touch {m})",
    "`touch {m}`",
    "x\ntouch {m}",
    "gpu --account=x",
    "--privileged",
    "\x1b[2J",
    "inf",
    "nan",
    "1e308",
    "-1e308",
    "1e400",
    "-3",
    "0",
    "",
    "<img src=x onerror=alert(1)>",
    "/etc/passwd",
    "/dev/zero",
    "../../x",
    "'\"",
    ";touch {m};",
    "%A",
    "[" * 100_000,
    "null",
    "{}",
    "[]",
    "true",
]


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def atom(rng: random.Random, marker: Path) -> str:
    return rng.choice(ATOMS).replace("{m}", str(marker))


def value(rng: random.Random, marker: Path) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return atom(rng, marker)
    if kind == 1:
        return rng.choice([None, True, -3, 10**30, 1e308, float("inf"), [], {}, [1, [2]]])
    if kind == 2:
        return {"job_id": atom(rng, marker), "tasks": [rng.randrange(-5, 5)]}
    if kind == 3:
        return [value(rng, marker)]
    if kind == 4:
        return "".join(rng.choice("ab$`\n;|<>\x1b\\'\" ") for _ in range(rng.randrange(1, 20)))
    return rng.random() * 10.0 ** rng.randrange(0, 308)


def invoke(args: list[str]) -> tuple[int, str]:
    from typer.testing import CliRunner

    from repro.cli import app

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        res = CliRunner().invoke(app, args)
    finally:
        signal.alarm(0)
    exc = res.exception
    if isinstance(exc, Hang):
        return -1, "hang"
    if exc is not None and not isinstance(exc, SystemExit):
        return -2, f"{type(exc).__name__}: {str(exc)[:100]}"
    return res.exit_code, res.output


def _vm(root: Path) -> Path:
    shutil.copytree(FIX / "ND_GB300_v6_1", root / "vm")
    shutil.copy(FIX / "ND_GB300_v6.json", root)
    return root / "vm"


def _summary_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    vm = _vm(root)
    p = next(vm.rglob("mlperf_log_summary.txt"))
    key = rng.choice(["Tokens per second", "Samples per second", "Result is", "Scenario", "min_duration (ms)"])
    p.write_text("\n".join(f"{key}: {atom(rng, m)}" if ln.startswith(key) else ln for ln in p.read_text().splitlines()))
    return ["report", str(vm)] if rng.random() < 0.3 else ["verify", str(vm)]


def _detail_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    vm = _vm(root)
    p = next(vm.rglob("mlperf_log_detail.txt"))
    p.write_text(p.read_text() + f":::MLLOG {json.dumps(value(rng, m))}\n:::MLLOG {atom(rng, m)}\n")
    return ["verify", str(vm)]


def _system_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    vm = _vm(root)
    (root / "ND_GB300_v6.json").write_text(
        '{"accelerators_per_node": '
        + ("[" * 100_000 + "]" * 100_000 if rng.random() < 0.3 else json.dumps(value(rng, m)))
        + "}"
    )
    return ["verify", str(vm)]


def _accuracy_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    vm = _vm(root)
    for p in vm.rglob("accuracy.txt"):
        p.write_text(f"{{'rouge1': {atom(rng, m)}, 'rouge2': {atom(rng, m)}}}")
    return ["verify", str(vm)]


def _run_json_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    vm = _vm(root)
    perf = next(vm.rglob("mlperf_log_summary.txt")).parent
    fifo = root / "trap.yaml"
    os.mkfifo(fifo)
    (perf / "run.json").write_text(json.dumps({"recipe": rng.choice([str(fifo), atom(rng, m)]), "scenario": "Offline"}))
    return ["verify", str(perf)]


def _ledger_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    home = Path(os.environ["REPRO_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    doc = rng.choice(
        [
            {"schema_version": value(rng, m), "steps": {}},
            {"schema_version": 2, "steps": {atom(rng, m): {"status": atom(rng, m), "pid": value(rng, m)}}},
            value(rng, m),
        ]
    )
    (home / "ledger.json").write_text(json.dumps(doc))
    return ["status", "--recipe", RECIPE]


def _rack_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    rack = root / "rack"
    rack.mkdir()
    doc: dict[str, Any] = {
        "kind": "repro-rack",
        "recipe": RECIPE,
        "backend": "sim",
        "label": "simulated",
        "nodes": 2,
        "workspace": str(root / "home"),
        "repro_bin": "repro",
        "jobs": [],
        "samples": 16,
    }
    for _ in range(rng.randrange(1, 3)):
        doc[rng.choice(["recipe", "nodes", "partition", "container_image", "workspace", "repro_bin", "jobs"])] = value(
            rng, m
        )
    (rack / "rack.json").write_text(json.dumps(doc))
    return ["run", "offline", "--launcher", "slurm", "--rerun-failed", str(rack), "--dry-run", "--json"]


def _recipe_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    target = rng.choice(["/dev/zero", "fifo", "deep", "text"])
    if target == "fifo":
        os.mkfifo(root / "r.yaml")
        return ["recipes", "show", str(root / "r.yaml")]
    if target == "deep":
        (root / "r.yaml").write_text("[" * 100_000)
        return ["recipes", "validate", str(root / "r.yaml")]
    if target == "text":
        text = (REPO / "recipes" / f"{RECIPE}.yaml").read_text()
        (root / f"{RECIPE}.yaml").write_text(text + f"\nx: {atom(rng, m)}\n")
        return ["recipes", "show", str(root / f"{RECIPE}.yaml")]
    return ["recipes", "show", "/dev/zero"]


def _cli_values_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    args = ["run", "offline", "--launcher", "slurm", "--nodes", "2", "--recipe", RECIPE, "--dry-run", "--json"]
    if rng.random() < 0.6:
        args += ["--partition", atom(rng, m)]
    args += ["--container-image", atom(rng, m)] if rng.random() < 0.5 else ["--backend", "sim"]
    return args


KINDS: dict[str, Callable[[Path, random.Random, Path], list[str]]] = {
    "summary log": _summary_case,
    "detail log": _detail_case,
    "system JSON": _system_case,
    "accuracy file": _accuracy_case,
    "run.json": _run_json_case,
    "ledger": _ledger_case,
    "rack.json": _rack_case,
    "recipe file": _recipe_case,
    "CLI values to scripts": _cli_values_case,
}


def _injected(output: str, root: Path, marker: Path) -> bool:
    """Run the dry run's script under bash as a job would (REPRO_BIN=true) and see whether the marker appeared."""
    try:
        script = json.loads(output[output.index("{") :])["script"]
    except (ValueError, KeyError, TypeError):
        return marker.exists()
    path = root / "job.sh"
    path.write_text(script)
    env = {
        "PATH": os.environ["PATH"],
        "SLURM_ARRAY_TASK_ID": "0",
        "SLURM_ARRAY_JOB_ID": "1",
        "REPRO_BIN": "true",
        "HOME": str(root),
    }
    subprocess.run(["bash", str(path)], cwd=root, env=env, capture_output=True, timeout=30)
    return marker.exists()


def probe(per_kind: int, seed: int) -> dict[str, Counter[str]]:
    from repro.core.workspace import Workspace

    rng = random.Random(seed)
    results: dict[str, Counter[str]] = {}
    for kind, make in KINDS.items():
        counts: Counter[str] = Counter()
        for _ in range(per_kind):
            root = Path(tempfile.mkdtemp(prefix="repro-probe-"))
            marker = root / "INJECTED"
            os.environ["REPRO_HOME"] = str(root / "home")
            if kind == "CLI values to scripts":
                from repro.core.recipes import get_recipe
                from repro.setup.dataset import save_prepared

                ds = get_recipe(RECIPE).dataset.name
                save_prepared(Workspace.open(None).preprocessed / ds, ds, [[1, 2, 3]] * 4, [5] * 4, source="probe")
            try:
                args = make(root, rng, marker)
                code, out = invoke(args)
                counts["tried"] += 1
                counts[
                    "hang"
                    if code == -1
                    else "traceback"
                    if code == -2 or code not in (0, 1, 2, 130)
                    else f"exit {code}"
                ] += 1
                if kind == "CLI values to scripts" and code == 0 and _injected(out, root, marker):
                    counts["injection"] += 1
            finally:
                shutil.rmtree(root, ignore_errors=True)
        results[kind] = counts
    return results


_LEDGER_TRIAL = ["run", "--recipe", RECIPE, "--backend", "sim", "--samples", "8", "--json"]


def ledger_trials(trials: int) -> tuple[int, int]:
    """(trials, entries lost): `run offline` and `run server` started together on one workspace."""
    import numpy as np

    from repro.core.ledger import Ledger
    from repro.core.recipes import get_recipe
    from repro.core.workspace import Workspace
    from repro.setup.dataset import save_prepared

    root = Path(tempfile.mkdtemp(prefix="repro-ledger-"))
    os.environ["REPRO_HOME"] = str(root)
    ws = Workspace.open(None).ensure()
    ds = get_recipe(RECIPE).dataset.name
    rng = np.random.default_rng(1)
    save_prepared(
        ws.preprocessed / ds, ds, [rng.integers(3, 32000, 50).tolist() for _ in range(16)], [20] * 16, source="probe"
    )
    lost = 0
    cli = [sys.executable, "-c", "from repro.cli import main; main()"]
    for _ in range(trials):
        ws.ledger_path.unlink(missing_ok=True)
        procs = [
            subprocess.Popen(
                [*cli, "run", s, *_LEDGER_TRIAL[1:]],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=os.environ,
            )
            for s in ("offline", "server")
        ]
        for p in procs:
            p.wait(timeout=300)
        steps = Ledger.load(ws.ledger_path).steps
        lost += sum(s not in steps or steps[s].status != "done" for s in ("run-offline", "run-server"))
    shutil.rmtree(root, ignore_errors=True)
    return trials, lost


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-kind", type=int, default=40)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--ledger-trials", type=int, default=0)
    a = ap.parse_args()
    import repro

    print(f"repro from {Path(repro.__file__).parent}")
    total: Counter[str] = Counter()
    for kind, c in probe(a.per_kind, a.seed).items():
        total.update(c)
        print(
            f"{kind:24} tried {c['tried']:4}  tracebacks {c['traceback']:3}  hangs {c['hang']:3}  "
            f"injections {c['injection']:3}  "
            + " ".join(f"{k}:{v}" for k, v in sorted(c.items()) if k.startswith("exit"))
        )
    print(
        f"{'TOTAL':24} tried {total['tried']:4}  tracebacks {total['traceback']:3}  hangs {total['hang']:3}  "
        f"injections {total['injection']:3}"
    )
    if a.ledger_trials:
        trials, lost = ledger_trials(a.ledger_trials)
        print(f"ledger: {trials} trials of run offline + run server together, {lost} entries lost")


if __name__ == "__main__":
    main()
