#!/usr/bin/env bash
# DCQCN and NIC-side PFC between two rocemu processes over memif, read live
# through `rocemu counters`.
#
#   1. The server marks every 2nd ECN-capable RoCEv2 frame it receives as CE
#      (--mark-ce-every 2): it sends CNPs (np_cnp_sent), the client handles
#      them (rp_cnp_handled) and cuts its QP's rate (rp_rate_decreases), and
#      `rocemu counters` shows the QP's current and target rate in Gbit/s.
#   2. The same with --no-cnp on the server: marks are counted, no CNP is sent.
#   3. The server handles at most 3000 received frames per second and sends
#      PFC at 16 frames of backlog (--rx-max-pps 3000 --pfc-rx-xoff 16): it
#      counts tx_pfc_xoff_prio3, the client counts rx_pfc, and every
#      ping-pong still completes.
set -euo pipefail
ROCEMU=$(realpath "${1:?usage: nic_cc.sh path/to/rocemu}")
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"

id=$$
tmp=$(mktemp -d)
tcp=$((20000 + (id + 7) % 20000))
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp" /var/run/dpdk/rocemu-nicc*-"$id"
}
trap cleanup EXIT

# start NAME SERVER_ARGS -- CLIENT_ARGS: a pingpong pair over memif in the background.
start() {
  local name=$1
  shift
  local sargs=() cargs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do sargs+=("$1"); shift; done
  shift
  cargs=("$@")
  "$ROCEMU" pingpong --port "net_memif0,role=server,socket=$tmp/$name.sock" --ip 10.98.0.2/24 \
    --mac 02:00:00:00:00:0b -p "$tcp" "${sargs[@]}" -- --file-prefix "rocemu-niccb-$id" >"$tmp/$name.b.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    grep -q "local address:" "$tmp/$name.b.log" && break
    sleep 0.1
  done
  grep -q "local address:" "$tmp/$name.b.log" || { cat "$tmp/$name.b.log"; fail "$name: the server did not start"; }
  "$ROCEMU" pingpong --port "net_memif0,role=client,socket=$tmp/$name.sock" --ip 10.98.0.1/24 \
    --mac 02:00:00:00:00:0a -p "$tcp" "${cargs[@]}" 127.0.0.1 -- --file-prefix "rocemu-nicca-$id" \
    >"$tmp/$name.a.log" 2>&1 &
  pids+=($!)
}

# value PREFIX NAME: the first value of counter NAME in `rocemu counters` (0 when absent).
value() {
  "$ROCEMU" counters --file-prefix "$1" 2>/dev/null | awk -v k="$2" '$1 == k { print $2; exit }' | grep . || echo 0
}

# wait_for PREFIX NAME: until counter NAME is above 0 (30 s at most).
wait_for() {
  for _ in $(seq 300); do
    [ "$(value "$1" "$2")" != 0 ] && return 0
    sleep 0.1
  done
  "$ROCEMU" counters --file-prefix "$1" || true
  fail "$1: $2 stayed 0"
}

stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  pids=()
}

# 1. CE marks -> CNPs -> rate cuts.
start ce --mark-ce-every 2 -n 1000000 -s 4000 -- -n 1000000 -s 4000
wait_for "rocemu-niccb-$id" lab_ce_marked
wait_for "rocemu-niccb-$id" np_ecn_marked_roce_packets
wait_for "rocemu-niccb-$id" np_cnp_sent
wait_for "rocemu-nicca-$id" rp_cnp_handled
wait_for "rocemu-nicca-$id" rp_rate_decreases
# The rate recovers between CNPs (a timer step every 300 us): read until a read catches it below line rate.
current=100
for _ in $(seq 100); do
  "$ROCEMU" counters --file-prefix "rocemu-nicca-$id" >"$tmp/ce.counters"
  current=$(awk '$1 == "rp_current_rate" { print $2; exit }' "$tmp/ce.counters")
  awk -v r="${current:-100}" 'BEGIN { exit !(r < 100) }' && break
  sleep 0.1
done
grep -Eq "^ +rp_current_rate +[0-9]+\.[0-9]{3} Gbit/s$" "$tmp/ce.counters" ||
  { cat "$tmp/ce.counters"; fail "ce: no current rate in Gbit/s"; }
grep -Eq "^ +rp_target_rate +[0-9]+\.[0-9]{3} Gbit/s$" "$tmp/ce.counters" ||
  { cat "$tmp/ce.counters"; fail "ce: no target rate in Gbit/s"; }
awk -v r="${current:-100}" 'BEGIN { exit !(r < 100) }' || fail "ce: the QP's rate never read below 100 Gbit/s"
stop_all

# 2. --no-cnp: marks counted, no CNP.
start nocnp --mark-ce-every 2 --no-cnp -n 1000000 -s 4000 -- -n 1000000 -s 4000
wait_for "rocemu-niccb-$id" np_ecn_marked_roce_packets
marked=$(value "rocemu-niccb-$id" np_ecn_marked_roce_packets)
for _ in $(seq 50); do
  [ "$(value "rocemu-niccb-$id" np_ecn_marked_roce_packets)" -gt $((marked + 100)) ] && break
  sleep 0.1
done
[ "$(value "rocemu-niccb-$id" np_cnp_sent)" = 0 ] || fail "nocnp: the server sent CNPs"
[ "$(value "rocemu-nicca-$id" rp_cnp_handled)" = 0 ] || fail "nocnp: the client handled CNPs"
stop_all

# 3. A slow receiver pauses its peer with PFC; 64 KiB messages (64 frames at MTU 1024) fill its backlog.
start pfc --rx-max-pps 3000 --pfc-rx-xoff 16 -n 40 -s 65536 -- -n 40 -s 65536
wait_for "rocemu-niccb-$id" tx_pfc_xoff_prio3
wait_for "rocemu-nicca-$id" rx_pfc
for p in "${pids[@]}"; do wait "$p" || { cat "$tmp/pfc.a.log" "$tmp/pfc.b.log"; fail "pfc: a side failed"; }; done
pids=()
grep -Eq "^40 iters in" "$tmp/pfc.a.log" || { cat "$tmp/pfc.a.log"; fail "pfc: the client did not finish"; }
echo "nic_cc: CE marks gave CNPs and rate cuts (rate $current Gbit/s); --no-cnp sent none; a slow receiver sent PFC and all 40 x 64 KiB ping-pongs completed"
