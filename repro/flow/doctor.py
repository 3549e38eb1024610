"""`repro doctor`: every precondition of a long run checked in seconds, each with the fix.

Checks never raise; a missing library, daemon or endpoint is a FAIL or WARN with the next step.
Whether a check is needed depends on the recipe: the CPU demo needs no GPU, Docker or token.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repro.core.errors import ReproError
from repro.core.feasibility import plural, recipe_memory_fit, server_fit
from repro.core.recipes import Recipe, by_gpu_name, gpu_is_recipes
from repro.core.systems import SystemInfo, detect_system, resolve_recipe
from repro.core.workspace import Workspace

Level = Literal["PASS", "WARN", "FAIL", "SKIP"]
GB = 10**9  # one unit everywhere (setup, doctor, recipes): decimal gigabytes, as disks and the hub count


@dataclass
class Check:
    name: str
    level: Level
    detail: str
    fix: str | None = None
    data: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "status": self.level, "detail": self.detail, "fix": self.fix}
        if self.data is not None:
            doc["data"] = self.data
        return doc


@dataclass
class DoctorReport:
    recipe: str | None
    recipe_reason: str
    workspace: str
    system: SystemInfo
    checks: list[Check] = field(default_factory=list)
    probe: dict[str, Any] | None = None

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.level == "FAIL"]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    @property
    def verdict(self) -> str:
        if self.failed:
            return "FAIL"
        return "WARN" if any(c.level == "WARN" for c in self.checks) else "PASS"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.verdict,
            "recipe": self.recipe,
            "recipe_reason": self.recipe_reason,
            "workspace": self.workspace,
            "system": self.system.to_json(),
            "checks": [c.to_json() for c in self.checks],
            **({"probe": self.probe} if self.probe is not None else {}),
        }


def _not_needed(recipe: Recipe | None) -> str:
    return f"not needed by recipe {recipe.name}" if recipe else "not checked: no recipe chosen"


def _needs_gpu(recipe: Recipe | None) -> bool:
    return recipe is not None and not recipe.demo and recipe.system.gpu_arch != "cpu"


def _needs_docker(recipe: Recipe | None) -> bool:
    return recipe is not None and recipe.trtllm is not None


def check_recipe(recipe: Recipe | None, reason: str) -> Check:
    if recipe is None:
        return Check("recipe", "FAIL", reason, "pick one with `--recipe NAME` (`repro recipes list`)")
    if recipe.reference_only:
        return Check(
            "recipe",
            "FAIL",
            f"{recipe.name} is a published reference system, not runnable through repro",
            "`repro recipes list` and pick a runnable recipe with `--recipe`",
        )
    label = " (CPU demo: never a reproduction)" if recipe.demo else ""
    return Check("recipe", "PASS", f"{recipe.name}: {recipe.title}{label}; {reason}")


def check_gpus(recipe: Recipe | None, info: SystemInfo) -> list[Check]:
    """Model, count and architecture against what the recipe was published on."""
    if not _needs_gpu(recipe):
        n = len(info.gpus)
        found = f"{n} GPU{'' if n == 1 else 's'} found" if n else "no GPU found"
        return [Check("GPU", "SKIP", f"{_not_needed(recipe)} ({found})")]
    assert recipe is not None
    if info.nvml_error or not info.gpus:
        return [
            Check(
                "GPU",
                "FAIL",
                info.nvml_error or "NVML reports no GPU",
                "install the NVIDIA driver (`nvidia-smi` must work) and `pip install nvidia-ml-py`",
            )
        ]
    name = info.gpus[0].name
    checks = []
    if gpu_is_recipes(recipe, name):
        checks.append(Check("GPU model", "PASS", f"{name}, as in the recipe ({recipe.system.gpu_name})"))
    else:
        other = by_gpu_name(name, len(info.gpus))
        fix = f"use `--recipe {other.name}`" if other else "run on a VM with the recipe's GPU, or `repro recipes list`"
        checks.append(
            Check("GPU model", "FAIL", f"{name}, but recipe {recipe.name} needs {recipe.system.gpu_name}", fix)
        )
    checks.append(check_gpu_count(recipe, len(info.gpus)))
    arch = info.gpus[0].arch
    if recipe.precision in ("nvfp4", "fp4") and not info.gpus[0].blackwell:
        fp8 = by_gpu_name(name, len(info.gpus))
        checks.append(
            Check(
                "GPU architecture",
                "FAIL",
                f"{arch or 'unknown'}: {recipe.precision.upper()} needs Blackwell (sm_100 or newer)",
                f"use this GPU's FP8 recipe (`--recipe {fp8.name}`)"
                if fp8 is not None and fp8.precision == "fp8"
                else "use an FP8 recipe on Hopper (`--recipe nd-h100-v5` or `nd-h200-v5`)",
            )
        )
    elif arch != recipe.system.gpu_arch:
        checks.append(
            Check(
                "GPU architecture",
                "WARN",
                f"{arch or 'unknown'}, recipe built for {recipe.system.gpu_arch}",
                "expect a different engine and number; prefer the matching recipe",
            )
        )
    else:
        checks.append(Check("GPU architecture", "PASS", f"{arch}"))
    return checks


def check_gpu_count(recipe: Recipe, gpus: int) -> Check:
    """GPUs present against the recipe's servers x tp_size x pp_size: FAIL when not even one server fits."""
    want = recipe.system.gpus_per_vm
    have = plural(gpus, "GPU")
    if recipe.trtllm is None:
        if gpus == want:
            return Check("GPU count", "PASS", f"{have}, as published")
        return Check(
            "GPU count",
            "WARN",
            f"{have}, the published run used {want}; the per-GPU figure is what will be compared",
            f"pass `--gpus {gpus}` to `repro verify`",
        )
    t = recipe.trtllm
    fit = server_fit(gpus, t.tp_size, t.pp_size, t.servers_per_vm)
    who = "the recipe's one server" if t.servers_per_vm == 1 else f"each of the recipe's {t.servers_per_vm} servers"
    each = f"{who} needs tp_size {t.tp_size} x pp_size {t.pp_size}"
    arithmetic = f"{have}: {each} = {plural(fit.per_server, 'GPU')}, {fit.needed} in all"
    if fit.fit == 0:
        return Check(
            "GPU count",
            "FAIL",
            f"{arithmetic}; not even one server fits",
            f"run on a VM with at least {fit.per_server} of these GPUs ({want} as published; `repro recipes list`)",
        )
    if fit.fit < t.servers_per_vm or gpus != want:
        return Check(
            "GPU count",
            "WARN",
            f"{arithmetic}; {fit.fit} of {t.servers_per_vm} fit, on {plural(fit.fit * fit.per_server, 'GPU')}; "
            f"the published run used {want}, so the per-GPU figure is what will be compared",
            f"pass `--gpus {fit.fit * fit.per_server}` to `repro verify`",
        )
    return Check("GPU count", "PASS", f"{arithmetic}, as published")


