#!/bin/sh
# Start a local Docker engine for the container tests if none answers yet; idempotent, waits at most ~60 s.
# vfs storage and no bridge/iptables so it runs inside CI containers and VMs without extra kernel features.
set -eu

if docker info >/dev/null 2>&1; then
    echo "dockerd already running"
    exit 0
fi

log="${DOCKERD_LOG:-/var/log/repro-dockerd.log}"
mkdir -p "$(dirname "$log")"
if ! pgrep -x dockerd >/dev/null 2>&1; then
    nohup dockerd --storage-driver=vfs --iptables=false --bridge=none >"$log" 2>&1 &
    echo "started dockerd (pid $!), log: $log"
fi

i=0
while [ "$i" -lt 60 ]; do
    if docker info >/dev/null 2>&1; then
        echo "dockerd is ready"
        exit 0
    fi
    i=$((i + 1))
    sleep 1
done
echo "dockerd did not answer within 60 s; last log lines:" >&2
tail -n 20 "$log" >&2 || true
exit 1
