#!/usr/bin/env bash
# `rocemu pingpong` server and client in two processes, RC then UD.
#
#   af_packet: [netns A: client] vethA <--> vethB [netns B: server]; the TCP
#              exchange runs over the kernel's own addresses on the same veths
#   memif:     client <-- shared memory --> server; TCP over loopback
#
# Checks: both sides exit 0 with ibv_rc_pingpong's closing lines, the
# client's capture decodes in tshark (one RC SEND ONLY per message each way,
# right size) and passes `rocemu pcap`, and a RoCEv1 GID index (-g 0, connectx
# layout) fails at once with the clear error and exit status 1.
set -euo pipefail
ROCEMU=$(realpath "${1:?usage: pingpong.sh path/to/rocemu af_packet|memif}")
MODE=${2:?usage: pingpong.sh path/to/rocemu af_packet|memif}
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
command -v tshark >/dev/null || skip "needs tshark"

id=$$
NS_A=rocemu-ppa-$id NS_B=rocemu-ppb-$id VA=pa$id VB=pb$id
tmp=$(mktemp -d)
tcp=$((20000 + id % 20000))
pid_b=
cleanup() {
  [ -n "$pid_b" ] && kill "$pid_b" 2>/dev/null && wait "$pid_b" 2>/dev/null
  if [ "$MODE" = af_packet ]; then
    ip netns del "$NS_A" 2>/dev/null
    ip netns del "$NS_B" 2>/dev/null
  fi
  rm -rf "$tmp" /var/run/dpdk/rocemu-pp*-"$id"
}
trap cleanup EXIT

case "$MODE" in
  af_packet)
    veth_pair "$NS_A" "$NS_B" "$VA" "$VB" 10.96.0
    ;;
  memif)
    run_a=() run_b=()
    # One socket per run: a second server on a used socket path never links up.
    port_a="net_memif0,role=client,socket=$tmp/SOCK"
    port_b="net_memif0,role=server,socket=$tmp/SOCK"
    mac_a=(--mac 02:00:00:00:00:0a) mac_b=(--mac 02:00:00:00:00:0b)
    server_tcp=127.0.0.1
    ;;
  *) fail "unknown mode $MODE" ;;
esac

# run_pair NAME ITERS BYTES ARGS...: server in the background, client in
# front; both must report ITERS iterations and BYTES bytes.
run_pair() {
  local name=$1 iters=$2 bytes=$3
  shift 3
  local port_a=${port_a/SOCK/$name.sock} port_b=${port_b/SOCK/$name.sock}
  "${run_b[@]}" "$ROCEMU" pingpong --port "$port_b" --ip 10.97.0.2/24 "${mac_b[@]}" -p "$tcp" "$@" \
    -- --file-prefix "rocemu-ppb-$id" >"$tmp/$name.b.log" 2>&1 &
  pid_b=$!
  # The server's port is up (memif: its socket listens) once it prints its address.
  wait_server "$tmp/$name.b.log" "$pid_b" "local address:" "$name"
  "${run_a[@]}" timeout 60 "$ROCEMU" pingpong --port "$port_a" --ip 10.97.0.1/24 "${mac_a[@]}" -p "$tcp" "$@" \
    --capture "$tmp/$name.pcapng" "$server_tcp" -- --file-prefix "rocemu-ppa-$id" >"$tmp/$name.a.log" 2>&1 ||
    { cat "$tmp/$name.a.log" "$tmp/$name.b.log"; fail "$name: the client failed"; }
  wait "$pid_b" || { cat "$tmp/$name.b.log"; fail "$name: the server failed"; }
  pid_b=
  for side in a b; do
    grep -Eq "^$bytes bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$" "$tmp/$name.$side.log" ||
      { cat "$tmp/$name.$side.log"; fail "$name: side $side has no bytes line"; }
    grep -Eq "^$iters iters in [0-9.]+ seconds = [0-9.]+ usec/iter$" "$tmp/$name.$side.log" ||
      { cat "$tmp/$name.$side.log"; fail "$name: side $side has no iters line"; }
    grep -q "remote address: LID 0x0000, QPN 0x0000" "$tmp/$name.$side.log" ||
      { cat "$tmp/$name.$side.log"; fail "$name: side $side printed no remote address"; }
  done
  "$ROCEMU" pcap --all "$tmp/$name.pcapng" >"$tmp/$name.txt" || fail "$name: rocemu pcap rejected the capture"
  ! grep -q "icrc=bad" "$tmp/$name.txt" || fail "$name: a frame has a bad ICRC"
}

run_pair rc 300 $((2 * 300 * 1000)) -n 300 -s 1000
sends=$(tshark -r "$tmp/rc.pcapng" -d udp.port==4791,infiniband -Y "infiniband.bth.opcode == 4 && frame.len == 1058" \
  2>/dev/null | wc -l)
[ "$sends" -eq 600 ] || fail "rc: the capture holds $sends RC SEND ONLY frames of 1000 bytes, expected 600"

run_pair ud 200 $((2 * 200 * 512)) -n 200 -s 512 --ud
uds=$(tshark -r "$tmp/ud.pcapng" -d udp.port==4791,infiniband -Y "infiniband.bth.opcode == 100" 2>/dev/null | wc -l)
[ "$uds" -eq 400 ] || fail "ud: the capture holds $uds UD SEND ONLY frames, expected 400"
grep -q "qkey=0x11111111" "$tmp/ud.txt" || fail "ud: the Q_Key is not ibv_ud_pingpong's"

# A RoCEv1 GID index is refused before anything is exchanged (here by a
# server, which would otherwise wait for a client).
start=$(date +%s)
if "${run_b[@]}" timeout 20 "$ROCEMU" pingpong --port "${port_b/SOCK/gid.sock}" --ip 10.97.0.2/24 "${mac_b[@]}" -p "$tcp" -g 0 \
  -- --file-prefix "rocemu-ppb-$id" >"$tmp/gid.log" 2>&1; then
  fail "-g 0 succeeded"
else
  status=$?
fi
[ "$status" -eq 1 ] || { cat "$tmp/gid.log"; fail "-g 0 exited with $status, expected 1"; }
[ $(($(date +%s) - start)) -le 10 ] || fail "-g 0 took more than 10 s to fail"
grep -q "GID index 0 is a RoCEv1 GID" "$tmp/gid.log" && grep -q "use GID index 1" "$tmp/gid.log" ||
  { cat "$tmp/gid.log"; fail "-g 0: the error does not explain itself"; }
echo "pingpong $MODE: RC 300 x 1000 B and UD 200 x 512 B both ways, captures decode; -g 0 refused clearly"
