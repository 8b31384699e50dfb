#!/usr/bin/env bash
# Paired runs of two kite binaries (before/after a change) on this noisy machine: both
# apiservers run at once on their own data dirs; lease renewals (PUT) and GETs alternate
# between them round by round, so a slow spell touches both alike. Prints each round, the
# median of each, the ratio after/before, and server CPU per request.
#
#   bench/paired.sh OLD_KITE NEW_KITE      (env: ROUNDS=6, SECS=8, CONNS=64, THREADS=2, NLEASES=64)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
A=${1:?old kite binary}; B=${2:?new kite binary}
ROUNDS=${ROUNDS:-6}; SECS=${SECS:-8}; CONNS=${CONNS:-64}; THREADS=${THREADS:-2}; NLEASES=${NLEASES:-64}
TOKEN=bench-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
TMP=$(mktemp -d /tmp/kite-paired.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
printf '%s,bench,1000,"system:masters"\n' "$TOKEN" > "$TMP/tokens.csv"
kcurl() { curl -sk --max-time 10 -H "Authorization: Bearer $TOKEN" "$@"; }
port() { local p; for _ in $(seq 200); do p=$((20000 + RANDOM % 12000)); ss -Htln "sport = :$p" | grep -q . || { echo $p; return; }; done; }

start() {  # name binary -> sets URL_<name>, PID_<name>
    local name=$1 bin=$2 p; p=$(port)
    "$bin" apiserver --data-dir "$TMP/$name" --listen "127.0.0.1:$p" --token-auth-file "$TMP/tokens.csv" > "$TMP/$name.log" 2>&1 &
    PIDS+=($!); eval "PID_$name=$!"; eval "URL_$name=https://127.0.0.1:$p"
    for _ in $(seq 300); do [ "$(kcurl "https://127.0.0.1:$p/readyz" 2>/dev/null || true)" = ok ] && break; sleep 0.1; done
    for i in $(seq 0 $((NLEASES - 1))); do
        kcurl -o /dev/null -X POST -H 'Content-Type: application/json' "https://127.0.0.1:$p/apis/coordination.k8s.io/v1/namespaces/default/leases" \
            -d "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"bench-$i\"},\"spec\":{\"holderIdentity\":\"bench-$i\",\"leaseDurationSeconds\":40}}"
    done
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
start old "$A"; start new "$B"
export KITE_TOKEN=$TOKEN LEASE_NS=default LEASE_COUNT=$NLEASES
TCK=$(getconf CLK_TCK)
for r in $(seq "$ROUNDS"); do
    for kind in put get; do
        for name in old new; do
            url=URL_$name; pid=PID_$name
            c0=$(cpu_ticks "${!pid}")
            wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" --latency --timeout 5s -s "bench/lease-$kind.lua" "${!url}" > "$TMP/w.txt" 2>&1 || true
            c1=$(cpu_ticks "${!pid}")
            rps=$(awk '/^Requests\/sec:/ {print $2}' "$TMP/w.txt")
            p99=$(awk '$1 == "99%" {print $2}' "$TMP/w.txt")
            us=$(awk -v c=$((c1 - c0)) -v t="$TCK" -v r="$rps" -v s="$SECS" 'BEGIN { printf "%.1f", c / t * 1e6 / (r * s) }')
            echo "$r $kind $name $rps $p99 $us" | tee -a "$TMP/rows.txt"
        done
    done
done
echo "median of $ROUNDS rounds: req/s, server CPU us/request"
for kind in put get; do
    for name in old new; do
        awk -v k=$kind -v n=$name '$2 == k && $3 == n { print $4, $6 }' "$TMP/rows.txt" | sort -n |
            awk -v k=$kind -v n=$name '{ r[NR] = $1; c[NR] = $2 } END { m = int((NR + 1) / 2); printf "%s %s %.0f %.1f\n", k, n, r[m], c[m] }'
    done
done | tee "$TMP/med.txt"
for kind in put get; do
    awk -v k=$kind '$1 == k { v[$2] = $3 } END { printf "%s: new/old req/s = %.3f\n", k, v["new"] / v["old"] }' "$TMP/med.txt"
done
