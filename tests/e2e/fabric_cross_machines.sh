#!/usr/bin/env bash
# A split live fabric across two "machines" on one box: two network
# namespaces, each with its own link folder (nothing shared on disk). The
# switch nodes run in one, the hosts node in the other; every NIC-to-leaf
# cable is af_packet over its own veth pair between the namespaces, the
# switch-to-switch cable memif inside the switches' namespace, and the hosts
# node learns that the switches are ready, and reads their counters, over
# TCP across a control veth. The commands are the ones `rocemu fabric plan`
# prints, every interface given by its --device (later layouts: placeholders
# filled in). Checked: plan refuses nothing it should accept, and a --device
# for a cable within one machine; a hosts node missing a --port is refused naming
# the cable; the incast completes verified with no drop and both switches'
# counters in the report; a hosts node with another --scale is refused by the
# topology check; wrong control addresses (refused, unroutable) fail with a
# message naming the switch and the address, within the hang guard. Then a
# switch node stopped for a second mid-run: with each machine's own clock
# the hosts node's rates show a gap, with `--clock fabric` (the clock
# exchanged over UDP) none, and no sample above the bottleneck; the same with
# each switch on a machine of its own (three machines).
# Usage: fabric_cross_machines.sh ROCEMU REPO_ROOT
set -uo pipefail
ROCEMU=$1
ROOT=$2
. "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fabric_checks.sh"
need_root_netns
NS=rocemu-xs-$$ NH=rocemu-xh-$$
netns_setup fab_cross "$NS" "$NH"
dumbbell_machines "$NS" "$NH"

C=$ROOT/tests/e2e/dumbbell_2to1.yaml
# Every end's interface from --device: the commands run as printed.
devices=()
for c in h0-left h1-left h2-right; do devices+=(--device "$c@sw=s$c" --device "$c@nics=n$c"); done
"$ROCEMU" fabric plan -c "$C" --machine sw=left,right --machine nics=hosts --address sw=10.77.0.1 \
  --link-dir "$D" --binary "$ROCEMU" -w incast --sizes 1M --qps 8 -o "$D/rep" "${devices[@]}" >"$D/plan.txt" 2>&1 ||
  { cat "$D/plan.txt"; fail "fabric plan failed"; }
cat "$D/plan.txt"
! grep -q "<iface:\|replace each" "$D/plan.txt" || fail "plan --device left a placeholder"
# A --device for a cable within one machine is refused, naming those between.
"$ROCEMU" fabric plan -c "$C" --machine sw=left,right --machine nics=hosts -w incast --device left-right@sw=eth1 \
  >"$D/baddev.txt" 2>&1 && fail "plan took a --device for a cable within one machine"
grep -q "^rocemu fabric plan: --device 'left-right@sw=eth1': cable left-right does not join two machines (cables between two machines: h0-left, h1-left, h2-right)" \
  "$D/baddev.txt" || { cat "$D/baddev.txt"; fail "no clear message for a --device within one machine"; }
# The command of NODE with its interfaces filled in (IFACES: a sed script
# for the placeholders of another layout, applied first).
IFACES=
command_of() { plan_command "$D/plan.txt" "$1" "$IFACES"; }
HOSTS=$(command_of hosts)
LEFT=$(command_of left)
RIGHT=$(command_of right)
[ -n "$HOSTS" ] && [ -n "$LEFT" ] && [ -n "$RIGHT" ] || fail "plan has no command for every node"
echo "$HOSTS" | grep -q -- "--control left=10.77.0.1:7700 --control right=10.77.0.1:7701" || fail "hosts command: $HOSTS"
! echo "$HOSTS$LEFT$RIGHT" | grep -q "<" || fail "a placeholder is left"
EAL="-- --log-level lib.eal:error"

# A cable to the other machine without its --port: refused, naming it.
NOPORT=$(echo "$HOSTS" | sed -E "s/--port '?h1-left=[^' ]*'? //")
[ "$NOPORT" != "$HOSTS" ] || fail "no --port h1-left in the hosts command to take out: $HOSTS"
eval ip netns exec "$NH" "$NOPORT" $EAL >"$D/noport.txt" 2>&1 && fail "a hosts node without h1-left's --port ran"
grep -q "cable h1-left joins hosts to left, which runs on another machine: give hosts --port h1-left=DEVSPEC" \
  "$D/noport.txt" || { cat "$D/noport.txt"; fail "no clear message for a missing --port"; }

