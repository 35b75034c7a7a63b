# Sourced by the fabric e2e tests. check_no_nic_drops DIR SIZE checks that
# the live report in DIR has no NIC drop at SIZE bytes: the sweep row's
# nic_drops column is 0 and the NIC CSV has no drop counter the table counts
# (a requester's ignored duplicate ACKs, drop_stale_response and
# drop_ghost_response, are not drops). On a lossless fabric a NIC must wait
# for its queue or pool, never drop; the failure names the counters.
check_no_nic_drops() {
  local dir=$1 size=$2 nic_drops rows
  nic_drops=$(awk -F, -v s="$size" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "nic_drops") c = i }
    NR > 1 && $1 == s && c { print $c }' "$dir"/live_*_sweep.csv)
  [ "$nic_drops" = 0 ] || fail "sweep nic_drops at $size B: '${nic_drops}'"
  rows=$(grep -E ",drop_" "$dir"/live_*_"${size}"B_nics.csv | grep -vE ",drop_(stale|ghost)_response,")
  [ -z "$rows" ] || fail "NIC drops at $size B: $(tr '\n' ' ' <<<"$rows")"
}

# check_incast_time SWEEP SENDERS GBPS: every size of a live incast sweep
# took at least 95 % of what its SENDERS x size bytes need through the
# receiver's GBPS link, the bottleneck every byte crosses (time_us is scaled
# back to the configured rates). A clock that stood still while frames went
# through reads less.
check_incast_time() {
  local sweep=$1 senders=$2 gbps=$3
  awk -F, -v n="$senders" -v g="$gbps" 'NR > 1 { need = n * $1 * 8 / (g * 1000)
      if ($2 < 0.95 * need) bad = bad " " $1 " B in " $2 " us (needs " need ")"; rows++ }
    END { if (bad || !rows) { print "rows " rows ":" bad; exit 1 } }' "$sweep" ||
    fail "an incast faster than its bottleneck carries"
}

# check_incast_series PREFIX: the time series and plots of a live 8:1 incast
# (incast.yaml), as virtual time writes them: every flow received something;
# in the middle of the run the flows together carry the 100 Gbit/s
# bottleneck, between 50 and 105 Gbit/s of payload in every sample, and each
# flow is near its eighth, 6-20 Gbit/s (12.3 expected; 11.7-12.9 seen in one
# process and split alike, as a split fabric's processes share one fabric
# clock); a sender (NIC h0-h7) held by PFC more
# than half of some sample, a queue above 100 kB, the plot script (and the
# rates plot where gnuplot is installed).
check_incast_series() {
  local series=$1 end
  head -1 "${series}_rates.csv" | grep -q "^time_us,f0_h0-h8,f1_h1-h8,.*,f7_h7-h8$" ||
    fail "rates header: $(head -1 "${series}_rates.csv")"
  awk -F, 'NR > 1 { for (i = 2; i <= NF; i++) if ($i > 0) got[i] = 1 }
    END { for (i = 2; i <= NF; i++) if (!got[i]) exit 1 }' "${series}_rates.csv" || fail "a flow with no rate"
  end=$(tail -1 "${series}_rates.csv" | cut -d, -f1)
  awk -F, -v end="$end" 'NR > 1 && $1 > end * 0.3 && $1 < end * 0.7 { n++; sum = 0
      for (i = 2; i <= NF; i++) { sum += $i; if ($i < 6 || $i > 20) bad = bad " " $1 "us:f" (i - 2) "=" $i }
      if (sum < 50 || sum > 105) bad = bad " " $1 "us:sum=" sum }
    END { if (bad || n < 5) { print "rows " n ", off:" bad; exit 1 } }' "${series}_rates.csv" ||
    fail "per-flow rates"
  # Anywhere in the run (a size after the first too): never above the bottleneck.
  awk -F, 'NR > 1 { sum = 0; for (i = 2; i <= NF; i++) sum += $i; if (sum > 105) { print $1 "us: " sum; exit 1 } }' \
    "${series}_rates.csv" || fail "a sample above the 100 Gbit/s bottleneck"
  awk -F, 'NR == 1 { for (i = 2; i <= NF; i++) nic[i] = ($i ~ /^h[0-7]$/) }
    NR > 1 { for (i = 2; i <= NF; i++) if (nic[i] && $i > 0.5) held++ } END { exit !(held > 0) }' \
    "${series}_pfc.csv" || fail "no sender paused half a sample: $(head -3 "${series}_pfc.csv")"
  awk -F, 'NR > 1 { for (i = 2; i <= NF; i++) if ($i > 100000) deep = 1 } END { exit !deep }' \
    "${series}_queues.csv" || fail "no queue above 100 kB: $(head -3 "${series}_queues.csv")"
  [ -s "${series}_plots.gp" ] || fail "no plot script"
  if command -v gnuplot >/dev/null; then [ -s "${series}_rates.svg" ] || fail "no rates plot"; fi
  echo "series $series: the bottleneck carried and shared, senders paused, a queue built"
}

