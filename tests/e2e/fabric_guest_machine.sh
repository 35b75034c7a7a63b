#!/usr/bin/env bash
# A split live fabric across two kernels: this host and a QEMU guest (TCG,
# tests/interop's Debian 6.1 image) as the second machine. The switch nodes
# (left, right) run on the host in the guest's network namespace, the hosts
# node inside the guest. Each NIC cable is its own virtio-net NIC of the guest:
# af_packet on the guest's ethN at one end and, at the other, on the host's tap
# behind that NIC (h0-left, h1-left) or on a veth that a bridge joins to it
# (h2-right: keeps the two switch processes' PACKET_FANOUT group ids apart,
# which DPDK derives from pid ^ ifindex and which met for consecutive pids
# and taps). Control is TCP over the guest's eth0 (10.77.0.2) and its tap
# (10.77.0.1). The guest runs the host's own rocemu binary and libraries
# through a read-only 9p share of / and chroot (guest.sh --host-root), with
# QEMU's -cpu max for DPDK's SSE4.2. The commands are `rocemu fabric plan`'s,
# their <iface:...> placeholders filled in. Rates are scaled down for the
# emulated CPU (--scale, GUEST_FABRIC_SCALE; GUEST_FABRIC_CLOCK=shared runs
# each machine's nodes on a clock of their own instead of plan's default
# --clock fabric).
# Checked: the incast completes, every flow verified, no drop, the counters of
# both switches (read over TCP from the guest) in the hosts node's report, the
# message crossed the guest's NICs (the kernels' counters on both sides), and
# the switch nodes stop cleanly.
# Two kernels, two clocks: h0-left is captured at both ends (--pcap: left
# writes what it receives from h0 on the host's clock, the hosts node what h0
# receives on the guest's). The clock offset the hosts node prints for each
# switch must lie within its stated bound as far as we can know the truth:
# both switches run on one clock, so their bounds meet, and each meets what
# the guest's kernel says of its clock in ICMP timestamp replies
# (icmp_clock.py) before and after the run. The merge command it prints is
# run and the merged capture verified (and the one the hosts node makes
# itself, fetching left's file): 0 ICRC errors, every ACK after the
# WRITE it answers or before it by less than the bound; without the shifts,
# an ACK must come first whenever the offset moves the WRITEs past the
# shortest request-to-response time.
# Then a second layout in the same guest: switch right moves into the guest,
# so the switch-to-switch cable left-right crosses the machines (same checks,
# left-right captured and merged; its WRITEs are on the guest's clock, its
# ACKs on the host's; the hosts node merges it too, reading right's file,
# still being written on its own machine, up to the end of the run).
# Then a third: layout 2's nodes with two cable ends on the guest's NICs as
# PCI devices under DPDK's own PMD (net_virtio on uio_pci_generic, hugepages
# in the guest), as real NICs are driven: the hosts node's end of h0-left and
# switch right's end of left-right. The nodes name each cable's device and
# driver, the incast completes and verifies, the traffic went through both
# devices, and the merged capture verifies. And a fourth: the same with those
# two ends on emulated Intel NICs (QEMU's e1000e, an 82574L, and e1000, an
# 82540EM; the guest's kernel has no driver for them) under DPDK's
# net_e1000_em, the PMD of that silicon rather than a paravirtual one.
# Skipped (77) without root, QEMU or the guest image (its build failing, e.g.
# offline). Usage: fabric_guest_machine.sh ROCEMU REPO_ROOT
set -uo pipefail
ROCEMU=$(readlink -f "$1")
ROOT=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fabric_pcap.sh"
need_root_netns
command -v python3 >/dev/null || skip "needs python3 (tests/interop/install-deps.sh)"
command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86_64 (tests/interop/install-deps.sh)"
[ -e /dev/net/tun ] || skip "needs /dev/net/tun"
. "$ROOT/tests/interop/guest.sh"
T0=$SECONDS
"$ROOT/tests/interop/build-guest.sh" >/tmp/fab_guest_build.$$ 2>&1 ||
  { cat /tmp/fab_guest_build.$$; rm -f /tmp/fab_guest_build.$$; skip "the guest image cannot be built"; }
rm -f /tmp/fab_guest_build.$$
BUILD_S=$((SECONDS - T0))

