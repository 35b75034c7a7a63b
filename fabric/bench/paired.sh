#!/usr/bin/env bash
# Two builds of rocemu_fabric_bench side by side: both run at the same time,
# one on each of two cores (swapped every round), so that the machine's
# speed state, which on a shared VM moves by 10-30 % between minutes, is the
# same for both. Each round prints the lower of three CPU ns a packet-hop of
# each (shift flows, --no-incast), and the end the mean difference B - A.
# The two share the last-level cache and memory: A against A differs by
# 1-2 % a round. Needs two otherwise idle cores (taskset -c 0 and 1).
# Usage:
#   paired.sh BENCH_A BENCH_B [rc|generator (rc)] [HOSTS (256)] [ROUNDS (8)]
set -euo pipefail
a=${1:?usage: paired.sh BENCH_A BENCH_B [rc|generator] [HOSTS] [ROUNDS]}
b=${2:?usage: paired.sh BENCH_A BENCH_B [rc|generator] [HOSTS] [ROUNDS]}
model=${3:-rc}
hosts=${4:-256}
rounds=${5:-8}
for x in "$a" "$b"; do
  [ -x "$x" ] || { echo "paired.sh: $x: not an executable (build/fabric/rocemu_fabric_bench)" >&2; exit 2; }
done
command -v taskset >/dev/null || { echo "paired.sh: needs taskset (apt install util-linux)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "paired.sh: needs two cores" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() {  # CORE BENCH OUT
  taskset -c "$1" "$2" --model "$model" --no-incast --hosts "$hosts" --flows shift --repeat 3 --span-us 1000 2>&1 |
    grep -oE '[0-9]+ CPU ns per packet-hop' | grep -oE '^[0-9]+' | sort -n | head -1 >"$3"
}
sum=0
for i in $(seq "$rounds"); do
  if [ $((i % 2)) = 1 ]; then ca=0; cb=1; else ca=1; cb=0; fi
  one "$ca" "$a" "$tmp/a" &
  one "$cb" "$b" "$tmp/b" &
  wait
  ra=$(cat "$tmp/a"); rb=$(cat "$tmp/b")
  [ -n "$ra" ] && [ -n "$rb" ] || { echo "paired.sh: round $i: a run printed no figure" >&2; exit 1; }
  echo "round $i: A $ra ns, B $rb ns a packet-hop ($model, $hosts hosts; A on core $ca)"
  sum=$((sum + rb - ra))
done
echo "mean B - A: $(awk -v s="$sum" -v n="$rounds" 'BEGIN { printf "%.1f", s / n }') ns a packet-hop over $rounds rounds"
