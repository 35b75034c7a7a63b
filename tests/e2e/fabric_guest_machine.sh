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
# emulated CPU (--scale, GUEST_FABRIC_SCALE).
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
# run and the merged capture verified: every ACK after the WRITE it answers,
# 0 ICRC errors; without the shifts, a response must come first whenever the
# offset exceeds the shortest request-to-response time.
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

# The hosts node takes 512 + 40 MB per NIC with --no-huge.
GUEST_MEM_MB=${GUEST_MEM_MB:-1536} guest_boot --mtu 9000 --nics 3 --host-root --cpu max ||
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

REP=$GUEST_SHARE/rep
"$ROCEMU" fabric plan -c "$C" --machine sw=left,right --machine guest=hosts --address sw=10.77.0.1 \
  --link-dir "$D/links" --binary "$ROCEMU" -w incast --sizes "$SIZE" --qps 2 --scale "$SCALE" --timeout 60 \
  -o "$REP" >"$D/plan.txt" 2>&1 || { cat "$D/plan.txt"; fail "fabric plan failed"; }
cat "$D/plan.txt"
command_of() {
  grep -A1 "^# machine [a-z]*, node $1\$" "$D/plan.txt" | tail -1 |
    sed -E "s/<iface:h0-left@sw>/rxetap1/; s/<iface:h1-left@sw>/rxetap2/; s/<iface:h2-right@sw>/vr/;
            s/<iface:h0-left@guest>/$G1/; s/<iface:h1-left@guest>/$G2/; s/<iface:h2-right@guest>/$G3/"
}
HOSTS=$(command_of hosts)
LEFT=$(command_of left)
RIGHT=$(command_of right)
[ -n "$HOSTS" ] && [ -n "$LEFT" ] && [ -n "$RIGHT" ] || fail "plan has no command for every node"
! echo "$HOSTS$LEFT$RIGHT" | grep -q "<" || fail "a placeholder is left"
EAL="-- --log-level lib.eal:error"