# stop_node_when WATCH COUNTERS COND BYTES READY: while process WATCH runs
# (60 s at most), once the tx_bytes rows of the switch counter snapshot
# COUNTERS for which the awk condition COND holds ($1 switch, $2 port) sum to
# more than BYTES, stops the node whose pid the ready mark READY holds for a
# second (SIGSTOP, as a debugger would, then SIGCONT). Sets `stopped=1` if it
# did.
stop_node_when() {
  local watch=$1 counters=$2 cond=$3 bytes=$4 ready=$5 sent victim
  stopped=
  for _ in $(seq 1200); do
    kill -0 "$watch" 2>/dev/null || return 0
    sent=$(awk -F, "\$3 == \"tx_bytes\" && ($cond) { s += \$4 } END { print s + 0 }" "$counters" 2>/dev/null)
    if [ "${sent:-0}" -gt "$bytes" ]; then
      victim=$(cat "$ready")
      kill -STOP "$victim" && sleep 1 && kill -CONT "$victim" && stopped=1
      return 0
    fi
    sleep 0.05
  done
}

# plan_command PLAN NODE [SED]: NODE's command in the output PLAN of
# `rocemu fabric plan` for the layout of dumbbell_machines (machines sw and
# nics), its <iface:...> placeholders filled in with that layout's veths
# (SED: a sed script for the placeholders of another layout, applied first).
plan_command() {
  grep -A1 "^# machine [a-z0-9]*, node $2\$" "$1" | tail -1 |
    sed -E "${3:-}"'s/<iface:([a-z0-9-]+)@sw>/s\1/g; s/<iface:([a-z0-9-]+)@nics>/n\1/g'
}

# dumbbell_machines NS NH: tests/e2e/dumbbell_2to1.yaml's two machines as
# network namespaces: switches in NS, the hosts node in NH; one veth pair per
# NIC cable (sCABLE in NS, nCABLE in NH, MTU 9000, IPv6 off) and a control
# pair cS 10.77.0.1/24 (NS) - cN 10.77.0.2/24 (NH). DPDK's af_packet fanout
# group id is pid XOR ifindex: the two switch processes' ends get ifindexes
# far apart so that their ids cannot meet.
veth_up() { ip -n "$1" link set "$2" mtu 9000 up && ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"; }
dumbbell_machines() {
  local ns=$1 nh=$2 idx=(1100 1101 2200) i=0 c
  for c in h0-left h1-left h2-right; do
    ip link add "s$c" netns "$ns" index "${idx[$i]}" type veth peer name "n$c" netns "$nh" || fail "cannot make a veth pair"
    veth_up "$nh" "n$c" && veth_up "$ns" "s$c" || fail "cannot bring up the $c veths"
    i=$((i + 1))
  done
  ip link add cN netns "$nh" type veth peer name cS netns "$ns" || fail "cannot make the control veth pair"
  ip -n "$nh" addr add 10.77.0.2/24 dev cN && ip -n "$ns" addr add 10.77.0.1/24 dev cS
  ip -n "$nh" link set cN up && ip -n "$ns" link set cS up && ip -n "$nh" link set lo up
}
