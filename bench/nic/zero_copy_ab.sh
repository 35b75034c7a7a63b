#!/usr/bin/env bash
# Zero-copy TX against copying, same binary, alternating: `rocemu perf write`
# with --zero-copy-min 0 (the MR's payload copied into the frame with its
# ICRC) and 1024 (sent from the MR's pages, read once for the ICRC),
#   1. --loopback 64 KiB WRITE (net_ring pair in one process, path MTU 1024);
#   2. 4 KiB WRITE over memif between two processes on CPUs 0 and 1 (port MTU
#      9000, path MTU 4096: one frame per message), as bench/nic/run.sh runs it.
# Prints each run's average Gbit/s and the load average before each round.
#
# Usage: bash bench/nic/zero_copy_ab.sh [BUILD_DIR]   (default build-perf; ROUNDS=N, default 3; SECONDS_EACH=N, default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-perf}
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_EACH:-3}
ROCEMU=$BUILD/tools/rocemu/rocemu
[ -x "$ROCEMU" ] || { echo "no $ROCEMU: build it first (ninja -C $BUILD rocemu)"; exit 1; }
eal=(--no-huge --no-pci -m 512)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" /var/run/dpdk/zcab-*-$$' EXIT

# Prints the average Gbit/s and the same per CPU-second of the process (its
# user + system time, which a loaded machine disturbs far less).
loopback() {
  local gbps
  gbps=$(/usr/bin/time -f "%U %S" -o "$tmp/cpu" "$ROCEMU" perf write --loopback -s 65536 -D "$SECS" \
    --zero-copy-min "$1" -- "${eal[@]}" --file-prefix "zcab-lb-$$" 2>/dev/null | awk '$1 == 65536 && NF == 5 { print $4 }')
  awk -v g="$gbps" -v s="$SECS" '{ c = $1 + $2; printf "%s (%.2f per CPU-s)", g, (c > 0 ? g * s / c : 0) }' "$tmp/cpu"
}

memif() {
  local zc=$1 sock=$tmp/m.sock port=$((30000 + $$ % 20000))
  rm -f "$sock"
  "$ROCEMU" perf write --zero-copy-min "$zc" --port "net_memif0,role=server,socket=$sock,socket-abstract=no,bsize=8192" \
    --ip 10.94.0.2/24 --mac 02:00:00:00:00:0b --port-mtu 9000 -p "$port" \
    -- "${eal[@]}" -l 1 --file-prefix "zcab-s-$$" >"$tmp/s.log" 2>&1 &
  local s=$!
  for _ in $(seq 100); do grep -q "waiting for a client" "$tmp/s.log" && break; sleep 0.1; done
  "$ROCEMU" perf write --zero-copy-min "$zc" -s 4096 -D "$SECS" -t 256 \
    --port "net_memif0,role=client,socket=$sock,socket-abstract=no,bsize=8192" \
    --ip 10.94.0.1/24 --mac 02:00:00:00:00:0a --port-mtu 9000 -p "$port" 127.0.0.1 \
    -- "${eal[@]}" -l 0 --file-prefix "zcab-c-$$" >"$tmp/c.log" 2>&1 || { cat "$tmp/c.log" "$tmp/s.log" >&2; }
  wait "$s" || true
  awk '$1 == 4096 && NF == 5 { print $4 }' "$tmp/c.log"
}

printf "%-6s %-24s %-14s %-28s\n" round "load average" "--zero-copy-min" "Gbit/s (avg)"
for round in $(seq "$ROUNDS"); do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  for zc in 0 1024; do printf "%-6s %-24s %-14s %-28s loopback 64 KiB\n" "$round" "$load" "$zc" "$(loopback "$zc")"; done
  for zc in 0 1024; do printf "%-6s %-24s %-14s %-28s memif 4 KiB\n" "$round" "$load" "$zc" "$(memif "$zc")"; done
done