# Both ends of h0-left capture it, each on its own machine and clock.
eval exec ip netns exec "$NS" "$LEFT --pcap h0-left" $EAL >"$D/left.log" 2>&1 &
pids+=($!)
eval exec ip netns exec "$NS" "$RIGHT" $EAL >"$D/right.log" 2>&1 &
pids+=($!)
eval timeout 150 ip netns exec "$NH" "$HOSTS --pcap h0-left" $EAL >"$D/hosts.txt" 2>"$D/hosts.err"
rc=$?
cat "$D/hosts.txt"
[ $rc -eq 0 ] || { tail -c 800 "$D/hosts.err"; cat "$D/left.log" "$D/right.log"; fail "hosts node exit status $rc"; }
row=$(grep -E "^ *1048576 " "$D/hosts.txt") || fail "no 1048576 row"
IFS=, read -r _ _ _ _ _ pfc _ _ drops lossless flows verified _ complete _ < <(sed -n 2p "$D/rep/live_incast_sweep.csv")
[ "$complete" = 1 ] && [ "$flows" -gt 0 ] && [ "$verified" = "$flows" ] && [ "$drops" = 0 ] && [ "$lossless" = 0 ] ||
  fail "sweep row: $(sed -n 2p "$D/rep/live_incast_sweep.csv")"
check_incast_time "$D/rep/live_incast_sweep.csv" 2 100
echo "$row" | grep -q " $flows/$flows$" || fail "not every flow verified: $row"
echo "$row" | awk -v p="$pfc" '{ exit !($6 == p) }' || fail "table PFC is not the CSV's $pfc: $row"
ports="$D/rep/live_incast_1048576B_switch_ports.csv"
grep -q "^left,Ethernet0," "$ports" && grep -q "^right,Ethernet0," "$ports" || fail "no counters of both switches in $ports"
ls "$D/nics" | grep -q "\.counters$" && fail "a counter file in the hosts' link folder: $(ls "$D/nics")"
tx=$(ip netns exec "$NH" cat /sys/class/net/nh0-left/statistics/tx_bytes)
[ "$tx" -ge 1048576 ] || fail "only $tx bytes crossed nh0-left: h0's cable was not the veth"

# The switches' clocks as the hosts node found them over the control channel:
# one box, one clock, so zero within the error it states (a wrong unit or
# sign is seconds off).
for sw in left right; do
  clock=$(grep "^clock: switch node $sw at 10.77.0.1:770[01]: its CLOCK_REALTIME is " "$D/hosts.txt") ||
    fail "no clock line for switch $sw"
  off=$(echo "$clock" | sed -E 's/.* is ([-+][0-9.]+) ms from .*/\1/')
  err=$(echo "$clock" | sed -E 's/.*\(within ([0-9.]+) ms.*/\1/')
  awk -v o="$off" -v e="$err" 'BEGIN { exit !(o <= e + 0.001 && -o <= e + 0.001) }' ||
    fail "one box, yet a clock $off ms off, outside its $err ms: $clock"
  # The run's own fetches plus the 16 the node asks after it for the clock.
  n=$(echo "$clock" | sed -E 's/.*best of ([0-9]+) replies.*/\1/')
  [ "$n" -ge 17 ] || fail "the clock of $sw from $n replies, not the run's and 16 more: $clock"
done
# Another scale than the switches': refused by the topology check before any QP.
eval timeout 60 ip netns exec "$NH" "${HOSTS/--scale 75 /--scale 150 }" $EAL >"$D/scale.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || { cat "$D/scale.txt"; fail "a hosts node at another scale: exit status $rc"; }
grep -q "rocemu fabric node --hosts: switch node left at 10.77.0.1:7700 answers as switch node left of fabric dumbbell-2to1 topology [0-9a-f]* scale 75 seed 1; this node runs fabric dumbbell-2to1 topology [0-9a-f]* scale 150 seed 1" \
  "$D/scale.txt" || { cat "$D/scale.txt"; fail "no clear message for another scale"; }

