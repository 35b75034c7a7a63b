#!/usr/bin/env bash
# The emulated NIC against the ceilings it cannot beat, measured in one run:
#
#   1. over memif, between two processes on two CPUs (generator/requester on
#      CPU 0, sink/responder on CPU 1), at the frame size of a RoCEv2 RDMA
#      WRITE ONLY carrying 4 KiB (4170 B: Ethernet 14, IPv4 20, UDP 8, BTH 12,
#      RETH 16, payload, ICRC 4) and 64 B (138 B):
#        dpdk-testpmd txonly -> dpdk-testpmd rxonly   (frames per second)
#        rocemu perf write client -> rocemu perf write server (two processes,
#        once sleeping 20 us when idle, as by default, once --busy-poll;
#        path MTU 4096, so one frame per message)
#      ratio: rocemu's goodput (payload Gbit/s) / testpmd's frame Gbit/s
#      (target >= 80 % at 4 KiB);
#   2. rocemu_perf_bench: --loopback 64 KiB WRITE over a net_ring pair vs
#      single-core cold memcpy (target >= 40 %), and the 64 B SEND rate; it
#      also prints each figure per CPU-second of its thread, which a loaded
#      machine disturbs far less than the wall-clock ratio.
#
# Usage: bash bench/nic/run.sh [BUILD_DIR]   (default build-perf; SECONDS_EACH=N, default 3; ROUNDS=N, default 3;
#        NO_LOOPBACK=1 leaves out part 2)
# Needs root (memif sockets, EAL), dpdk-testpmd (Debian package dpdk-dev; scripts/install-deps.sh installs it) and a
# release build; it builds rocemu and rocemu_perf_bench with ninja -j2.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-perf}
SECS=${SECONDS_EACH:-3}
ROUNDS=${ROUNDS:-3}
TESTPMD=${TESTPMD:-dpdk-testpmd}
command -v "$TESTPMD" >/dev/null || { echo "needs $TESTPMD (Debian package dpdk-dev: bash scripts/install-deps.sh)"; exit 1; }
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$BUILD" -j2 rocemu rocemu_perf_bench >/dev/null
ROCEMU=$BUILD/tools/rocemu/rocemu

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp" /var/run/dpdk/nicbench-*-$$
}
trap cleanup EXIT
eal=(--no-huge --no-pci -m 512 --log-level lib.eal:error)

# testpmd FRAME: frames per second rxonly received, the mean of its busy
# stats periods without the first (start-up) and the last (cut short).
testpmd_pps() {
  local frame=$1 sock=$tmp/tp-$1.sock mbuf=$(($1 + 256))
  rm -f "$sock"  # a round's socket file would pass the wait below before the server is up
  "$TESTPMD" --lcores 0@0,1@1 "${eal[@]}" --file-prefix "nicbench-rx-$$" \
    --vdev "net_memif0,role=server,socket=$sock,socket-abstract=no,bsize=8192" -- \
    --mbuf-size "$mbuf" --total-num-mbufs 16384 --forward-mode=rxonly --stats-period 1 --nb-cores 1 >"$tmp/rx-$frame.log" 2>&1 &
  local rx=$!
  pids+=("$rx")
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  timeout -s INT $((SECS + 4)) "$TESTPMD" --lcores 0@1,1@0 "${eal[@]}" --file-prefix "nicbench-tx-$$" \
    --vdev "net_memif0,role=client,socket=$sock,socket-abstract=no,bsize=8192" -- \
    --mbuf-size "$mbuf" --total-num-mbufs 16384 --forward-mode=txonly --txpkts "$frame" --stats-period 1 --nb-cores 1 \
    >"$tmp/tx-$frame.log" 2>&1 || true
  kill -INT "$rx" 2>/dev/null || true
  wait "$rx" 2>/dev/null || true
  awk '/Rx-pps:/ && $2 > 0 { v[n++] = $2 }
       END { a = n >= 3 ? 1 : 0; b = n >= 3 ? n - 1 : n; s = 0; for (i = a; i < b; i++) s += v[i]
             print (b > a ? s / (b - a) : 0) }' "$tmp/rx-$frame.log"
}

