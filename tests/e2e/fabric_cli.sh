#!/usr/bin/env bash
# The virtual-time fabric on the command line, as a user runs it:
# - `rocemu demo` (the README's first command) passes its verdict and writes
#   the report folder it names (CSV series, SVG plots when gnuplot is there);
#   its progress on a non-terminal stderr has no carriage returns, and the
#   file count it prints is what the folder holds; a later run into that
#   folder removes the demo's files (and says so), not the user's;
# - `rocemu fabric run` sweeps sizes into nccl-tests rows and captures a
#   named link; the same seed twice gives byte-identical CSVs and pcaps, and
#   another seed a different capture; every ICRC in it verifies; its rows
#   are also a CSV; Ctrl-C in a long size keeps the sizes before it;
#   nccl-tests' -b/-e/-f sweep the sizes nccl-tests would; `rocemu pcap
#   --merge` refuses to write onto one of its inputs or out of a pcap's
#   time range;
# - the heap runs on transparent huge pages (glibc.malloc.hugetlb=1 added
#   unless GLIBC_TUNABLES names it);
# - bad input is refused with exit status 2, a message naming the problem
#   and nothing on stdout (no fabric summary before the refusal), also a
#   live or split option given without --live or --processes.
# Usage: fabric_cli.sh ROCEMU REPO_ROOT
set -uo pipefail
ROCEMU=$1
ROOT=$2
. "$ROOT/tests/e2e/lib.sh"
scratch_dir fab_cli_e2e

