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

# response_order LISTING: reads a `rocemu pcap` listing (in the file's order)
# and prints 'R U B W G': R responses (positive ACKs, atomic ACKs, the first
# or only packet of READ responses), U of them with no request of theirs in
# the listing, B listed before that request, W the most one came before it
# and G the shortest time from a request to its response (seconds; negative
# when B > 0). A response answers the first request from its destination to
# its source with the same UDP source port (a QP pair's flow uses one in
# both directions) and the same PSN. NAKs are left out: a PSN sequence error
# NAK names the PSN it expected, which may not have been sent yet.
response_order() {
  awk '$4 == ">" && $8 ~ /^psn=/ {
      split($3, s, ":"); psn = substr($8, 5)
      if ($6 ~ /^RC_(SEND|RDMA_WRITE|RDMA_READ_REQUEST|COMPARE_SWAP|FETCH_ADD|ATOMIC_WRITE|FLUSH)/) {
        k = s[1] ">" $5 ":" s[2] "/" psn
        if (!(k in req)) req[k] = $2
      } else if ($6 ~ /^RC_(ATOMIC_ACKNOWLEDGE|RDMA_READ_RESPONSE_(FIRST|ONLY))$/ ||
                 ($6 == "RC_ACKNOWLEDGE" && $0 ~ / aeth=ACK/)) {
        resp[++r] = $5 ">" s[1] ":" s[2] "/" psn; at[r] = $2
      }
    }
    END {
      u = b = w = 0; g = ""
      for (i = 1; i <= r; ++i) {
        if (!(resp[i] in req)) { ++u; continue }
        d = at[i] - req[resp[i]]
        if (d < 0) { ++b; if (-d > w) w = -d }
        if (g == "" || d < g) g = d
      }
      printf "%d %d %d %.9f %.9f\n", r, u, b, w, (g == "" ? 0 : g)
    }' "$1"
}