def check_gpu_memory(recipe: Recipe | None, info: SystemInfo, ws: Workspace | None = None) -> list[Check]:
    """Weights + KV cache per GPU for each engine the recipe serves (the base one, and a scenario's own), with the
    numbers shown; a sequence counts the prepared dataset's mean prompt as well as its output."""
    if not _needs_gpu(recipe):
        return [Check("GPU memory", "SKIP", _not_needed(recipe))]
    assert recipe is not None
    if info.gpus:
        gpu_gb, where = info.gpus[0].memory_mib * (1 << 20) / GB, f"{info.gpus[0].name} (NVML)"
    elif isinstance(recipe.system.gpu_memory_gb, (int, float)):
        gpu_gb, where = float(recipe.system.gpu_memory_gb), f"the recipe's {recipe.system.gpu_name} (no GPU found)"
    else:
        return [Check("GPU memory", "SKIP", "no GPU found and the recipe states no GPU memory")]
    model_dir = ws.models / recipe.model.repo_id.split("/")[-1] if ws is not None else None
    prompts = mean_prompt(recipe, ws)
    rows = []
    for dep in recipe.deployments():
        fit = recipe_memory_fit(dep, gpu_gb, model_dir, prompts)
        name = f"GPU memory ({dep.scenario} engine)" if dep.own else "GPU memory"
        if fit is None:
            return [Check("GPU memory", "SKIP", "this recipe starts no TensorRT-LLM servers")]
        level: Level = fit.level  # type: ignore[assignment]
        fix = None
        if level == "FAIL":
            fix = "a GPU with more memory or a recipe with a larger tp_size or smaller precision (`repro recipes list`)"
        elif level == "WARN" and fit.pool_tokens is not None:
            fix = "expect batches limited by KV cache; the published system had the same limit per GPU"
        layout = f"{dep.layout.text()}: " if dep.own and dep.layout else ""
        rows.append(Check(name, level, f"{where}, {layout}{fit.detail()}", fix, data=fit.to_json()))
    return rows


