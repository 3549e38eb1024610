#!/usr/bin/env bash
# Usage: scripts/verify_equivalence.sh [BASE_REV]   (default: where this branch left main, git merge-base HEAD main)
#
# A behaviour-preserving refactor proves itself here: `repro verify --json` (and a few other read-only
# commands that judge a result folder) on every folder of tests/fixtures/published/ that holds LoadGen logs, run
# once with BASE_REV's code and once with this checkout's, must print the same bytes and exit the same way.
# Both read the same fixture folders (this checkout's), each in a fresh empty workspace. Exit 0: identical; 1: a
# diff, printed. Nothing outside a temporary folder is written (KEEP=DIR also copies the outputs there).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
base=${1:-$(git -C "$here" merge-base HEAD main)}
py=$here/.venv/bin/python
tmp=$(mktemp -d "${TMPDIR:-/tmp}/repro-equiv.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
mkdir -p "$tmp/base" "$tmp/out/base" "$tmp/out/head"
git -C "$here" archive "$base" repro recipes | tar -x -C "$tmp/base"

cd "$here"
folders=()
while IFS= read -r f; do folders+=("$f"); done < <(
  { find tests/fixtures/published -mindepth 1 -maxdepth 1 -type d
    find tests/fixtures/published -name mlperf_log_summary.txt -not -path '*/TEST0*' -exec dirname {} \; ; } | sort -u)

# Each case: a command line (arguments to `repro`), one per line.
cases=$tmp/cases
: >"$cases"
for f in "${folders[@]}"; do
  printf 'verify --json %s\n' "$f" >>"$cases"
done
fx=tests/fixtures/published
cat >>"$cases" <<EOF
verify --json $fx/azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Offline --recipe nd-gb200-v6
verify --json $fx/azure-nd-gb200-v6-v5.1/llama2-70b-99/Offline --recipe nd-gb200-v6-405b
verify --json $fx/azure-nd-gb200-v6-v5.1/llama2-70b-99/Offline --against 5.1-0008
verify --json $fx/v5.1_Dell_XE9685L_B200_SXM_180GBx8_TRT_llama3.1-405b_Offline --against 5.1-0008
verify --json $fx/nvidia-dgx-h100-v4.1/llama2-70b-99.9/Server --recipe dgx-h100
aggregate --json $fx/azure-nd-gb300-v6-rack --recipe nd-gb300-v6
explain --json $fx/v5.1_HPE_Cray_XD670_H200_SXM_141GBx8_TRT_llama2-70b-99_Offline
explain --json $fx/azure-nd-gb200-v6-v5.1-llama3.1-405b/llama3.1-405b/Offline
report --json $fx/azure-nd-gb200-v6-v5.1
published list --json
published list --json --benchmark 405b
recipes list --json
EOF

# -P: the working directory (this checkout) is not put before PYTHONPATH, so each side imports its own repro.
run_side() {  # side pythonpath
  local side=$1 pp=$2 n=0 line
  while IFS= read -r line; do
    n=$((n + 1))
    local ws=$tmp/ws-$side-$n
    mkdir -p "$ws"
    local -a args
    read -ra args <<<"$line"  # the case line is words by design (fixture paths hold no spaces)
    set +e
    PYTHONPATH=$pp REPRO_HOME=$ws COLUMNS=120 "$py" -P -m repro "${args[@]}" >"$tmp/out/$side/$n.out" 2>"$tmp/out/$side/$n.err"
    echo "rc=$?" >>"$tmp/out/$side/$n.out"
    set -e
    sed -i "s#$ws#<WS>#g" "$tmp/out/$side/$n.out" "$tmp/out/$side/$n.err"
  done <"$cases"
}
run_side base "$tmp/base"
run_side head "$here"
for side in base head; do  # each side ran its own code: a check that cannot fail is no check
  want=$([ $side = base ] && echo "$tmp/base" || echo "$here")
  got=$(PYTHONPATH=$([ $side = base ] && echo "$tmp/base" || echo "$here") "$py" -P -c 'import repro; print(repro.__file__)')
  [ "$got" = "$want/repro/__init__.py" ] || { echo "verify_equivalence: the $side side imported $got"; exit 2; }
done

status=0 n=0
while IFS= read -r line; do
  n=$((n + 1))
  for kind in out err; do
    if ! diff -u --label "base: repro $line ($kind)" --label "head: repro $line ($kind)" \
      "$tmp/out/base/$n.$kind" "$tmp/out/head/$n.$kind"; then
      status=1
    fi
  done
done <"$cases"
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$tmp/out" "$cases" "$KEEP/"; fi
echo "verify_equivalence: $n commands, base $(git -C "$here" rev-parse --short "$base"), head $(git -C "$here" rev-parse --short HEAD)$(git -C "$here" diff --quiet || echo ' + uncommitted'): $([ $status = 0 ] && echo identical || echo DIFFERENT)"
exit $status
