#!/usr/bin/env bash
# NIC -> rocemu switch -> NIC over memif, three processes:
#
#   rocemu switch gen (1G, 1 Gbit/s offered, DSCP 3)  -- memif -->  Ethernet4
#   Ethernet0 (shaped to 200 Mbit/s)  -- memif -->  rocemu host 10.98.1.2 (receiver)
#
# The egress is 5 times slower than the offered load on lossless TC3, so
# the switch must pause the sender. Checks: the switch sent XOFF and XON for
# priority 3 out of Ethernet4; the sender received and honoured them; zero
# lossless drops in the switch's own counters; every frame reached the
# receiver; the capture taken inside the switch holds PFC frames that tshark
# decodes as MAC control class-based flow control for priority 3.
set -euo pipefail
ROCEMU=$(realpath "${1:?usage: pfc_e2e.sh path/to/rocemu}")
. "$(dirname "$0")/../lib.sh"
command -v tshark >/dev/null || skip "needs tshark"
[ -w /var/run ] || [ -n "${XDG_RUNTIME_DIR:-}" ] || skip "no writable DPDK runtime directory"

id=$$
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$tmp" /var/run/dpdk/rocemu-e2e-sw{,r,g}-$id
}
trap cleanup EXIT

FRAMES=10000
# The sender's link is 1G so that a pause (65535 quanta) lasts 33 ms: the
# processes share two cores, and a pause must outlast a scheduling gap.
# The headroom (xoff) must hold what is in flight when a pause is sent. Here
# the cable is a memif ring of 1024 frames plus the sender's burst of 32, far
# more than a real link's 160 KB: 1.5 MB covers 1056 frames of 1 KiB.
cat >"$tmp/switch.yaml" <<YAML
PORT:
  Ethernet0: {speed: 200, mtu: 1500}
  Ethernet4: {speed: 1000, mtu: 1500}
PORT_QOS_MAP:
  pfc_enable: "3"
BUFFER_POOL:
  size: "4194304"
BUFFER_PROFILE:
  pg_lossless_profile: {size: "9540", xon: "9540", xoff: "1572864", xon_offset: "2496", dynamic_th: "-2"}
YAML