def mean_prompt(recipe: Recipe, ws: Workspace | None) -> tuple[float, str] | None:
    """The prepared dataset's mean prompt length (`repro setup` wrote input_lens.npy); before setup the benchmark
    file's stated mean of the published set, with where it is stated; else None, and the row says the prompts are
    not counted yet."""
    from repro.setup.dataset import prompt_lengths

    if ws is not None:
        folder = ws.preprocessed / recipe.dataset.name
        try:
            lens = prompt_lengths(folder)
        except ReproError:
            pass
        else:
            return float(lens.mean()), f"{len(lens):,} prompts in {folder / 'input_lens.npy'}"
    stated = recipe.dataset.mean_input_tokens
    if stated == "unknown":
        return None
    where = f"repro/data/benchmarks/{recipe.benchmark}.yaml mean_input_tokens"
    return float(stated), f"the benchmark file's mean of the published set ({where}; `repro setup` measures it)"


def _min_cuda(recipe: Recipe) -> tuple[int, int]:
    """Blackwell kernels need CUDA 12.8 drivers; Hopper TensorRT-LLM releases need 12.x."""
    return (12, 8) if recipe.blackwell else (12, 0)


def check_driver(recipe: Recipe | None, info: SystemInfo) -> Check:
    if not _needs_gpu(recipe):
        return Check("driver/CUDA", "SKIP", _not_needed(recipe))
    assert recipe is not None
    if not info.driver or not info.cuda_driver:
        return Check(
            "driver/CUDA",
            "FAIL",
            info.nvml_error or "driver version unknown",
            "install the NVIDIA data-center driver, then `repro doctor`",
        )
    major, _, minor = info.cuda_driver.partition(".")
    have, need = (int(major), int(minor or 0)), _min_cuda(recipe)
    text = f"driver {info.driver}, CUDA {info.cuda_driver}"
    if have < need:
        return Check(
            "driver/CUDA",
            "FAIL",
            f"{text}; {recipe.system.gpu_arch} needs CUDA {need[0]}.{need[1]} or newer",
            "upgrade the NVIDIA driver (Azure HPC image or `apt install nvidia-driver`)",
        )
    return Check("driver/CUDA", "PASS", text)


