#!/usr/bin/env bash
# `rocemu perf` between two processes, one emulated NIC each, paired over TCP.
#
#   memif:     client <-- shared memory --> server; TCP over loopback
#   af_packet: [netns A: client] vethA <--> vethB [netns B: server]; TCP over
#              the kernel's own addresses on the same veths
#   tap:       client and server on net_tap ports bridged by the kernel in a
#              namespace of their own; the kernel pings the server over the
#              bridge first
#   vhost:     client on net_vhost <-- vhost-user --> server on
#              net_virtio_user (server=1); only the zero-copy WRITE below
#
# Checks: every op (WRITE, READ, SEND at 1 B, 4 KiB and 1 MiB, FETCH_ADD)
# with --verify succeeds on both sides and both report the same message
# count; a READ latency run prints ordered percentiles; the client's capture of a 4 KiB WRITE run decodes in tshark (RDMA
# WRITE ONLY frames) and passes `rocemu pcap`; a server started for another
# op refuses the client with a message and both exit 1; a client without a
# server fails within its --wait. PERF_KEEP=1 keeps the run's logs and
# captures in /tmp/perf-keep-<id> for a look after a failure.
set -euo pipefail
ROCEMU=$(realpath "${1:?usage: perf.sh path/to/rocemu memif|af_packet|tap|vhost|ring}")
MODE=${2:?usage: perf.sh path/to/rocemu memif|af_packet|tap|vhost|ring}
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
# net_ring (one process, --loopback) needs neither root nor a capture.
if [ "$MODE" != ring ]; then
  [ "$(id -u)" = 0 ] || skip "needs root"
  command -v tshark >/dev/null || skip "needs tshark"
fi

id=$$
NS_A=perf-a-$id NS_B=perf-b-$id NS_T=perf-t-$id VA=pfa$id VB=pfb$id TA=pfta$id TB=pftb$id BR=pfbr$id
tmp=$(mktemp -d)
tcp=$((20000 + (id + 7) % 20000))
pid_b=
cleanup() {
  if [ -n "$pid_b" ]; then kill "$pid_b" 2>/dev/null && wait "$pid_b" 2>/dev/null || true; fi
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
  ip netns del "$NS_T" 2>/dev/null || true
  [ -n "${PERF_KEEP:-}" ] && cp -r "$tmp" /tmp/perf-keep-$id
  rm -rf "$tmp"
  [ "$MODE" = ring ] || rm -rf /var/run/dpdk/perf-a-"$id" /var/run/dpdk/perf-b-"$id"
}
trap cleanup EXIT

mac_a=(--mac 02:00:00:00:00:0a) mac_b=(--mac 02:00:00:00:00:0b)
case "$MODE" in
  memif)
    run_a=() run_b=()
    # One socket per run: a second server on a used socket path never links up.
    port_a="net_memif0,role=client,socket=$tmp/SOCK"
    port_b="net_memif0,role=server,socket=$tmp/SOCK"
    server_tcp=127.0.0.1
    ;;
  af_packet)
    veth_pair "$NS_A" "$NS_B" "$VA" "$VB" 10.94.0
    ;;
  tap)
    need_root_netns
    ip netns add "$NS_T"
    ip -n "$NS_T" link add "$BR" type bridge
    ip -n "$NS_T" addr add 10.95.0.254/24 dev "$BR"
    ip -n "$NS_T" link set "$BR" up
    ip -n "$NS_T" link set lo up
    run_a=(ip netns exec "$NS_T") run_b=(ip netns exec "$NS_T")
    port_a="net_tap0,iface=$TA" port_b="net_tap0,iface=$TB"
    server_tcp=127.0.0.1
    ;;
  vhost)
    # The server starts first, so its virtio_user listens on the socket and
    # the client's net_vhost connects (the sender of the zero-copy WRITE).
    run_a=() run_b=()
    port_a="net_vhost0,iface=$tmp/SOCK,client=1"
    port_b="net_virtio_user0,path=$tmp/SOCK,server=1"
    server_tcp=127.0.0.1
    # When the client's net_vhost leaves first, virtio_user's next message
    # goes to a closed socket: rocemu ignores SIGPIPE (Eal::init), so that
    # is EPIPE, not a kill with exit 141 after its run.
    ;;
  ring) ;;  # one process, two NICs over net_ring (--loopback)
  *) fail "unknown mode $MODE" ;;
esac

