#!/usr/bin/env bash
# The GPU path of repro checked on one GPU in under 5 minutes, with only the installed wheel, torch and
# transformers[serving]: no Docker, no internet, no model download (issue 34).
#
#   doctor (feasibility for nd-h100-v5 on this box), the demo on CUDA, a random-weight Llama built on the demo
#   tokenizer served by `transformers serve`, an --endpoint Offline run, tune then a Server run, telemetry
#   (power.csv/gpu.csv), the GPU probe, verify/explain/report; one summary file.
#
# Usage: benchmarks/gpu_check.sh [--out DIR] [--cpu-only]
#   --cpu-only  the parts that need no GPU, on the CPU (the tests run this): a tiny model, short probes; the GPU
#               steps (demo on CUDA, telemetry, probe figures) are written to the summary as SKIP.
# Environment: REPRO (default: `repro`, else `python -m repro`), PYTHON (default: python3).
set -euo pipefail

OUT=""
CPU_ONLY=0
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
        --cpu-only) CPU_ONLY=1; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "gpu_check.sh: unknown argument '$1' (--out DIR, --cpu-only)" >&2; exit 2 ;;
    esac
done

PYTHON="${PYTHON:-python3}"
if [ -n "${REPRO:-}" ]; then
    read -r -a REPRO_CMD <<< "$REPRO"
elif command -v repro > /dev/null 2>&1; then
    REPRO_CMD=(repro)
else
    REPRO_CMD=("$PYTHON" -m repro)
fi
OUT="${OUT:-gpu-check-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WS="$OUT/ws"
SUMMARY="$OUT/summary.txt"
DEVICE=cuda
[ "$CPU_ONLY" = 1 ] && DEVICE=cpu
START=$(date +%s)
SERVER_PID=""
MODEL_PID=""

cleanup() {
    if [ -n "${MODEL_PID:-}" ] && kill -0 "$MODEL_PID" 2> /dev/null; then
        kill "$MODEL_PID" 2> /dev/null || true
        wait "$MODEL_PID" 2> /dev/null || true
    fi
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2> /dev/null; then
        kill "$SERVER_PID" 2> /dev/null || true
        wait "$SERVER_PID" 2> /dev/null || true
    fi
}
trap cleanup EXIT

: > "$SUMMARY"
note() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
repro() { "${REPRO_CMD[@]}" "$@"; }

# One step: its name, then the command; the JSON it prints goes to OUT/NAME.json, its stderr to OUT/NAME.log.
# A failing step is recorded, not fatal: the summary says which steps failed.
FAILED=0
step() {
    local name="$1"; shift
    local t0 rc
    t0=$(date +%s)
    set +e
    "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"
    rc=$?
    set -e
    printf '%-22s rc=%-3s %4ss  %s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(summarize "$name")" | tee -a "$SUMMARY"
    return 0
}
expect() {  # expect NAME RC...: the step's rc must be one of these
    local name="$1"; shift
    local rc
    rc=$(grep -E "^$name " "$SUMMARY" | tail -1 | sed -E 's/.* rc=([0-9]+).*/\1/')
    for ok in "$@"; do [ "$rc" = "$ok" ] && return 0; done
    note "  FAILED: $name exited $rc (expected $*); see $OUT/$name.log"
    FAILED=$((FAILED + 1))
}
summarize() {  # one line of figures from a step's JSON
    "$PYTHON" - "$OUT/$1.json" << 'PY'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception:
    doc = {}
if not doc:  # a failed step prints its one-line error on stderr
    log = sys.argv[1][: -len(".json")] + ".log"
    lines = [ln for ln in open(log, errors="replace") if ln.startswith("error:")]
    print(lines[0].strip()[:160] if lines else "(no JSON)"); sys.exit()
if isinstance(doc.get("error"), dict):
    print("error: " + str(doc["error"].get("message", ""))[:160]); sys.exit()
d = doc.get("details") or {}
bits = []
for k in ("status", "verdict", "summary"):
    if isinstance(doc.get(k), str):
        bits.append(doc[k][:90])
for k in ("tokens_per_s", "samples_per_s", "target_qps", "validity"):
    if d.get(k) is not None:
        bits.append(f"{k}={d[k]}")
for c in doc.get("checks") or []:
    if c.get("name") in ("GPU count", "GPU memory", "GPU probe"):
        bits.append(f"{c['name']}: {c['status']}")
if doc.get("chosen_qps") is not None:
    bits.append(f"chosen_qps={doc['chosen_qps']} confirmed={doc.get('confirmed')}")
print("; ".join(bits) or "(done)")
PY
}

