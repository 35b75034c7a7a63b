#!/usr/bin/env bash
# Self-test of the rxe interop peer: proves the guest image, the harness, the
# guest's RDMA stack under TCG and the wire path through the tap, with no
# rocemu involved. Prints one PASS/FAIL line per check, the measured timings,
# and "N passed, M failed"; exits non-zero if any check failed.
#
# The one place an IP address goes on the tap is the "temporary tap IP"
# block: added, used by the host ping and by the RoCEv2 wire capture (whose
# out-of-band TCP exchange needs a host endpoint), then removed. Every other
# check runs with the tap address-free, as rocemu needs it.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=guest.sh
source "$HERE/guest.sh"

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS $1"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; }
check() {   # check NAME DETAIL_ON_FAILURE COMMAND...
  local name="$1" detail="$2"; shift 2
  if "$@"; then pass "$name"; else fail "$name" "$detail"; fi
}

TSHARK_PID=""
dead_pid=""
cleanup() {
  [ -n "$TSHARK_PID" ] && kill "$TSHARK_PID" 2>/dev/null
  [ -n "$dead_pid" ] && ip netns del "rocemu-rxe-$dead_pid-0" 2>/dev/null
  guest_shutdown
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$HERE/install-deps.sh" || exit 1
t0=$SECONDS
"$HERE/build-guest.sh" || { fail "build guest" "build-guest.sh failed"; echo "$PASSED passed, $FAILED failed"; exit 1; }
echo "info: guest image ready in $((SECONDS - t0)) s ($(sed -n 's/^build_seconds //p' "$GUEST_CACHE/guest/manifest") s to build the image)"

# --- MTU 1500 guest, command-loop mode ------------------------------------
# A netns left by a harness that no longer runs must be reaped by guest_boot.
true & dead_pid=$!
wait "$dead_pid"
ip netns add "rocemu-rxe-$dead_pid-0"
if ! guest_boot --mtu 1500; then
  fail "boot to ready" "see the messages above"
  echo "$PASSED passed, $FAILED failed"
  exit 1
fi
pass "boot to ready"
check "guest_boot reaps the netns of a dead harness" "$(ip netns list | grep "rocemu-rxe-$dead_pid-")" \
  eval '! ip netns list | grep -q "^rocemu-rxe-$dead_pid-0"'
echo "info: boot to ready ${GUEST_READY_SECONDS} s host time, guest uptime $(guest_fact uptime) s (modules loaded at $(guest_fact uptime_modules_loaded) s)"

check "guest keeps time with the HPET, not a miscalibrated TSC" "clocksource=$(guest_fact clocksource)" \
  test "$(guest_fact clocksource)" = hpet
clock_g0="$(guest_run "cut -d' ' -f1 /proc/uptime")"; clock_h0="$(date +%s.%N)"

out="$(guest_run 'echo hello; exit 7')"; rc=$?
check "guest_run returns output and exit code" "rc=$rc out='$out'" test "$rc:$out" = "7:hello"
guest_run -t 2 'sleep 10' > /dev/null 2>&1; rc=$?
check "guest_run times out" "rc=$rc" test "$rc" = 124

state="$(guest_run 'cat /sys/class/infiniband/rxe0/ports/1/state')"
check "rxe0 port 1 active" "state='$state'" test "$state" = "4: ACTIVE"

# The IPv4-mapped RoCEv2 GID, found by scanning the table, not by index.
gid_scan="$(guest_run 'P=/sys/class/infiniband/rxe0/ports/1
for g in $(grep -lsx 0000:0000:0000:0000:0000:ffff:0a4d:0002 $P/gids/*); do
  n=${g##*/}; echo "$n $(cat $P/gid_attrs/types/$n)"; done')"
gidx="$(guest_fact gid_index_ipv4)"
check "IPv4-mapped RoCE v2 GID found in sysfs" "scan='$gid_scan' ready gid_index_ipv4='$gidx'" \
  test "$gid_scan" = "$gidx RoCE v2"
check "IPv4 GID is index 1, as rxe documents" "index=$gidx" test "$gidx" = 1

devinfo="$(guest_run 'ibv_devinfo -v -d rxe0')"
check "ibv_devinfo: rxe0 active_mtu 1024 at netdev MTU 1500" "$(grep -E 'active_mtu|state' <<< "$devinfo")" \
  grep -q 'active_mtu:.*1024 (3)' <<< "$devinfo"
check "ibv_devinfo: atomics supported" "$(grep atomic_cap <<< "$devinfo")" \
  grep -q 'atomic_cap:.*ATOMIC_HCA' <<< "$devinfo"

# -e: completion events instead of busy polling. Client and server share the
# guest's one vCPU, and two busy pollers make each round trip ~10x slower.
PP='ibv_rc_pingpong -e -d rxe0 -g '"$gidx"' -n 200 -s 4096'
guest_spawn pp_srv "$PP"
cli="$(guest_run -t 120 "wait-listen 18515 && $PP 127.0.0.1")"; cli_rc=$?
srv="$(guest_wait pp_srv 60)"; srv_rc=$?
check "ibv_rc_pingpong over rxe0 loopback (client)" "rc=$cli_rc: $cli" \
  eval '[ $cli_rc = 0 ] && grep -q "1638400 bytes in" <<< "$cli"'
check "ibv_rc_pingpong over rxe0 loopback (server)" "rc=$srv_rc: $srv" \
  eval '[ $srv_rc = 0 ] && grep -q "1638400 bytes in" <<< "$srv"'
echo "info: ibv_rc_pingpong 200 x 4096 B in guest: $(grep -m1 'iters in' <<< "$cli")"

UD='ibv_ud_pingpong -e -d rxe0 -g '"$gidx"' -n 100 -s 512'
guest_spawn ud_srv "$UD"
cli="$(guest_run -t 120 "wait-listen 18515 && $UD 127.0.0.1")"; cli_rc=$?
srv="$(guest_wait ud_srv 60)"; srv_rc=$?
check "ibv_ud_pingpong over rxe0 loopback" "client rc=$cli_rc: $cli / server rc=$srv_rc: $srv" \
  eval '[ $cli_rc = 0 ] && [ $srv_rc = 0 ] && [ "$(printf "%s\n%s\n" "$cli" "$srv" | grep -c "102400 bytes in")" = 2 ]'

OPS="rdma_ops -d rxe0 -g $gidx -s 65536 -n 20"
guest_spawn ops_srv "$OPS"
cli="$(guest_run -t 120 "$OPS 127.0.0.1")"; cli_rc=$?
srv="$(guest_wait ops_srv 60)"; srv_rc=$?
check "rdma_ops WRITE/READ/FETCH_ADD/CMP_SWAP, WRITE/SEND WITH IMM, RNR SEND and WRITE WITH IMM loopback (client)" "rc=$cli_rc: $cli" \
  eval '[ $cli_rc = 0 ] && grep -q "client PASS" <<< "$cli"'
check "rdma_ops server region verified" "rc=$srv_rc: $srv" \
  eval '[ $srv_rc = 0 ] && grep -q "server PASS" <<< "$srv"'

# rdma_ops must fail when the data does not match: the server checks for 20
# iterations' worth of atomics while the client performs 19.
guest_spawn ops_bad "rdma_ops -d rxe0 -g $gidx -n 20 -p 18600"
guest_run -t 120 "rdma_ops -d rxe0 -g $gidx -n 19 -p 18600 127.0.0.1" > /dev/null 2>&1; cli_rc=$?
srv="$(guest_wait ops_bad 60 2>&1)"; srv_rc=$?
check "rdma_ops detects a mismatch" "client rc=$cli_rc server rc=$srv_rc: $srv" \
  eval '[ $cli_rc = 1 ] && [ $srv_rc = 1 ] && grep -q "FETCH_AND_ADD word is" <<< "$srv"'

# Errors that end a QP or lose data must be zero. Retransmissions are not:
# a host busy with other work can stall the TCG vCPU past rxe's 67 ms ACK
# timeout, and the data checks above already prove nothing was lost.
# send_rnr_err / rcvd_rnr_err are not errors: rxe counts the RNR NAKs its
# responder sent and its requester received. rdma_ops' RNR step makes both
# move, by the same amount in loopback (the mismatch run above ends before it).
counters="$(guest_run 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep -H . *')"
errs="$(grep -E '^(retry_exceeded_err|retry_rnr_exceeded_err|send_err|link_downed):' <<< "$counters" | grep -v ':0$')"
check "rxe hw_counters show no fatal errors" "$errs" test -z "$errs"
rnr="$(grep -E '^(send_rnr_err|rcvd_rnr_err):' <<< "$counters" | tr '\n' ' ')"
check "rdma_ops' RNR steps: rxe sent and received the same number (>= 1) of RNR NAKs" "$rnr" \
  eval '[ "$(sed -n "s/^send_rnr_err://p" <<< "$counters")" -ge 1 ] &&
        [ "$(sed -n "s/^send_rnr_err://p" <<< "$counters")" = "$(sed -n "s/^rcvd_rnr_err://p" <<< "$counters")" ]'
echo "info: rxe retransmission counters: $(grep -E '^(completer_retry_err|rcvd_seq_err|duplicate_request|out_of_seq_request):' <<< "$counters" | tr '\n' ' ')"

# --- wire path through the tap ---------------------------------------------
# tshark prints each packet as it sees it; checks wait (bounded) for the
# packets they need in that log instead of guessing when capture has started.
start_capture() {
  PCAP="$GUEST_DIR/tap.pcapng"
  CAPLOG="$GUEST_DIR/tshark.out"
  rm -f "$PCAP" "$CAPLOG"
  (exec ip netns exec "$GUEST_NS" tshark -l -n -i "$GUEST_TAP" -w "$PCAP" -P \
      > "$CAPLOG" 2> "$GUEST_DIR/tshark.log") &
  TSHARK_PID=$!
}
captured() { [ "$(grep -cE "$1" "$CAPLOG" 2>/dev/null)" -ge "$2" ]; }
await_capture() { guest__poll "$3" captured "$1" "$2"; }   # REGEX COUNT SECONDS
stop_capture() {
  kill -TERM "$TSHARK_PID" 2>/dev/null
  wait "$TSHARK_PID" 2>/dev/null
  TSHARK_PID=""
}

addrs="$(guest_ns_exec ip -o addr show dev "$GUEST_TAP")"
check "tap has no IP address" "$addrs" test -z "$addrs"

start_capture
guest_spawn arp "ping -c 30 -W 1 $GUEST_PEER_IP"
await_capture "Who has 10\\.77\\.0\\.1\\? Tell 10\\.77\\.0\\.2" 3 60; r=$?
check "guest ARP requests reach the host tap" "$(tail -5 "$CAPLOG"; cat "$GUEST_DIR/tshark.log")" test $r = 0
guest_run 'killall ping' > /dev/null 2>&1
stop_capture
rep="$(tshark -r "$PCAP" -Y 'arp.opcode==2' 2>/dev/null | wc -l)"
req="$(tshark -r "$PCAP" -Y "arp.opcode==1 && eth.src==$GUEST_MAC" 2>/dev/null | wc -l)"
check "host kernel does not answer ARP on the address-free tap" "requests=$req replies=$rep" \
  eval '[ "$req" -ge 3 ] && [ "$rep" = 0 ]'

# What rocemu must do on this tap, in miniature: a user-space peer with its
# own MAC resolves the guest by ARP, answers the guest's ARP and exchanges
# ICMP with it, with no kernel address anywhere on the host side.
out="$(guest_ns_exec python3 "$HERE/raw_peer.py" "$GUEST_TAP" 3 30)"; rc=$?
neigh="$(guest_run "ip neigh show $GUEST_PEER_IP dev eth0")"
check "user-space peer on the address-free tap: ARP both ways and ICMP echo" "rc=$rc $out; guest neighbour: $neigh" \
  eval '[ $rc = 0 ] && grep -q "lladdr 02:00:00:77:00:01" <<< "$neigh"'
guest_run 'ip neigh flush dev eth0' > /dev/null

# The only time the tap carries an address: to prove host-to-guest delivery
# and to give the rdma_ops exchange below a TCP endpoint on the host side.
start_capture
guest_ns_exec ip addr add "$GUEST_PEER_IP/24" dev "$GUEST_TAP"
(exec ip netns exec "$GUEST_NS" ping -q -c 100 -i 0.2 10.77.0.2 > /dev/null 2>&1) &
ping_pid=$!
await_capture '10\.77\.0\.2 .* 10\.77\.0\.1 .*ICMP.*Echo \(ping\) reply' 3 60; r=$?
check "host pings guest through the tap (temporary tap IP)" "$(tail -5 "$CAPLOG")" test $r = 0
kill "$ping_pid" 2>/dev/null
wait "$ping_pid" 2>/dev/null
stop_capture

# Loss injection lives in the guest (the host kernel has no netem): netem on
# eth0 drops what the guest sends, netem on ifb0 (fed by an ingress redirect)
# drops what it receives. Each must stop the host's pings, and removing it
# must bring them back.
host_ping_replies() {
  guest_ns_exec ping -c 3 -i 0.2 -W 1 10.77.0.2 2>/dev/null | sed -n 's/.* \([0-9]*\) received.*/\1/p'
}
out="$(guest_run 'tc qdisc add dev eth0 root netem loss 100%')"; rc=$?
got="$(host_ping_replies)"
check "guest egress netem loss 100% drops the host's pings" "rc=$rc replies=$got $out" \
  eval '[ $rc = 0 ] && [ "$got" = 0 ]'
out="$(guest_run 'tc qdisc del dev eth0 root && ip link set ifb0 up &&
  tc qdisc add dev eth0 handle ffff: ingress &&
  tc filter add dev eth0 parent ffff: matchall action mirred egress redirect dev ifb0 &&
  tc qdisc add dev ifb0 root netem loss 100%')"; rc=$?
got="$(host_ping_replies)"
check "guest ingress netem (ifb0) loss 100% drops the host's pings" "rc=$rc replies=$got $out" \
  eval '[ $rc = 0 ] && [ "$got" = 0 ]'
out="$(guest_run 'tc qdisc del dev ifb0 root && tc qdisc del dev eth0 ingress')"; rc=$?
got="$(host_ping_replies)"
check "pings pass again once the netem qdiscs are removed" "rc=$rc replies=$got $out" \
  eval '[ $rc = 0 ] && [ "$got" = 3 ]'

# RoCEv2 from the guest's rxe onto the wire. oob_stub.py plays the rdma_ops
# server without any RDMA, so the client's RDMA WRITE is never acknowledged
# and rxe retransmits it until rdma_ops gives up after 3 s. Leaves the RoCEv2
# frames in $ROCE, the client's PSN in $client_psn, rdma_ops' result in
# $out and $rc. Needs the temporary tap address.
stub_listening() { guest_ns_exec ss -ltn | grep -q ':18515 '; }
unacked_write() {   # unacked_write SIZE
  start_capture
  (exec ip netns exec "$GUEST_NS" python3 "$HERE/oob_stub.py" > "$GUEST_DIR/oob_stub.log" 2>&1) &
  local stub_pid=$!
  guest__poll 30 stub_listening
  out="$(guest_run -t 60 "rdma_ops -d rxe0 -g $gidx -s $1 -n 1 -t 3 $GUEST_PEER_IP" 2>&1)"; rc=$?
  wait "$stub_pid"
  await_capture 'RC RDMA Write' 2 30
  stop_capture
  client_psn="$(sed -n 's/^client record: [0-9a-f]*:[0-9a-f]*:\([0-9a-f]*\):.*/\1/p' "$GUEST_DIR/oob_stub.log")"
  ROCE="$GUEST_DIR/roce-$1.pcap"
  tshark -r "$PCAP" -Y 'udp.dstport==4791 && !icmp' -F pcap -w "$ROCE" 2>/dev/null
}

unacked_write 64
check "rdma_ops reports the missing responder" "rc=$rc: $out" \
  eval '[ $rc = 1 ] && grep -q "RDMA WRITE: no completion within 3 s" <<< "$out"'
fields="$(tshark -r "$ROCE" -T fields -e ip.src -e ip.dst -e infiniband.bth.opcode -e infiniband.bth.destqp \
  -e infiniband.bth.psn -e infiniband.reth.r_key -e infiniband.reth.va -e infiniband.reth.dmalen 2>/dev/null | sort | uniq -c)"
want="$(printf '10.77.0.2\t10.77.0.1\t10\t0x000011\t%d\t0x00001234\t0x0000000000010010\t64' "0x${client_psn:-0}")"
frames="$(awk '{print $1}' <<< "$fields")"
check "rxe RDMA WRITE on the wire: BTH and RETH as negotiated" "psn=$client_psn fields: $fields" \
  eval '[ -n "$client_psn" ] && [ "$(wc -l <<< "$fields")" = 1 ] && [ "$(sed "s/^ *[0-9]* //" <<< "$fields")" = "$want" ]'
check "rxe retransmits the unacknowledged WRITE with the same PSN" "frames=$frames" \
  test "${frames:-0}" -ge 2
icrc="$(python3 "$HERE/roce_icrc_check.py" "$ROCE")"; rc=$?
check "ICRC of every captured RoCEv2 frame verifies" "$icrc" test $rc = 0
# The first frame's payload starts 24 + 16 + 14 + 20 + 8 + 12 + 16 bytes in.
python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[110] ^= 1; open(sys.argv[2], "wb").write(d)' \
  "$ROCE" "$GUEST_DIR/roce-corrupt.pcap"
icrc="$(python3 "$HERE/roce_icrc_check.py" "$GUEST_DIR/roce-corrupt.pcap")"; rc=$?
check "ICRC check rejects a frame with one flipped payload bit" "$icrc" test $rc = 1
unreach="$(tshark -r "$PCAP" -Y 'icmp.type==3 && icmp.code==3' 2>/dev/null | wc -l)"
check "with an IP on the tap the host kernel answers UDP 4791 with port-unreachable" "count=$unreach" \
  test "$unreach" -ge 1
guest_ns_exec ip addr del "$GUEST_PEER_IP/24" dev "$GUEST_TAP"

clock_g1="$(guest_run "cut -d' ' -f1 /proc/uptime")"; clock_h1="$(date +%s.%N)"
ratio="$(awk -v g0="$clock_g0" -v g1="$clock_g1" -v h0="$clock_h0" -v h1="$clock_h1" \
  'BEGIN { printf "%.3f", (g1 - g0) / (h1 - h0) }')"
check "guest time advances with host time (ratio within 0.9..1.1)" "guest/host = $ratio" \
  awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9 && r <= 1.1) }'