C=$ROOT/tests/e2e/dumbbell_2to1.yaml
# The guest sees the host's / through its share, but with its own tmpfs on
# /tmp and /run: a checkout there (a CI clone, say) is hidden from the hosts
# node. Its binary (nothing of the build tree is linked dynamically) and the
# fabric file are then run from a copy under /var/tmp, which the guest sees.
BIN_DIR=
for f in "$ROCEMU" "$C"; do
  case "$f" in
    /tmp/*|/run/*)
      [ -n "$BIN_DIR" ] || BIN_DIR=$(mktemp -d /var/tmp/fab_guest_bin.XXXXXX) || fail "cannot make a folder under /var/tmp"
      cp "$f" "$BIN_DIR/" || fail "cannot copy $f to $BIN_DIR"
      ;;
  esac
done
case "$ROCEMU" in /tmp/*|/run/*) ROCEMU=$BIN_DIR/$(basename "$ROCEMU") ;; esac
case "$C" in /tmp/*|/run/*) C=$BIN_DIR/$(basename "$C") ;; esac
SCALE=${GUEST_FABRIC_SCALE:-1500}
SIZE=${GUEST_FABRIC_SIZE:-256K}
CLOCK=${GUEST_FABRIC_CLOCK:-}  # plan --clock; default: plan's (fabric, the clock exchanged between host and guest)
D=$(mktemp -d /tmp/fab_guest.XXXXXX)
pids=()
cleanup() {
  # Never a bare `wait`: QEMU is a child of this shell too.
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null
    wait "${pids[@]}" 2>/dev/null
  fi
  guest_shutdown
  rm -rf "$D"
  [ -z "$BIN_DIR" ] || rm -rf "$BIN_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# With --no-huge the hosts node takes 512 + 40 MB per NIC, and switch right
# in layout 2 (below) 256 + 48 MB per cable port.
GUEST_MEM_MB=${GUEST_MEM_MB:-2048} guest_boot --mtu 9000 --nics 5 --nic-model 4=e1000e --nic-model 5=e1000 \
  --host-root --cpu max ||
  fail "the guest did not boot (see above)"
echo "guest ready in $GUEST_READY_SECONDS s (image build/check $BUILD_S s)"
guest_host_root || fail "cannot mount the host's / in the guest"

# Host side: the control address on eth0's tap; cable taps without address.
guest_ns_exec ip addr add 10.77.0.1/24 dev "$GUEST_TAP" || fail "cannot address $GUEST_TAP"
guest_ns_exec ip link add vr index 2200 mtu 9000 type veth peer name vrb mtu 9000 &&
  guest_ns_exec ip link add brr mtu 9000 type bridge &&
  guest_ns_exec ip link set rxetap3 master brr && guest_ns_exec ip link set vrb master brr ||
  fail "cannot bridge h2-right's tap to a veth"
for i in vr vrb brr; do
  guest_ns_exec sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1"
  guest_ns_exec ip link set "$i" up || fail "cannot bring $i up"
done

# Guest side: NIC i (MAC from guest.sh) carries cable i; its name from sysfs.
guest_ifaces=$(guest_run -t 60 "set -e
  for m in $(guest_nic_mac 1) $(guest_nic_mac 2) $(guest_nic_mac 3); do
    n=\$(grep -lx \"\$m\" /sys/class/net/*/address | cut -d/ -f5)
    echo 1 > /proc/sys/net/ipv6/conf/\$n/disable_ipv6
    ip link set \"\$n\" mtu 9000 up
    echo \$n
  done") || fail "cannot bring up the guest's cable NICs: $guest_ifaces"
read -r G1 G2 G3 <<<"$(echo $guest_ifaces)"
[ -n "$G3" ] || fail "guest NICs: '$guest_ifaces'"
echo "cables: h0-left rxetap1/$G1, h1-left rxetap2/$G2, h2-right vr-brr-rxetap3/$G3"

# Each layout: `fabric plan`'s commands with the cables' devices filled in.
# Layout 1 runs both switches on the host (h2-right over the bridge: vr on
# the host); layout 2 moves right into the guest, so left-right crosses the
# machines instead (vr on the host, the same guest NIC) and h2-right is a
# memif inside the guest.
plan() {
  local file=$1; shift
  "$ROCEMU" fabric plan -c "$C" "$@" --address sw=10.77.0.1 --binary "$ROCEMU" -w incast --sizes "$SIZE" --qps 2 \
    --scale "$SCALE" --timeout 60 ${CLOCK:+--clock "$CLOCK"} >"$file" 2>&1 || { cat "$file"; fail "fabric plan failed"; }
  cat "$file"
}
# node_line PLAN NODE: NODE's command in plan's output PLAN, as printed.
node_line() { grep -A1 "^# machine [a-z]*, node $2\$" "$1" | tail -1; }
# command_of PLAN NODE: that command with its <iface:...> placeholders filled in.
command_of() {
  node_line "$1" "$2" |
    sed -E "s/<iface:h0-left@sw>/rxetap1/; s/<iface:h1-left@sw>/rxetap2/; s/<iface:(h2-right|left-right)@sw>/vr/;
            s/<iface:h0-left@guest>/$G1/; s/<iface:h1-left@guest>/$G2/; s/<iface:(h2-right|left-right)@guest>/$G3/"
}
EAL="-- --log-level lib.eal:error"
# with_eal CMD [OPTS [EAL_ARGS]]: CMD with rocemu's OPTS before its EAL
# arguments (plan ends a PCI NIC's node's command with `-- -a ADDR`), then
# $EAL's and EAL_ARGS.
with_eal() {
  local head=${1%% -- *} tail=
  [ "$head" = "$1" ] || tail=" ${1#* -- }"
  echo "$head${2:+ $2} --$tail ${EAL#-- }${3:+ $3}"
}
REP=$GUEST_SHARE/rep
plan "$D/plan.txt" --machine sw=left,right --machine guest=hosts --link-dir "$D/links" -o "$REP"
HOSTS=$(command_of "$D/plan.txt" hosts)
LEFT=$(command_of "$D/plan.txt" left)
RIGHT=$(command_of "$D/plan.txt" right)
[ -n "$HOSTS" ] && [ -n "$LEFT" ] && [ -n "$RIGHT" ] || fail "plan has no command for every node"
! echo "$HOSTS$LEFT$RIGHT" | grep -q "<" || fail "a placeholder is left"

