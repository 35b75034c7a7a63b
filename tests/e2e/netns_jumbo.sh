#!/usr/bin/env bash
# Jumbo frames on af_packet: a kernel netns sends 8000-byte pings to a rocemu
# NIC whose veth runs at MTU 9000, and rocemu reports the active RDMA MTU rxe
# would (4096).
set -euo pipefail
ROCEMU=$(realpath "${1:?usage: netns_jumbo.sh path/to/rocemu}")
. "$(dirname "$0")/lib.sh"
need_root_netns
command -v ping >/dev/null || skip "needs ping (iputils-ping)"

id=$$
NS_K=rocemu-jk-$id NS_R=rocemu-jr-$id VK=jk$id VR=jr$id PREFIX=rocemu-e2e-j-$id
tmp=$(mktemp -d)
host_pid=
cleanup() {
  if [ -n "$host_pid" ]; then kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null || true; fi
  ip netns del "$NS_K" 2>/dev/null || true
  ip netns del "$NS_R" 2>/dev/null || true
  rm -rf "$tmp" "/var/run/dpdk/$PREFIX"
}
trap cleanup EXIT

ip netns add "$NS_K"
ip netns add "$NS_R"
ip link add "$VK" netns "$NS_K" mtu 9000 type veth peer name "$VR" netns "$NS_R" mtu 9000
ip -n "$NS_K" addr add 10.94.0.1/24 dev "$VK"
ip -n "$NS_K" link set "$VK" up
ip netns exec "$NS_R" sysctl -qw "net.ipv6.conf.$VR.disable_ipv6=1"
ip -n "$NS_R" link set "$VR" up

ip netns exec "$NS_R" "$ROCEMU" host --port "net_af_packet0,iface=$VR,framesz=9216,blocksz=36864" --mtu 9000 \
  --ip 10.94.0.2/24 --duration 30 -- --file-prefix "$PREFIX" >"$tmp/host.log" 2>&1 &
host_pid=$!
wait_ready "$tmp/host.log" "$host_pid"
grep -q "mtu=9000 active_mtu=4096" "$tmp/host.log" || { cat "$tmp/host.log"; fail "expected mtu=9000 active_mtu=4096"; }

ip netns exec "$NS_K" ping -c 3 -i 0.2 -W 2 -s 8000 -M do 10.94.0.2 >"$tmp/ping.log" ||
  { cat "$tmp/ping.log" "$tmp/host.log"; fail "jumbo ping failed"; }
grep -q " 3 received" "$tmp/ping.log" || { cat "$tmp/ping.log"; fail "not every jumbo echo was answered"; }
stop_host "$host_pid"
host_pid=
grep -q "tx_echo_reply 3" "$tmp/host.log" || { cat "$tmp/host.log"; fail "exit counters lack 3 echo replies"; }
grep -q "drop_multi_segment" "$tmp/host.log" && fail "jumbo frames arrived in several mbufs"
echo "netns_jumbo: 3/3 8000-byte pings answered at MTU 9000, active MTU 4096"
