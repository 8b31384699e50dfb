#!/usr/bin/env bash
# Instructions per write (valgrind --tool=callgrind, user space only: the figure this noisy
# machine cannot blur) of lease renewals (PUT, the kubelet's) and node status heartbeats
# (strategic-merge PATCH of nodes/status: four conditions' lastHeartbeatTime, on nodes with a
# kubelet-sized status: conditions, addresses, capacity, nodeInfo, 20 images), for each binary.
#
#   bench/write-instructions.sh KITE [KITE...]     (env: N=256 writes measured per kind)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-256}
TMP=$(mktemp -d /tmp/kite-instr.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
for bin in "$@"; do
    d=$(mktemp -d "$TMP/run.XXXX")
    token=bench-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
    printf '%s,bench,1000,"system:masters"\n' "$token" > "$d/tokens.csv"
    port=$(/usr/bin/python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
    valgrind --tool=callgrind --callgrind-out-file="$d/cg.%p" "$bin" apiserver --data-dir "$d/api" \
        --listen "127.0.0.1:$port" --token-auth-file "$d/tokens.csv" > "$d/log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
        [ "$(curl -sk -H "Authorization: Bearer $token" "https://127.0.0.1:$port/readyz" 2>/dev/null)" = ok ] && break
        sleep 0.2
    done
    /usr/bin/python3 "$ROOT/bench/write-instructions.py" "$port" "$token" setup 64
    for kind in lease node; do
        /usr/bin/python3 "$ROOT/bench/write-instructions.py" "$port" "$token" "$kind" 64   # first writes move fields
        callgrind_control -z "$pid" > /dev/null
        /usr/bin/python3 "$ROOT/bench/write-instructions.py" "$port" "$token" "$kind" "$N"
        callgrind_control -d "$pid" > /dev/null
        f=$(ls -t "$d"/cg.*.* | head -1)
        ir=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
        echo "$bin $kind: $((ir / N)) instructions/write"
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
done