def check_docker(recipe: Recipe | None, timeout: float = 3.0) -> list[Check]:
    """The engine must answer and know the NVIDIA runtime; only container recipes need either."""
    needed = _needs_docker(recipe)
    miss: Level = "FAIL" if needed else "WARN"
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        client.ping()
        info = client.info()
    except Exception as exc:  # noqa: BLE001 - any failure means unreachable
        if not needed:
            return [Check("Docker engine", "SKIP", _not_needed(recipe))]
        return [
            Check(
                "Docker engine",
                miss,
                f"not reachable: {docker_problem(exc)}",
                "start it (`sudo systemctl start docker`) and add yourself to the docker group",
            )
        ]
    checks = [Check("Docker engine", "PASS", f"Docker {info.get('ServerVersion', '?')} reachable")]
    runtimes = set((info.get("Runtimes") or {}).keys())
    if "nvidia" in runtimes:
        checks.append(Check("NVIDIA container runtime", "PASS", "runtime 'nvidia' registered"))
    elif needed:
        checks.append(
            Check(
                "NVIDIA container runtime",
                "FAIL",
                f"runtimes: {', '.join(sorted(runtimes)) or 'none'}",
                "install nvidia-container-toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker`"
                " and restart Docker",
            )
        )
    else:
        checks.append(Check("NVIDIA container runtime", "SKIP", _not_needed(recipe)))
    return checks


def docker_problem(exc: BaseException) -> str:
    """The Docker client's failure in words: the cause, never the client's own exception text."""
    text = str(exc).lower()
    if isinstance(exc, ModuleNotFoundError):
        return "the docker Python package is not installed"
    if "permission denied" in text:
        return "permission denied on the Docker socket (your user is not in the docker group)"
    if "no such file" in text or "filenotfounderror" in text:
        return "no Docker socket (the engine is not installed or not running)"
    if "timed out" in text or "timeout" in text:
        return "the engine did not answer in time"
    if "connection refused" in text:
        return "the engine refused the connection (not running)"
    return "the engine did not answer"


def _existing(path: Path) -> Path:
    path = path.resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(recipe: Recipe | None, ws: Workspace) -> Check:
    root = _existing(ws.root)
    free_gb = shutil.disk_usage(root).free / GB
    if recipe is None:
        return Check("disk", "WARN", f"{free_gb:,.1f} GB free at {root}; need unknown without a recipe")
    need = recipe.disk_needed_gb
    own = [(s, o.disk_gb) for s, o in recipe.scenarios.items() if o.disk_gb]
    parts = "; ".join(f"{s}'s own engine {gb:,.0f} GB of it" for s, gb in own)
    text = f"{free_gb:,.1f} GB free at {root}, recipe needs {need:,.0f} GB" + (f" ({parts})" if parts else "")
    text += " (1 GB = 10^9 bytes)"
    hint = recipe.system.local_nvme_hint
    fix = (
        f"free space, or put the workspace on the local NVMe (`--workspace {hint}/repro`)"
        if hint
        else "free space, or choose a bigger disk with `--workspace`"
    )
    base = need - sum(gb for _, gb in own)
    if free_gb < base:
        return Check("disk", "FAIL", text, fix)
    if free_gb < need:
        scenarios = " and ".join(s for s, _ in own)
        return Check("disk", "WARN", f"{text}: enough for the base engine, not for {scenarios}'s own", fix)
    return Check("disk", "PASS", text)


def nvme_mounts(mounts_file: Path = Path("/proc/mounts")) -> list[tuple[str, str]]:
    """(device, mount point) of local NVMe or md-RAID data mounts; the OS disk ('/', /boot) is not one."""
    found = []
    try:
        lines = Path(mounts_file).read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split()
        if len(parts) < 2:
            continue
        dev, mnt = parts[0], parts[1].replace("\\040", " ")
        if not (dev.startswith("/dev/nvme") or dev.startswith("/dev/md")):
            continue
        if mnt == "/" or mnt.startswith("/boot") or mnt.startswith("/snap") or mnt.startswith("/efi"):
            continue
        found.append((dev, mnt))
    return found