# The demo, from an empty folder. A sanitizer build runs it at the reduced
# size (the same code, a quarter of the draws: 70 s under ASan instead of
# 270 s); a release build runs the README's command as it is.
SANITIZED=false
# Not grep -q: with pipefail, grep leaving early fails ldd with SIGPIPE.
if ldd "$ROCEMU" 2>/dev/null | grep libasan >/dev/null; then SANITIZED=true; fi
DEMO_ARGS=()
$SANITIZED && DEMO_ARGS=(--reduced)
(cd "$OUT" && "$ROCEMU" demo "${DEMO_ARGS[@]}" >"$OUT/demo.txt" 2>"$OUT/demo.err")
rc=$?
cat "$OUT/demo.txt"
[ $rc -eq 0 ] || { cat "$OUT/demo.err"; fail "demo exit status $rc"; }
grep -q "^verdict: PASS" "$OUT/demo.txt" || fail "demo verdict"
grep -q "^report: $OUT/rocemu-report ([0-9]* files" "$OUT/demo.txt" || fail "demo report line"
ls "$OUT"/rocemu-report/*.csv >/dev/null 2>&1 || fail "no CSV in the demo's report folder"
if command -v gnuplot >/dev/null; then
  ls "$OUT"/rocemu-report/*.svg >/dev/null 2>&1 || fail "gnuplot is installed but no SVG was drawn"
fi
if grep -q $'\r' "$OUT/demo.err"; then fail "carriage returns in a non-terminal stderr"; fi
# The count it prints is what is in the (new) folder, plots included.
said=$(sed -n "s|^report: $OUT/rocemu-report (\([0-9]*\) files.*|\1|p" "$OUT/demo.txt")
there=$(ls "$OUT/rocemu-report" | wc -l)
[ "$said" = "$there" ] || fail "the demo says $said files, its folder has $there"

# Another run into the same folder: the demo's files go (it says how many),
# a file of the user's stays, and the folder holds this run's report alone.
echo mine >"$OUT/rocemu-report/notes.txt"
(cd "$OUT" && "$ROCEMU" fabric run -c "$ROOT/configs/fabrics/incast.yaml" -w incast --sizes 64K >"$OUT/again.txt" 2>&1) ||
  { cat "$OUT/again.txt"; fail "fabric run into the demo's folder failed"; }
grep -q "^report: $OUT/rocemu-report ([0-9]* files; .*; the previous report's other $said files removed)$" "$OUT/again.txt" ||
  fail "no report line saying the demo's $said files were removed: $(grep '^report:' "$OUT/again.txt")"
ls "$OUT"/rocemu-report/ecmp_* >/dev/null 2>&1 && fail "the demo's files are still there: $(ls "$OUT/rocemu-report")"
[ -f "$OUT/rocemu-report/notes.txt" ] || fail "the user's file was removed"
said=$(sed -n "s|^report: $OUT/rocemu-report (\([0-9]*\) files.*|\1|p" "$OUT/again.txt")
there=$(ls "$OUT/rocemu-report" | grep -vc '^notes.txt$')
[ "$said" = "$there" ] || fail "the second run says $said files, the folder has $there besides the user's"
# A refused run changes nothing there.
before=$(ls "$OUT/rocemu-report" | tr '\n' ' ')
(cd "$OUT" && "$ROCEMU" fabric run -c "$ROOT/configs/fabrics/incast.yaml" -w incast --sizes 0 >/dev/null 2>&1) &&
  fail "a size of 0 was not refused"
[ "$(ls "$OUT/rocemu-report" | tr '\n' ' ')" = "$before" ] || fail "a refused run changed the report folder"
echo "second run into the demo's folder: its $said files alone, the user's file kept; a refused run changed nothing"

# A sweep with a capture, twice with one seed and once with another.
sweep() {  # sweep DIR SEED
  "$ROCEMU" fabric run -c "$ROOT/configs/fabrics/default.yaml" -w ring_allreduce --sizes 64K,1M --seed "$2" \
    --pcap h0-leaf0 -o "$1" >"$1.txt" 2>"$1.err"
}
for run in a:7 b:7 c:8; do
  sweep "$OUT/${run%:*}" "${run#*:}" || { cat "$OUT/${run%:*}.err"; fail "fabric run ${run%:*} failed"; }
done
cat "$OUT/a.txt"
grep -qE "^ +65536 +[0-9.]+ " "$OUT/a.txt" || fail "no 65536 row"
grep -qE "^ +1048576 +[0-9.]+ " "$OUT/a.txt" || fail "no 1048576 row"
[ -s "$OUT/a/ring_allreduce_65536B.pcap" ] || fail "no capture of the 64K run in $(ls "$OUT/a")"
pcap=ring_allreduce_1048576B.pcap
listing=$("$ROCEMU" pcap "$OUT/a/$pcap") || fail "rocemu pcap: $(tail -1 <<<"$listing")"
n=$(tail -1 <<<"$listing" | awk '/ packets, 0 ICRC errors$/ { print $1 }')
[ -n "$n" ] && [ "$n" -gt 0 ] || fail "capture: $(tail -1 <<<"$listing")"
echo "capture $pcap: $n RoCEv2 packets, 0 ICRC errors"
ncsv=0
for f in "$OUT"/a/*.csv "$OUT/a/$pcap"; do
  cmp -s "$f" "$OUT/b/$(basename "$f")" || fail "seed 7 twice: $(basename "$f") differs"
  ncsv=$((ncsv + 1))
done
echo "seed 7 twice: $ncsv files byte-identical"
cmp -s "$OUT/a/$pcap" "$OUT/c/$pcap" && fail "seeds 7 and 8 captured the same bytes"

# A capture that cannot be written (here a link to /dev/full, as on a full
# disk) fails the run, naming the file, instead of leaving a short pcap.
mkdir -p "$OUT/full"
ln -s /dev/full "$OUT/full/ring_allreduce_65536B.pcap"
"$ROCEMU" fabric run --sizes 64K --pcap h0-leaf0 -o "$OUT/full" >"$OUT/full.txt" 2>"$OUT/full.err"
rc=$?
[ $rc -eq 2 ] && grep -qF "ring_allreduce_65536B.pcap: writing failed: No space left on device" "$OUT/full.err" ||
  fail "a capture onto a full disk: exit status $rc, $(cat "$OUT/full.err")"
echo "refused, a capture that cannot be written: $(cat "$OUT/full.err")"

# Merging captures: never onto one of its inputs, however the path is
# spelled (it overwrote it until 7 December), and never shifted outside a
# pcap's time range.
cp "$OUT/a/$pcap" "$OUT/m1.pcap"
cp "$OUT/c/$pcap" "$OUT/m2.pcap"
for onto in "$OUT/./m1.pcap" "$OUT/m1-link.pcap"; do
  [ "$onto" = "$OUT/m1-link.pcap" ] && ln "$OUT/m1.pcap" "$onto"
  "$ROCEMU" pcap -q "$OUT/m1.pcap" "$OUT/m2.pcap" --merge "$onto" >"$OUT/r.out" 2>"$OUT/r.err"
  rc=$?
  [ $rc -eq 2 ] || fail "--merge onto its input as $onto: exit status $rc"
  grep -qF "that is one of the files to merge" "$OUT/r.err" || fail "--merge $onto: $(cat "$OUT/r.err")"
  cmp -s "$OUT/a/$pcap" "$OUT/m1.pcap" || fail "--merge $onto changed its input"
done
echo "refused, --merge onto an input by another name or a hard link; the input unchanged"
"$ROCEMU" pcap -q "$OUT/m1.pcap" "$OUT/m2.pcap" --merge "$OUT/m.pcap" --shift "$OUT/m1.pcap=-9223372036854775807" \
  >"$OUT/r.out" 2>"$OUT/r.err"
rc=$?
[ $rc -eq 2 ] && grep -qF "more than a pcap file's 2^32 s" "$OUT/r.err" ||
  fail "a shift past a pcap's range: exit status $rc, $(cat "$OUT/r.err")"
echo "refused, a shift past a pcap's range: $(head -1 "$OUT/r.err")"
# A frame stamped before the first (a clock stepped back) lists a negative
# time, not '0.-300000000'.
python3 -c '
import struct, sys
f = open(sys.argv[1], "wb")
f.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
for sec, ns in ((100, 500000000), (100, 200000000)):
    f.write(struct.pack("<IIII", sec, ns, 60, 60) + bytes(12) + b"\x08\x06" + bytes(46))
' "$OUT/back.pcap"
"$ROCEMU" pcap --all "$OUT/back.pcap" >"$OUT/back.txt" 2>&1 || fail "pcap --all back.pcap: $(cat "$OUT/back.txt")"
grep -qE '^ +2 +-0\.300000000 ' "$OUT/back.txt" || fail "a frame 0.3 s before the first: $(cat "$OUT/back.txt")"
echo "a frame before the first: $(sed -n 2p "$OUT/back.txt")"

# nccl-tests' -b/-e/-f: 8 KiB to 1 MiB, each size four times the one
# before, the rows those sizes.
"$ROCEMU" fabric run -w ring_allreduce -b 8K -e 1M -f 4 -o "$OUT/nccl" >"$OUT/nccl.txt" 2>"$OUT/nccl.err" ||
  { cat "$OUT/nccl.err"; fail "fabric run -b 8K -e 1M -f 4 failed"; }
rows=$(tail -n +2 "$OUT/nccl/ring_allreduce_sweep.csv" | cut -d, -f1 | tr '\n' ' ')
[ "$rows" = "8192 32768 131072 524288 " ] || fail "-b 8K -e 1M -f 4 swept: $rows"
echo "-b 8K -e 1M -f 4: $rows"

# The sweep's rows as a CSV: a row per size, the times the table prints.
csv=$OUT/a/ring_allreduce_sweep.csv
[ "$(head -1 "$csv")" = "size_bytes,time_us,algbw_gbs,busbw_gbs,pfc,ecn,cnp,drops,drop_causes,ignored_responses,unfinished_flows" ] ||
  fail "sweep CSV header: $(head -1 "$csv")"
[ "$(tail -n +2 "$csv" | cut -d, -f1 | tr '\n' ' ')" = "65536 1048576 " ] || fail "sweep CSV rows: $(cat "$csv")"
for size in 65536 1048576; do
  in_csv=$(awk -F, -v s=$size '$1 == s { printf "%.1f", $2 }' "$csv")
  in_table=$(awk -v s=$size '$1 == s { print $2 }' "$OUT/a.txt")
  [ -n "$in_csv" ] && [ "$in_csv" = "$in_table" ] || fail "size $size: CSV time $in_csv, table $in_table"
done
echo "sweep CSV: $(($(wc -l <"$csv") - 1)) rows, the table's times"

# Ctrl-C in a long sweep: the sizes that finished are printed and kept, the
# one running is named, exit status 130. The 4 GiB ring all-reduce takes
# seconds; SIGINT goes once the 64 KiB row is on disk.
interrupt_at "$OUT/int/ring_allreduce_sweep.csv" 2 "$OUT/int" -- "$ROCEMU" fabric run \
  -c "$ROOT/configs/fabrics/default.yaml" -w ring_allreduce --sizes 64K,4G -o "$OUT/int"
rc=$interrupted_rc
cat "$OUT/int.txt"
[ $rc -eq 130 ] || { cat "$OUT/int.err"; fail "interrupted sweep: exit status $rc"; }
grep -qE "^ +65536 +[0-9.]+ " "$OUT/int.txt" || fail "interrupted sweep: no 65536 row"
grep -qxF "# interrupted by SIGINT in the 4294967296 B run: 1 of 2 sizes finished" "$OUT/int.txt" ||
  fail "interrupted sweep: no line naming the size it stopped in"
[ "$(wc -l <"$OUT/int/ring_allreduce_sweep.csv")" -eq 2 ] || fail "interrupted sweep CSV: $(cat "$OUT/int/ring_allreduce_sweep.csv")"
said=$(sed -n "s|^report: $OUT/int (\([0-9]*\) files.*|\1|p" "$OUT/int.txt")
[ "$said" = "$(ls "$OUT/int" | wc -l)" ] || fail "interrupted sweep: says $said files, its folder has $(ls "$OUT/int")"

# The heap on transparent huge pages: rocemu starts itself again, once, with
# glibc.malloc.hugetlb=1 added to GLIBC_TUNABLES (common/malloc_thp.hpp),
# unless the variable names that tunable already; sanitizer builds do not.
tunables_of() {  # tunables_of ENV-ARGS...: the GLIBC_TUNABLES rocemu runs with (its debug log)
  env "$@" "$ROCEMU" --log-level debug fabric show --default 2>&1 | sed -n 's/.*glibc tunables: //p'
}
if $SANITIZED; then
  echo "heap huge pages: not in a sanitizer build"
else
  got=$(tunables_of -u GLIBC_TUNABLES)
  [ "$got" = "glibc.malloc.hugetlb=1" ] || fail "restart with the heap tunable: GLIBC_TUNABLES='$got'"
  got=$(tunables_of GLIBC_TUNABLES=glibc.malloc.tcache_count=0)
  [ "$got" = "glibc.malloc.tcache_count=0:glibc.malloc.hugetlb=1" ] || fail "tunable appended: '$got'"
  got=$(tunables_of GLIBC_TUNABLES=glibc.malloc.hugetlb=0)
  [ "$got" = "glibc.malloc.hugetlb=0" ] || fail "a user's hugetlb=0 is kept: '$got'"
  echo "heap huge pages: glibc.malloc.hugetlb=1 added, appended to other tunables, a user's =0 kept"
fi

# Refusals: exit 2, the reason on stderr, nothing on stdout.
printf 'topology: {kind: leaf_spine, leafs: 2}\n' >"$OUT/badkey.yaml"
printf 'topology: {kind: dumbbell, left_hosts: 4, right_hosts: 2}\n' >"$OUT/six.yaml"
refused() {  # refused WHAT PATTERN -- ARGS...
  local what=$1 pattern=$2
  shift 3
  "$ROCEMU" "$@" >"$OUT/r.out" 2>"$OUT/r.err"
  local rc=$?
  [ $rc -eq 2 ] || fail "$what: exit status $rc"
  grep -qF -- "$pattern" "$OUT/r.err" || fail "$what: message: $(cat "$OUT/r.err")"
  [ ! -s "$OUT/r.out" ] || fail "$what: printed on stdout: $(head -2 "$OUT/r.out")"
  echo "refused, $what: $(head -1 "$OUT/r.err")"
}
refused "unknown link" "has no link 'nosuch'; its links: h0-leaf0, " -- fabric run --pcap nosuch --sizes 1M -o "$OUT/x"
refused "unknown workload" "--workload 'foo' is not one of" -- fabric run -w foo
refused "bad size" "--sizes '1Q' is not a size" -- fabric run --sizes 1Q
refused "a size past 64 bits" "--sizes '99999999999999999999999' is not a size" -- \
  fabric run --sizes 99999999999999999999999
refused "a size past 1 TiB" "--sizes '2048G' is not a size" -- fabric run --sizes 2048G
refused "--sizes with -b" "--sizes and -b/-e/-f/-i are two ways" -- fabric run --sizes 1M -b 8 -o "$OUT/x"
refused "-b after -e" "the smallest size (1048576 B) is larger than the largest" -- fabric run -b 1M -e 8K -o "$OUT/x"
refused "-f without -b or -e" "-f/-i step a sweep from -b" -- fabric run -f 2 -o "$OUT/x"
refused "a sweep of too many sizes" "has more than 128 sizes" -- fabric run -b 8 -e 1M -i 1K -o "$OUT/x"
refused "a negative seed" "--seed: '-1' is not a whole number" -- fabric run --seed -1 -o "$OUT/x"
refused "an unknown option" "rocemu fabric run: The following argument was not expected: --bogus" -- fabric run --bogus
refused "an unknown command" "'bogus' is not a command (commands: pcap, demo, scenario, fabric" -- bogus
refused "an unknown fabric command" "rocemu fabric: 'bogus' is not a command (commands: show, run" -- fabric bogus
refused "a pcap that is not there" "rocemu pcap: files: File does not exist" -- pcap "$OUT/nope.pcap"
# fabric plan refuses what the hosts node would, before any machine starts
# (a build without DPDK, as the sanitizer build, has no fabric plan).
if "$ROCEMU" fabric --help | grep -q '^  plan '; then
  M=(--machine a=hosts,leaf0,leaf1 --machine b=spine0,spine1,spine2,spine3)
  refused "plan: --qps 65" "rocemu fabric plan: --qps 65: must be in [1, 64]" -- fabric plan "${M[@]}" --qps 65
  refused "plan: a size too small" "rocemu fabric plan: hd_allreduce splits 4 B over 8 ranks" -- \
    fabric plan "${M[@]}" -w hd_allreduce --sizes 4
  refused "plan: control ports past 65535" "the 6 switches take ports 65533 to 65538" -- \
    fabric plan "${M[@]}" --control-port 65533
  refused "plan: an address for no machine" "no --machine is named c" -- fabric plan "${M[@]}" --address c=10.0.0.3
  refused "plan: a machine named as a path" "a machine's name is letters, digits" -- \
    fabric plan --machine a/..=hosts,leaf0,leaf1 --machine b=spine0,spine1,spine2,spine3
else
  echo "skipped: fabric plan's refusals (this rocemu is built without DPDK)"
fi
refused "an empty report folder" "rocemu fabric run: --out: must not be empty" -- fabric run -o ""
refused "an empty config" "rocemu fabric show: --config: must not be empty" -- fabric show -c ""
refused "-c and --default" "and --default name two fabrics" -- fabric run -c "$ROOT/configs/fabrics/incast.yaml" --default
refused "a sweep option with --scenario" "--scenario runs the scenario's own workloads; --sizes is for a sweep" -- \
  fabric run --scenario ecmp --sizes 64K -o "$OUT/x"
refused "a folder as the fabric" "$OUT: a folder, not a file" -- fabric run -c "$OUT" -o "$OUT/x"
refused "missing file" "nope.yaml: cannot read the file" -- fabric run -c "$OUT/nope.yaml"
refused "unknown key" "topology.leafs: unknown key" -- fabric run -c "$OUT/badkey.yaml"
refused "hd over 6 ranks" "power-of-two number of ranks; the fabric has 6" -- \
  fabric run -c "$OUT/six.yaml" -w hd_allreduce --sizes 1M
refused "all_to_all below a byte a peer" "sizes start at 8 B" -- fabric run -w all_to_all --sizes 4
refused "unknown scenario" "unknown scenario 'nosuch' (known: ecmp," -- scenario nosuch
refused "a live option in virtual time" "--qps needs --live" -- fabric run --qps 4 --sizes 1M -o "$OUT/x"
refused "a split option in one process" "--clock needs --live --processes" -- fabric run --live --clock own -o "$OUT/x"
refused "EAL arguments in virtual time" "EAL arguments (--no-huge ...) need --live" -- fabric run -o "$OUT/x" -- --no-huge
[ ! -e "$OUT/x" ] || fail "a refused run made its report folder"
echo "PASS"
