#!/bin/bash
#SBATCH --job-name=@JOB_NAME@
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --exclusive
#SBATCH --array=@ARRAY@
@PARTITION_LINE@
# @COMMENT@
# Each task's repro writes its run straight into RACK_DIR/vm-NN/ (--into: performance/run_1/ logs and run.json), beside
# its task.json; `repro aggregate RACK_DIR` sums them. Nodes share WORKSPACE (inputs, ledger), never a run folder.
# REPRO_FAIL_TASKS=1,3 makes those array tasks fail on purpose (to rehearse --rerun-failed).
# Submitted by repro as: sbatch --parsable --export=... --output=RACK_DIR/slurm/%A_%a.out rack.sbatch
# Every value below was quoted by repro (repro/run/rack.py: render_script); this file is a template in the package.
set -uo pipefail
RACK_DIR=@RACK_DIR@
WORK_DIR=@WORK_DIR@
WORKSPACE=@WORKSPACE@
IMAGE=@IMAGE@
IMAGE_SOURCE=@IMAGE_SOURCE@
IMAGE_ARCHIVE=@IMAGE_ARCHIVE@
LABEL=@LABEL@
DEFAULT_BIN=@REPRO_BIN@
REPRO_BIN="${REPRO_BIN:-$DEFAULT_BIN}"
SIMULATED=@SIMULATED@
PER_VM=@PER_VM@
IDX="${SLURM_ARRAY_TASK_ID:?submit this script with sbatch}"
JOB="${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-0}}"
VM=$(printf 'vm-%02d' "$IDX")
OUT="$RACK_DIR/$VM"
# Simulated VMs and rehearsal nodes share this machine: each works in its own home, removed when it ends.
if [ "$PER_VM" = 1 ]; then TASK_HOME="$WORK_DIR/$VM"; else TASK_HOME="$WORKSPACE"; fi
STARTED=$(date -u +%FT%TZ)
ARGS=(@ARGS@ --workspace "$TASK_HOME" --into "$OUT")
mkdir -p "$OUT" "$TASK_HOME"
if [ "$SIMULATED" = 1 ] && [ "$PER_VM" = 1 ]; then ln -sfn "$WORKSPACE/preprocessed" "$TASK_HOME/preprocessed"; fi

# shellcheck disable=SC1003  # the set is a double quote and a backslash, not an escaped quote
clean() { printf '%s' "$1" | tr -d '"\\' | tr '\n\t\r' '   ' | cut -c1-300; }
state() {  # state NAME EXIT_CODE REASON
  local tmp="$OUT/.task.json.$$"
  printf '{"vm": "%s", "index": %s, "job_id": "%s", "host": "%s", "state": "%s", "exit_code": %s, "reason": "%s", "started": "%s", "finished": "%s", "label": "%s"}\n' \
    "$VM" "$IDX" "$JOB" "$(hostname -s)" "$1" "$2" "$(clean "$3")" "$STARTED" "$(date -u +%FT%TZ)" "$LABEL" >"$tmp" \
    && mv -f "$tmp" "$OUT/task.json"
}
ran() { [ -f "$OUT/performance/run_1/run.json" ]; }  # this task's own run: repro wrote it --into OUT
finish() { if [ "$PER_VM" = 1 ]; then rm -rf "$TASK_HOME"; fi; }

case ",${REPRO_FAIL_TASKS:-}," in
  *",$IDX,"*) state failed 1 "failed on purpose (REPRO_FAIL_TASKS=${REPRO_FAIL_TASKS})"; finish; exit 1 ;;
esac

# repro runs on this node's host and starts the node's trtllm-serve containers through the node's Docker; the image
# comes from the shared rack folder (docker save/load) or a registry, once per node. With enroot, repro creates the
# node's container from the squashfs file in the rack folder itself; here it is only checked.
if [ "$IMAGE_SOURCE" = enroot ]; then
  if ! command -v enroot >/dev/null 2>&1 || [ ! -r "$IMAGE_ARCHIVE" ]; then
    state failed 1 "no enroot, or cannot read the server image $IMAGE_ARCHIVE, on $(hostname -s)"
    finish
    exit 1
  fi
elif [ -n "$IMAGE" ] && ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  case "$IMAGE_SOURCE" in
    archive) fetch=(docker load -i "$IMAGE_ARCHIVE") ;;
    *) fetch=(docker pull "$IMAGE") ;;
  esac
  if ! "${fetch[@]}" >"$OUT/image.log" 2>&1; then
    state failed 1 "could not get the server image $IMAGE on $(hostname -s): $(tail -1 "$OUT/image.log")"
    finish
    exit 1
  fi
fi
LAUNCH=("$REPRO_BIN" "${ARGS[@]}")

child=""
# shellcheck disable=SC2317  # called by the trap below
on_term() {
  trap - TERM INT
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi
  # repro stops within ~10 s of a signal (run/harness.py: grace, close, server removal); a loaded node takes longer.
  # Wait up to 25 s (under Slurm's default KillWait of 30 s), then KILL it: its home is removed only once nothing
  # of it can write there again (a home removed at 10 s while repro still wrote its ledger came back).
  for _ in $(seq 50); do { [ -n "$child" ] && kill -0 "$child" 2>/dev/null; } || break; sleep 0.5; done
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then kill -KILL "$child" 2>/dev/null; wait "$child" 2>/dev/null; fi
  finish
  state cancelled 143 "cancelled by Slurm (scancel, time limit or preemption); partial run kept if any"
  exit 143
}
trap on_term TERM INT

state running null ""
printf 'repro rack task %s (array %s index %s) on %s:' "$VM" "$JOB" "$IDX" "$(hostname -s)"
printf ' %q' "${LAUNCH[@]}"
printf '\n'
"${LAUNCH[@]}" >"$OUT/repro.log" 2>&1 &
child=$!
wait "$child"
rc=$?
child=""
if [ "$rc" -ne 0 ]; then
  finish
  state failed "$rc" "repro exited $rc: $(grep -v '^[[:space:]]*$' "$OUT/repro.log" | tail -1)"
elif ran; then
  finish
  state "done" 0 ""
else
  finish
  rc=1
  state failed 1 "repro exited 0 but wrote no run into $OUT (performance/run_1/run.json)"
fi
exit "$rc"