note "repro GPU check: $(date -u +%FT%TZ), device $DEVICE, out $OUT"
note "repro: $(repro --version 2>&1 | head -1)"
note "torch: $("$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1 | tail -1)"
if [ "$CPU_ONLY" = 0 ] && ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    note "no CUDA GPU visible to torch: run with --cpu-only, or on the GPU VM"
    exit 2
fi

# A random-weight Llama on the demo tokenizer, for transformers serve (step 3), is built in the background while
# doctor and the demo run: importing torch and transformers is most of a minute on a loaded 2-core VM. The demo's
# files are made first, in the foreground, so the build and the demo run only read them.
"$PYTHON" -c 'import sys; from pathlib import Path; from repro.core.workspace import Workspace
from repro.setup.demo import prepare_demo; prepare_demo(Workspace(Path(sys.argv[1])))' "$WS"
MODEL="$OUT/random-llama"
if [ "$CPU_ONLY" = 1 ]; then SIZE="256 4 4 2 688"; else SIZE="2048 16 16 8 5632"; fi
"$PYTHON" - "$WS" "$MODEL" "$SIZE" > "$OUT/model.log" 2>&1 << 'PY' &
import json, shutil, sys
from pathlib import Path
from repro.core.workspace import Workspace
from repro.setup.demo import prepare_demo
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

ws, out, size = Workspace(Path(sys.argv[1])), Path(sys.argv[2]), [int(x) for x in sys.argv[3].split()]
demo = prepare_demo(ws)["model_dir"]
tok = AutoTokenizer.from_pretrained(demo)
hidden, layers, heads, kv, inter = size
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv, intermediate_size=inter, max_position_embeddings=2048,
                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
model = LlamaForCausalLM(cfg).to(torch.bfloat16 if torch.cuda.is_available() else torch.float32)
out.mkdir(parents=True, exist_ok=True)
model.save_pretrained(out)
tok.save_pretrained(out)
cfg_path = out / "tokenizer_config.json"
doc = json.loads(cfg_path.read_text())
doc["chat_template"] = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
cfg_path.write_text(json.dumps(doc, indent=2))
print(f"random-weight Llama: {sum(p.numel() for p in model.parameters()) / 1e6:,.0f} M parameters in {out}")
PY
MODEL_PID=$!

# 1. doctor: the box against the 8-GPU H100 recipe (1 GPU: FAIL with the server arithmetic), then the demo.
step doctor-nd-h100-v5 repro doctor --recipe nd-h100-v5 -w "$WS" --json
expect doctor-nd-h100-v5 0 1
step doctor-demo repro doctor --recipe demo -w "$WS" --json
expect doctor-demo 0

# 2. the demo: its own backend, then (with a GPU) the hf backend on CUDA
DEMO_SIZE=(--duration 10)
[ "$CPU_ONLY" = 1 ] && DEMO_SIZE=(--samples 64)
step demo-offline repro run offline --recipe demo -w "$WS" "${DEMO_SIZE[@]}" --json
expect demo-offline 0
if [ "$CPU_ONLY" = 0 ]; then  # the demo's own backend is numpy on the CPU; hf runs the same model on CUDA
    step demo-offline-hf-cuda repro run offline --recipe demo --backend hf -w "$WS" "${DEMO_SIZE[@]}" --json
    expect demo-offline-hf-cuda 0
else
    note "demo-offline-hf-cuda   SKIP (needs a GPU)"
fi

# 3. the random-weight Llama is ready (built in the background since the start: see above)
if ! wait "$MODEL_PID"; then
    MODEL_PID=""
    note "the random-weight Llama was not built; see $OUT/model.log"
    exit 1
fi
MODEL_PID=""
cat "$OUT/model.log"
note "model: $MODEL (random weights, demo tokenizer, $SIZE = hidden layers heads kv_heads intermediate)"

PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
# On the CPU the server gets one torch thread: the tiny model's matrices are too small to share between threads,
# and LoadGen and repro's client need the other core (2 cores: 382 ms per 32-token answer with torch's default
# threads, 24 ms with one), and a KV cache of 256 blocks: sized from free memory, the CPU's cache took 14 GiB of RAM
# and 15 s before the first answer (0.8 s and 3 GiB with 256 blocks, room for hundreds of the demo's requests at
# once); docs/BENCHMARKS.md, session 7
SERVE_THREADS=()
SERVE_CACHE=()
if [ "$CPU_ONLY" = 1 ]; then SERVE_THREADS=(OMP_NUM_THREADS=1); SERVE_CACHE=(--cb-num-blocks 256); fi
env "${SERVE_THREADS[@]}" "$PYTHON" -c 'import sys; from transformers.cli.transformers import main; sys.exit(main())' \
    serve "$MODEL" --host 127.0.0.1 --port "$PORT" --device "$DEVICE" --continuous-batching "${SERVE_CACHE[@]}" \
    > "$OUT/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 180); do
    if "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen('$URL/health', timeout=2); sys.exit(0)" 2> /dev/null; then
        break
    fi
    kill -0 "$SERVER_PID" 2> /dev/null || { note "transformers serve exited; see $OUT/server.log"; exit 1; }
    sleep 1
