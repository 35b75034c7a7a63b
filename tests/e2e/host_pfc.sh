#!/usr/bin/env bash
# `rocemu host` with the receive-side PFC options of the RDMA commands, over
# memif: a responder that handles at most 200 frames/s (--rx-max-pps) is
# pinged at 1000/s, so its receive backlog reaches --pfc-rx-xoff and it pauses
# the pinger with the configured quanta, then resumes it. Every ping is
# answered (ping is not held by PFC). A bad quanta is refused before DPDK
# starts, with the allowed range.
set -euo pipefail
ROCEMU=$(realpath "${1:?usage: host_pfc.sh path/to/rocemu}")
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
command -v tshark >/dev/null || skip "needs tshark"

id=$$
tmp=$(mktemp -d)
pid_b=
cleanup() {
  if [ -n "$pid_b" ]; then kill "$pid_b" 2>/dev/null && wait "$pid_b" 2>/dev/null || true; fi
  rm -rf "$tmp" "/var/run/dpdk/rocemu-e2e-pa-$id" "/var/run/dpdk/rocemu-e2e-pb-$id"
}
trap cleanup EXIT

status=0
"$ROCEMU" host --port net_null0 --ip 10.98.0.2/24 --pfc-rx-xoff 4 --pfc-pause-quanta 70000 >"$tmp/bad.log" 2>&1 ||
  status=$?
[ "$status" = 2 ] || { cat "$tmp/bad.log"; fail "a bad --pfc-pause-quanta exited $status, expected 2"; }
grep -q -- "--pfc-pause-quanta 70000 is out of range; allowed \[1, 65535\]" "$tmp/bad.log" ||
  { cat "$tmp/bad.log"; fail "the error does not name the option, the value and the range"; }

"$ROCEMU" host --port "net_memif0,role=server,socket=$tmp/memif.sock" --ip 10.98.0.2/24 --mac 02:00:00:00:00:0b \
  --rx-max-pps 200 --pfc-rx-xoff 4 --pfc-rx-xon 1 --pfc-pause-quanta 1000 --pfc-refresh-percent 25 --duration 60 \
  -- --file-prefix "rocemu-e2e-pb-$id" >"$tmp/b.log" 2>&1 &
pid_b=$!
wait_ready "$tmp/b.log" "$pid_b"

"$ROCEMU" host --port "net_memif0,role=client,socket=$tmp/memif.sock" --ip 10.98.0.1/24 --mac 02:00:00:00:00:0a \
  --ping 10.98.0.2 -c 40 -i 0.001 --capture "$tmp/a.pcapng" -- --file-prefix "rocemu-e2e-pa-$id" >"$tmp/a.log" 2>&1 ||
  { cat "$tmp/a.log" "$tmp/b.log"; fail "the pinger did not get 40 replies"; }
stop_host "$pid_b"
pid_b=
grep -q "40 transmitted, 40 received" "$tmp/a.log" || { cat "$tmp/a.log"; fail "ping summary missing"; }
grep -Eq "tx_pfc_xoff_prio3 [1-9]" "$tmp/b.log" || { cat "$tmp/b.log"; fail "the slow responder sent no XOFF"; }
grep -Eq "tx_pfc_xon_prio3 [1-9]" "$tmp/b.log" || { cat "$tmp/b.log"; fail "the responder never resumed"; }
grep -Eq "rx_pfc [1-9]" "$tmp/a.log" || { cat "$tmp/a.log"; fail "the pinger received no PFC"; }
xoff=$(tshark -r "$tmp/a.pcapng" -Y "macc.cbfc.enbv.c3 && macc.cbfc.pause_time.c3 == 1000" 2>/dev/null | wc -l)
[ "$xoff" -ge 1 ] || { tshark -r "$tmp/a.pcapng" -Y macc -V 2>/dev/null | head -40; fail "no XOFF of 1000 quanta in the capture"; }
echo "host_pfc: 40/40 echo replies, the slow responder paused the pinger with 1000 quanta ($xoff XOFF seen) and resumed it"
