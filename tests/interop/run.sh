#!/usr/bin/env bash
# rocemu <-> Linux rxe interoperability scenarios. Boots the rxe guest once per
# MTU, runs each scenario with rocemu as server and as client, checks exit
# codes, rxe's hw_counters, rocemu's view of the wire and the ICRC of every
# captured frame, prints one line per scenario and "N passed, M failed".
#
#   tests/interop/run.sh [--core] [--rocemu PATH]
#
# INTEROP_ROCEMU_ARGS: more NIC options for every rocemu run (e.g.
# "--zero-copy-min 1024": rocemu's payload leaves as chains lent from MR pages).
#
# --core: RC pingpong both ways and rdma_ops (WRITE, READ, atomics, WRITE and
# SEND WITH IMMEDIATE, an RNR-retried SEND and multi- and single-packet WRITE
# WITH IMMEDIATE) both ways at MTU 1500, once more with the server's receives
# on an SRQ, for CI. Without it: the full suite (README.md, "Scenarios").
#
# Out-of-band TCP (the pingpong and rdma_ops exchanges) needs a kernel
# endpoint on each side, but 10.77.0.1 must stay rocemu's alone, or the host
# kernel would answer ARP for it and send port-unreachable for UDP 4791. So
# TCP runs on a second subnet: 10.77.1.1 on the tap, 10.77.1.2 on the guest's
# eth0. The host kernel drops RoCE frames to 10.77.0.1 silently (not a local
# address, forwarding off) and rocemu ignores the TCP frames.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# shellcheck source=guest.sh
source "$HERE/guest.sh"

CORE=0
ROCEMU="${ROCEMU:-$ROOT/build-interop/tools/rocemu/rocemu}"
while [ $# -gt 0 ]; do
  case "$1" in
    --core) CORE=1; shift ;;
    --rocemu) ROCEMU="$2"; shift 2 ;;
    *) echo "usage: $0 [--core] [--rocemu PATH]" >&2; exit 2 ;;
  esac
done
[ -x "$ROCEMU" ] || { echo "rocemu binary not found at $ROCEMU (build it with -DROCEMU_DPDK=ON, or pass --rocemu)" >&2; exit 2; }

OOB_HOST=10.77.1.1
OOB_GUEST=10.77.1.2
# rocemu and its scenario take at most this long; rxe retries forever, so every wait is bounded here.
STEP_TIMEOUT="${INTEROP_STEP_TIMEOUT:-240}"
WORK="$(mktemp -d /tmp/rocemu-interop.XXXXXX)"
KEEP="${INTEROP_KEEP:-0}"
PASSED=0
FAILED=0
TCP_PORT=18600
ROCEMU_PID=""