done
note "server: transformers serve at $URL ($DEVICE, continuous batching)"

EP=(--endpoint "$URL" --served-model "$MODEL")
# 4. Offline through --endpoint
OFFLINE_SAMPLES=1024
[ "$CPU_ONLY" = 1 ] && OFFLINE_SAMPLES=32
step endpoint-offline repro run offline --recipe demo -w "$WS" "${EP[@]}" --samples "$OFFLINE_SAMPLES" --json
expect endpoint-offline 0

# 5. tune, then a Server run at the tuned rate
# On the CPU: 60-query runs and probes (tune prints the lower confidence that buys), so the check fits minutes
# on a 3 M-parameter model that serves a few queries per second.
RUN_SAMPLES=1001
TUNE=(--start-qps 16 --max-minutes 2)
TUNE_OK=(0)
if [ "$CPU_ONLY" = 1 ]; then
    # a CPU serving a few queries per second may have no rate within TPOT 200 ms: tune says so (exit 1), and the
    # Server run then uses the recipe's rate; a crash (exit 3) still fails the check
    RUN_SAMPLES=60
    TUNE=(--start-qps 8 --max-minutes 2 --probe-queries 60)
    TUNE_OK=(0 1)
fi
step tune-server repro tune server --recipe demo -w "$WS" "${EP[@]}" --run-samples "$RUN_SAMPLES" "${TUNE[@]}" --json
expect tune-server "${TUNE_OK[@]}"
step endpoint-server repro run server --recipe demo -w "$WS" "${EP[@]}" --samples "$RUN_SAMPLES" --json
expect endpoint-server 0
cleanup
SERVER_PID=""

# 6. telemetry: NVML power and clocks beside the runs
RUN_DIR=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["details"]["log_dir"])' \
    "$OUT/endpoint-offline.json" 2> /dev/null || true)
if [ "$CPU_ONLY" = 1 ]; then
    note "telemetry              SKIP (needs a GPU: power.csv/gpu.csv come from NVML)"
elif [ -n "$RUN_DIR" ] && [ -s "$RUN_DIR/power.csv" ] && [ -s "$RUN_DIR/gpu.csv" ]; then
    note "telemetry              power.csv $(wc -l < "$RUN_DIR/power.csv") rows, gpu.csv $(wc -l < "$RUN_DIR/gpu.csv") rows"
else
    note "telemetry              FAILED: no power.csv/gpu.csv in ${RUN_DIR:-the Offline run}"
    FAILED=$((FAILED + 1))
fi

# 7. the GPU probe (on the CPU it says it needs a GPU)
step probe repro doctor --recipe nd-h100-v5 --probe -w "$WS" --json
expect probe 0 1
"$PYTHON" - "$OUT/probe.json" << 'PY' | tee -a "$SUMMARY"
import json, sys
doc = json.load(open(sys.argv[1])).get("probe") or {}
print(f"  probe: {doc.get('status')}: {doc.get('reason')}")
for g in doc.get("gpus") or []:
    print("  GPU {index} {name}: ".format(**g) + ", ".join(f"{k} {v}" for k, v in (g.get("figures") or {}).items()))
PY

# 8. verify, explain and report on the runs
if [ -n "$RUN_DIR" ]; then
    step verify-offline repro verify "$RUN_DIR" --json
    expect verify-offline 0 1
    step explain-offline repro explain "$RUN_DIR" --json
    expect explain-offline 0
    step report-offline repro report "$RUN_DIR" --markdown "$OUT/report.md" --json
    expect report-offline 0 1  # report exits with the verdict, as verify does: this random-weight run is never a PASS
fi

if grep -l "Traceback" "$OUT"/*.log > /dev/null 2>&1; then
    note "FAILED: a traceback in $(grep -l "Traceback" "$OUT"/*.log | tr '\n' ' ')"
    FAILED=$((FAILED + 1))
fi
note "total: $(( $(date +%s) - START )) s; failed steps: $FAILED; summary: $SUMMARY"
[ "$FAILED" = 0 ]