eval exec ip netns exec "$GUEST_NS" "$LEFT --pcap h0-left" $EAL >"$D/left.log" 2>&1 &
pids+=($!)
eval exec ip netns exec "$GUEST_NS" "$RIGHT" $EAL >"$D/right.log" 2>&1 &
pids+=($!)
# Both kernels' packet counters of every cable device, for a failure report.
diag() {
  local i
  for i in rxetap1 rxetap2 rxetap3 vr vrb brr; do
    echo "host $i: rx $(dev_bytes "$i" rx) B tx $(dev_bytes "$i" tx) B" \
      "rx_dropped $(guest_ns_exec cat "/sys/class/net/$i/statistics/rx_dropped")" \
      "tx_dropped $(guest_ns_exec cat "/sys/class/net/$i/statistics/tx_dropped")"
  done
  guest_ns_exec bridge fdb show br brr | grep -v permanent
  guest_run -t 30 "for i in $G1 $G2 $G3; do echo guest \$i: rx \$(cat /sys/class/net/\$i/statistics/rx_bytes) B tx \$(cat /sys/class/net/\$i/statistics/tx_bytes) B rx_dropped \$(cat /sys/class/net/\$i/statistics/rx_dropped); done"
}
dev_bytes() { guest_ns_exec cat "/sys/class/net/$1/statistics/$2_bytes"; }
guest_rx_bytes() { guest_run -t 30 "cat /sys/class/net/$G3/statistics/rx_bytes"; }
tx0=$(dev_bytes rxetap3 tx)
grx0=$(guest_rx_bytes) || fail "no counter of the guest's $G3"
# This host's CLOCK_REALTIME minus the guest's, bounded by the guest kernel's
# ICMP timestamp replies (whole ms): 'LO HI N' in ns.
icmp_clock() { guest_ns_exec python3 "$ROOT/tests/e2e/icmp_clock.py" 10.77.0.2 24; }
icmp_before=$(icmp_clock) || fail "ICMP timestamps of the guest: $icmp_before"
if [ -n "${GUEST_FABRIC_PCAP:-}" ]; then guest_ns_exec dumpcap -q -i vrb -s 200 -c 50 -w "$GUEST_FABRIC_PCAP" & pids+=($!); fi

