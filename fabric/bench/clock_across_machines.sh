#!/usr/bin/env bash
# What one fabric clock across machines costs and gives: the 2:1 incast of
# tests/e2e/dumbbell_2to1.yaml (100 Gbit/s links, MTU 4200) split across two
# machines as network namespaces, as tests/e2e/fabric_cross_machines.sh does
# (switches left and right in one, the hosts node in the other, each NIC
# cable af_packet over a veth pair, control over TCP and UDP on a third),
# with the commands `rocemu fabric plan` prints. Each round runs SIZE once
# with each machine's own clock (--clock shared) and once with one clock
# across them (--clock fabric), in that order; no node is stopped. Prints per
# run the size's time scaled back and its algbw (the sweep CSV), the mean
# payload rate over the middle 40 % of the samples (the bottleneck carries
# 100 Gbit/s), the hosts node's wall time, and with --clock fabric each
# switch's clock round trip; then the median of each column per clock.
# Root (network namespaces). Usage:
#   clock_across_machines.sh ROCEMU REPO_ROOT [ROUNDS (3)] [SIZE (64M)]
set -uo pipefail
ROCEMU=$1
ROOT=$2
ROUNDS=${3:-3}
SIZE=${4:-64M}
. "$ROOT/tests/e2e/lib.sh"
source "$ROOT/tests/e2e/fabric_checks.sh"
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces)"
NS=rocemu-bs-$$ NH=rocemu-bh-$$
netns_setup fab_clock_bench "$NS" "$NH"
dumbbell_machines "$NS" "$NH"
C=$ROOT/tests/e2e/dumbbell_2to1.yaml
EAL="-- --log-level lib.eal:error"
echo "# $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $ROUNDS rounds of a $SIZE 2:1 incast"
printf '%-7s %5s %10s %10s %14s %8s  %s\n' clock round time_ms algbw_GBps middle_Gbit/s wall_s "clock round trips"

# run CLOCK ROUND: one run; appends "clock time algbw middle wall" to $D/runs.
run() {
  local clock=$1 round=$2 name="$1_$2" hosts left right t0 t1 rc bytes
  "$ROCEMU" fabric plan -c "$C" --machine sw=left,right --machine nics=hosts --address sw=10.77.0.1 \
    --link-dir "$D/$name" --binary "$ROCEMU" -w incast --sizes "$SIZE" --qps 8 -o "$D/rep_$name" --clock "$clock" \
    >"$D/plan_$name.txt" 2>&1 || { cat "$D/plan_$name.txt"; fail "fabric plan failed"; }
  hosts=$(plan_command "$D/plan_$name.txt" hosts) left=$(plan_command "$D/plan_$name.txt" left)
  right=$(plan_command "$D/plan_$name.txt" right)
  eval exec ip netns exec "$NS" "$left" $EAL >"$D/${name}_left.log" 2>&1 &
  pids+=($!)
  eval exec ip netns exec "$NS" "$right" $EAL >"$D/${name}_right.log" 2>&1 &
  pids+=($!)
  t0=$(date +%s.%N)
  eval timeout 300 ip netns exec "$NH" "$hosts" $EAL >"$D/$name.txt" 2>"$D/$name.err"
  rc=$?
  t1=$(date +%s.%N)
  kill -TERM "${pids[@]}"
  wait "${pids[@]}"
  pids=()
  [ $rc -eq 0 ] || { tail -c 800 "$D/$name.err"; fail "$name: hosts node exit status $rc"; }
  # size,time_us,algbw,... ; a verified, complete row
  read -r bytes time algbw < <(awk -F, 'NR == 2 && $14 == 1 && $12 == $11 { print $1, $2, $3 }' \
    "$D/rep_$name/live_incast_sweep.csv")
  [ -n "${time:-}" ] || fail "$name: no complete, verified row: $(cat "$D/rep_$name/live_incast_sweep.csv")"
  middle=$(awk -F, 'NR > 1 { s = 0; for (i = 2; i <= NF; i++) s += $i; r[++n] = s }
    END { lo = int(n * 0.3) + 1; hi = int(n * 0.7); for (i = lo; i <= hi; i++) { t += r[i]; m++ }
          printf "%.1f", m ? t / m : 0 }' "$D/rep_$name/live_incast_${bytes}B_rates.csv")
  local rtt
  rtt=$(sed -nE 's/^clock: fabric clock.s round trip to switch node ([a-z]+) at [^:]*:[0-9]+: median ([0-9.]+) ms, 99 % within ([0-9.]+) ms.*the lead is ([0-9.]+) ms.*/\1 \2 \/ \3 ms (lead \4)/p' \
    "$D/$name.txt" | paste -sd';' - | sed 's/;/; /g')
  local wall
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  printf '%-7s %5s %10.2f %10.2f %14s %8s  %s\n' "$clock" "$round" "$(awk -v t="$time" 'BEGIN { print t / 1000 }')" \
    "$algbw" "$middle" "$wall" "${rtt:--}"
  echo "$clock $time $algbw $middle $wall" >>"$D/runs"
  rm -rf "${D:?}/$name" "$D/rep_$name"
}
for r in $(seq "$ROUNDS"); do
  run shared "$r"
  run fabric "$r"
done
# Medians per clock, and fabric against shared.
awk '{ n[$1]++; t[$1, n[$1]] = $2; a[$1, n[$1]] = $3; m[$1, n[$1]] = $4; w[$1, n[$1]] = $5 }
  function med(arr, c,   k, i, j, v, x) { k = n[c]; for (i = 1; i <= k; i++) v[i] = arr[c, i]
    for (i = 2; i <= k; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2 }
  END { for (c in n) { mt[c] = med(t, c) / 1000; ma[c] = med(a, c); mm[c] = med(m, c); mw[c] = med(w, c)
          printf "median %-7s time %.2f ms, algbw %.2f GB/s, middle %.1f Gbit/s, wall %.2f s (%d runs)\n",
            c, mt[c], ma[c], mm[c], mw[c], n[c] }
        if (n["shared"] && n["fabric"])
          printf "fabric / shared: algbw %.2fx, middle rate %.2fx, wall %.2fx\n",
            ma["fabric"] / ma["shared"], mm["fabric"] / mm["shared"], mw["fabric"] / mw["shared"] }' "$D/runs"