if [ "$MODE" = ring ]; then
  # net_ring hands chains over as they are: READ responses lent from the
  # responder's MR reach the requester as chains and are verified byte for byte.
  for op in read write; do
    timeout 60 "$ROCEMU" perf "$op" --loopback -s 65536 -n 50 --verify --zero-copy-min 1024 >"$tmp/ring-$op.log" 2>&1 ||
      { cat "$tmp/ring-$op.log"; fail "ring-$op: the run failed"; }
    grep -Eq "^ 65536 +50 " "$tmp/ring-$op.log" || { cat "$tmp/ring-$op.log"; fail "ring-$op: no result line"; }
    echo "ok ring-$op: 50 x 64 KiB, zero copy, verified"
  done
  exit 0
fi

# bridge_tap DEV: puts the tap rocemu created into the bridge once it exists.
bridge_tap() {
  [ "$MODE" = tap ] || return 0
  for _ in $(seq 100); do
    if ip -n "$NS_T" link show "$1" >/dev/null 2>&1; then
      ip netns exec "$NS_T" sysctl -qw "net.ipv6.conf.$1.disable_ipv6=1" || true
      ip -n "$NS_T" link set "$1" master "$BR" up
      return 0
    fi
    sleep 0.05
  done
  fail "tap $1 never appeared"
}

# start_server NAME ARGS...: the server in the background, once it waits.
start_server() {
  local name=$1
  shift
  : >"$tmp/$name.b.log"
  "${run_b[@]}" "$ROCEMU" perf "$@" --port "${port_b/SOCK/$name.sock}" --ip 10.95.0.2/24 "${mac_b[@]}" -p "$tcp" \
    -- --file-prefix "perf-b-$id" >"$tmp/$name.b.log" 2>&1 &
  pid_b=$!
  wait_server "$tmp/$name.b.log" "$pid_b" "waiting for a client" "$name"
  bridge_tap "$TB"
}

# client NAME ARGS...: the client in front; its status is the function's.
client() {
  local name=$1
  shift
  bridge_tap "$TA" &
  local bt=$!
  local rc=0
  "${run_a[@]}" timeout 60 "$ROCEMU" perf "$@" --port "${port_a/SOCK/$name.sock}" --ip 10.95.0.1/24 "${mac_a[@]}" \
    -p "$tcp" "$server_tcp" -- --file-prefix "perf-a-$id" >"$tmp/$name.a.log" 2>&1 || rc=$?
  wait "$bt" || true
  return $rc
}

# run_pair NAME OP SIZE ITERS TOTAL [ARGS...]: both sides succeed and agree
# on TOTAL messages (ITERS per QP).
run_pair() {
  local name=$1 op=$2 size=$3 iters=$4 total=$5
  shift 5
  start_server "$name" "$op"
  client "$name" "$op" -s "$size" -n "$iters" --verify "$@" || { cat "$tmp/$name.a.log" "$tmp/$name.b.log"; fail "$name: the client failed"; }
  wait "$pid_b" || { cat "$tmp/$name.b.log"; fail "$name: the server failed"; }
  pid_b=
  local bytes=$size
  [ "$op" = atomic ] && bytes=8
  for side in a b; do
    grep -Eq "^ $bytes +$total +[0-9.]+ +[0-9.]+ +[0-9.]+ *$" "$tmp/$name.$side.log" ||
      { cat "$tmp/$name.$side.log"; fail "$name: side $side has no result line for $total x $bytes B"; }
  done
  grep -q "payload verified end to end: $total messages intact" "$tmp/$name.a.log" ||
    { cat "$tmp/$name.a.log"; fail "$name: the client did not verify"; }
  echo "ok $name"
}