# run_hosts N CMD LINK [EAL_ARGS]: the hosts node in the guest, its output in
# $GUEST_SHARE/hostsN.txt and its capture of LINK (in its chroot's tmpfs: the
# link folder is under /tmp) copied to the share.
run_hosts() {
  local n=$1 cmd=$2 link=$3 eal_more=${4:-} rc t=$SECONDS dir
  dir=$(sed -E 's/.*--link-dir ([^ ]*) .*/\1/' <<<"$cmd")
  out=$(guest_run -t 150 "chroot $GUEST_HOST_ROOT $(with_eal "$cmd" "--pcap $link" "$eal_more") >/share/hosts$n.txt 2>/share/hosts$n.err
    rc=\$?; cp '$GUEST_HOST_ROOT$dir/$link@hosts.pcap' /share/ 2>/dev/null; exit \$rc")
  rc=$?
  HOSTS_S=$((SECONDS - t))
  cat "$GUEST_SHARE/hosts$n.txt" 2>/dev/null
  if [ $rc -ne 0 ]; then
    echo "$out"
    tail -c 1500 "$GUEST_SHARE/hosts$n.err" 2>/dev/null
    cat "$D"/*.log "$GUEST_SHARE"/*.log 2>/dev/null
    diag
    [ $rc -eq 124 ] && fail "the hosts node in the guest did not finish within 150 s"
    fail "hosts node in the guest: exit status $rc"
  fi
}
kb=$(( ${SIZE%K} ))
bytes=$((kb * 1024))
# check_report DIR OUT: the incast completed, every flow verified, no drop;
# both switches' counters and every NIC's in the report.
check_report() {
  local csv=$1/live_incast_sweep.csv row
  row=$(grep -E "^ *$bytes " "$2") || fail "no $bytes row in $2"
  IFS=, read -r _ _ _ _ live_us pfc _ _ drops lossless flows verified _ complete _ < <(sed -n 2p "$csv")
  [ "$complete" = 1 ] && [ "$flows" -gt 0 ] && [ "$verified" = "$flows" ] && [ "$drops" = 0 ] && [ "$lossless" = 0 ] ||
    fail "sweep row: $(sed -n 2p "$csv")"
  echo "$row" | grep -q " $flows/$flows$" || fail "not every flow verified: $row"
  local ports=$1/live_incast_${bytes}B_switch_ports.csv nics=$1/live_incast_${bytes}B_nics.csv n
  grep -q "^left,Ethernet0," "$ports" && grep -q "^right,Ethernet0," "$ports" || fail "no counters of both switches in $ports"
  for n in h0 h1 h2; do grep -q "^$n,sent_pkts,[1-9]" "$nics" || fail "no sent_pkts of $n in $nics"; done
}

run_hosts 1 "$HOSTS" h0-left
check_report "$REP" "$GUEST_SHARE/hosts1.txt"
# The receiver h2 is in the guest: two senders' messages left right's port
# through the bridge and the tap into the guest's NIC.
tx=$(( $(dev_bytes rxetap3 tx) - tx0 ))
[ "$tx" -ge $((2 * bytes)) ] || fail "only $tx bytes went to the guest over rxetap3"
grx=$(guest_rx_bytes) || fail "no counter of the guest's $G3"
grx=$((grx - grx0))
[ "$grx" -ge $((2 * bytes)) ] || fail "the guest's $G3 received only $grx bytes"
icmp_after=$(icmp_clock) || fail "ICMP timestamps of the guest: $icmp_after"

kill -TERM "${pids[@]}"
wait "${pids[@]}"
pids=()
for sw in left right; do  # each answered the ARP of a NIC in the guest
  cat "$D/$sw.log"
  grep -q "^switch $sw: .*ARP requests answered [1-9]" "$D/$sw.log" || fail "switch $sw did not stop cleanly"
done

# clock_of OUT SWITCH: the clock hosts node output OUT found over TCP for
# SWITCH: sets off and err (ms), and bound, 'LO HI' in ns: the offset -+ its
# bound, widened by 1 us for the printed values' rounding.
clock_of() {
  local clock
  clock=$(grep "^clock: switch node $2 at 10.77.0.1:770[01]: its CLOCK_REALTIME is " "$1") ||
    fail "no clock line for switch $2 in $1"
  echo "$clock"
  off=$(sed -E 's/.* is ([-+][0-9.]+) ms from .*/\1/' <<<"$clock")
  err=$(sed -E 's/.*\(within ([0-9.]+) ms.*/\1/' <<<"$clock")
  bound=$(awk -v o="$off" -v e="$err" 'BEGIN { printf "%.0f %.0f", (o - e) * 1e6 - 1000, (o + e) * 1e6 + 1000 }')
}
# Two spans that both hold the truth meet.
meet() { awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); exit !(x[1] <= y[2] && y[1] <= x[2]) }'; }
clock_of "$GUEST_SHARE/hosts1.txt" right
right_bound=$bound
clock_of "$GUEST_SHARE/hosts1.txt" left
left_bound=$bound left_off=$off left_err=$err
meet "$left_bound" "$right_bound" || fail "left and right share the host's clock, yet their offsets' bounds do not meet"
for icmp in "$icmp_before" "$icmp_after"; do
  meet "$left_bound" "$icmp" || fail "left's offset bound $left_bound ns does not meet the guest kernel's ICMP bound $icmp"
  meet "$right_bound" "$icmp" || fail "right's offset bound $right_bound ns does not meet the guest kernel's ICMP bound $icmp"
done
echo "clock offset host - guest: ICMP timestamps $icmp_before before, $icmp_after after (ns, probes)"

