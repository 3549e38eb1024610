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


SECRET = "S3cretPass"
MARKUP = ["[link=https://evil.example/]x[/link]", "[blink]x[/blink]", "[bold red]FAKE PASS[/]"]
INVISIBLE = ["\u202e", "\u2066", "\u200b", "\u200f", "\ufeff", "\x1b]52;c;cm0K\x07", "\x1b]8;;http://e/\x1b\\"]
MD = ["<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", "![i](http://e.example/p.png)", "$\\frac{1}{$"]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice([*MARKUP, *INVISIBLE, *MD, "vm", " ", "|", "`"]) for _ in range(rng.randrange(1, 4)))


def _option_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    """Issue 29 item 7: numbers and URLs at the option edge (a dry run must refuse or accept, never crash)."""
    opt = rng.choice(["--duration", "--ready-timeout", "--sim-rate", "--stall-timeout", "--endpoint", "env"])
    bad = rng.choice(["nan", "inf", "-inf", "1e308", "1e400", "0", "-1", "abc", "", "1e-320"])
    url = rng.choice(["http://127.0.0.1:99999", "http://127.0.0.1:abc", "http://[::1", "ftp://x", "http://:80"])
    args = ["run", rng.choice(["offline", "server"]), "--recipe", "demo", "--workspace", str(root / "ws"), "--dry-run"]
    if opt == "env":
        os.environ["REPRO_HEARTBEAT_S"] = bad
        return args
    return [*args, opt, url if opt == "--endpoint" else bad]


def _terminal_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    """Issue 29 item 5: markup, bidi and escape sequences in folder names and shared-storage fields."""
    name = _text(rng)
    if rng.random() < 0.5:
        home = Path(os.environ["REPRO_HOME"])
        home.mkdir(parents=True, exist_ok=True)
        from repro.core.ledger import Ledger

        ledger = Ledger.load(home / "ledger.json")
        ledger.start("setup", "h", recipe="demo")
        ledger.finish("setup")
        doc = json.loads((home / "ledger.json").read_text())
        doc["steps"]["setup"]["finished"] = name
        (home / "ledger.json").write_text(json.dumps(doc))
        return ["status", "--recipe", "demo"]
    (root / "x").mkdir()
    vm = root / "x" / name.replace("/", "_")
    shutil.copytree(FIX / "ND_GB300_v6_1", vm)
    return [rng.choice(["verify", "report"]), str(vm)]


def _markdown_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    """Issue 29 item 5: HTML, links, images and mathtext from folder names in Markdown and HTML reports."""
    rack = root / "rack"
    rack.mkdir()
    for k in range(rng.randrange(1, 3)):
        shutil.copytree(FIX / "ND_GB300_v6_1", rack / f"{_text(rng).replace('/', '_')}{k}")
    shutil.copy(FIX / "ND_GB300_v6.json", rack)
    out = root / rng.choice(["out.md", "out.html"])
    if out.suffix == ".html":
        return ["report", str(rack), "--html", str(out)]
    return [rng.choice(["aggregate", "report"]), str(rack), "--markdown", str(out)]


def _secret_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    """Issue 29 item 6: user:password@ in HF_ENDPOINT or --endpoint, through dry runs, errors and --debug."""
    url = f"http://{rng.choice(['user', 'admin', ''])}:{SECRET}@127.0.0.1:9"
    debug = ["--debug"] if rng.random() < 0.5 else []
    if rng.random() < 0.5:
        os.environ["HF_ENDPOINT"] = url
        return [
            *debug,
            "setup",
            "--recipe",
            RECIPE,
            "--workspace",
            str(root / "ws"),
            rng.choice(["--dry-run", "--yes"]),
        ]
    return [
        *debug,
        "run",
        "offline",
        "--recipe",
        "demo",
        "--workspace",
        str(root / "ws"),
        "--endpoint",
        url,
        "--dry-run",
    ]


def _output_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    """Issue 29 item 5: an output pointed at an input, or inside one."""
    vm = _vm(root)
    inputs = [p for p in root.rglob("*") if p.is_file()]
    target = rng.choice([*inputs, vm / "new.md", root / "ND_GB300_v6.json"])
    if rng.random() < 0.5:
        return ["aggregate", str(root), "--markdown", str(target)]
    return ["report", str(rng.choice([root, vm])), rng.choice(["--markdown", "--html"]), str(target)]


def _power_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    """Issue 29 item 7: power.csv with invalid UTF-8, long fields, NaN watts, time going back."""
    vm = _vm(root)
    perf = next(vm.rglob("mlperf_log_summary.txt")).parent
    rows = [b"time_s,gpu_index,watts", b"0,0,100", b"1,0,200"]
    rows.insert(
        rng.randrange(1, 4),
        rng.choice(
            [
                b"1,0,\xff\xfe",
                b"1,0," + b"9" * (128 << 10),
                b"1,0,nan",
                b"1,0,inf",
                b"-1,0,5",
                b"x",
                b"5,0,1e308",
                b"0,99999999999,1",
            ]
        ),
    )
    (perf / "power.csv").write_bytes(b"\n".join(rows) + b"\n")
    return ["report", str(vm)]