# Zero copy on this port type (Port::takes_chains): the lending side sends
# its MR's pages as 3-segment chains (headers, the payload in the MR, pad +
# ICRC): the client its WRITE and SEND payload, the server its READ
# responses. The PMD must send each as one frame. The other side's capture
# holds what crossed the port, `rocemu pcap` checks every ICRC, and --verify
# every byte.
# zc_pair NAME OP LENDER (a: the client, b: the server)
zc_pair() {
  local name=$1 op=$2 lender=$3
  local zc=(--zero-copy-min 1024) cap=(--capture "$tmp/$name.pcapng") zc_a=() zc_b=() cap_a=() cap_b=()
  if [ "$lender" = a ]; then zc_a=("${zc[@]}") cap_b=("${cap[@]}"); else zc_b=("${zc[@]}") cap_a=("${cap[@]}"); fi
  start_server "$name" "$op" --counters "${zc_b[@]}" "${cap_b[@]}"
  client "$name" "$op" -s 4096 -n 50 --verify --counters "${zc_a[@]}" "${cap_a[@]}" ||
    { cat "$tmp/$name.a.log" "$tmp/$name.b.log"; fail "$name: the client failed"; }
  wait "$pid_b" || { cat "$tmp/$name.b.log"; fail "$name: the server failed"; }
  pid_b=
  grep -q "payload verified end to end: 50 messages intact" "$tmp/$name.a.log" ||
    { cat "$tmp/$name.a.log"; fail "$name: not verified"; }
  # 50 messages of 4 KiB at path MTU 1024: 200 frames of 1 KiB, each lendable.
  local lent full
  lent=$(awk '$1 == "tx_zero_copy" { print $2 }' "$tmp/$name.$lender.log")
  [ "${lent:-0}" -ge 200 ] || { cat "$tmp/$name.$lender.log"; fail "$name: side $lender sent ${lent:-0} zero-copy frames, expected >= 200"; }
  if grep -Eq "^(tx_zero_copy_short|drop_multi_segment|drop_bad_icrc) " "$tmp/$name.a.log" "$tmp/$name.b.log"; then
    grep -E "^(tx_zero_copy_short|drop_multi_segment|drop_bad_icrc) " "$tmp/$name.a.log" "$tmp/$name.b.log"
    fail "$name: short chains or drops"
  fi
  "$ROCEMU" pcap "$tmp/$name.pcapng" >"$tmp/$name.txt" || { tail "$tmp/$name.txt"; fail "$name: rocemu pcap rejected the capture"; }
  grep -Eq "^[0-9]+ packets, 0 ICRC errors" "$tmp/$name.txt" || { tail -3 "$tmp/$name.txt"; fail "$name: ICRC errors"; }
  full=$(grep -Ec "RC_(RDMA_WRITE|SEND|RDMA_READ_RESPONSE)_(FIRST|MIDDLE|LAST|ONLY) .* len=1024 icrc=ok" "$tmp/$name.txt")
  [ "$full" -ge 200 ] || fail "$name: the receiver's capture holds $full 1 KiB data frames with a good ICRC, expected >= 200"
  echo "ok $name: $lent chained frames sent, $full arrived whole with good ICRCs, every byte verified"
}
if [ "$MODE" = vhost ]; then
  # virtio_user hands the vhost side segment addresses, so it takes no chains:
  # only net_vhost's TX (a copy into the peer's ring) is tested here.
  zc_pair zc-write write a
  # READ responses lent by the server: the server on net_vhost (listening),
  # the client on virtio_user.
  port_a="net_virtio_user0,path=$tmp/SOCK" port_b="net_vhost0,iface=$tmp/SOCK"
  zc_pair zc-read read b
  echo "perf vhost: chained WRITE requests and READ responses from net_vhost arrive whole and verified"
  exit 0
fi

if [ "$MODE" = tap ]; then
  # The kernel reaches a rocemu NIC on net_tap: ARP and ping over the bridge.
  "${run_b[@]}" "$ROCEMU" host --port "net_tap0,iface=$TB" --ip 10.95.0.2/24 "${mac_b[@]}" --duration 30 \
    -- --file-prefix "perf-b-$id" >"$tmp/host.log" 2>&1 &
  pid_b=$!
  wait_ready "$tmp/host.log" "$pid_b"
  bridge_tap "$TB"
  ip netns exec "$NS_T" ping -c 3 -i 0.2 -W 2 10.95.0.2 >"$tmp/ping.log" || { cat "$tmp/ping.log" "$tmp/host.log"; fail "the kernel cannot ping rocemu on net_tap"; }
  stop_host "$pid_b" || true
  pid_b=
  echo "ok kernel pings rocemu on net_tap"
fi

for op in write read send; do
  run_pair "$op-1" "$op" 1 200 200
  run_pair "$op-4k" "$op" 4096 100 100
  run_pair "$op-1m" "$op" $((1 << 20)) 4 4 -t 2
done
run_pair atomic atomic 8 200 400 -q 2

# Latency mode: one READ in flight, perftest's latency columns, ordered.
start_server lat read
client lat read -s 64 -n 100 --latency --verify || { cat "$tmp/lat.a.log" "$tmp/lat.b.log"; fail "lat: the client failed"; }
wait "$pid_b" || { cat "$tmp/lat.b.log"; fail "lat: the server failed"; }
pid_b=
grep -q "t_min\[usec\] *t_typical\[usec\] *t_avg\[usec\] *99% percentile\[usec\] *99.9% percentile\[usec\]" "$tmp/lat.a.log" ||
  { cat "$tmp/lat.a.log"; fail "lat: no latency header"; }