# check_merge N LINK REMOTE REMOTE_FILE LOCAL_FILE REQUESTS_IN: runs the merge
# hosts node N printed for LINK, whose REMOTE switch's capture is REMOTE_FILE
# and the guest's LOCAL_FILE; the WRITEs are in the `remote` or `local` one.
# Every RoCEv2 packet verifies, and every ACK comes after the WRITE it answers
# or before it by less than the stated bound: the README's promise, and the
# test of the offset against the truth (one that came first by more would
# make the true offset lie outside its bound). Unshifted, the remote file
# moves by the offset: some ACK must come first whenever that puts it past the
# shortest request-to-response gap. Sets frames.
check_merge() {
  local n=$1 link=$2 remote=$3 rfile=$4 lfile=$5 reqs_in=$6 merge m=$D/merge$1 off err bound
  merge=$(grep "^pcap: link $link is captured on more than one machine" "$GUEST_SHARE/hosts$n.txt" |
    sed 's/.*: rocemu pcap/pcap/') || fail "no merge command for $link"
  echo "$merge" | grep -q -- "--shift $link@$remote.pcap=-\?[0-9]" || fail "no shift for $remote's capture: $merge"
  mkdir -p "$m" && cp "$rfile" "$lfile" "$m/" || fail "captures missing: $(find "$D/links"* "$GUEST_SHARE" -name '*.pcap')"
  (cd "$m" && eval "\"$ROCEMU\" $merge") >"$m/merged.txt" 2>&1 || { tail -5 "$m/merged.txt"; fail "the merge failed"; }
  head -1 "$m/merged.txt"
  tail -1 "$m/merged.txt"
  frames=$(sed -nE 's/^# merged ([0-9]+) frames of 2 files.*/\1/p' "$m/merged.txt")
  grep -qE "^[1-9][0-9]* packets, 0 ICRC errors" "$m/merged.txt" || fail "merged capture: $(tail -1 "$m/merged.txt")"
  local writes nresp unmatched early worst gap raw_early raw_worst sign=1
  # h0's WRITEs (4 KiB each; on left-right h1's too) and the ACKs to them.
  writes=$(grep -c " RC_RDMA_WRITE_" "$m/merged.txt")
  [ "$writes" -ge $((bytes / 4096)) ] || { cat "$m/merged.txt"; fail "merged $frames frames, $writes WRITE packets"; }
  clock_of "$GUEST_SHARE/hosts$n.txt" "$remote" >/dev/null
  read -r nresp unmatched early worst gap <<<"$(response_order "$m/merged.txt")"
  [ "$nresp" -gt 0 ] && [ "$unmatched" = 0 ] ||
    { cat "$m/merged.txt"; fail "merged: $nresp ACKs, $unmatched of them answer no WRITE in the file"; }
  awk -v w="$worst" -v e="$err" 'BEGIN { exit !(w * 1000 < e + 0.001) }' ||
    { cat "$m/merged.txt"; fail "merged: an ACK $worst s before its WRITE, beyond $remote's clock bound of $err ms"; }
  echo "merged: $writes WRITE packets, $nresp ACKs, $early before their WRITE (by up to $worst s, within $err ms);" \
    "shortest gap $gap s"
  (cd "$m" && "$ROCEMU" pcap --merge raw.pcap "$(basename "$lfile")" "$(basename "$rfile")") >"$m/raw.txt" 2>&1 ||
    { tail -5 "$m/raw.txt"; fail "the unshifted merge failed"; }
  read -r _ _ raw_early raw_worst _ <<<"$(response_order "$m/raw.txt")"
  [ "$reqs_in" = remote ] || sign=-1
  if awk -v o="$off" -v s="$sign" -v g="$gap" 'BEGIN { exit !(s * o / 1000 > g + 1e-6) }'; then
    [ "$raw_early" -gt 0 ] || fail "unshifted, with $remote's clock $off ms off, still no ACK before its WRITE"
    echo "unshifted: $raw_early of $nresp ACKs before their WRITE (by up to $raw_worst s)"
  else
    echo "unshifted: $raw_early ACKs before their WRITE ($remote's file moved by $off ms does not put one first)"
  fi
}
# Left captures what it receives from h0 (the WRITEs), the guest what h0
# receives (the ACKs).
check_merge 1 h0-left left "$D/links/sw/h0-left@left.pcap" "$GUEST_SHARE/h0-left@hosts.pcap" remote
frames1=$frames
# The hosts node merged them too, left's file fetched over the control
# channel after the run, into its report.
grep -qE "^pcap: [0-9]+ frames of link h0-left in .*/live_incast_h0-left.pcap: merged on this machine's clock" \
  "$GUEST_SHARE/hosts1.txt" || fail "the hosts node did not merge h0-left's captures itself"
"$ROCEMU" pcap "$REP/live_incast_h0-left.pcap" >"$D/auto1.txt" 2>&1 &&
  grep -qE "^[1-9][0-9]* packets, 0 ICRC errors" "$D/auto1.txt" || fail "the hosts node's merge: $(tail -1 "$D/auto1.txt")"
goodput() {  # the fabric clock leaves out the gaps in which a node was not scheduled ("held back")
  local held_ms
  held_ms=$(sed -n 's/.*fabric clock held back \([0-9.]*\) ms.*/\1/p' "$1" | head -1)
  awk -v b="$((flows * bytes))" -v us="$live_us" -v h="${held_ms:-0}" \
    'BEGIN { printf "%.1f Mbit/s on the fabric clock, %.1f Mbit/s in real time (+%s ms held back)", b * 8 / us, b * 8 / (us + h * 1000), h }'
}
summary1="incast $flows x $SIZE in $live_us us live: goodput $(goodput "$GUEST_SHARE/hosts1.txt") into the guest;\
 $tx bytes over rxetap3, the guest's $G3 received $grx; left's clock $left_off ms within $left_err ms;\
 $frames1 frames of h0-left merged; hosts node in the guest $HOSTS_S s"
echo "layout 1 (switches on the host): $summary1"

# Layout 2: right in the guest with the hosts node, so the switch-to-switch
# cable left-right crosses the machines (af_packet on the host's vr, bridged
# to rxetap3, and on the guest's third NIC) and h2-right is a memif inside the
# guest. The hosts node reads right's state from their link folder and left's
# over TCP. left-right is captured at both ends: right writes what it receives
# from left (the WRITEs, on the guest's clock), left what it receives from
# right (the ACKs, on the host's): the other way round from h0-left.
REP2=$GUEST_SHARE/rep2
plan "$D/plan2.txt" --machine sw=left --machine guest=hosts,right --link-dir "$D/links2" -o "$REP2"
HOSTS=$(command_of "$D/plan2.txt" hosts)
LEFT=$(command_of "$D/plan2.txt" left)
RIGHT=$(command_of "$D/plan2.txt" right)
[ -n "$HOSTS" ] && [ -n "$LEFT" ] && [ -n "$RIGHT" ] || fail "plan 2 has no command for every node"
! echo "$HOSTS$LEFT$RIGHT" | grep -q "<" || fail "a placeholder is left in plan 2"
eval exec ip netns exec "$GUEST_NS" "$LEFT --pcap left-right" $EAL >"$D/left2.log" 2>&1 &
pids+=($!)
# chroot execs rocemu: the pid it leaves is the switch node's.
guest_spawn right "chroot $GUEST_HOST_ROOT $RIGHT --pcap left-right $EAL >/share/right2.log 2>&1 &
  echo \$! >/share/right2.pid; wait \$!" || fail "cannot start switch right in the guest"