def check_nvme(recipe: Recipe | None, ws: Workspace, mounts_file: Path = Path("/proc/mounts")) -> Check:
    mounts = nvme_mounts(mounts_file)
    root = ws.root.resolve()
    for dev, mnt in mounts:
        if root == Path(mnt) or Path(mnt) in root.parents:
            return Check("local NVMe", "PASS", f"workspace is on {mnt} ({dev})")
    heavy = _needs_gpu(recipe)
    if not heavy:
        return Check("local NVMe", "SKIP", _not_needed(recipe))
    level: Level = "WARN"
    if mounts:
        dev, mnt = mounts[0]
        return Check(
            "local NVMe",
            level,
            f"{mnt} ({dev}) is mounted but the workspace {root} is not on it",
            f"`--workspace {mnt}/repro` (or export REPRO_HOME)" if heavy else None,
        )
    hint = recipe.system.local_nvme_hint if recipe else None
    return Check(
        "local NVMe",
        level,
        "no local NVMe data mount found" + ("" if heavy else f"; {_not_needed(recipe)}"),
        (
            f"assemble and mount the local NVMe disks (Azure HPC images: {hint})"
            if hint
            else "mount a local NVMe disk and point `--workspace` at it"
        )
        if heavy
        else None,
    )


def _hf_token() -> str | None:
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:  # noqa: BLE001
        return None


def check_hf(recipe: Recipe | None, timeout: float = 5.0) -> list[Check]:
    """Token present and the (gated) model repo readable with it; the token itself is never shown."""
    if recipe is None:
        return [Check("Hugging Face", "SKIP", "no recipe chosen, so no model to check access to")]
    if recipe.demo or recipe.model.repo_id.startswith("repro-local/"):
        return [Check("Hugging Face", "SKIP", "not needed by this recipe (model is built locally)")]
    token = _hf_token()
    if not token:
        return [
            Check(
                "HF token",
                "FAIL",
                "no Hugging Face token (HF_TOKEN or `hf auth login`)",
                f"`hf auth login`, after requesting access to {recipe.model.repo_id}",
            )
        ]
    checks = [Check("HF token", "PASS", "token present (not shown)")]
    repo = recipe.model.repo_id
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

        api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=token)
        api.auth_check(repo, token=token)
    except GatedRepoError:
        checks.append(
            Check(
                "model access",
                "FAIL",
                f"{repo} is gated and this token has no access",
                f"request access at https://huggingface.co/{repo}, then `repro doctor`",
            )
        )
    except RepositoryNotFoundError:
        checks.append(
            Check(
                "model access",
                "FAIL",
                f"{repo} not found, or the token cannot see it",
                "check the token (`hf auth whoami`) and `model.repo_id` in the recipe",
            )
        )
    except HfHubHTTPError as exc:
        checks.append(
            Check(
                "model access",
                "FAIL",
                f"{repo}: hub error {str(exc).splitlines()[0][:160]}",
                "`hf auth whoami`, then `repro doctor`",
            )
        )
    except Exception as exc:  # noqa: BLE001 - network down, DNS, timeouts
        checks.append(
            Check(
                "model access",
                "WARN",
                f"{repo}: could not reach the hub ({type(exc).__name__})",
                "check the network or HF_ENDPOINT, then `repro doctor`",
            )
        )
    else:
        checks.append(Check("model access", "PASS", f"{repo} readable with this token"))
    return checks


def check_loadgen() -> Check:
    try:
        import mlperf_loadgen  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        arm = platform.machine() == "aarch64"
        why = (
            "not installed"
            if isinstance(exc, ModuleNotFoundError)
            else f"installed but cannot be loaded ({type(exc).__name__})"
        )
        return Check(
            "LoadGen",
            "FAIL",
            f"mlperf_loadgen is {why}",
            "build it from mlcommons/inference loadgen/ (no aarch64 wheels on PyPI)"
            if arm
            else "`pip install mlcommons-loadgen`",
        )
    try:
        from importlib.metadata import version

        ver = version("mlcommons-loadgen")
    except Exception:  # noqa: BLE001
        ver = "version unknown"
    return Check("LoadGen", "PASS", f"mlperf_loadgen importable ({ver})")