awk '$1 == 64 && $2 == 100 && NF == 7 { ok = $3 > 0 && $3 <= $4 && $4 <= $6 && $6 <= $7 } END { exit !ok }' "$tmp/lat.a.log" ||
  { cat "$tmp/lat.a.log"; fail "lat: the percentiles are not ordered"; }
grep -q "payload verified end to end: 100 messages intact" "$tmp/lat.a.log" || { cat "$tmp/lat.a.log"; fail "lat: not verified"; }
echo "ok latency"

# A capture of a 4 KiB WRITE run: path MTU 1024 on 1500-byte ports, so 4
# WRITE FIRST/MIDDLE/MIDDLE/LAST per message; tshark decodes them, `rocemu
# pcap` checks every ICRC.
start_server cap write
client cap write -s 4096 -n 50 --verify --capture "$tmp/cap.pcapng" || { cat "$tmp/cap.a.log" "$tmp/cap.b.log"; fail "cap: the client failed"; }
wait "$pid_b" || { cat "$tmp/cap.b.log"; fail "cap: the server failed"; }
pid_b=
firsts=$(tshark -r "$tmp/cap.pcapng" -d udp.port==4791,infiniband -Y "infiniband.bth.opcode == 6" 2>/dev/null | wc -l)
lasts=$(tshark -r "$tmp/cap.pcapng" -d udp.port==4791,infiniband -Y "infiniband.bth.opcode == 8" 2>/dev/null | wc -l)
[ "$firsts" -eq 50 ] && [ "$lasts" -eq 50 ] ||
  fail "cap: tshark sees $firsts RDMA WRITE FIRST and $lasts LAST frames, expected 50 each"
"$ROCEMU" pcap "$tmp/cap.pcapng" >"$tmp/cap.txt" || { tail "$tmp/cap.txt"; fail "cap: rocemu pcap rejected the capture"; }
grep -q "RC_RDMA_WRITE_FIRST" "$tmp/cap.txt" || fail "cap: rocemu pcap lists no WRITE FIRST"
grep -Eq "^[0-9]+ packets, 0 ICRC errors" "$tmp/cap.txt" || { tail -3 "$tmp/cap.txt"; fail "cap: ICRC errors"; }
echo "ok capture: $firsts WRITE FIRST + $lasts LAST frames decode in tshark, every ICRC good"

zc_pair zc-write write a
zc_pair zc-send send a
zc_pair zc-read read b

# A server for another op refuses the client clearly; both exit 1.
start_server mismatch read
if client mismatch write -s 64 -n 10; then fail "mismatch: the client succeeded"; fi
st=0
wait "$pid_b" || st=$?
pid_b=
[ "$st" -eq 1 ] || { cat "$tmp/mismatch.b.log"; fail "mismatch: the server exited $st, expected 1"; }
grep -q "the client runs write but this server runs read" "$tmp/mismatch.b.log" ||
  { cat "$tmp/mismatch.b.log"; fail "mismatch: the server does not say why"; }
grep -q "the server refused the run: the client runs write but this server runs read" "$tmp/mismatch.a.log" ||
  { cat "$tmp/mismatch.a.log"; fail "mismatch: the client does not say why"; }
echo "ok mismatched op refused on both sides"

# No perf server (the other NIC is up, nobody listens on TCP): the client
# gives up within its --wait, saying so.
"${run_b[@]}" "$ROCEMU" host --port "${port_b/SOCK/noserver.sock}" --ip 10.95.0.2/24 "${mac_b[@]}" --duration 30 \
  -- --file-prefix "perf-b-$id" >"$tmp/host.log" 2>&1 &
pid_b=$!
wait_ready "$tmp/host.log" "$pid_b"
bridge_tap "$TB"
st=0
client noserver write --wait 1 || st=$?
stop_host "$pid_b" || true
pid_b=
[ "$st" -eq 1 ] || { cat "$tmp/noserver.a.log"; fail "no server: the client exited $st, expected 1"; }
grep -q "no perf server" "$tmp/noserver.a.log" || { cat "$tmp/noserver.a.log"; fail "no server: no clear error"; }
echo "ok missing server reported"
echo "perf $MODE: every op at 1 B, 4 KiB and 1 MiB verified end to end in two processes; capture decodes"