cleanup() {
  [ -n "$ROCEMU_PID" ] && kill "$ROCEMU_PID" 2>/dev/null
  guest_shutdown
  if [ "$KEEP" = 1 ] || [ "$FAILED" -gt 0 ]; then echo "info: logs and captures kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass() { PASSED=$((PASSED + 1)); echo "PASS $1${2:+ ($2)}"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; }

# rxe's port counters as "name value" lines.
rxe_counters() {
  guest_run 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep -H . * | tr : " "'
}
# counter_delta NAME BEFORE AFTER
counter_delta() {
  local b a
  b="$(awk -v n="$1" '$1 == n { print $2 }' <<< "$2")"
  a="$(awk -v n="$1" '$1 == n { print $2 }' <<< "$3")"
  echo $(( ${a:-0} - ${b:-0} ))
}

rocemu_args() {   # the device and identity every rocemu run shares
  local port="net_af_packet0,iface=$GUEST_TAP"
  [ "$MTU" -gt 1500 ] && port="$port,framesz=9216,blocksz=36864"
  echo "--port $port --ip 10.77.0.1/24 --gid-layout rxe --port-mtu $MTU${INTEROP_ROCEMU_ARGS:+ $INTEROP_ROCEMU_ARGS}"
}

# Waits (bounded) until something listens on TCP port $1 in the guest's netns.
host_wait_listen() {
  local port="$1" tries=$(( $2 * 10 ))
  while [ $tries -gt 0 ]; do
    guest_ns_exec ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
    kill -0 "$ROCEMU_PID" 2>/dev/null || return 1
    tries=$((tries - 1))
    sleep 0.1
  done
  return 1
}

# run_pair NAME ROLE LOSSY GUEST_CMD ROCEMU_SUBCOMMAND_AND_ARGS
#   ROLE: server (rocemu listens, the guest program connects to $OOB_HOST) or
#   client (the guest program listens, rocemu connects to $OOB_GUEST).
#   LOSSY: 1 if the guest injects loss (retransmissions expected, wire and
#   counters then differ by what netem dropped).
run_pair() {
  local name="$1" role="$2" lossy="$3" gcmd="$4" rcmd="$5"
  local port=$((TCP_PORT += 1))
  local cap="$WORK/$name.pcapng" rlog="$WORK/$name.rocemu.log" glog="$WORK/$name.guest.log"
  local before after rrc grc
  before="$(rxe_counters)"
  if [ "$role" = server ]; then
    # shellcheck disable=SC2086
    guest_ns_exec timeout "$STEP_TIMEOUT" "$ROCEMU" $rcmd -p "$port" --capture "$cap" $(rocemu_args) > "$rlog" 2>&1 &
    ROCEMU_PID=$!
    if ! host_wait_listen "$port" 60; then
      wait "$ROCEMU_PID"; ROCEMU_PID=""
      fail "$name" "rocemu server never listened: $(tail -3 "$rlog" | tr '\n' ' ')"
      return
    fi
    guest_spawn "$name" "$gcmd -p $port $OOB_HOST"
  else
    guest_spawn "$name" "$gcmd -p $port"
    if ! guest_run -t 60 "wait-listen $port 50" > /dev/null; then
      guest_wait "$name" 5 > "$glog" 2>&1
      fail "$name" "guest server never listened: $(tail -3 "$glog" | tr '\n' ' ')"
      return
    fi
    # shellcheck disable=SC2086
    guest_ns_exec timeout "$STEP_TIMEOUT" "$ROCEMU" $rcmd -p "$port" --capture "$cap" $(rocemu_args) "$OOB_GUEST" > "$rlog" 2>&1 &
    ROCEMU_PID=$!
  fi
  wait "$ROCEMU_PID"; rrc=$?; ROCEMU_PID=""
  guest_wait "$name" "$STEP_TIMEOUT" > "$glog" 2>&1; grc=$?
  after="$(rxe_counters)"
  check_pair "$name" "$role" "$lossy" "$rrc" "$grc" "$before" "$after" "$cap" "$rlog" "$glog"
}

# rocemu's own counter NAME from the "counter NAME VALUE" lines of `rocemu rdma-ops` (empty if none).
own_counter() { awk -v n="$1" '$1 == "counter" && $2 == n { print $3 }' "$2"; }

check_pair() {
  local name="$1" role="$2" lossy="$3" rrc="$4" grc="$5" before="$6" after="$7" cap="$8" rlog="$9" glog="${10}"
  local c d bad="" retr pcap_out sent_by_rocemu sent_by_rxe fatal
  if [ "$rrc" != 0 ] || [ "$grc" != 0 ]; then
    fail "$name" "rocemu exit $rrc ($(grep -v '^counter ' "$rlog" | tail -2 | tr '\n' ' ')), rxe side exit $grc ($(tail -2 "$glog" | tr '\n' ' '))"
    return
  fi
  # rxe's send_rnr_err / rcvd_rnr_err count RNR NAKs sent (responder) and
  # received (requester), not errors: rdma_ops provokes them on purpose and
  # checks them below; in every other pairing they must not move.
  fatal="retry_exceeded_err retry_rnr_exceeded_err send_err link_downed"
  [ -z "$(own_counter sent_pkts "$rlog")" ] && fatal="$fatal send_rnr_err rcvd_rnr_err"
  for c in $fatal; do
    d="$(counter_delta "$c" "$before" "$after")"
    [ "$d" != 0 ] && bad="$bad $c+$d"
  done
  [ -n "$bad" ] && { fail "$name" "rxe hw_counters:$bad"; return; }
  # Every frame rocemu sent and received, checked independently of both stacks.
  if ! pcap_out="$("$ROCEMU" pcap -q "$cap" 2>&1)"; then
    fail "$name" "capture does not verify: $(tail -3 <<< "$pcap_out" | tr '\n' ' ')"
    return
  fi
  local listing
  listing="$("$ROCEMU" pcap "$cap" 2>/dev/null)"
  sent_by_rocemu="$(grep -c ' 10\.77\.0\.1:[0-9]* > 10\.77\.0\.2 ' <<< "$listing")"
  sent_by_rxe="$(grep -c ' 10\.77\.0\.2:[0-9]* > 10\.77\.0\.1 ' <<< "$listing")"
  local rxe_rcvd rxe_sent
  rxe_rcvd="$(counter_delta rcvd_pkts "$before" "$after")"
  rxe_sent="$(counter_delta sent_pkts "$before" "$after")"
  retr="$(counter_delta completer_retry_err "$before" "$after")"
  local seq dup
  seq="$(counter_delta rcvd_seq_err "$before" "$after")"
  dup="$(counter_delta duplicate_request "$before" "$after")"
  local summary="rocemu sent $sent_by_rocemu / rxe rcvd $rxe_rcvd, rxe sent $rxe_sent / rocemu saw $sent_by_rxe, rxe retries $retr, seq-NAKs $seq, dup $dup"
  # rocemu rdma-ops prints its engine counters: they must match its own capture.
  local own_sent own_rcvd
  own_sent="$(own_counter sent_pkts "$rlog")"
  own_rcvd="$(own_counter rcvd_pkts "$rlog")"
  if [ -n "$own_sent" ]; then
    summary="$summary, rocemu counters sent $own_sent rcvd $own_rcvd"
    # Frames rocemu sent as chains lent from MR pages (INTEROP_ROCEMU_ARGS="--zero-copy-min N").
    local lent
    lent="$(awk '$1 == "port" && $2 == "tx_zero_copy" { print $3 }' "$rlog")"
    [ -n "$lent" ] && summary="$summary, zero-copy frames $lent"
    if [ "$own_sent" != "$sent_by_rocemu" ] || [ "$own_rcvd" != "$sent_by_rxe" ]; then
      fail "$name" "rocemu's counters disagree with its capture: $summary"; return
    fi
    local why
    why="$(check_imm_rnr "$role" "$lossy" "$before" "$after" "$rlog" "$listing")"
    summary="$summary, ${why#* }"
    [ "${why%% *}" = ok ] || { fail "$name" "immediate/RNR: $summary"; return; }
    # The SRQ pairings: the server (whichever stack) must say it received through its SRQ.
    if [[ "$name" == *-srq-* ]] && ! grep -q 'server (SRQ): ' "$([ "$role" = server ] && echo "$rlog" || echo "$glog")"; then
      fail "$name" "the server did not receive through an SRQ: $summary"; return
    fi
  fi
  if [ "$lossy" = 0 ]; then
    # On a clean link both stacks must have seen exactly the frames on the wire, with no retransmission.
    if [ "$sent_by_rocemu" != "$rxe_rcvd" ] || [ "$sent_by_rxe" != "$rxe_sent" ]; then
      fail "$name" "counters disagree with the wire: $summary"; return
    fi
    # rocemu must neither NAK (rxe's rcvd_seq_err) nor retransmit (rxe's
    # duplicate_request) on a clean link. rxe's own timer retries (completer_retry_err)
    # are reported, not failed: see README "rxe retries on a clean link".
    if [ "$seq" != 0 ] || [ "$dup" != 0 ]; then
      fail "$name" "NAK or retransmission by rocemu on a clean link: $summary"; return
    fi
  elif [ "$sent_by_rxe" -gt "$rxe_sent" ]; then
    fail "$name" "more rxe frames on the wire than rxe sent: $summary"; return
  fi
  pass "$name" "$summary"
}

# rdma_ops' immediate and RNR steps, seen on the wire and in both stacks'
# counters. Prints "ok DETAILS" or "bad DETAILS".
#   check_imm_rnr ROLE LOSSY BEFORE AFTER ROCEMU_LOG LISTING
# ROLE server: rocemu is the responder of the RNR SEND, rxe the requester.
check_imm_rnr() {
  local role="$1" lossy="$2" before="$3" after="$4" rlog="$5" listing="$6"
  local imm_w imm_s imm_r imm_r1 rnr_wire resp_sent req_rcvd other_sent other_rcvd
  # ImmDt as `rocemu pcap` prints it: the big-endian wire value.
  imm_w="$(grep -c ' imm=0x1a2b3c4d' <<< "$listing")"
  imm_s="$(grep -c ' imm=0x5e6f7081' <<< "$listing")"
  imm_r="$(grep -c ' imm=0x2c3d4e5f' <<< "$listing")"
  imm_r1="$(grep -c ' imm=0x6b7c8d9e' <<< "$listing")"
  rnr_wire="$(grep -c 'aeth=RNR_NAK' <<< "$listing")"
  if [ "$role" = server ]; then
    resp_sent="$(own_counter send_rnr_err "$rlog")"; req_rcvd="$(counter_delta rcvd_rnr_err "$before" "$after")"
    other_sent="$(counter_delta send_rnr_err "$before" "$after")"; other_rcvd="$(own_counter rcvd_rnr_err "$rlog")"
  else
    resp_sent="$(counter_delta send_rnr_err "$before" "$after")"; req_rcvd="$(own_counter rcvd_rnr_err "$rlog")"
    other_sent="$(own_counter send_rnr_err "$rlog")"; other_rcvd="$(counter_delta rcvd_rnr_err "$before" "$after")"
  fi
  local details="imm frames $imm_w+$imm_s+$imm_r+$imm_r1, RNR NAKs sent $resp_sent / rcvd $req_rcvd / on the wire $rnr_wire"
  # Three RNR steps (a SEND, a multi- and a single-packet WRITE WITH IMM): at least one RNR NAK each.
  if [ "$imm_w" -lt 1 ] || [ "$imm_s" -lt 1 ] || [ "$imm_r" -lt 1 ] || [ "$imm_r1" -lt 1 ] || [ "${resp_sent:-0}" -lt 3 ] ||
     [ "$other_sent" != 0 ] ||
     [ "${other_rcvd:-0}" != 0 ] || [ "$rnr_wire" -gt "$resp_sent" ] || [ "$req_rcvd" -gt "$resp_sent" ]; then
    echo "bad $details"; return
  fi
  # On a clean link the ImmDt of the steps without RNR crosses once (the RNR'd
  # WRITEs' once per attempt), and every RNR NAK is on the wire and arrives.
  if [ "$lossy" = 0 ] && { [ "$imm_w" != 1 ] || [ "$imm_s" != 1 ] || [ "$imm_r" -lt 2 ] || [ "$imm_r1" -lt 2 ] ||
                            [ "$rnr_wire" != "$resp_sent" ] ||
                            [ "$req_rcvd" != "$resp_sent" ]; }; then
    echo "bad $details"; return
  fi
  echo "ok $details"
}

# Both directions of one pairing.
both_ways() {   # both_ways NAME LOSSY GUEST_CMD ROCEMU_CMD
  run_pair "$1-rocemu-server" server "$2" "$3" "$4"
  run_pair "$1-rocemu-client" client "$2" "$3" "$4"
}

boot() {
  MTU="$1"
  if ! guest_boot --mtu "$MTU"; then fail "boot guest at MTU $MTU" "see the messages above"; return 1; fi
  G="$(guest_fact gid_index_ipv4)"
  guest_ns_exec ip addr add "$OOB_HOST/24" dev "$GUEST_TAP" || { fail "OOB address on the tap" "ip addr add failed"; return 1; }
  # noprefixroute-free /24 on eth0: the guest reaches 10.77.1.1 directly.
  guest_run "ip addr add $OOB_GUEST/24 dev eth0" > /dev/null || { fail "OOB address in the guest" "ip addr add failed"; return 1; }
  echo "info: guest at MTU $MTU ready in ${GUEST_READY_SECONDS} s, rxe GID index $G"
}

netem_on() {
  guest_run "tc qdisc add dev eth0 root netem loss $1 reorder 20% delay 2ms &&
    ip link set ifb0 up && tc qdisc add dev eth0 handle ffff: ingress &&
    tc filter add dev eth0 parent ffff: matchall action mirred egress redirect dev ifb0 &&
    tc qdisc add dev ifb0 root netem loss $1" > /dev/null
}
netem_off() {
  guest_run 'tc qdisc del dev eth0 root; tc qdisc del dev eth0 ingress; tc qdisc del dev ifb0 root; true' > /dev/null
}

# A GID index that does not fit must fail at once with rocemu's own message:
# one its table lacks (before any traffic), and one that exists but is the
# IPv6 link-local GID while the peer's is IPv4-mapped (at RTR, as fill_av).
wrong_gid_checks() {
  local out rc port=$((TCP_PORT += 1))
  # shellcheck disable=SC2046
  out="$(guest_ns_exec timeout 60 "$ROCEMU" pingpong -g 7 -p "$port" $(rocemu_args) 2>&1)"; rc=$?
  if [ "$rc" = 1 ] && grep -q 'GID index 7 does not exist' <<< "$out"; then
    pass "wrong-gid-index-missing" "$(grep 'GID index' <<< "$out" | head -1)"
  else
    fail "wrong-gid-index-missing" "exit $rc: $(tail -3 <<< "$out" | tr '\n' ' ')"
  fi
  # rocemu is the server here: rxe's ibv_rc_pingpong would refuse the IPv6
  # GID first (at its own RTR) if rocemu sent its record before failing.
  port=$((TCP_PORT += 1))
  # shellcheck disable=SC2046
  guest_ns_exec timeout 60 "$ROCEMU" pingpong -g 0 -p "$port" $(rocemu_args) > "$WORK/wronggid.log" 2>&1 &
  ROCEMU_PID=$!
  host_wait_listen "$port" 30
  guest_run -t 60 "ibv_rc_pingpong -d rxe0 -g $G -e -n 1 -p $port $OOB_HOST" > "$WORK/wronggid.guest.log" 2>&1
  wait "$ROCEMU_PID"; rc=$?; ROCEMU_PID=""
  out="$(cat "$WORK/wronggid.log")"
  if [ "$rc" = 1 ] && grep -q 'GID index 0 .*different IP versions' <<< "$out"; then
    pass "wrong-gid-index-ipv6-vs-ipv4" "$(grep 'GID index' <<< "$out" | head -1)"
  else
    fail "wrong-gid-index-ipv6-vs-ipv4" "exit $rc: $(tail -3 <<< "$out" | tr '\n' ' ')"
  fi
}

"$HERE/install-deps.sh" || exit 1
"$HERE/build-guest.sh" > "$WORK/build-guest.log" 2>&1 || { cat "$WORK/build-guest.log"; echo "0 passed, 1 failed"; exit 1; }
T0=$SECONDS

if boot 1500; then
  PP="ibv_rc_pingpong -d rxe0 -g $G -e"
  RP="pingpong"
  both_ways rc-3000-mtu1500 0 "$PP -s 3000 -n 50" "$RP -s 3000 -n 50"
  both_ways rdma-ops-mtu1500 0 "rdma_ops -d rxe0 -g $G -s 65536 -n 3 -t 60" "rdma-ops -s 65536 -n 3 -t 60"
  # The server's receives on an SRQ: the RNR steps meet an empty SRQ (the client ignores -q/--srq).
  both_ways rdma-ops-srq-mtu1500 0 "rdma_ops -d rxe0 -g $G -q -s 4096 -n 1 -t 60" "rdma-ops --srq -s 4096 -n 1 -t 60"
  if [ "$CORE" = 0 ]; then
    both_ways rc-64-mtu1500 0 "$PP -s 64 -n 100" "$RP -s 64 -n 100"
    both_ways rc-1MiB-mtu1500 0 "$PP -s 1048576 -n 5" "$RP -s 1048576 -n 5"
    both_ways ud-512-mtu1500 0 "ibv_ud_pingpong -d rxe0 -g $G -e -s 512 -n 100" "$RP --ud -s 512 -n 100"
    if netem_on 3%; then
      # rdma_ops only: ibv_rc_pingpong has no handshake after its traffic, so a
      # lost final ACK leaves one side retransmitting to a QP its peer already
      # destroyed (README, "Loss scenarios").
      both_ways rdma-ops-loss3%-mtu1500 1 "rdma_ops -d rxe0 -g $G -s 65536 -n 5 -t 120" "rdma-ops -s 65536 -n 5 -t 120"
      netem_off
    else
      fail "netem loss in the guest" "tc failed"
    fi
    wrong_gid_checks
  fi
  guest_shutdown
fi

if [ "$CORE" = 0 ] && boot 9000; then
  PP="ibv_rc_pingpong -d rxe0 -g $G -e -m 4096"
  RP="pingpong -m 4096"
  both_ways rc-64-mtu9000 0 "$PP -s 64 -n 100" "$RP -s 64 -n 100"
  both_ways rc-3000-mtu9000 0 "$PP -s 3000 -n 50" "$RP -s 3000 -n 50"
  both_ways rc-1MiB-mtu9000 0 "$PP -s 1048576 -n 5" "$RP -s 1048576 -n 5"
  both_ways rdma-ops-mtu9000 0 "rdma_ops -d rxe0 -g $G -s 65536 -n 3 -t 60" "rdma-ops -s 65536 -n 3 -t 60"
  guest_shutdown
fi

echo "info: scenarios took $((SECONDS - T0)) s"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
