#!/usr/bin/env bash
# A kernel network namespace pings a rocemu NIC across a veth pair, over
# IPv4 and over IPv6 to the NIC's link-local address (its link-local GID).
#
#   [netns K: kernel, 10.99.0.1] vethK <--> vethR [netns R: rocemu host, 10.99.0.2 on net_af_packet]
#
# Checks: the kernel resolves the rocemu MAC by ARP and by neighbour
# discovery and gets every echo answered; `rocemu counters` reads the live
# counters through telemetry; the in-process pcapng capture decodes in tshark
# and passes `rocemu pcap`.
set -euo pipefail
ROCEMU=$(realpath "${1:?usage: netns_ping.sh path/to/rocemu}")
. "$(dirname "$0")/lib.sh"
need_root_netns
command -v ping >/dev/null || skip "needs ping (iputils-ping)"
command -v tshark >/dev/null || skip "needs tshark"

id=$$
NS_K=rocemu-k-$id NS_R=rocemu-r-$id VK=rk$id VR=rr$id PREFIX=rocemu-e2e-$id
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
ip link add "$VK" netns "$NS_K" type veth peer name "$VR" netns "$NS_R"
ip -n "$NS_K" addr add 10.99.0.1/24 dev "$VK"
ip netns exec "$NS_K" sysctl -qw "net.ipv6.conf.$VK.accept_dad=0"  # usable link-local address at once
ip -n "$NS_K" link set "$VK" up
# rocemu owns this side: keep the kernel quiet on it.
ip netns exec "$NS_R" sysctl -qw "net.ipv6.conf.$VR.disable_ipv6=1"
ip -n "$NS_R" link set "$VR" up
mac_r=$(ip -n "$NS_R" -o link show "$VR" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)

ip netns exec "$NS_R" "$ROCEMU" host --port "net_af_packet0,iface=$VR" --ip 10.99.0.2/24 --duration 30 \
  --capture "$tmp/host.pcapng" -- --file-prefix "$PREFIX" >"$tmp/host.log" 2>&1 &
host_pid=$!
wait_ready "$tmp/host.log" "$host_pid"
grep -q "mac=$mac_r" "$tmp/host.log" || fail "rocemu did not take the veth's MAC $mac_r"

ip netns exec "$NS_K" ping -c 5 -i 0.2 -W 2 10.99.0.2 >"$tmp/ping.log" || { cat "$tmp/ping.log"; fail "ping failed"; }
grep -q " 5 received" "$tmp/ping.log" || { cat "$tmp/ping.log"; fail "not every echo was answered"; }
ip -n "$NS_K" neigh show 10.99.0.2 | grep -q "lladdr $mac_r" || fail "the kernel did not learn $mac_r by ARP"

ll_r=$(awk '/gid\[1\] RoCEv2/ { print $3 }' "$tmp/host.log")
[ -n "$ll_r" ] || fail "no link-local GID in the ready output"
ip netns exec "$NS_K" ping -6 -c 3 -i 0.2 -W 2 "$ll_r%$VK" >"$tmp/ping6.log" || { cat "$tmp/ping6.log"; fail "ping -6 failed"; }
grep -q " 3 received" "$tmp/ping6.log" || { cat "$tmp/ping6.log"; fail "not every IPv6 echo was answered"; }
ip -n "$NS_K" -6 neigh show dev "$VK" | grep -q "lladdr $mac_r" || fail "the kernel did not learn $mac_r by ND"

"$ROCEMU" counters --file-prefix "$PREFIX" >"$tmp/counters.log" || { cat "$tmp/counters.log"; fail "rocemu counters failed"; }
replies=$(awk '$1 == "tx_echo_reply" { print $2 }' "$tmp/counters.log")
[ "${replies:-0}" -ge 8 ] || { cat "$tmp/counters.log"; fail "telemetry shows ${replies:-no} echo replies"; }

stop_host "$host_pid"
host_pid=
grep -q "tx_echo_reply 8" "$tmp/host.log" || { cat "$tmp/host.log"; fail "exit counters lack 8 echo replies"; }
grep -q "tx_neighbor_advert" "$tmp/host.log" || { cat "$tmp/host.log"; fail "no neighbour advertisement counted"; }

echo_replies=$(tshark -r "$tmp/host.pcapng" -Y "icmp.type == 0 && ip.src == 10.99.0.2" 2>/dev/null | wc -l)
arp_replies=$(tshark -r "$tmp/host.pcapng" -Y "arp.opcode == 2 && arp.src.proto_ipv4 == 10.99.0.2" 2>/dev/null | wc -l)
[ "$echo_replies" -eq 5 ] || fail "capture holds $echo_replies echo replies, expected 5"
[ "$arp_replies" -ge 1 ] || fail "capture holds no ARP reply from rocemu"
echo6_replies=$(tshark -r "$tmp/host.pcapng" -Y "icmpv6.type == 129" 2>/dev/null | wc -l)
[ "$echo6_replies" -eq 3 ] || fail "capture holds $echo6_replies ICMPv6 echo replies, expected 3"
"$ROCEMU" pcap --all "$tmp/host.pcapng" >"$tmp/pcap.log" || { cat "$tmp/pcap.log"; fail "rocemu pcap rejected the capture"; }
echo "netns_ping: kernel ping answered 5/5 (IPv4) and 3/3 (IPv6 link-local), ARP and ND learned $mac_r, capture decodes"
