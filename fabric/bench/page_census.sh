#!/usr/bin/env bash
# Distinct pages a simulated microsecond touches, by source file and by
# function: `rocemu_fabric_bench --page-census WINDOW_NS` (page_census.hpp)
# with the first-touch addresses it prints named by addr2line. A TLB of 4 KiB
# entries (a guest's on these VMs, huge pages or not) holds about 1536 pages;
# a fabric that touches more than that between two visits to a node pays a
# page walk on many of its loads. Figures and their reading:
# fabric/bench/README.md, "Pages a simulated microsecond". Usage:
#   page_census.sh BENCH [rc|generator (rc)] [HOSTS (256)] [shift|random (shift)] [WINDOW_NS (1000)]
set -euo pipefail
bench=${1:?usage: page_census.sh BENCH [rc|generator] [HOSTS] [shift|random] [WINDOW_NS]}
model=${2:-rc}
hosts=${3:-256}
flows=${4:-shift}
window=${5:-1000}
case "$model" in rc|generator) ;; *) echo "page_census.sh: model '$model' is not rc or generator" >&2; exit 2 ;; esac
case "$hosts" in 16|32|64|128|256) ;; *) echo "page_census.sh: HOSTS '$hosts' is not 16, 32, 64, 128 or 256" >&2; exit 2 ;; esac
case "$flows" in shift|random) ;; *) echo "page_census.sh: flows '$flows' are not shift or random" >&2; exit 2 ;; esac
[ -x "$bench" ] || { echo "page_census.sh: $bench: not an executable (build/fabric/rocemu_fabric_bench)" >&2; exit 2; }
command -v addr2line >/dev/null || { echo "page_census.sh: needs addr2line (apt install binutils)" >&2; exit 2; }
out=$("$bench" --model "$model" --hosts "$hosts" --flows "$flows" --page-census "$window")
echo "$out" | grep -m1 'page census'
echo "$out" | sed -n '/^-- by mapping/,/^-- by code/p' | sed '$d'
# "pages where" lines of the bench's own code, named by its innermost (inlined) source line and function.
code=$(echo "$out" | sed -n '/^-- by code/,/^-- end/p' | grep -F "$(readlink -f "$bench")+" || true)
[ -n "$code" ] || { echo "page_census.sh: no first touches in the bench's code" >&2; exit 1; }
pages=$(echo "$code" | cut -d' ' -f1)
named=$(echo "$code" | sed 's/.*+//' | addr2line -f -C -e "$bench" | paste - -)
paste -d'\t' <(echo "$pages") <(echo "$named") | awk -F'\t' '
  { split($3, at, ":"); file[at[1]] += $1; fn[$2] += $1; total += $1 }
  END {
    printf "-- by source file (pages a window):\n"
    for (f in file) printf "%8.1f %s\n", file[f], f | "sort -rn | head -20"
    close("sort -rn | head -20")
    printf "-- by function (pages a window):\n"
    for (f in fn) printf "%8.1f %s\n", fn[f], substr(f, 1, 120) | "sort -rn | head -25"
    close("sort -rn | head -25")
    printf "%8.1f in the bench'"'"'s code\n", total
  }'
