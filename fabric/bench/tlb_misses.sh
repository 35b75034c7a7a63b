#!/usr/bin/env bash
# TLB misses a packet-hop of the like-for-like bench run (one flow per host to
# the next leaf), as cachegrind counts them with its last level shaped as a
# second-level TLB of 4 KiB pages (1536 entries, 12-way, 4096-byte "lines")
# and a 4 KiB first level, so nearly every access reaches it. Cachegrind
# ignores prefetches: this counts the pages a hop touches that were not among
# the last ~1536, whether or not a prefetch hid them. Two spans (0.2 and 0.4
# simulated ms after the same warm-up) run side by side; their difference
# over their difference in packet-hops leaves set-up and the bench's own
# memory probes out. Figures and their reading: fabric/README.md, Speed,
# "Pages". Needs valgrind (apt install valgrind). Usage:
#   tlb_misses.sh BENCH [rc|generator (rc)] [HOSTS (256)]
set -euo pipefail
bench=${1:?usage: tlb_misses.sh BENCH [rc|generator] [HOSTS]}
model=${2:-rc}
hosts=${3:-256}
command -v valgrind >/dev/null || { echo "tlb_misses.sh: needs valgrind (apt install valgrind)" >&2; exit 2; }
[ -x "$bench" ] || { echo "tlb_misses.sh: $bench: not an executable (build/fabric/rocemu_fabric_bench)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "tlb_misses: $model, $hosts hosts, two spans under cachegrind (a 256-host span takes about a minute)" >&2
for span in 200 400; do
  # The tunable set beforehand: the bench would start itself again with it,
  # which valgrind's launcher refuses.
  GLIBC_TUNABLES=glibc.malloc.hugetlb=1 valgrind --tool=cachegrind --cache-sim=yes --D1=4096,4,64 \
    --LL=6291456,12,4096 --cachegrind-out-file="$tmp/$span.out" "$bench" --model "$model" --hosts "$hosts" \
    --flows shift --no-incast --repeat 1 --span-us "$span" >"$tmp/$span.log" 2>&1 &
done
wait
misses() { grep -oE 'LL misses: +[0-9,]+' "$tmp/$1.log" | grep -oE '[0-9,]+$' | tr -d ,; }
hops() { grep -oE '[0-9]+ packet-hops' "$tmp/$1.log" | head -1 | grep -oE '^[0-9]+'; }
for span in 200 400; do
  if [ -z "$(misses $span)" ] || [ -z "$(hops $span)" ]; then
    echo "tlb_misses.sh: the $span us run printed no figures:" >&2
    tail -5 "$tmp/$span.log" >&2
    exit 1
  fi
done
awk -v m1="$(misses 200)" -v m2="$(misses 400)" -v h1="$(hops 200)" -v h2="$(hops 400)" -v model="$model" \
  -v hosts="$hosts" 'BEGIN { printf "[%s] %d hosts: %.2f TLB misses (4 KiB pages, 1536 entries) a packet-hop (%d over %d packet-hops)\n", model, hosts, (m2 - m1) / (h2 - h1), m2 - m1, h2 - h1 }'
