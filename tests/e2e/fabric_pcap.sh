# Sourced by the fabric e2e tests: check_link_pcap ROCEMU FILE IP checks a
# `--live --pcap` capture of the cable of the NIC at IP. The project's
# verifier decodes it (every RoCEv2 ICRC good), it holds RoCEv2 frames of
# both directions, and every one has IP at one end: none of another cable.
# tshark, if installed, must decode the same RoCEv2 frames as InfiniBand.
# Here-strings, not pipes: under pipefail `echo | grep -q` fails when grep
# stops reading early.
check_link_pcap() {
  local rocemu=$1 file=$2 ip=$3 lines n
  [ -s "$file" ] || fail "no capture $file"
  lines=$("$rocemu" pcap "$file") || fail "rocemu pcap $file: $(tail -1 <<<"$lines")"
  n=$(tail -1 <<<"$lines" | awk '/ packets, 0 ICRC errors$/ { print $1 }')
  [ -n "$n" ] && [ "$n" -gt 0 ] || fail "no RoCEv2 frame in $file: $(tail -1 <<<"$lines")"
  grep -q " $ip:[0-9]* > " <<<"$lines" || fail "no RoCEv2 frame from $ip in $file"
  grep -q " > $ip " <<<"$lines" || fail "no RoCEv2 frame to $ip in $file"
  local other
  other=$(sed '$d' <<<"$lines" | grep -v -e " $ip:[0-9]* > " -e " > $ip ")
  [ -z "$other" ] || fail "frames of another cable in $file: $(head -2 <<<"$other")"
  if command -v tshark >/dev/null; then
    local ib
    ib=$(tshark -r "$file" -Y "infiniband && ip.addr == $ip" 2>/dev/null | wc -l)
    [ "$ib" = "$n" ] || fail "tshark decodes $ib RoCEv2 frames of $ip in $file, rocemu pcap $n"
  fi
  echo "capture $file: $n RoCEv2 frames, all of $ip"
}