# wait_for FILE PID WHAT: until FILE exists (10 s at most).
wait_for() {
  for _ in $(seq 100); do
    [ -e "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || { cat "$tmp"/*.log; fail "$3 exited early"; }
    sleep 0.1
  done
  cat "$tmp"/*.log
  fail "$3: $1 did not appear in 10 s"
}
wait_line() {
  for _ in $(seq 150); do
    grep -q "$2" "$1" && return 0
    kill -0 "$3" 2>/dev/null || { cat "$tmp"/*.log; fail "$2: process exited early"; }
    sleep 0.1
  done
  cat "$tmp"/*.log
  fail "no '$2' in $1 after 15 s"
}

"$ROCEMU" switch --config "$tmp/switch.yaml" \
  --port "Ethernet0=net_memif0,role=server,socket=$tmp/r.sock,socket-abstract=no" \
  --port "Ethernet4=net_memif1,role=server,socket=$tmp/g.sock,socket-abstract=no" \
  --neighbor 10.98.1.2=02:00:00:00:01:02@Ethernet0 \
  --capture "$tmp/switch.pcapng" --duration 60 \
  -- --file-prefix "rocemu-e2e-sw-$id" >"$tmp/switch.log" 2>&1 &
pid_sw=$!
pids+=("$pid_sw")

wait_for "$tmp/r.sock" "$pid_sw" "rocemu switch"
"$ROCEMU" host --port "net_memif0,role=client,socket=$tmp/r.sock,socket-abstract=no" --ip 10.98.1.2/24 --mac 02:00:00:00:01:02 \
  --duration 60 -- --file-prefix "rocemu-e2e-swr-$id" >"$tmp/receiver.log" 2>&1 &
pid_r=$!
pids+=("$pid_r")
wait_ready "$tmp/receiver.log" "$pid_r"

wait_for "$tmp/g.sock" "$pid_sw" "rocemu switch"
"$ROCEMU" switch gen --port "net_memif0,role=client,socket=$tmp/g.sock,socket-abstract=no" --src-ip 10.98.0.1 --dst-ip 10.98.1.2 \
  --dscp 3 --prio 3 --size 1024 --count $FRAMES --rate-gbps 1 --link-gbps 1 --duration 20 \
  -- --file-prefix "rocemu-e2e-swg-$id" >"$tmp/gen.log" 2>&1 ||
  { cat "$tmp"/*.log; fail "the sender did not send all $FRAMES frames"; }
wait_line "$tmp/switch.log" "rocemu switch: ready" "$pid_sw"

# The live counters, read through DPDK telemetry as an operator would, until
# the switch has forwarded every frame (10 MB at 200 Mbit/s: about 0.4 s).
counters_of() {  # counters_of PORTNAME COUNTER: from $tmp/counters.txt
  awk -v port="(switch $1)" -v name="$2" '
    /^rocemu/ { inport = index($0, port) > 0 }
    inport && $1 == name { v = $2 }
    END { print v + 0 }' "$tmp/counters.txt"
}
for _ in $(seq 100); do
  "$ROCEMU" counters --file-prefix "rocemu-e2e-sw-$id" >"$tmp/counters.txt" 2>&1 ||
    { cat "$tmp/counters.txt"; fail "rocemu counters could not read the switch"; }
  [ "$(counters_of Ethernet0 sw_tx_packets)" -ge $FRAMES ] && break
  sleep 0.1
done
[ "$(counters_of Ethernet4 pfc_tx_xoff_p3)" -gt 0 ] ||
  { cat "$tmp/counters.txt" "$tmp/gen.log"; fail "rocemu counters shows no XOFF sent on Ethernet4"; }
kill -INT "$pid_sw"
wait "$pid_sw" || { cat "$tmp/switch.log"; fail "rocemu switch failed"; }
stop_host "$pid_r"
pids=()

cat "$tmp/gen.log"
grep -E "lossless_drops|pfc priority" "$tmp/switch.log"

counter() {  # counter LOG PORT NAME: the value under "counters port=PORT"
  awk -v port="$2" -v name="$3" '
    /^counters port=/ { inport = ($2 == "port=" port) }
    inport && $1 == name { print $2; found = 1; exit }
    END { if (!found) print 0 }' "$1"
}

grep -q "rocemu switch: lossless_drops 0$" "$tmp/switch.log" || { cat "$tmp/switch.log"; fail "lossless drops in the switch"; }
xoff=$(counter "$tmp/switch.log" Ethernet4 pfc_tx_xoff_p3)
xon=$(counter "$tmp/switch.log" Ethernet4 pfc_tx_xon_p3)
fwd=$(counter "$tmp/switch.log" Ethernet0 sw_tx_packets)
[ "$xoff" -gt 0 ] || { cat "$tmp/switch.log"; fail "the switch never paused the sender"; }
[ "$xon" -gt 0 ] || { cat "$tmp/switch.log"; fail "the switch never resumed the sender"; }
[ "$fwd" -eq $FRAMES ] || { cat "$tmp/switch.log"; fail "the switch forwarded $fwd of $FRAMES frames"; }
grep -qE "pfc_rx [1-9][0-9]* \(xoff [1-9]" "$tmp/gen.log" || fail "the sender saw no XOFF"
grep -qE "paused [0-9.]+ ms" "$tmp/gen.log" || fail "the sender did not report its pause time"
rx=$(awk '$1 == "rx_packets" { print $2 }' "$tmp/receiver.log")
[ "${rx:-0}" -ge $FRAMES ] || { cat "$tmp/receiver.log"; fail "the receiver got ${rx:-0} of $FRAMES frames"; }

# The capture from inside the switch: tshark must decode the PFC frames.
tshark -r "$tmp/switch.pcapng" -Y macc -T fields -e macc.opcode -e macc.cbfc.enbv.c3 -e macc.cbfc.pause_time.c3 \
  2>/dev/null >"$tmp/pfc.txt"
n_pfc=$(wc -l <"$tmp/pfc.txt")
n_xoff=$(awk '$1 == "0x0101" && ($2 == "1" || $2 == "True") && $3 > 0' "$tmp/pfc.txt" | wc -l)
n_xon=$(awk '$1 == "0x0101" && ($2 == "1" || $2 == "True") && $3 == 0' "$tmp/pfc.txt" | wc -l)
[ "$n_xoff" -gt 0 ] || { head "$tmp/pfc.txt"; fail "tshark decoded no PFC XOFF for priority 3 ($n_pfc MAC control frames)"; }
[ "$n_xon" -gt 0 ] || { head "$tmp/pfc.txt"; fail "tshark decoded no PFC XON for priority 3"; }
echo "pfc_e2e: $FRAMES frames through a 200 Mbit/s egress, $xoff XOFF and $xon XON sent, 0 lossless drops;" \
     "tshark decodes $n_xoff XOFF and $n_xon XON in the switch's capture"
