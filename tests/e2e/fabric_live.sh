#!/usr/bin/env bash
# rocemu fabric run --live on the command line: the 8:1 incast dumbbell
# (configs/fabrics/incast.yaml) in one process on DPDK. Every flow completes
# with its bytes verified, the left switch sends PFC, nothing lossless is
# dropped and no NIC drops (at 4M --qps 8 and 1M --qps 2), the report folder has its CSVs (per-flow rates at
# their share, senders paused, a queue built) and plots, --pcap h1-left captures that
# cable and only it, no QP retransmits (the ACK timeout follows the scaled
# round trip) while the unscaled exponent (14, 67 ms) makes the same incast
# retransmit, SIGINT in a long size keeps the sizes before it, and bad
# options (an unknown --pcap link) are refused, as is a capture its file
# cannot take.
# Usage: fabric_live.sh ROCEMU REPO_ROOT
set -uo pipefail
ROCEMU=$1
ROOT=$2
. "$ROOT/tests/e2e/lib.sh"
scratch_dir fab_live_e2e
source "$ROOT/tests/e2e/fabric_pcap.sh"
source "$ROOT/tests/e2e/fabric_checks.sh"

"$ROCEMU" fabric run --live -c "$ROOT/configs/fabrics/incast.yaml" -w incast --sizes 4M --qps 8 -o "$OUT/rep" \
  --pcap h1-left -- --log-level lib.eal:error >"$OUT/out.txt" 2>"$OUT/err.txt"
rc=$?
cat "$OUT/out.txt"
[ $rc -eq 0 ] || { cat "$OUT/err.txt"; fail "exit status $rc"; }
grep -q "live, scale 1:225" "$OUT/out.txt" || fail "no scale factor in the table title"
row=$(grep -E "^ +4194304 " "$OUT/out.txt") || fail "no 4194304 row"
echo "$row" | grep -q " 8/8$" || fail "not every flow verified: $row"
grep -q "live incast 4.0 MiB" "$OUT/err.txt" || fail "no progress line"
sweep="$OUT/rep/live_incast_sweep.csv"
[ -f "$sweep" ] || fail "no $sweep"
head -1 "$sweep" | grep -q "^size_bytes,time_us,algbw_gbs,busbw_gbs,live_time_us,pfc,ecn,cnp,drops,lossless_drops" ||
  fail "sweep CSV header"
IFS=, read -r size _ algbw _ _ pfc _ _ drops lossless flows verified _ complete _ < <(sed -n 2p "$sweep")
[ "$size" = 4194304 ] && [ "$complete" = 1 ] && [ "$flows" = 8 ] && [ "$verified" = 8 ] || fail "sweep row: $(sed -n 2p "$sweep")"
[ "$pfc" -gt 0 ] || fail "no PFC frame at an 8:1 incast with 64 QPs"
[ "$lossless" = 0 ] && [ "$drops" = 0 ] || fail "drops $drops, lossless drops $lossless"
for f in flows totals switch_ports nics; do
  [ -s "$OUT/rep/live_incast_4194304B_$f.csv" ] || fail "no $f CSV"
done
grep -q "^left,Ethernet0,pfc_tx_xoff_p3," "$OUT/rep/live_incast_4194304B_switch_ports.csv" || fail "no XOFF from left:Ethernet0"
check_incast_series "$OUT/rep/live_incast_4194304B"
check_no_nic_drops "$OUT/rep" 4194304
check_incast_time "$sweep" 8 100
# Two sizes on the same QPs: the second size's series counts its own bytes
# only (its first samples once read the first size's bytes too, 2.9x the
# bottleneck).
"$ROCEMU" fabric run --live -c "$ROOT/configs/fabrics/incast.yaml" -w incast --sizes 1M,4M --qps 8 -o "$OUT/rep_two" \
  -- --log-level lib.eal:error >"$OUT/two.txt" 2>&1 || { cat "$OUT/two.txt"; fail "two sizes: exit status $?"; }
check_incast_series "$OUT/rep_two/live_incast_4194304B"
check_incast_time "$OUT/rep_two/live_incast_sweep.csv" 8 100
# Ctrl-C in a long size: the finished size is printed and kept, the one
# running is named, the EAL's runtime folder is removed, exit status 130.
# SIGINT goes once the 1 MiB row is on disk (the 1 GiB incast takes minutes).
interrupt_at "$OUT/rep_int/live_incast_sweep.csv" 2 "$OUT/int" -- "$ROCEMU" fabric run --live \
  -c "$ROOT/configs/fabrics/incast.yaml" -w incast --sizes 1M,1G --qps 8 -o "$OUT/rep_int" -- --log-level lib.eal:error
