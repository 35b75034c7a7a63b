#!/usr/bin/env bash
# The nodes of a split live fabric started by hand, as on several machines,
# with one cable on another device: incast.yaml's h0-left runs over
# af_packet on a veth pair between two network namespaces (the hosts node
# in one, switch left in the other; --port h0-left=... on both), the other
# cables over memif (file sockets, which namespaces do not separate). Every
# flow completes verified with no drop, and h0's megabyte crossed the veth
# (the kernel's counters say so). Two namespaces also keep the two
# af_packet sockets' PACKET_FANOUT groups apart: DPDK derives the group id
# from pid and ifindex, which collide for two processes started together
# on the two ends of one pair.
# Usage: fabric_split_afpacket.sh ROCEMU REPO_ROOT
set -uo pipefail
ROCEMU=$1
ROOT=$2
. "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fabric_checks.sh"
need_root_netns
NA=rocemu-fa-$$ NB=rocemu-fb-$$ VA=rfa$$ VB=rfb$$
netns_setup fab_split_af "$NA" "$NB"
ip link add "$VA" netns "$NA" type veth peer name "$VB" netns "$NB" || fail "cannot make a veth pair"
for side in "$NA:$VA" "$NB:$VB"; do
  ns=${side%%:*} v=${side#*:}
  ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$v.disable_ipv6=1"
  ip -n "$ns" link set "$v" mtu 9000 up
done
C=$ROOT/configs/fabrics/incast.yaml
AF=framesz=9216,blocksz=36864
common=(-c "$C" --link-dir "$D" --scale 225)
EAL=(-- --log-level lib.eal:error)
ip netns exec "$NB" "$ROCEMU" fabric node --switch left "${common[@]}" --port "h0-left=net_af_packet0,iface=$VB,$AF" "${EAL[@]}" \
  >"$D/left.log" 2>&1 &
pids+=($!)
"$ROCEMU" fabric node --switch right "${common[@]}" "${EAL[@]}" >"$D/right.log" 2>&1 &
pids+=($!)
timeout 120 ip netns exec "$NA" "$ROCEMU" fabric node --hosts "${common[@]}" --port "h0-left=net_af_packet0,iface=$VA,$AF" \
  -w incast --sizes 1M --qps 8 -o "$D/rep" "${EAL[@]}" >"$D/hosts.txt" 2>"$D/hosts.err"
rc=$?
kill -TERM "${pids[@]}"
wait "${pids[@]}"
pids=()
cat "$D/hosts.txt" "$D/left.log" "$D/right.log"
[ $rc -eq 0 ] || { tail -c 600 "$D/hosts.err"; fail "hosts node exit status $rc"; }
row=$(grep -E "^ *1048576 " "$D/hosts.txt") || fail "no 1048576 row"
echo "$row" | grep -q " 8/8$" || fail "not every flow verified: $row"
IFS=, read -r _ _ _ _ _ _ _ _ drops lossless flows verified _ complete _ < <(sed -n 2p "$D/rep/live_incast_sweep.csv")
[ "$complete" = 1 ] && [ "$verified" = 8 ] && [ "$drops" = 0 ] && [ "$lossless" = 0 ] ||
  fail "sweep row: $(sed -n 2p "$D/rep/live_incast_sweep.csv")"
check_incast_time "$D/rep/live_incast_sweep.csv" 8 100
grep -q "^switch left: .*ARP requests answered [1-9]" "$D/left.log" || fail "switch left did not stop cleanly"
tx=$(ip netns exec "$NA" cat "/sys/class/net/$VA/statistics/tx_bytes")
[ "$tx" -ge 1048576 ] || fail "only $tx bytes crossed $VA: h0's cable was not the veth"
echo "PASS ($tx bytes over $VA)"
