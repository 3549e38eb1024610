#!/usr/bin/env bash
# Install everything the test suite uses on a fresh Debian 12 machine (as root): system packages,
# a virtual environment with repro and its test extras, a Docker engine and a one-node Slurm cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  docker.io slurm-wlm munge tmux chromium busybox-static shellcheck ca-certificates python3-venv >/dev/null
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -c .ci/constraints.txt -e '.[test]'
[ -f .ci/start-dockerd.sh ] && $SUDO bash .ci/start-dockerd.sh
[ -f .ci/start-slurm.sh ] && $SUDO bash .ci/start-slurm.sh
echo "dev-setup: ready"