rc=$interrupted_rc
pid=$interrupted_pid
cat "$OUT/int.txt"
[ $rc -eq 130 ] || { cat "$OUT/int.err"; fail "interrupted: exit status $rc"; }
grep -qE "^ +1048576 .* 8/8$" "$OUT/int.txt" || fail "interrupted: no verified 1048576 row"
grep -qxF "# interrupted by SIGINT in the 1073741824 B run: 1 of 2 sizes finished" "$OUT/int.txt" ||
  fail "interrupted: no line naming the size it stopped in"
[ "$(wc -l <"$OUT/rep_int/live_incast_sweep.csv")" = 2 ] || fail "interrupted: $(cat "$OUT/rep_int/live_incast_sweep.csv")"
[ ! -e "/var/run/dpdk/rocemu-$pid" ] || fail "interrupted: its EAL folder /var/run/dpdk/rocemu-$pid is left"
# Few QPs a sender (2), so each QP's window is most of the NIC's traffic.
"$ROCEMU" fabric run --live -c "$ROOT/configs/fabrics/incast.yaml" -w incast --sizes 1M --qps 2 -o "$OUT/rep2" \
  -- --log-level lib.eal:error >"$OUT/out2.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$OUT/out2.txt"; fail "1M --qps 2: exit status $rc"; }
grep -qE "^ +1048576 .* 8/8$" "$OUT/out2.txt" || fail "1M --qps 2: $(grep -E '^ +1048576 ' "$OUT/out2.txt")"
check_no_nic_drops "$OUT/rep2" 1048576
grep -qE "RC ACK timeout (19|2[0-9]|3[01]) \(" "$OUT/out.txt" || fail "no scaled RC ACK timeout: $(grep 'RC ACK' "$OUT/out.txt")"
grep -qE ",(completer_retry_err|duplicate_request)," "$OUT/rep/live_incast_4194304B_nics.csv" &&
  fail "retransmissions with the scaled timeout: $(grep -E 'retry|duplicate' "$OUT/rep/live_incast_4194304B_nics.csv")"
"$ROCEMU" fabric run --live -c "$ROOT/configs/fabrics/incast.yaml" -w incast --sizes 1M --qps 8 --timeout 5 \
  --rc-timeout 14 -o "$OUT/rep14" -- --log-level lib.eal:error >"$OUT/out14.txt" 2>&1
rc=$?
# Whether it then completes within --timeout depends on the machine's load
# (it did not at load 8-9, it did at 2-3): only the retransmissions are checked.
[ $rc -le 1 ] || { cat "$OUT/out14.txt"; fail "with the unscaled timeout: exit status $rc"; }
retries=$(awk -F, '$2 == "completer_retry_err" { s += $3 } END { print s + 0 }' "$OUT/rep14/live_incast_1048576B_nics.csv")
[ "$retries" -gt 0 ] || fail "no retransmission with the unscaled timeout"
echo "unscaled ACK timeout: $retries retries, exit status $rc"
h1=$("$ROCEMU" fabric show -c "$ROOT/configs/fabrics/incast.yaml" | awk '$1 == "h1" { print $2 }')
check_link_pcap "$ROCEMU" "$OUT/rep/live_incast_h1-left.pcap" "$h1"
grep -q "pcap: [0-9]* frames of link h1-left" "$OUT/out.txt" || fail "no pcap note"

"$ROCEMU" fabric run --live --default --scale 0.5 >"$OUT/bad.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--scale 0.5 exit status $rc"
grep -q -- "--scale 0.5 must be at least 1" "$OUT/bad.txt" || fail "--scale 0.5 message: $(cat "$OUT/bad.txt")"
"$ROCEMU" fabric run --live --default --nic-model generator >"$OUT/bad.txt" 2>&1
[ $? -eq 2 ] || fail "--nic-model generator accepted with --live"
"$ROCEMU" fabric run --live --default --pcap nosuch -o "$OUT/x" >"$OUT/bad.txt" 2>&1
[ $? -eq 2 ] || fail "--pcap nosuch accepted with --live"
grep -q "no link 'nosuch'; its links: h0-leaf0, " "$OUT/bad.txt" || fail "--pcap nosuch message: $(cat "$OUT/bad.txt")"
# A capture its file cannot take (a link to /dev/full, as a full disk) fails
# the run, naming the file.
mkdir -p "$OUT/full"
ln -s /dev/full "$OUT/full/live_ring_allreduce_h0-leaf0.pcap"
"$ROCEMU" fabric run --live --default --sizes 64K --pcap h0-leaf0 -o "$OUT/full" >"$OUT/bad.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a capture onto a full disk: exit status $rc"
grep -q "live_ring_allreduce_h0-leaf0.pcap: writing failed: No space left on device" "$OUT/bad.txt" ||
  fail "a capture onto a full disk: $(cat "$OUT/bad.txt")"
echo "PASS"