eval exec ip netns exec "$GUEST_NS" "$LEFT --pcap h0-left" $EAL >"$D/left.log" 2>&1 &
pids+=($!)
eval exec ip netns exec "$GUEST_NS" "$RIGHT" $EAL >"$D/right.log" 2>&1 &
pids+=($!)
# Both kernels' packet counters of every cable device, for a failure report.
diag() {
  local i
  for i in rxetap1 rxetap2 rxetap3 vr vrb brr; do
    echo "host $i: rx $(tap_bytes "$i" rx) B tx $(tap_bytes "$i" tx) B" \
      "rx_dropped $(guest_ns_exec cat "/sys/class/net/$i/statistics/rx_dropped")" \
      "tx_dropped $(guest_ns_exec cat "/sys/class/net/$i/statistics/tx_dropped")"
  done
  guest_ns_exec bridge fdb show br brr | grep -v permanent
  guest_run -t 30 "for i in $G1 $G2 $G3; do echo guest \$i: rx \$(cat /sys/class/net/\$i/statistics/rx_bytes) B tx \$(cat /sys/class/net/\$i/statistics/tx_bytes) B rx_dropped \$(cat /sys/class/net/\$i/statistics/rx_dropped); done"
}
tap_bytes() { guest_ns_exec cat "/sys/class/net/$1/statistics/$2_bytes"; }
tx0=$(tap_bytes rxetap3 tx)
# This host's CLOCK_REALTIME minus the guest's, bounded by the guest kernel's
# ICMP timestamp replies (whole ms): 'LO HI N' in ns.
icmp_clock() { guest_ns_exec python3 "$ROOT/tests/e2e/icmp_clock.py" 10.77.0.2 24; }
icmp_before=$(icmp_clock) || fail "ICMP timestamps of the guest: $icmp_before"
if [ -n "${GUEST_FABRIC_PCAP:-}" ]; then guest_ns_exec dumpcap -q -i vrb -s 200 -c 50 -w "$GUEST_FABRIC_PCAP" & pids+=($!); fi
T1=$SECONDS
# The guest's capture is in its chroot's tmpfs (the link folder is under
# /tmp): copied to the share.
out=$(guest_run -t 150 "chroot $GUEST_HOST_ROOT $HOSTS --pcap h0-left $EAL >/share/hosts.txt 2>/share/hosts.err
  rc=\$?; cp '$GUEST_HOST_ROOT$D/links/guest/h0-left@hosts.pcap' /share/; exit \$rc")
rc=$?
HOSTS_S=$((SECONDS - T1))
cat "$GUEST_SHARE/hosts.txt" 2>/dev/null
if [ $rc -ne 0 ]; then
  echo "$out"
  tail -c 1500 "$GUEST_SHARE/hosts.err" 2>/dev/null
  cat "$D/left.log" "$D/right.log"
  diag
  [ $rc -eq 124 ] && fail "the hosts node in the guest did not finish within 150 s"
  fail "hosts node in the guest: exit status $rc"
fi
kb=$(( ${SIZE%K} ))
bytes=$((kb * 1024))
row=$(grep -E "^ *$bytes " "$GUEST_SHARE/hosts.txt") || fail "no $bytes row"
csv=$REP/live_incast_sweep.csv
IFS=, read -r _ _ _ _ _ pfc _ _ drops lossless flows verified _ complete _ < <(sed -n 2p "$csv")
[ "$complete" = 1 ] && [ "$flows" -gt 0 ] && [ "$verified" = "$flows" ] && [ "$drops" = 0 ] && [ "$lossless" = 0 ] ||
  fail "sweep row: $(sed -n 2p "$csv")"
echo "$row" | grep -q " $flows/$flows$" || fail "not every flow verified: $row"
ports=$REP/live_incast_${bytes}B_switch_ports.csv
grep -q "^left,Ethernet0," "$ports" && grep -q "^right,Ethernet0," "$ports" || fail "no counters of both switches in $ports"
# and the guest side's: every NIC's, in the same report.
nics=$REP/live_incast_${bytes}B_nics.csv
for n in h0 h1 h2; do grep -q "^$n,sent_pkts,[1-9]" "$nics" || fail "no sent_pkts of $n in $nics"; done
# The receiver h2 is in the guest: two senders' messages left right's port
# through the bridge and the tap into the guest's NIC.
tx=$(( $(tap_bytes rxetap3 tx) - tx0 ))
[ "$tx" -ge $((2 * bytes)) ] || fail "only $tx bytes went to the guest over rxetap3"
grx=$(guest_run -t 30 "cat /sys/class/net/$G3/statistics/rx_bytes") || fail "no guest counter"
[ "$grx" -ge $((2 * bytes)) ] || fail "the guest's $G3 received only $grx bytes"

icmp_after=$(icmp_clock) || fail "ICMP timestamps of the guest: $icmp_after"

kill -TERM "${pids[@]}"
wait "${pids[@]}"
pids=()
for sw in left right; do  # each answered the ARP of a NIC in the guest
  cat "$D/$sw.log"
  grep -q "^switch $sw: .*ARP requests answered [1-9]" "$D/$sw.log" || fail "switch $sw did not stop cleanly"
done

# Each switch's clock as the hosts node found it over TCP, as 'LO HI' in ns:
# the offset -+ its bound, widened by 1 us for the printed values' rounding.
bounds=()
for sw in left right; do
  clock=$(grep "^clock: switch node $sw at 10.77.0.1:770[01]: its CLOCK_REALTIME is " "$GUEST_SHARE/hosts.txt") ||
    fail "no clock line for switch $sw"
  echo "$clock"
  off=$(sed -E 's/.* is ([-+][0-9.]+) ms from .*/\1/' <<<"$clock")
  err=$(sed -E 's/.*\(within ([0-9.]+) ms.*/\1/' <<<"$clock")
  bounds+=("$(awk -v o="$off" -v e="$err" 'BEGIN { printf "%.0f %.0f", (o - e) * 1e6 - 1000, (o + e) * 1e6 + 1000 }')")
  [ "$sw" = left ] && { left_off=$off; left_err=$err; }
done
# Two spans that both hold the truth meet.
meet() { awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); exit !(x[1] <= y[2] && y[1] <= x[2]) }'; }
meet "${bounds[0]}" "${bounds[1]}" || fail "left and right share the host's clock, yet their offsets' bounds do not meet"
for icmp in "$icmp_before" "$icmp_after"; do
  meet "${bounds[0]}" "$icmp" || fail "left's offset bound ${bounds[0]} ns does not meet the guest kernel's ICMP bound $icmp"
  meet "${bounds[1]}" "$icmp" || fail "right's offset bound ${bounds[1]} ns does not meet the guest kernel's ICMP bound $icmp"
done
echo "clock offset host - guest: ICMP timestamps $icmp_before before, $icmp_after after (ns, probes)"