kill -TERM "${pids[@]}"
wait "${pids[@]}"
pids=()
cat "$D/left.log" "$D/right.log"
grep -q "^switch left: .*ARP requests answered [1-9]" "$D/left.log" || fail "switch left did not stop cleanly"
grep -q "^switch right: " "$D/right.log" || fail "switch right did not stop cleanly"

# The merge the hosts node printed for h0-left's two captures (left's file
# is whole once its node has stopped), run where both files are.
merge=$(grep "^pcap: link h0-left is captured on more than one machine" "$D/hosts.txt" | sed 's/.*: rocemu pcap/pcap/') ||
  fail "no merge command for h0-left"
echo "$merge" | grep -q -- "--shift h0-left@left.pcap=-\?[0-9]" || fail "no shift for left's capture: $merge"
hosts_cap=$D/nics/h0-left@hosts.pcap
left_cap=$D/sw/h0-left@left.pcap
[ -f "$hosts_cap" ] && [ -f "$left_cap" ] || fail "captures missing: $(find "$D" -name '*.pcap')"
mkdir -p "$D/merge" && cp "$hosts_cap" "$left_cap" "$D/merge/"
(cd "$D/merge" && eval "\"$ROCEMU\" $merge -q") >"$D/merge.txt" 2>&1 || { cat "$D/merge.txt"; fail "the merge failed"; }
cat "$D/merge.txt"
frames=$(sed -nE 's/^# merged ([0-9]+) frames of 2 files.*/\1/p' "$D/merge.txt")
[ -n "$frames" ] && [ "$frames" -gt 100 ] || fail "merged $frames frames"
grep -qE "^[1-9][0-9]* packets, 0 ICRC errors" "$D/merge.txt" || fail "merged capture: $(tail -1 "$D/merge.txt")"
# The hosts node merged them itself: left's file fetched over the control
# channel after the run (so it may lack what left received after that).
auto=$(sed -nE "s|^pcap: ([0-9]+) frames of link h0-left in $D/rep/live_incast_h0-left.pcap: merged on this machine's clock \(within [0-9.]+ ms\) from 2 files, left's fetched over the control channel\$|\1|p" "$D/hosts.txt")
[ -n "$auto" ] && [ "$auto" -gt 100 ] && [ "$auto" -le "$frames" ] || fail "the hosts node's own merge: '$auto' frames (by hand $frames)"
"$ROCEMU" pcap "$D/rep/live_incast_h0-left.pcap" >"$D/auto.txt" 2>&1 || { tail -3 "$D/auto.txt"; fail "its merge does not verify"; }
grep -qE "^[1-9][0-9]* packets, 0 ICRC errors" "$D/auto.txt" || fail "its merge: $(tail -1 "$D/auto.txt")"
cmp -s "$D/nics/h0-left@left.pcap" <(head -c "$(stat -c %s "$D/nics/h0-left@left.pcap")" "$left_cap") ||
  fail "left's capture as fetched is not the start of its file"

# Wrong control addresses: nothing listens there, or no host has it. The
# hosts node gives up after --wait, naming the switch, the address and why.
wrong_control() {
  local addr=$1 why=$2
  eval timeout 60 ip netns exec "$NH" "${HOSTS/--control left=10.77.0.1:7700/--control left=$addr} --wait 3" $EAL \
    >"$D/wrong.txt" 2>&1
  local rc=$?
  [ $rc -eq 2 ] || { cat "$D/wrong.txt"; fail "control address $addr: exit status $rc (124: it hung)"; }
  grep -qE "rocemu fabric node --hosts: after 3 s still waiting for switch node left at $addr \($why" "$D/wrong.txt" ||
    { cat "$D/wrong.txt"; fail "no clear message for control address $addr"; }
  grep "still waiting" "$D/wrong.txt"
}
wrong_control 10.77.0.1:7799 "connect: Connection refused"
wrong_control 10.77.0.9:7700 "(no connection within 1.0 s|connect: No route to host)"