t0=$SECONDS
guest_shutdown
check "guest powers off and netns is removed" "$(ip netns list | grep rocemu-rxe-$$)" \
  eval '! ip netns list | grep -q "rocemu-rxe-$$-"'
echo "info: shutdown took $((SECONDS - t0)) s"

# --- MTU 9000 guest -------------------------------------------------------
if guest_boot --mtu 9000; then
  pass "MTU 9000: boot to ready"
  gidx="$(guest_fact gid_index_ipv4)"
  out="$(guest_run 'ibv_devinfo -d rxe0')"
  check "MTU 9000: rxe0 active_mtu 4096" "$(grep mtu <<< "$out")" grep -q 'active_mtu:.*4096 (5)' <<< "$out"

  PP="ibv_rc_pingpong -e -d rxe0 -g $gidx -m 4096 -n 50 -s 65536"
  guest_spawn pp9k "$PP"
  cli="$(guest_run -t 120 "wait-listen 18515 && $PP 127.0.0.1")"; cli_rc=$?
  srv="$(guest_wait pp9k 60)"; srv_rc=$?
  check "MTU 9000: ibv_rc_pingpong -m 4096 loopback, 64 KiB messages" "client rc=$cli_rc: $cli / server rc=$srv_rc: $srv" \
    eval '[ $cli_rc = 0 ] && [ $srv_rc = 0 ] && [ "$(printf "%s\n%s\n" "$cli" "$srv" | grep -c "6553600 bytes in")" = 2 ]'

  # An 8192-byte WRITE at path MTU 4096: WRITE FIRST (opcode 6, with RETH)
  # and WRITE LAST (opcode 8), each with 4096 bytes of payload, as jumbo
  # frames of 14+20+8+12+16+4096+4 and 14+20+8+12+4096+4 bytes.
  guest_ns_exec ip addr add "$GUEST_PEER_IP/24" dev "$GUEST_TAP"
  unacked_write 8192
  guest_ns_exec ip addr del "$GUEST_PEER_IP/24" dev "$GUEST_TAP"
  fields="$(tshark -r "$ROCE" -T fields -e frame.len -e infiniband.bth.opcode -e infiniband.bth.psn 2>/dev/null | sort -u)"
  psn=$((0x${client_psn:-0}))
  want="$(printf '4154\t8\t%d\n4170\t6\t%d' $(( (psn + 1) & 0xffffff )) "$psn")"
  check "MTU 9000: an 8 KiB WRITE leaves the guest as two 4096 B jumbo frames" "psn=$client_psn rdma_ops rc=$rc, frames: $fields" \
    eval '[ -n "$client_psn" ] && [ "$fields" = "$want" ]'
  icrc="$(python3 "$HERE/roce_icrc_check.py" "$ROCE")"; rc=$?
  check "MTU 9000: ICRC of every jumbo RoCEv2 frame verifies" "$icrc" test $rc = 0
else
  fail "MTU 9000: boot to ready" "see the messages above"
fi
guest_shutdown

# --- one-shot mode through the command line --------------------------------
out="$("$HERE/guest.sh" oneshot 'echo one-shot; exit 3' 2>&1)"; rc=$?
check "guest.sh oneshot prints the guest's output and returns its exit code" "rc=$rc: $out" \
  eval '[ $rc = 3 ] && grep -qx one-shot <<< "$out"'

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
