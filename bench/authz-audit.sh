#!/usr/bin/env bash
# Lease renewals by nodes with authorization and audit on vs off, in the same run: two
# `kite apiserver`s at once on their own data dirs, one with the defaults
# (--authorization-mode Node,RBAC) and --audit-log-path, one with --authorization-mode AlwaysAllow
# and no audit log. Every request is a node (static token user system:node:bench-N in
# system:nodes) renewing its own Lease in kube-node-lease (bench/lease-node-put.lua), so the Node
# authorizer, NodeRestriction and the audit writer see each one. Rounds alternate between the two
# servers so a slow spell of the machine touches both alike; the median round of each is shown.
#
#   bench/authz-audit.sh [KITE]   (env: ROUNDS=5, SECS=8, CONNS=64, THREADS=2, NLEASES=64)
# Prints per round, then: `summary: on=RPS off=RPS slower_pct=P on_p99=MS off_p99=MS on_cpu_us=US
# off_cpu_us=US cpu_pct=P audit_lines=N` (medians; server CPU per request is the figure to read on a
# busy machine, where req/s moves with other work).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KITE=${1:-${KITE:-$ROOT/build/kite}}
ROUNDS=${ROUNDS:-5}; SECS=${SECS:-8}; CONNS=${CONNS:-64}; THREADS=${THREADS:-2}; NLEASES=${NLEASES:-64}
ADMIN=admin-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
NODE_PREFIX=node-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')-
TMP=$(mktemp -d /tmp/kite-authz.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
{
    printf '%s,bench,1000,"system:masters"\n' "$ADMIN"
    for i in $(seq 0 $((NLEASES - 1))); do printf '%s%d,system:node:bench-%d,node-%d,"system:nodes"\n' "$NODE_PREFIX" "$i" "$i" "$i"; done
} > "$TMP/tokens.csv"
kcurl() { curl -sk --max-time 10 -H "Authorization: Bearer $ADMIN" "$@"; }
port() { local p; for _ in $(seq 200); do p=$((20000 + RANDOM % 12000)); ss -Htln "sport = :$p" | grep -q . || { echo $p; return; }; done; }

start() {  # name extra-args... -> sets URL_<name>, PID_<name>
    local name=$1 p; shift; p=$(port)
    "$KITE" apiserver --data-dir "$TMP/$name" --listen "127.0.0.1:$p" --token-auth-file "$TMP/tokens.csv" "$@" \
        > "$TMP/$name.log" 2>&1 &
    PIDS+=($!); eval "PID_$name=$!"; eval "URL_$name=https://127.0.0.1:$p"
    for _ in $(seq 300); do [ "$(kcurl "https://127.0.0.1:$p/readyz" 2>/dev/null || true)" = ok ] && break; sleep 0.1; done
    for i in $(seq 0 $((NLEASES - 1))); do
        code=$(curl -sk --max-time 10 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $NODE_PREFIX$i" \
            -X POST -H 'Content-Type: application/json' \
            "https://127.0.0.1:$p/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases" \
            -d "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"bench-$i\"},\"spec\":{\"holderIdentity\":\"bench-$i\",\"leaseDurationSeconds\":40}}")
        case $code in 201|409) ;; *) echo "authz-audit: node bench-$i creating its lease on $name -> HTTP $code" >&2; exit 1 ;; esac
    done
}
start on --audit-log-path "$TMP/audit.log" --audit-log-maxsize 200 --audit-log-maxbackup 1
start off --authorization-mode AlwaysAllow

export NODE_TOKEN_PREFIX=$NODE_PREFIX LEASE_COUNT=$NLEASES
summ() { awk '/Requests\/sec/ {r = $2} / 99%/ {p = $2} /Non-2xx/ {n = $NF} END {print r + 0, p, n + 0}' "$1"; }
reqs() { awk '/requests in/ {print $1}' "$1"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # the server's utime + stime
HZ=$(getconf CLK_TCK)
to_ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) printf "%.2f", v / 1000; else if (v ~ /ms$/) printf "%.2f", v + 0; else if (v ~ /s$/) printf "%.2f", v * 1000; else print v }'; }
for r in $(seq "$ROUNDS"); do
    for name in on off; do
        url=URL_$name pid=PID_$name
        t0=$(ticks "${!pid}")
        wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" --latency --timeout 5s -s bench/lease-node-put.lua "${!url}" \
            > "$TMP/wrk-$name-$r.txt" 2>&1 || true
        t1=$(ticks "${!pid}")
        read -r rps p99 non2xx <<< "$(summ "$TMP/wrk-$name-$r.txt")"
        n=$(reqs "$TMP/wrk-$name-$r.txt")
        awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="${n:-0}" 'BEGIN { if (n > 0) printf "%.1f\n", t * 1e6 / hz / n; else print 0 }' \
            > "$TMP/cpu-$name-$r.txt"
        echo "round $r $name: $rps req/s, p99 $(to_ms "$p99") ms, server CPU $(cat "$TMP/cpu-$name-$r.txt") us/request, non-2xx $non2xx"
        [ "$non2xx" = 0 ] || { echo "authz-audit: $name answered non-2xx:" >&2; cat "$TMP/wrk-$name-$r.txt" >&2; }
    done
done
median() {  # name -> "rps p99ms" of the median round by req/s
    for r in $(seq "$ROUNDS"); do read -r a b _ <<< "$(summ "$TMP/wrk-$1-$r.txt")"; echo "$a $(to_ms "$b")"; done |
        sort -n -k1,1 | awk '{ row[NR] = $0 } END { print row[int((NR + 1) / 2)] }'
}
read -r ON ON_P99 <<< "$(median on)"
read -r OFF OFF_P99 <<< "$(median off)"
cpu_median() { cat "$TMP"/cpu-"$1"-*.txt | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ON_CPU=$(cpu_median on); OFF_CPU=$(cpu_median off)
CPU_PCT=$(awk -v a="$ON_CPU" -v b="$OFF_CPU" 'BEGIN { if (b > 0) printf "%.1f", (a - b) * 100 / b; else print 0 }')
LINES=$(cat "$TMP"/audit.log* 2>/dev/null | wc -l)
PCT=$(awk -v a="$ON" -v b="$OFF" 'BEGIN { if (b > 0) printf "%.1f", (b - a) * 100 / b; else print 0 }')
echo "summary: on=$ON off=$OFF slower_pct=$PCT on_p99=$ON_P99 off_p99=$OFF_P99 on_cpu_us=$ON_CPU off_cpu_us=$OFF_CPU cpu_pct=$CPU_PCT audit_lines=$LINES"