# run_with_stop NAME CLOCK SIZES: an incast of SIZES (the last 64M) planned
# with --clock CLOCK (link folders $D/NAME, report $D/rep_NAME), switch node
# left stopped for a second (SIGSTOP) once it has sent 24 MiB (of the 64 MiB
# size's 128); checks every size completes verified with no drop. Sets
# `sums` to the 64 MiB rates' per-sample totals (Gbit/s). The layout: the
# plan's machine and address options in LAYOUT, switch right's namespace in
# RIGHT_NS (left's is $NS, on machine sw).
LAYOUT=(--machine sw=left,right --machine nics=hosts --address sw=10.77.0.1)
RIGHT_NS=$NS
run_with_stop() {
  local name=$1 clock=$2 sizes=$3 rc
  "$ROCEMU" fabric plan -c "$C" "${LAYOUT[@]}" \
    --link-dir "$D/$name" --binary "$ROCEMU" -w incast --sizes "$sizes" --qps 8 -o "$D/rep_$name" --clock "$clock" \
    >"$D/plan.txt" 2>&1 || { cat "$D/plan.txt"; fail "fabric plan --clock $clock failed"; }
  HOSTS=$(command_of hosts) LEFT=$(command_of left) RIGHT=$(command_of right)
  [ "$clock" = shared ] || echo "$HOSTS$LEFT$RIGHT" | grep -q -- "--clock $clock .*--clock $clock .*--clock $clock" ||
    fail "plan --clock $clock: not every node has it"
  [ "$clock" = fabric ] && { grep -q "^# --clock fabric: .* over UDP on that switch's control port" "$D/plan.txt" ||
    fail "plan --clock fabric does not say UDP must get through"; }
  eval exec ip netns exec "$NS" "$LEFT" $EAL >"$D/${name}_left.log" 2>&1 &
  pids+=($!)
  eval exec ip netns exec "$RIGHT_NS" "$RIGHT" $EAL >"$D/${name}_right.log" 2>&1 &
  pids+=($!)
  if [ "$clock" = shared ]; then
    # A hosts node with --clock fabric against these switch nodes, which do
    # not exchange the clock: it waits, then names the switch and why.
    eval timeout 60 ip netns exec "$NH" "$HOSTS --clock fabric --wait 5" $EAL >"$D/noclock.txt" 2>&1
    rc=$?
    [ $rc -eq 2 ] || { cat "$D/noclock.txt"; fail "--clock fabric against switches without it: exit status $rc"; }
    grep -q "still waiting for switch node left at 10.77.0.1:7700 (it has not answered the fabric clock over UDP: does \
its node run with --clock fabric" "$D/noclock.txt" || { cat "$D/noclock.txt"; fail "no clear message for --clock fabric"; }
  fi
  eval timeout 150 ip netns exec "$NH" "$HOSTS" $EAL >"$D/$name.txt" 2>"$D/$name.err" &
  local hosts=$!
  stop_node_when "$hosts" "$D/$name/sw/left.counters" '$1 == "left"' 25165824 "$D/$name/sw/left.ready"
  wait "$hosts"
  rc=$?
  kill -TERM "${pids[@]}"
  wait "${pids[@]}"
  pids=()
  cat "$D/$name.txt" "$D/${name}_left.log" "$D/${name}_right.log"
  [ -n "$stopped" ] || fail "$name: switch left was not stopped (the run ended, or 60 s passed, first)"
  [ $rc -eq 0 ] || { tail -c 800 "$D/$name.err"; fail "$name: hosts node exit status $rc"; }
  # size,time,algbw,busbw,live,pfc,ecn,cnp,drops,lossless,flows,verified,mismatched,complete,...
  awk -F, -v n="$(echo "$sizes" | tr ',' '\n' | wc -l)" 'NR > 1 { rows++
      if ($14 != 1 || $11 < 1 || $12 != $11 || $9 != 0 || $10 != 0) bad = 1 }
    END { exit bad || rows != n }' "$D/rep_$name/live_incast_sweep.csv" ||
    fail "$name: sweep: $(cat "$D/rep_$name/live_incast_sweep.csv")"
  check_incast_time "$D/rep_$name/live_incast_sweep.csv" 2 100
  sums=$(awk -F, 'NR > 1 { s = 0; for (i = 2; i <= NF; i++) s += $i; printf "%.1f ", s }' \
    "$D/rep_$name/live_incast_67108864B_rates.csv")
  echo "$name: samples' Gbit/s: $sums"
}
# gap SUMS: a sample below a twentieth of the largest between two above a
# quarter of it (true if there is one). A quarter, not half: on a loaded box
# the rates can reach their peak only after the stop (seen with two copies of
# this test on 2 cores).
gap() {
  echo "$1" | tr ' ' '\n' | awk 'NF { s[++n] = $1; if ($1 > m) m = $1 }
    END { for (i = 1; i <= n; i++) if (s[i] > m / 4) { if (!f) f = i; l = i }
          for (i = f; i < l; i++) if (s[i] < m / 20) exit 0; exit 1 }'
}