# rocemu PAYLOAD [--busy-poll]: the client's result line (#bytes #iterations
# peak avg Mpps).
rocemu_write() {
  local size=$1 mode=${2:-} sock=$tmp/ro-$1${2:-}.sock port=$((30000 + $$ % 20000))
  rm -f "$sock"
  "$ROCEMU" perf write $mode --port "net_memif0,role=server,socket=$sock,socket-abstract=no,bsize=8192" \
    --ip 10.93.0.2/24 --mac 02:00:00:00:00:0b --port-mtu 9000 -p "$port" \
    -- "${eal[@]}" -l 1 --file-prefix "nicbench-rs-$$" >"$tmp/rs-$size.log" 2>&1 &
  local rs=$!
  pids+=("$rs")
  for _ in $(seq 100); do grep -q "waiting for a client" "$tmp/rs-$size.log" && break; sleep 0.1; done
  "$ROCEMU" perf write $mode -s "$size" -D "$SECS" -t 256 --port "net_memif0,role=client,socket=$sock,socket-abstract=no,bsize=8192" \
    --ip 10.93.0.1/24 --mac 02:00:00:00:00:0a --port-mtu 9000 -p "$port" 127.0.0.1 \
    -- "${eal[@]}" -l 0 --file-prefix "nicbench-rc-$$" >"$tmp/rc-$size.log" 2>&1 ||
    { cat "$tmp/rc-$size.log" "$tmp/rs-$size.log" >&2; echo "0 0 0 0 0"; return; }
  wait "$rs" || true
  awk -v s="$size" '$1 == s && NF == 5 { print; exit }' "$tmp/rc-$size.log"
}

echo "bench/nic: memif between two processes on CPUs 0 and 1, ${SECS} s each, $ROUNDS rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-9s %-6s %-12s %5s %14s %14s %14s %14s %14s %10s\n" payload frame rocemu round "testpmd Mpps" "testpmd Gb/s" \
  "rocemu Mpps" "rocemu goodput" "(best 1 ms)" ratio
# testpmd's own rate moves several-fold between runs even on an idle machine,
# so each round measures the baseline again right before rocemu, and the
# verdict is the median of the rounds' ratios (rows: "med").
for pair in 4096:4170 64:138; do
  size=${pair%:*} frame=${pair#*:}
  declare -A rows=()
  for round in $(seq "$ROUNDS"); do
    pps=$(testpmd_pps "$frame")
    # Both ways: sleeping when idle (the default) and spinning as testpmd does.
    for mode in "" --busy-poll; do
      read -r _ _ peak avg mpps < <(rocemu_write "$size" $mode)
      line=$(awk -v s="$size" -v f="$frame" -v m="${mode:-idle-sleep}" -v r="$round" -v pps="$pps" -v avg="$avg" \
        -v mpps="$mpps" -v peak="$peak" 'BEGIN {
        tg = pps * f * 8 / 1e9
        printf "%-9s %-6s %-12s %5s %14.3f %14.2f %14.3f %14.2f %14.2f %9.1f%%\n", s " B", f " B", m, r, pps / 1e6, tg, mpps,
               avg, peak, (tg > 0 ? 100 * avg / tg : 0) }')
      echo "$line"
      rows[${mode:-idle-sleep}]+="$line"$'\n'
    done
  done
  for m in idle-sleep --busy-poll; do
    # The median of each column over the rounds (the ratio is the median of
    # the rounds' ratios, not the ratio of the medians).
    printf "%s" "${rows[$m]}" | awk -v s="$size" -v f="$frame" -v m="$m" '
      { for (c = 5; c <= 10; c++) { v = $(c + 2); sub("%", "", v); col[c, NR] = v + 0 } n = NR }
      function med(c,   i, j, t, a) { for (i = 1; i <= n; i++) a[i] = col[c, i]
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      END { printf "%-9s %-6s %-12s %5s %14.3f %14.2f %14.3f %14.2f %14.2f %9.1f%%\n", s " B", f " B", m, "med",
            med(5), med(6), med(7), med(8), med(9), med(10) }'
  done
  unset rows
done
echo "target: rocemu goodput >= 80% of testpmd's Gbit/s at the 4 KiB frame"
echo
[ -n "${NO_LOOPBACK:-}" ] || "$BUILD/verbs/rocemu_perf_bench" --no-huge --no-pci -m 512 --file-prefix "nicbench-lb-$$"