def _meminfo_gb(meminfo: Path = Path("/proc/meminfo")) -> tuple[float | None, float | None]:
    values: dict[str, float] = {}
    try:
        for line in meminfo.read_text().splitlines():
            key, _, rest = line.partition(":")
            values[key] = float(rest.split()[0]) * 1024 / GB
    except (OSError, ValueError, IndexError):
        return None, None
    return values.get("MemTotal"), values.get("MemAvailable")


def check_host(recipe: Recipe | None, meminfo: Path = Path("/proc/meminfo")) -> list[Check]:
    machine = platform.machine()
    checks = []
    want = recipe.system.cpu_arch if recipe else "any"
    if want not in ("any", machine):
        checks.append(
            Check(
                "CPU architecture",
                "FAIL",
                f"{machine}, recipe needs {want}",
                "run on the recipe's VM size, or pick another `--recipe`",
            )
        )
    else:
        checks.append(Check("CPU architecture", "PASS", f"{machine}, {os.cpu_count()} cores"))
    total, avail = _meminfo_gb(meminfo)
    need = recipe.model.size_gb if _needs_gpu(recipe) and recipe else 2.0
    if total is None:
        checks.append(Check("host memory", "WARN", "could not read /proc/meminfo"))
    elif (avail or total) < need:
        checks.append(
            Check(
                "host memory",
                "WARN" if _needs_gpu(recipe) else "FAIL",
                f"{avail or total:,.1f} GB available of {total:,.1f} GB; about {need:,.0f} GB needed",
                "stop other work on the host or use a larger VM",
            )
        )
    else:
        checks.append(Check("host memory", "PASS", f"{avail or total:,.1f} GB available of {total:,.1f} GB"))
    return checks


def check_workspace(ws: Workspace) -> Check:
    from repro.core.ledger import Ledger

    root = _existing(ws.root)
    if not os.access(root, os.W_OK):
        return Check(
            "workspace", "FAIL", f"{root} is not writable", "`--workspace` on a writable disk, or fix its owner"
        )
    problem = Ledger.problem(ws.ledger_path)
    if problem is not None:
        return Check("workspace", "FAIL", problem.message, problem.next_command)
    return Check("workspace", "PASS", f"{ws.root} (ledger {'present' if ws.ledger_path.exists() else 'new'})")


def _listeners(proc: Path = Path("/proc/net")) -> dict[int, set[str]]:
    """Listening TCP ports and the addresses they are bound to, from the kernel's own tables (IPv4 and IPv6)."""
    out: dict[int, set[str]] = {}
    for name, width in (("tcp", 8), ("tcp6", 32)):
        try:
            lines = (proc / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != "0A":  # 0A: LISTEN
                continue
            addr, _, port = fields[1].partition(":")
            out.setdefault(int(port, 16), set()).add(_address(addr, width))
    return out


def _address(hexaddr: str, width: int) -> str:
    import ipaddress
    import socket

    raw = bytes.fromhex(hexaddr)
    if width == 8:
        return socket.inet_ntoa(raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))


def check_vboost(recipe: Recipe | None) -> Check:
    """The GPU boost slider the published run's harness set (`vboost_slider`), against the host's: repro never
    changes a host setting, so a difference is a WARN naming the command."""
    from repro.results.stack import vboost_advice, vboost_command, vboost_words
    from repro.run.host_state import read_boost_slider

    host = recipe.published_host if recipe is not None else None
    if recipe is None or host is None or host.vboost_slider is None:
        return Check("vboost", "SKIP", "not needed: the published run set no GPU boost slider")
    state = read_boost_slider()
    advice = vboost_advice(recipe, state)
    if advice is None:
        return Check("vboost", "PASS", f"{vboost_words(state)}, as the published run's harness set it")
    fix = f"`{vboost_command(host.vboost_slider)}` before the run (`--vboost 0` after); repro never changes it"
    return Check("vboost", "WARN", advice.split(". To match it:")[0], fix, data=state)


