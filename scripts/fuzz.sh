#!/usr/bin/env bash
# Builds every libFuzzer target with clang (ASan+UBSan) and runs each for a
# bounded time, seeded with the real rxe captures (and, per target, the pcap
# files or the YAML configs). Targets and invariants: tests/fuzz/README.md.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
build=build-fuzz
CC=clang CXX=clang++ cmake -S . -B $build -G Ninja -DROCEMU_FUZZ=ON -DROCEMU_DPDK=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=$(cd tests/fuzz && find . -name 'fuzz_*.cpp' -exec basename {} .cpp \; | sort)
ninja -C $build $targets >/dev/null
corpus_seed=$build/corpus-seed
rm -rf "$corpus_seed"
python3 scripts/pcap-to-corpus.py "$corpus_seed" ../shared/captures/*.pcap >/dev/null
# Seeds beyond the capture frames, for targets whose input is not a frame.
extra_seeds() {
  case "$1" in
    fuzz_pcap_reader) echo ../shared/captures ;;  # whole pcap files
    fuzz_config) echo configs ;;                   # the shipped YAML profiles
    fuzz_fabric_nodes) echo tests/fuzz/fabric/seeds ;;  # a snapshot, a clock datagram, a HOST:PORT
  esac
}
# One target per core at a time (each is one libFuzzer process on one core),
# so a CI machine's two cores halve the phase for the same seconds a target
# (each then runs fewer inputs a second: tests/fuzz/README.md); a target's
# result line is printed when it ends.
jobs=${FUZZ_JOBS:-$(nproc)}
run_target() {
  local t=$1 bin
  bin=$(find $build -type f -name "$t" -perm -u+x | head -n 1)
  mkdir -p $build/corpus/$t
  if ! "$bin" -max_total_time="$secs" -max_len=9216 -print_final_stats=1 -artifact_prefix="$build/$t-" \
        $build/corpus/$t "$corpus_seed" $(extra_seeds "$t") >$build/$t.log 2>&1; then
    { echo "fuzz: $t FAILED; see $build/$t.log"; tail -n 40 $build/$t.log; } | flock $build/.out cat
    return 1
  fi
  echo "fuzz: $t: $(grep -E "stat::number_of_executed_units|stat::peak_rss" $build/$t.log | tr -s ' \n' ' ')" \
    | flock $build/.out cat
}
touch $build/.out
echo "fuzz: $(echo $targets | wc -w) targets for ${secs}s each, $jobs at a time"
status=0
running=0
for t in $targets; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
