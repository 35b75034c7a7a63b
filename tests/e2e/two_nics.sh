#!/usr/bin/env bash
# Two rocemu NICs in two processes find each other by ARP and ping.
#
#   af_packet: [netns A: rocemu --ping] vethA <--> vethB [netns B: rocemu]
#   memif:     rocemu (memif client) <-- shared memory --> rocemu (memif server)
#   vhost:     rocemu (virtio_user)  <-- vhost-user    --> rocemu (vhost)
#   vlan:      as af_packet, both NICs on VLAN 100, the responder with PCP 5
#
# Checks: every echo request is answered (the pinger's exit status), both
# sides count what they sent and received, and the pinger's capture decodes
# in tshark and passes `rocemu pcap`.
set -euo pipefail
ROCEMU=$(realpath "${1:?usage: two_nics.sh path/to/rocemu af_packet|memif|vhost|vlan}")
MODE=${2:?usage: two_nics.sh path/to/rocemu af_packet|memif|vhost|vlan}
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
command -v tshark >/dev/null || skip "needs tshark"

id=$$
NS_A=rocemu-a-$id NS_B=rocemu-b-$id VA=ra$id VB=rb$id
tmp=$(mktemp -d)
pid_b=
cleanup() {
  if [ -n "$pid_b" ]; then kill "$pid_b" 2>/dev/null && wait "$pid_b" 2>/dev/null || true; fi
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
  rm -rf "$tmp" "/var/run/dpdk/rocemu-e2e-a-$id" "/var/run/dpdk/rocemu-e2e-b-$id"
}
trap cleanup EXIT

vlan_a=() vlan_b=()
case "$MODE" in
  af_packet|vlan)
    need_root_netns
    ip netns add "$NS_A"
    ip netns add "$NS_B"
    ip link add "$VA" netns "$NS_A" type veth peer name "$VB" netns "$NS_B"
    for side in "$NS_A:$VA" "$NS_B:$VB"; do
      ns=${side%%:*} dev=${side#*:}
      ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
      ip -n "$ns" link set "$dev" up
    done
    run_a=(ip netns exec "$NS_A") run_b=(ip netns exec "$NS_B")
    port_a="net_af_packet0,iface=$VA" port_b="net_af_packet0,iface=$VB"
    mac_a=() mac_b=()
    if [ "$MODE" = vlan ]; then
      vlan_a=(--vlan 100) vlan_b=(--vlan 100 --pcp 5)
    fi
    ;;
  memif)
    run_a=() run_b=()
    port_a="net_memif0,role=client,socket=$tmp/memif.sock"
    port_b="net_memif0,role=server,socket=$tmp/memif.sock"
    # memif ports share one default MAC; give each NIC its own.
    mac_a=(--mac 02:00:00:00:00:0a) mac_b=(--mac 02:00:00:00:00:0b)
    ;;
  vhost)
    run_a=() run_b=()
    port_a="net_virtio_user0,path=$tmp/vhost.sock"
    port_b="net_vhost0,iface=$tmp/vhost.sock"
    mac_a=(--mac 02:00:00:00:00:0a) mac_b=(--mac 02:00:00:00:00:0b)
    ;;
  *) fail "unknown mode $MODE" ;;
esac

"${run_b[@]}" "$ROCEMU" host --port "$port_b" --ip 10.97.0.2/24 "${mac_b[@]}" "${vlan_b[@]}" --duration 60 \
  -- --file-prefix "rocemu-e2e-b-$id" >"$tmp/b.log" 2>&1 &
pid_b=$!
wait_ready "$tmp/b.log" "$pid_b"

"${run_a[@]}" "$ROCEMU" host --port "$port_a" --ip 10.97.0.1/24 "${mac_a[@]}" "${vlan_a[@]}" --ping 10.97.0.2 -c 5 -i 0.1 \
  --capture "$tmp/a.pcapng" -- --file-prefix "rocemu-e2e-a-$id" >"$tmp/a.log" 2>&1 ||
  { cat "$tmp/a.log" "$tmp/b.log"; fail "the pinger did not get 5 replies"; }
grep -q "5 transmitted, 5 received" "$tmp/a.log" || { cat "$tmp/a.log"; fail "ping summary missing"; }
stop_host "$pid_b"
pid_b=
grep -q "rx_echo_request 5" "$tmp/b.log" || { cat "$tmp/b.log"; fail "responder did not count 5 echo requests"; }
grep -q "tx_arp_reply" "$tmp/b.log" || { cat "$tmp/b.log"; fail "responder sent no ARP reply"; }
grep -q "rx_echo_reply 5" "$tmp/a.log" || { cat "$tmp/a.log"; fail "pinger did not count 5 echo replies"; }

replies=$(tshark -r "$tmp/a.pcapng" -Y "icmp.type == 0 && ip.src == 10.97.0.2" 2>/dev/null | wc -l)
[ "$replies" -eq 5 ] || fail "the pinger's capture holds $replies echo replies, expected 5"
"$ROCEMU" pcap --all "$tmp/a.pcapng" >/dev/null || fail "rocemu pcap rejected the capture"
if [ "$MODE" = vlan ]; then
  tagged=$(tshark -r "$tmp/a.pcapng" -Y "vlan.id == 100 && vlan.priority == 5 && icmp.type == 0" 2>/dev/null | wc -l)
  [ "$tagged" -eq 5 ] || fail "$tagged echo replies carry VLAN 100 with PCP 5, expected 5"
fi
echo "two_nics $MODE: 5/5 echo replies between two rocemu processes, capture decodes"