def check_server_ports(recipe: Recipe | None, ports: list[int] | None = None) -> Check:
    """The trtllm-serve endpoints have no authentication: one bound to every interface is reachable from outside."""
    if ports is None:
        if recipe is None or recipe.trtllm is None:
            return Check("server ports", "SKIP", "not needed: this recipe starts no inference servers")
        t = recipe.trtllm
        ports = [t.base_port + i for i in range(t.servers_per_vm)]
    listening = _listeners()
    open_wide = sorted(
        f"{p} on {a}" for p in ports for a in listening.get(p, ()) if not (a.startswith("127.") or a == "::1")
    )
    if open_wide:
        return Check(
            "server ports",
            "WARN",
            f"reachable from outside this VM (no authentication): {', '.join(open_wide)}",
            "stop those servers, or start them with `repro run offline --listen 127.0.0.1` (the default)",
        )
    busy = [p for p in ports if p in listening]
    detail = f"ports {', '.join(map(str, busy))} listen on this VM only" if busy else "no server listening yet"
    return Check("server ports", "PASS", f"{detail} (servers bind 127.0.0.1 unless --listen says otherwise)")


def run_doctor(
    explicit_recipe: str | None,
    ws: Workspace,
    *,
    info: SystemInfo | None = None,
    imds_timeout: float = 1.0,
    reason: str | None = None,
    probe: bool = False,
) -> DoctorReport:
    """All checks; an unknown --recipe name is bad input and raises, an undetectable system is a FAIL row.

    `reason`: why the caller (the guided flow) chose the recipe, so the report does not claim it was --recipe."""
    info = info or detect_system(imds_timeout=imds_timeout)
    recipe: Recipe | None
    try:
        recipe, why = resolve_recipe(explicit_recipe, ws, info=info)
        reason = reason or why
    except ReproError as exc:
        if explicit_recipe:
            raise
        recipe, reason = None, exc.message
    report = DoctorReport(recipe.name if recipe else None, reason, str(ws.root), info)
    steps: list[Callable[[], Check | list[Check]]] = [
        lambda: check_recipe(recipe, reason),
        lambda: check_gpus(recipe, info),
        lambda: check_gpu_memory(recipe, info, ws),
        lambda: check_driver(recipe, info),
        lambda: check_docker(recipe),
        lambda: check_server_ports(recipe),
        lambda: check_vboost(recipe),
        lambda: check_disk(recipe, ws),
        lambda: check_nvme(recipe, ws),
        lambda: check_hf(recipe),
        check_loadgen,
        lambda: check_host(recipe),
        lambda: check_workspace(ws),
    ]
    for step in steps:
        out = step()
        report.checks.extend(out if isinstance(out, list) else [out])
    if probe:
        report.checks.append(check_probe(report, ws, recipe))
    return report


def check_probe(report: DoctorReport, ws: Workspace, recipe: Recipe | None = None) -> Check:
    """`--probe`: every GPU's measured GEMM and HBM ceilings; a slow GPU is named here, before the long run."""
    from repro.run.gpu_probe import run_probe

    arch = recipe.model.architecture if recipe is not None else None
    result = run_probe(
        ws, hidden=arch.hidden_size if arch else None, intermediate=arch.intermediate_size if arch else None
    )
    report.probe = result.to_json()
    if result.status == "unavailable":
        return Check("GPU probe", "WARN", result.reason, "run `repro doctor --probe` on the GPU VM")
    figures = ", ".join(f"{k.replace('_', ' ')} {v:,.2f}" for k, v in result.ceilings.items())
    text = f"{len(result.gpus)} GPU(s) in {result.seconds:g} s; median {figures}; saved to {result.file}"
    if result.flagged:
        return Check(
            "GPU probe",
            "FAIL",
            "; ".join(result.flagged[:4]) + (f" (+{len(result.flagged) - 4} more)" if len(result.flagged) > 4 else ""),
            "check clocks and throttling (`nvidia-smi -q -d PERFORMANCE,CLOCK`), or ask Azure for another VM",
        )
    return Check("GPU probe", "PASS", text)
