#!/bin/sh
# Start a local Docker engine for the container tests if none answers yet; idempotent, waits at most ~60 s per try.
# No bridge/iptables so it runs inside CI containers and VMs without extra kernel features. Storage: overlay2 where
# the kernel mounts overlayfs on /var/lib/docker's file system, else vfs (a full copy of the image per container and
# per build step: the container tests took 90.8 s on vfs, 14.0 s on overlay2, on the 2-core VM).
# REPRO_DOCKER_STORAGE=vfs|overlay2 forces one.
set -eu

if docker info >/dev/null 2>&1; then
    echo "dockerd already running ($(docker info --format '{{.Driver}}' 2>/dev/null || echo '?') storage)"
    exit 0
fi

log="${DOCKERD_LOG:-/var/log/repro-dockerd.log}"
root="${DOCKERD_DATA_ROOT:-/var/lib/docker}"
mkdir -p "$(dirname "$log")" "$root"

overlay_works() {
    probe="$(mktemp -d "$root/.overlay-probe.XXXXXX")"
    mkdir -p "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
    ok=1
    if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" \
        "$probe/merged" >/dev/null 2>&1; then
        umount "$probe/merged" && ok=0
    fi
    rm -rf "$probe"
    return "$ok"
}

wait_ready() {
    i=0
    while [ "$i" -lt 60 ]; do
        if docker info >/dev/null 2>&1; then
            return 0
        fi
        kill -0 "$1" 2>/dev/null || return 1
        i=$((i + 1))
        sleep 1
    done
    return 1
}

start() {
    nohup dockerd --data-root "$root" --storage-driver="$1" --iptables=false --bridge=none >>"$log" 2>&1 &
    pid=$!
    echo "started dockerd (pid $pid, $1 storage), log: $log"
    if wait_ready "$pid"; then
        echo "dockerd is ready"
        return 0
    fi
    kill "$pid" 2>/dev/null || true
    return 1
}

if pgrep -x dockerd >/dev/null 2>&1; then
    echo "a dockerd runs but does not answer yet; waiting" >&2
    i=0
    while [ "$i" -lt 60 ]; do
        docker info >/dev/null 2>&1 && { echo "dockerd is ready"; exit 0; }
        i=$((i + 1))
        sleep 1
    done
else
    driver="${REPRO_DOCKER_STORAGE:-}"
    if [ -z "$driver" ]; then
        if overlay_works; then driver=overlay2; else driver=vfs; fi
    fi
    start "$driver" && exit 0
    if [ "$driver" != vfs ] && [ -z "${REPRO_DOCKER_STORAGE:-}" ]; then
        echo "dockerd did not start with $driver storage; trying vfs" >&2
        sleep 2
        start vfs && exit 0
    fi
fi
echo "dockerd did not answer within 60 s; last log lines:" >&2
tail -n 20 "$log" >&2 || true
exit 1
