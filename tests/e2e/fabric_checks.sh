# Sourced by the fabric e2e tests: check_no_nic_drops DIR SIZE checks that
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