# Each machine's own clock (the default): the hosts node's clock goes on
# while the other machine's switch is stopped, so its samples show the stop
# as a gap.
run_with_stop stop_shared shared 64M
gap "$sums" || fail "--clock shared: no gap in the rates through the stop of a switch on the other machine"
# --clock fabric: the hosts node and the switch nodes exchange their
# machine's time over UDP, so the stopped switch stops the hosts node's
# clock too: no gap, and no sample above the bottleneck. Two sizes: between
# them the hosts node leaves the clock and joins it again.
run_with_stop stop_fabric fabric 1M,64M
gap "$sums" && fail "--clock fabric: a gap in the rates through the stop: the hosts node's clock did not stop"
echo "$sums" | tr ' ' '\n' | awk 'NF && $1 > 105 { exit 1 }' || fail "--clock fabric: a sample above the bottleneck"
answers=$(sed -nE 's/^clock: fabric clock across machines: [0-9]+ questions sent, ([0-9]+) answers, 0 datagrams ignored$/\1/p' \
  "$D/stop_fabric.txt")
[ "${answers:-0}" -gt 100 ] || fail "--clock fabric: the hosts node reports $answers answers"
for sw in left right; do
  grep -qE "^switch $sw: .*\(across machines: [1-9][0-9]* clock questions, [1-9][0-9]* answers, 0 datagrams ignored" \
    "$D/stop_fabric_$sw.log" || fail "--clock fabric: switch $sw does not report its exchanges"
done

# Three machines: switch right moves to a namespace of its own, so the hosts
# node exchanges the clock with two machines and tells each the other's time
# (never its own back). Its cables: h2-right from the hosts, left-right from
# left's namespace, control at 10.77.3.1.
NS2=rocemu-xr-$$
ip netns add "$NS2" || fail "cannot add network namespace $NS2"
netns_made+=("$NS2")
ip link add th2-right netns "$NS2" index 3300 type veth peer name mh2-right netns "$NH" &&
  ip link add lr1 netns "$NS" type veth peer name lr2 netns "$NS2" || fail "cannot make the third machine's veths"
veth_up "$NS2" th2-right && veth_up "$NH" mh2-right && veth_up "$NS" lr1 && veth_up "$NS2" lr2 || fail "cannot bring up its veths"
ip link add c3N netns "$NH" type veth peer name c3S netns "$NS2" || fail "cannot make its control veth pair"
ip -n "$NH" addr add 10.77.3.2/24 dev c3N && ip -n "$NS2" addr add 10.77.3.1/24 dev c3S
ip -n "$NH" link set c3N up && ip -n "$NS2" link set c3S up
LAYOUT=(--machine sw=left --machine sw2=right --machine nics=hosts --address sw=10.77.0.1 --address sw2=10.77.3.1)
RIGHT_NS=$NS2
IFACES='s/<iface:h2-right@sw2>/th2-right/; s/<iface:h2-right@nics>/mh2-right/; s/<iface:left-right@sw>/lr1/; s/<iface:left-right@sw2>/lr2/; '
run_with_stop three fabric 64M
grep -q -- "--control right=10.77.3.1:7701" <<<"$HOSTS" || fail "three machines: hosts command: $HOSTS"
gap "$sums" && fail "three machines: a gap in the rates through the stop"
echo "$sums" | tr ' ' '\n' | awk 'NF && $1 > 105 { exit 1 }' || fail "three machines: a sample above the bottleneck"
for sw in left right; do
  grep -qE "^switch $sw: .*\(across machines: [1-9][0-9]* clock questions, [1-9][0-9]* answers, 0 datagrams ignored" \
    "$D/three_$sw.log" || fail "three machines: switch $sw does not report its exchanges"
done
tx2=$(ip netns exec "$NS" cat /sys/class/net/lr1/statistics/tx_bytes)
[ "$tx2" -ge 67108864 ] || fail "three machines: only $tx2 bytes crossed left-right's veth"
echo "PASS ($tx bytes over nh0-left; three machines: $tx2 over left-right)"
