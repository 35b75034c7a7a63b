#!/usr/bin/env bash
# Every test in one command: installs what is missing, builds, runs the unit,
# scenario and interop tests, the unit tests again under ASan+UBSan, and each
# fuzz target for a bounded time. Ends with 'N passed, M failed'.
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-55}

bash scripts/install-deps.sh || { echo "install failed"; echo "0 passed, 1 failed"; exit 1; }
for f in tests/*/install-deps.sh; do [ -f "$f" ] && bash "$f"; done

passed=0
failed=0
count_ctest() {  # reads a ctest log, adds its totals
  local line
  line=$(grep -E "tests passed, [0-9]+ tests failed out of" "$1" | tail -n 1)
  if [ -z "$line" ]; then failed=$((failed + 1)); return; fi
  local f t
  f=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
  t=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/')
  passed=$((passed + t - f))
  failed=$((failed + f))
}
step() { echo; echo "=== $* ==="; }
# What the console shows of a ctest run: the totals, each failed test, and why
# it failed (a shell test's 'FAIL:' line, a sanitizer's report line, a GoogleTest
# failure and the 4 lines after it); the whole output stays in the log.
ctest_summary() {
  awk '/tests passed|Failed|\*\*\*|Total Test|^FAIL: |ERROR: AddressSanitizer|runtime error: /{print; fflush(); next}
       /: Failure$/{n=5} n>0{print; fflush(); n--}'
}

step "build (release)"
if bash scripts/build.sh release; then
  step "tests (release)"
  ctest --test-dir build --output-on-failure -j2 --timeout 900 2>&1 | tee build/ctest.log | ctest_summary
  count_ctest build/ctest.log
else
  echo "release build FAILED"; failed=$((failed + 1))
fi

step "build (ASan+UBSan)"
if bash scripts/build.sh asan; then
  step "tests (ASan+UBSan)"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j2 --timeout 1800 -LE 'slow|netns|dpdk' 2>&1 | tee build-asan/ctest.log | ctest_summary
  count_ctest build-asan/ctest.log
else
  echo "asan build FAILED"; failed=$((failed + 1))
fi

if [ -x tests/interop/run.sh ]; then
  step "interop with Linux rxe in a QEMU guest (core scenarios)"
  bash tests/interop/run.sh --core --rocemu "$PWD/build/tools/rocemu/rocemu" 2>&1 | tee build/interop.log
  line=$(grep -E "^[0-9]+ passed, [0-9]+ failed" build/interop.log | tail -n 1)
  if [ -n "$line" ]; then
    passed=$((passed + $(echo "$line" | cut -d' ' -f1)))
    failed=$((failed + $(echo "$line" | cut -d' ' -f3)))
  else
    failed=$((failed + 1))
  fi
fi

step "fuzz (${FUZZ_SECONDS}s per target)"
if bash scripts/fuzz.sh "$FUZZ_SECONDS"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

echo
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