tx0=$(dev_bytes vr tx)
grx0=$(guest_rx_bytes) || fail "no counter of the guest's $G3"
run_hosts 2 "$HOSTS" left-right
check_report "$REP2" "$GUEST_SHARE/hosts2.txt"
# Both senders' messages crossed from left on the host to right in the guest.
tx=$(( $(dev_bytes vr tx) - tx0 ))
[ "$tx" -ge $((2 * bytes)) ] || fail "only $tx bytes went from left to the guest over vr"
grx=$(guest_rx_bytes) || fail "no counter of the guest's $G3"
grx=$((grx - grx0))
[ "$grx" -ge $((2 * bytes)) ] || fail "the guest's $G3 received only $grx bytes from left"
icmp_after2=$(icmp_clock) || fail "ICMP timestamps of the guest: $icmp_after2"
guest_run -t 30 "kill -TERM \$(cat /share/right2.pid)" || fail "cannot stop switch right in the guest"
guest_wait right 60 || { cat "$GUEST_SHARE/right2.log"; fail "switch right in the guest did not stop"; }
kill -TERM "${pids[@]}"
wait "${pids[@]}"
pids=()
cat "$D/left2.log" "$GUEST_SHARE/right2.log"
grep -q "^switch left: .*ARP requests answered [1-9]" "$D/left2.log" || fail "switch left did not stop cleanly"
grep -q "^switch right: " "$GUEST_SHARE/right2.log" || fail "switch right in the guest did not stop cleanly"
! grep -q "^clock: switch node right" "$GUEST_SHARE/hosts2.txt" || fail "a clock offset for right, on the hosts node's machine"
clock_of "$GUEST_SHARE/hosts2.txt" left
left2_off=$off left2_err=$err
for icmp in "$icmp_after" "$icmp_after2"; do
  meet "$bound" "$icmp" || fail "left's offset bound $bound ns does not meet the guest kernel's ICMP bound $icmp"
done
echo "clock offset host - guest: ICMP timestamps $icmp_after2 after layout 2 (ns, probes)"
guest_run -t 30 "cp '$GUEST_HOST_ROOT$D/links2/guest/left-right@right.pcap' /share/" || fail "no capture by right in the guest"
check_merge 2 left-right left "$D/links2/sw/left-right@left.pcap" "$GUEST_SHARE/left-right@right.pcap" local
# The hosts node merged them itself: left's file fetched over the control
# channel, right's (on its own machine, still running) read up to the end of
# the run, which holds every WRITE of both senders (they were all answered).
grep -qE "^pcap: [0-9]+ frames of link left-right in .*/live_incast_left-right.pcap: merged on this machine's clock \(within [0-9.]+ ms\) from 2 files, left's fetched over the control channel, right's read from this machine's link folder\$" \
  "$GUEST_SHARE/hosts2.txt" || fail "the hosts node did not merge left-right's captures itself: $(grep ^pcap: "$GUEST_SHARE/hosts2.txt")"
"$ROCEMU" pcap "$REP2/live_incast_left-right.pcap" >"$D/auto2.txt" 2>&1 &&
  grep -qE "^[1-9][0-9]* packets, 0 ICRC errors" "$D/auto2.txt" || fail "the hosts node's merge 2: $(tail -1 "$D/auto2.txt")"
auto_writes=$(grep -c " RC_RDMA_WRITE_" "$D/auto2.txt")
[ "$auto_writes" -ge $((flows * bytes / 4096)) ] || fail "the hosts node's merge 2 has $auto_writes WRITE packets"
guest_run -t 30 "! ls '$GUEST_HOST_ROOT$D/links2/guest/' | grep -q '\.run\$'" || fail "the copy of right's capture is left"
echo "hosts node's merge of left-right: $(grep -E "^[0-9]+ packets" "$D/auto2.txt" | head -1); $auto_writes WRITE packets"
echo "layout 2 (right in the guest): incast $flows x $SIZE in $live_us us live: goodput" \
  "$(goodput "$GUEST_SHARE/hosts2.txt"); $tx bytes from left over vr, the guest's $G3 received $grx;" \
  "left's clock $left2_off ms within $left2_err ms; $frames frames of left-right merged; hosts node in the guest $HOSTS_S s"

