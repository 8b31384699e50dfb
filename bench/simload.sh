#!/bin/bash
# bench/simload.sh: CPU per lease renewal of `kite up --no-agent` and of `kite sim` under simulated nodes.
#   UP_KITE=path SIM_KITE=path bench/simload.sh NODES LEASE_DURATION_S SECONDS PORT [RAMP]
# Starts kite up (UP_KITE, default build/kite) on a fresh data dir at 127.0.0.1:PORT, then kite sim
# (SIM_KITE, default UP_KITE) with NODES nodes (8 HTTP/2 connections, 512 lanes), waits until
# all are Ready and 15 s more, then measures both processes' CPU over SECONDS.
# Prints: renewals/s, up %core, sim %core, up us/renewal, sim us/renewal (per node-period for sim),
# and kite up's resident memory at the end.
set -u
N=$1; LD=$2; SECS=$3; PORT=$4; RAMP=${5:-1500}
UPK=${UP_KITE:-build/kite}; SIMK=${SIM_KITE:-$UPK}
W=$(mktemp -d /tmp/simload.XXXX); D=$W/d; mkdir $D
$UPK up --no-agent --data-dir $D --listen 127.0.0.1:$PORT > $W/up.log 2>&1 & UP=$!
for i in $(seq 200); do [ -f $D/admin.kubeconfig ] && break; sleep 0.2; done
sleep 1
$SIMK sim --kubeconfig $D/admin.kubeconfig --data-dir $D --nodes $N --ramp $RAMP --connections 8 --inflight 512 \
   --lease-duration $LD --progress-every 5s > $W/sim.log 2>&1 & SIM=$!
for i in $(seq 600); do grep -q "$N/$N registered, $N Ready" $W/sim.log && break; sleep 1; done
sleep 15
a=($(awk '{print $14+$15}' /proc/$UP/stat)); b=($(awk '{print $14+$15}' /proc/$SIM/stat))
sleep $SECS
c=($(awk '{print $14+$15}' /proc/$UP/stat)); d=($(awk '{print $14+$15}' /proc/$SIM/stat))
RATE=$(tail -n1 $W/sim.log | sed -n 's/.* \([0-9.]*\) renewals\/s.*/\1/p')
P99=$(tail -n1 $W/sim.log | sed -n 's/.*renewal p99 \([0-9.]* ms\).*/\1/p')
RSS=$(awk '/VmRSS/{print $2}' /proc/$UP/status)
kill $SIM; wait $SIM 2>/dev/null; kill $UP; wait $UP 2>/dev/null
python3 - "$RATE" "$(( c - a ))" "$(( d - b ))" "$SECS" "$P99" "$RSS" <<'PY'
import sys
rate=float(sys.argv[1] or 0); up=int(sys.argv[2])/100; sim=int(sys.argv[3])/100; s=float(sys.argv[4])
print(f"renewals/s {rate:.0f}  p99 {sys.argv[5]}  up {100*up/s:.0f}%  sim {100*sim/s:.0f}%  "
      f"up {1e6*up/s/max(rate,1):.1f} us/renewal  sim {1e6*sim/s/max(rate,1):.1f} us/renewal  "
      f"up RSS {int(sys.argv[6] or 0)} KiB")
PY
rm -rf $W