# The merge the hosts node printed, run where both files are (left's is whole
# once its node has stopped).
merge=$(grep "^pcap: link h0-left is captured on more than one machine" "$GUEST_SHARE/hosts.txt" |
  sed 's/.*: rocemu pcap/pcap/') || fail "no merge command for h0-left"
echo "$merge" | grep -q -- "--shift h0-left@left.pcap=-\?[0-9]" || fail "no shift for left's capture: $merge"
mkdir -p "$D/merge" && cp "$D/links/sw/h0-left@left.pcap" "$GUEST_SHARE/h0-left@hosts.pcap" "$D/merge/" ||
  fail "captures missing: $(find "$D/links" "$GUEST_SHARE" -name '*.pcap')"
(cd "$D/merge" && eval "\"$ROCEMU\" $merge") >"$D/merge.txt" 2>&1 || { tail -5 "$D/merge.txt"; fail "the merge failed"; }
head -1 "$D/merge.txt"
tail -1 "$D/merge.txt"
frames=$(sed -nE 's/^# merged ([0-9]+) frames of 2 files.*/\1/p' "$D/merge.txt")
grep -qE "^[1-9][0-9]* packets, 0 ICRC errors" "$D/merge.txt" || fail "merged capture: $(tail -1 "$D/merge.txt")"
# h0's WRITEs (4 KiB each, captured by left) and the ACKs to h0 (by the guest).
writes=$(grep -c " RC_RDMA_WRITE_" "$D/merge.txt")
[ "$writes" -ge $((bytes / 4096)) ] || { cat "$D/merge.txt"; fail "merged $frames frames, $writes WRITE packets of h0"; }
read -r nresp unmatched early worst gap <<<"$(response_order "$D/merge.txt")"
[ "$nresp" -gt 0 ] && [ "$unmatched" = 0 ] || { cat "$D/merge.txt"; fail "merged: $nresp ACKs, $unmatched of them answer no WRITE in the file"; }
[ "$early" = 0 ] || { cat "$D/merge.txt"; fail "merged: $early of $nresp ACKs before the WRITE they answer (by up to $worst s)"; }
echo "merged: $writes WRITE packets, $nresp ACKs, each after its WRITE (shortest gap $gap s)"
# Unshifted, left's WRITEs move later by the offset: some ACK comes first
# whenever the offset exceeds the shortest gap. Only then is it asserted.
(cd "$D/merge" && "$ROCEMU" pcap --merge raw.pcap h0-left@hosts.pcap h0-left@left.pcap) >"$D/raw.txt" 2>&1 ||
  { tail -5 "$D/raw.txt"; fail "the unshifted merge failed"; }
read -r _ _ raw_early raw_worst _ <<<"$(response_order "$D/raw.txt")"
if awk -v o="$left_off" -v g="$gap" 'BEGIN { exit !(o / 1000 > g + 1e-6) }'; then
  [ "$raw_early" -gt 0 ] || fail "unshifted, with left's clock $left_off ms off, still no ACK before its WRITE"
  echo "unshifted: $raw_early of $nresp ACKs before their WRITE (by up to $raw_worst s)"
else
  echo "unshifted: left's offset $left_off ms is within the shortest gap; $raw_early ACKs before their WRITE"
fi
live_us=$(sed -n 2p "$csv" | cut -d, -f5)
# The fabric clock leaves out the gaps in which a node was not scheduled
# ("held back"); real time is the sum.
held_ms=$(sed -n 's/.*fabric clock held back \([0-9.]*\) ms.*/\1/p' "$GUEST_SHARE/hosts.txt" | head -1)
goodput=$(awk -v b="$((flows * bytes))" -v us="$live_us" -v h="${held_ms:-0}" \
  'BEGIN { printf "%.1f Mbit/s on the fabric clock, %.1f Mbit/s in real time (+%s ms held back)", b * 8 / us, b * 8 / (us + h * 1000), h }')
echo "PASS (scale 1:$SCALE: host and fabric links $(awk -v s="$SCALE" 'BEGIN { printf "%.1f", 100000 / s }') Mbit/s;" \
  "incast $flows x $SIZE in $live_us us live: goodput $goodput into the guest;" \
  "$tx bytes over rxetap3, the guest's $G3 received $grx; left's clock $left_off ms within $left_err ms;" \
  "$frames frames of h0-left merged; hosts node in the guest ${HOSTS_S} s," \
  "guest booted in $GUEST_READY_SECONDS s, total $((SECONDS - T0)) s; load average $(cut -d' ' -f1-3 /proc/loadavg))"