# Layouts 3 and 4: layout 2's nodes (left on the host; the hosts node and
# right in the guest), with two cable ends on PCI NICs driven by DPDK's own
# PMD, as on real NICs: the hosts node's end of h0-left (a NIC) and right's
# end of left-right (a switch port). Layout 3 puts them on two guest NICs
# that were virtio-net (they leave the kernel's virtio-pci for
# uio_pci_generic; net_virtio); layout 4 on two emulated Intel NICs, an
# 82574L (QEMU's e1000e) and an 82540EM (e1000), which the guest's kernel has
# no driver for, under DPDK's net_e1000_em: the driver of that silicon, with
# its registers and descriptor rings, not a paravirtual device. Each node
# probes its own with `-a ADDR`. uio needs physical addresses (IOVA as PA),
# so both nodes run on hugepages (--huge-dir).
# The guest-side lines that bind the device at $a to uio_pci_generic and
# print its address.
UIO_BIND='echo uio_pci_generic > /sys/bus/pci/devices/$a/driver_override
    echo $a > /sys/bus/pci/drivers_probe
    [ $(basename $(readlink /sys/bus/pci/devices/$a/driver)) = uio_pci_generic ]
    echo $a'
to_uio() {  # to_uio IFACE: its PCI address, the device bound to uio_pci_generic
  guest_run -t 60 "set -e
    a=\$(basename \$(readlink -f /sys/class/net/$1/device/..))
    echo \$a > /sys/bus/pci/devices/\$a/driver/unbind
    [ ! -e /sys/class/net/$1 ]
    $UIO_BIND"
}
# id_to_uio VENDOR:DEVICE: the address of the one guest PCI device with that
# ID (no kernel driver holds it), bound to uio_pci_generic.
id_to_uio() {
  guest_run -t 60 "set -e
    a=; for d in /sys/bus/pci/devices/*; do
      [ \$(cat \$d/vendor):\$(cat \$d/device) = 0x${1%:*}:0x${1#*:} ] && { [ -z \"\$a\" ] || exit 3; a=\$(basename \$d); }
    done
    [ -n \"\$a\" ] && [ ! -e /sys/bus/pci/devices/\$a/driver ]
    $UIO_BIND"
}
PCI1=$(to_uio "$G1") || fail "cannot give the guest's $G1 to uio_pci_generic: $PCI1"
PCI3=$(to_uio "$G3") || fail "cannot give the guest's $G3 to uio_pci_generic: $PCI3"
PCI4=$(id_to_uio 8086:10d3) || fail "cannot give the guest's 82574L (8086:10d3) to uio_pci_generic: $PCI4"
PCI5=$(id_to_uio 8086:100e) || fail "cannot give the guest's 82540EM (8086:100e) to uio_pci_generic: $PCI5"
out=$(guest_run -t 60 "set -e
  echo 520 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
  [ \$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) = 520 ]
  mkdir -p $GUEST_HOST_ROOT/run/huge
  mount -t hugetlbfs -o pagesize=2M nodev $GUEST_HOST_ROOT/run/huge") ||
  fail "cannot reserve 520 hugepages in the guest: $out"
echo "in the guest on uio_pci_generic: virtio-net $PCI1 and $PCI3, 82574L $PCI4, 82540EM $PCI5"

# pci_layout N PCI_H0 PCI_LR TAP_H0 DEV_LR DRIVER: layout N with h0's end of
# h0-left on guest device PCI_H0, whose host end is tap TAP_H0, and right's
# end of left-right on PCI_LR, left's end on the host's DEV_LR; both devices
# under DPDK's DRIVER. Checked: every end from plan's --device, the incast
# completes and verifies, each node names each cable's device and driver,
# the traffic went through both devices, and the hosts node's merge of
# h0-left verifies. Sets summary.
pci_layout() {
  local n=$1 p_h0=$2 p_lr=$3 tap_h0=$4 dev_lr=$5 drv=$6 rep=$GUEST_SHARE/rep$1 rx0 tx0 rx tx
  plan "$D/plan$n.txt" --machine sw=left --machine guest=hosts,right --link-dir "$D/links$n" -o "$rep" \
    --device h0-left@sw="$tap_h0" --device h1-left@sw=rxetap2 --device left-right@sw="$dev_lr" \
    --device h0-left@guest="$p_h0" --device h1-left@guest="$G2" --device left-right@guest="$p_lr" >/dev/null
  ! grep -q "<iface:\|replace each" "$D/plan$n.txt" || { cat "$D/plan$n.txt"; fail "plan $n left a placeholder"; }
  grep -q "^# A PCI NIC must be bound to vfio-pci or uio_pci_generic" "$D/plan$n.txt" ||
    { cat "$D/plan$n.txt"; fail "plan $n does not say how a PCI NIC is bound"; }
  HOSTS=$(node_line "$D/plan$n.txt" hosts)
  LEFT=$(node_line "$D/plan$n.txt" left)
  RIGHT=$(node_line "$D/plan$n.txt" right)
  echo "$HOSTS" | grep -q -- "--port h0-left=$p_h0 .* -- -a $p_h0\$" || fail "no PCI port in the hosts node's command: $HOSTS"
  echo "$RIGHT" | grep -q -- "--port left-right=$p_lr -- -a $p_lr\$" || fail "no PCI port in switch right's command: $RIGHT"
  echo "$LEFT" | grep -q -- "iface=$tap_h0,.*iface=rxetap2,.*iface=$dev_lr," || fail "left's interfaces: $LEFT"
  eval exec ip netns exec "$GUEST_NS" "$LEFT --pcap h0-left" $EAL >"$D/left$n.log" 2>&1 &
  pids+=($!)
  guest_spawn "right$n" "chroot $GUEST_HOST_ROOT $(with_eal "$RIGHT" "" "--huge-dir /run/huge") >/share/right$n.log 2>&1 &
    echo \$! >/share/right$n.pid; wait \$!" || fail "cannot start switch right in the guest (layout $n)"
  rx0=$(dev_bytes "$tap_h0" rx)
  tx0=$(dev_bytes "$dev_lr" tx)
  run_hosts "$n" "$HOSTS" h0-left "--huge-dir /run/huge"
  check_report "$rep" "$GUEST_SHARE/hosts$n.txt"
  grep -qx "cable h0-left: NIC h0 on $p_h0 ($drv)" "$GUEST_SHARE/hosts$n.txt" ||
    fail "the hosts node does not say h0 is on $p_h0 under $drv: $(grep ^cable "$GUEST_SHARE/hosts$n.txt")"
  grep -qx "cable h1-left: NIC h1 on net_af_packet0 (net_af_packet)" "$GUEST_SHARE/hosts$n.txt" ||
    fail "the hosts node does not say h1 is on af_packet: $(grep ^cable "$GUEST_SHARE/hosts$n.txt")"
  # h0's WRITEs left the guest through one PCI device, into the host's tap;
  # both senders' messages came back into the guest through the other.
  rx=$(( $(dev_bytes "$tap_h0" rx) - rx0 ))
  [ "$rx" -ge "$bytes" ] || fail "only $rx bytes came out of the guest's PCI device $p_h0 over $tap_h0"
  tx=$(( $(dev_bytes "$dev_lr" tx) - tx0 ))
  [ "$tx" -ge $((2 * bytes)) ] || fail "only $tx bytes went from left to $p_lr in the guest over $dev_lr"
  guest_run -t 30 "kill -TERM \$(cat /share/right$n.pid)" || fail "cannot stop switch right in the guest"
  guest_wait "right$n" 60 || { cat "$GUEST_SHARE/right$n.log"; fail "switch right in the guest did not stop (layout $n)"; }
  kill -TERM "${pids[@]}"
  wait "${pids[@]}"
  pids=()
  grep -qE "^cable left-right: right:Ethernet[0-9]+ on $p_lr \($drv\)\$" "$GUEST_SHARE/right$n.log" ||
    { cat "$GUEST_SHARE/right$n.log"; fail "switch right does not say left-right is on $p_lr under $drv"; }
  grep -q "^switch right: " "$GUEST_SHARE/right$n.log" || fail "switch right in the guest did not stop cleanly (layout $n)"
  grep -qx "cable h0-left: left:Ethernet0 on net_af_packet0 (net_af_packet)" "$D/left$n.log" ||
    { cat "$D/left$n.log"; fail "switch left does not name h0-left's device"; }
  grep -q "^switch left: .*ARP requests answered [1-9]" "$D/left$n.log" || fail "switch left did not stop cleanly (layout $n)"
  # The hosts node's merge of h0-left (the WRITEs captured by left on the
  # host, the ACKs by the hosts node on the PCI port): every packet verifies.
  "$ROCEMU" pcap "$rep/live_incast_h0-left.pcap" >"$D/auto$n.txt" 2>&1 &&
    grep -qE "^[1-9][0-9]* packets, 0 ICRC errors" "$D/auto$n.txt" || fail "the hosts node's merge $n: $(tail -1 "$D/auto$n.txt")"
  local pci_writes pci_acks
  pci_writes=$(grep -c " RC_RDMA_WRITE_" "$D/auto$n.txt")
  pci_acks=$(grep -c " RC_ACKNOWLEDGE" "$D/auto$n.txt")
  [ "$pci_writes" -ge $((bytes / 4096)) ] && [ "$pci_acks" -gt 0 ] ||
    fail "the hosts node's merge $n has $pci_writes WRITE packets and $pci_acks ACKs"
  summary="incast $flows x $SIZE in $live_us us live, h0 on PCI $p_h0 and right's left-right port on PCI $p_lr\
 ($drv, uio_pci_generic, hugepages): $rx bytes out of $p_h0 over $tap_h0, $tx bytes over $dev_lr into $p_lr;\
 h0-left merged: $pci_writes WRITEs, $pci_acks ACKs, 0 ICRC errors; hosts node in the guest $HOSTS_S s"
  echo "layout $n: $summary"
}
pci_layout 3 "$PCI1" "$PCI3" rxetap1 vr net_virtio
summary3=$summary
pci_layout 4 "$PCI4" "$PCI5" rxetap4 rxetap5 net_e1000_em
summary4=$summary
echo "PASS (scale 1:$SCALE: host and fabric links $(awk -v s="$SCALE" 'BEGIN { printf "%.1f", 100000 / s }') Mbit/s;" \
  "layout 1: $summary1; layout 2 as above; layout 3: $summary3; layout 4: $summary4;" \
  "guest booted in $GUEST_READY_SECONDS s, total $((SECONDS - T0)) s; load average $(cut -d' ' -f1-3 /proc/loadavg))"
