# Sourced by the verbs end-to-end tests: what pingpong.sh and perf.sh share.

# wait_server LOG PID LINE NAME: until the server's LOG shows LINE (10 s at
# most); fails at once if the server exits first.
wait_server() {
  local log=$1 pid=$2 line=$3 name=$4
  for _ in $(seq 100); do
    grep -q "$line" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log"; fail "$name: the server exited early"; }
    sleep 0.1
  done
}

# veth_pair NS_A NS_B VA VB NET: namespaces NS_A and NS_B joined by the veth
# pair VA <--> VB, the kernel's addresses NET.1 and NET.2 on them (for the
# TCP exchange), IPv6 off so the kernel stays quiet; sets run_a/run_b (the
# namespace prefixes), port_a/port_b (af_packet device strings), empty
# mac_a/mac_b (the NICs take the veths' MACs) and server_tcp (NET.2).
veth_pair() {
  local ns_a=$1 ns_b=$2 va=$3 vb=$4 net=$5
  need_root_netns
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  ip link add "$va" netns "$ns_a" type veth peer name "$vb" netns "$ns_b"
  local side ns dev kip
  for side in "$ns_a:$va:$net.1" "$ns_b:$vb:$net.2"; do
    IFS=: read -r ns dev kip <<<"$side"
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
    ip -n "$ns" addr add "$kip/24" dev "$dev"
    ip -n "$ns" link set "$dev" up
  done
  run_a=(ip netns exec "$ns_a") run_b=(ip netns exec "$ns_b")
  port_a="net_af_packet0,iface=$va" port_b="net_af_packet0,iface=$vb"
  mac_a=() mac_b=()
  server_tcp=$net.2
}