def _yaml_case(root: Path, rng: random.Random, m: Path) -> list[str]:
    """Issue 29 item 4: a recipe with YAML aliases (billion laughs) anywhere."""
    depth = rng.randrange(2, 10)
    lines = ['    l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"    l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, depth)]
    text = (REPO / "recipes" / f"{RECIPE}.yaml").read_text()
    path = root / f"{RECIPE}.yaml"
    path.write_text(text.replace("  serve_extra_options:\n", "  serve_extra_options:\n" + "\n".join(lines) + "\n", 1))
    cmd = rng.choice([["recipes", "validate"], ["recipes", "show"], ["run", "offline", "--dry-run", "--recipe"]])
    return [*cmd, str(path)]


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
    "option values (29.7)": _option_case,
    "terminal text (29.5)": _terminal_case,
    "Markdown/HTML text (29.5)": _markdown_case,
    "URL secrets (29.6)": _secret_case,
    "output onto input (29.5)": _output_case,
    "power.csv (29.7)": _power_case,
    "recipe aliases (29.4)": _yaml_case,
}


def _tree(root: Path, skip: Path | None) -> dict[str, str]:
    """Every file under root (but `skip`, the command's own output) with a digest, to see what a command changed."""
    import hashlib

    out = {}
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink() and p != skip:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _unsafe(kind: str, args: list[str], out: str, root: Path) -> bool:
    """An injection that reached the terminal or a written report (issue 29 item 5): a raw escape or invisible
    character in the output, markup that was applied (its text shown without its brackets), live HTML or links."""
    if "\x1b" in out or any(ch in out for ch in "\u202e\u2066\u200b\u200f\ufeff"):
        return True
    import re

    if re.search(r"(?<!\])FAKE PASS", out):  # shown without the [bold red] before it: the markup was applied
        return True
    for p in root.rglob("out.*"):
        text = p.read_text(errors="replace")
        if p.suffix == ".md":
            import re

            live = re.sub(r"`[^`\n]*`", "", text)
            if "<img" in live or re.search(r"(?<!\\)\]\((javascript|http)", live):
                return True
        if p.suffix == ".html" and ("<img src=x" in text or "javascript:" in text.replace("javascript:alert", "")):
            return True
    return False


def _written_outside(before: dict[str, str], root: Path) -> int:
    """Input files a command changed or removed; a new output file is not in `before`, one written over an input is."""
    after = _tree(root, None)
    return sum(1 for k, v in before.items() if after.get(k) != v)


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


def probe(per_kind: int, seed: int, only: str = "") -> dict[str, Counter[str]]:
    from repro.core.workspace import Workspace

    rng = random.Random(seed)
    results: dict[str, Counter[str]] = {}
    for kind, make in KINDS.items():
        if only and only not in kind:
            continue
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
            saved = {k: os.environ.get(k) for k in ("HF_ENDPOINT", "REPRO_HEARTBEAT_S")}
            try:
                args = make(root, rng, marker)
                before = _tree(root, None) if kind.endswith("(29.5)") else {}
                code, out = invoke(args)
                counts["tried"] += 1
                if SECRET in out or any(SECRET.encode() in p.read_bytes() for p in root.rglob("*") if p.is_file()):
                    counts["secret"] += 1
                if kind.endswith("(29.5)"):
                    hit = _unsafe(kind, args, out, root)
                    counts["injection"] += hit
                    if (hit or code == 0 and "onto" in kind) and os.environ.get("PROBE_VERBOSE"):
                        print(
                            "INJECTION" if hit else "EXIT0", kind, repr(args)[:300], repr(out)[:1500], file=sys.stderr
                        )
                    counts["changed"] += _written_outside(before, root)
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
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
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
    ap.add_argument("--only", default="", help="run only the kinds whose name contains this (e.g. 29.)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs, measures nothing")
    a = ap.parse_args()
    if a.smoke:
        a.per_kind = 1
    import repro

    print(f"repro from {Path(repro.__file__).parent}")
    total: Counter[str] = Counter()
    for kind, c in probe(a.per_kind, a.seed, a.only).items():
        total.update(c)
        print(
            f"{kind:27} tried {c['tried']:4}  tracebacks {c['traceback']:3}  hangs {c['hang']:3}  "
            f"injections {c['injection']:3}  secrets {c['secret']:3}  inputs changed {c['changed']:3}  "
            + " ".join(f"{k}:{v}" for k, v in sorted(c.items()) if k.startswith("exit"))
        )
    print(
        f"{'TOTAL':27} tried {total['tried']:4}  tracebacks {total['traceback']:3}  hangs {total['hang']:3}  "
        f"injections {total['injection']:3}  secrets {total['secret']:3}  inputs changed {total['changed']:3}"
    )
    import resource

    print(f"peak RSS of the probe process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if a.ledger_trials:
        trials, lost = ledger_trials(a.ledger_trials)
        print(f"ledger: {trials} trials of run offline + run server together, {lost} entries lost")


if __name__ == "__main__":
    main()
