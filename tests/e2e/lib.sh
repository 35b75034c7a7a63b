# Shared helpers for the end-to-end tests: skip codes, waiting for a rocemu
# host to come up, and cleanup of everything a test created.
# Exit status 77 tells ctest the test was skipped (SKIP_RETURN_CODE).

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# scratch_dir PREFIX: a scratch folder $OUT, removed at exit.
scratch_dir() {
  OUT=$(mktemp -d "/tmp/$1.XXXXXX")
  trap 'rm -rf "$OUT"' EXIT
}

need_root_netns() {
  [ "$(id -u)" = 0 ] || skip "needs root"
  command -v ip >/dev/null || skip "needs iproute2"
  ip netns add "rocemu-probe-$$" 2>/dev/null || skip "network namespaces unavailable"
  ip netns del "rocemu-probe-$$"
}

# wait_ready LOG PID: until LOG shows the ready line (10 s at most).
wait_ready() {
  local log=$1 pid=$2
  for _ in $(seq 100); do
    grep -q "rocemu host: ready" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log"; fail "rocemu host exited before it was ready"; }
    sleep 0.1
  done
  cat "$log"
  fail "rocemu host not ready after 10 s"
}

# stop_host PID: SIGINT, then wait for a clean exit.
stop_host() {
  kill -INT "$1" 2>/dev/null || true
  wait "$1"
}

# interrupt_at CSV LINES OUT -- COMMAND...: runs COMMAND (stdout OUT.txt,
# stderr OUT.err) as a job of its own (without job control a script's
# background jobs ignore SIGINT), sends it SIGINT once CSV has LINES lines
# (60 s at most), and sets $interrupted_pid and its exit status
# $interrupted_rc.
interrupt_at() {
  local csv=$1 lines=$2 out=$3
  shift 4
  set -m
  "$@" >"$out.txt" 2>"$out.err" &
  interrupted_pid=$!
  set +m
  for _ in $(seq 600); do
    [ "$(wc -l 2>/dev/null <"$csv")" = "$lines" ] && break
    kill -0 "$interrupted_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -INT "$interrupted_pid"
  wait "$interrupted_pid"
  interrupted_rc=$?
}

# netns_setup PREFIX NS...: a scratch folder $D and network namespaces NS,
# removed at exit together with the processes left in the array `pids`.
netns_setup() {
  D=$(mktemp -d "/tmp/$1.XXXXXX")
  shift
  pids=()
  netns_made=("$@")
  trap netns_cleanup EXIT
  for ns in "$@"; do ip netns add "$ns" || fail "cannot add network namespace $ns"; done
}
netns_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  for ns in "${netns_made[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$D"
}
