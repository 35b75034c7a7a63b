#!/usr/bin/env bash
# Boots the rxe guest on a tap inside a fresh network namespace and talks to it
# through a 9p share. Source it for the functions, or run it as a command:
#
#   guest.sh oneshot [--mtu N] [--ip A.B.C.D/NN] 'shell commands'
#       boot, run the commands in the guest, print their output, power off,
#       exit with their exit code.
#   guest.sh shell [--mtu N] [--ip A.B.C.D/NN]
#       boot and read commands from stdin, one guest_run per line.
#
# Library (after `source guest.sh`):
#   guest_boot [--mtu N] [--ip A.B.C.D/NN] [--boot-script FILE] [--nics N]
#              [--nic-model I=MODEL]... [--host-root] [--cpu MODEL]
#       Creates netns $GUEST_NS holding tap $GUEST_TAP (MTU N, no IP address,
#       no IPv6), boots the guest on it and waits for its ready marker.
#       --nics N: N more virtio-net NICs (0..8), each on its own tap
#       rxetap1..rxetapN in $GUEST_NS (MTU N, no address, no IPv6); in the
#       guest NIC i has MAC $(guest_nic_mac i) and is left down.
#       --nic-model I=MODEL: extra NIC I is QEMU's MODEL instead of
#       virtio-net-pci, e.g. e1000e (Intel 82574L) or e1000 (Intel 82540EM),
#       whose MTU the guest sets (no host_mtu); repeatable.
#       --host-root: the host's / as a read-only 9p share (tag hostroot), for
#       guest_host_root. --cpu MODEL: QEMU's -cpu (default: QEMU's own, qemu64
#       under TCG; `max` has SSE4.2/PCLMUL/AVX2 that DPDK needs).
#       Returns non-zero, with the reason on stderr, if setup fails or the
#       guest is not ready within $GUEST_BOOT_TIMEOUT s (default 180).
#   guest_run [-t SECONDS] 'commands'   run in the guest, print stdout+stderr,
#       return their exit code (124 on timeout, default 300 s)
#   guest_spawn NAME 'commands'         start commands in the guest's background
#   guest_wait NAME [SECONDS]           wait for a spawned job; print its output
#       and return its exit code (124 on timeout)
#   guest_fact KEY                      a value from the ready marker:
#       kernel ip mtu mac gid_index_ipv4 gid_ipv4 port_state clocksource
#       uptime_modules_loaded uptime_rxe_added uptime
#   guest_wait_exit [SECONDS]           wait for the guest to power itself off
#   guest_shutdown                      power off (bounded), remove the netns
#   guest_ns_exec CMD...                run a host command inside $GUEST_NS
#   guest_nic_mac I                     the guest MAC of extra NIC I (1..8)
#   guest_host_root                     (after --host-root) mounts the host's /
#       read-only on $GUEST_HOST_ROOT in the guest with the guest's /dev, /proc,
#       /sys, fresh tmpfs on /run and /tmp, and the share at its host path, so
#       that `chroot $GUEST_HOST_ROOT PROGRAM` runs a host program and its
#       libraries unchanged, writing only to tmpfs and the share. Host files
#       under /run and /tmp are hidden by those tmpfs.
# After guest_boot: $GUEST_NS, $GUEST_TAP, $GUEST_MTU, $GUEST_DIR (run dir:
# console.log, qemu.log), $GUEST_SHARE, $GUEST_QEMU_PID, $GUEST_READY_SECONDS.
#
# Address plan: guest 10.77.0.2/24 on eth0, MAC 52:54:00:77:00:02. The peer
# (rocemu) owns 10.77.0.1 on the host side of the tap, in user space only.
#
# Environment: ROCEMU_GUEST_ACCEL (tcg; kvm hangs on this machine, see
# README.md), GUEST_MEM_MB (1024), GUEST_SMP (1), GUEST_BOOT_TIMEOUT (180),
# ROCEMU_INTEROP_CACHE (tests/interop/.cache), GUEST_RUN_TIMEOUT (600, oneshot).

GUEST_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GUEST_CACHE="${ROCEMU_INTEROP_CACHE:-$GUEST_HERE/.cache}"
GUEST_DEFAULT_IP=10.77.0.2/24
GUEST_PEER_IP=10.77.0.1
GUEST_MAC=52:54:00:77:00:02

guest__err() { echo "guest: $*" >&2; }

# Polls until the command succeeds or SECONDS pass; fails fast if QEMU died.
guest__poll() {
  local secs="$1"; shift
  local deadline=$((SECONDS + secs))
  while ! "$@"; do
    if [ -n "${GUEST_QEMU_PID:-}" ] && ! kill -0 "$GUEST_QEMU_PID" 2>/dev/null; then
      "$@" && return 0
      return 2
    fi
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.1
  done
}

guest_ns_exec() { ip netns exec "$GUEST_NS" "$@"; }

GUEST_HOST_ROOT=/host
guest_nic_mac() { printf '52:54:00:77:01:%02x' "$1"; }

# 9p cache=loose: the host's / does not change under the guest while it runs,
# and loading a program's libraries through an uncached 9p mount takes
# minutes under TCG.
guest_host_root() {
  local h=$GUEST_HOST_ROOT
  guest_run -t 120 "set -e
    mkdir -p $h
    mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot $h
    mount -o bind /dev $h/dev
    mount -o bind /dev/shm $h/dev/shm
    mount -o bind /dev/pts $h/dev/pts
    mount -t proc proc $h/proc
    mount -o bind /sys $h/sys
    mount -t tmpfs tmpfs $h/run
    mount -t tmpfs tmpfs $h/tmp
    mkdir -p $h$GUEST_SHARE
    mount -o bind /share $h$GUEST_SHARE"
}

# A harness killed outright leaves its netns, and maybe its QEMU, behind. The
# netns name carries the harness pid: reap those whose harness is gone, and
# run directories older than a day.
guest__reap_stale() {
  local ns owner pid
  for ns in $(ip netns list 2>/dev/null | awk '/^rocemu-rxe-[0-9]+-/ {print $1}'); do
    owner="${ns#rocemu-rxe-}"; owner="${owner%%-*}"
    kill -0 "$owner" 2>/dev/null && continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  find "$GUEST_CACHE/runs" -mindepth 1 -maxdepth 1 -mmin +1440 -exec rm -rf {} + 2>/dev/null
  return 0
}

guest_boot() {
  local mtu=1500 ip="$GUEST_DEFAULT_IP" boot_script="" nics=0 host_root=0 cpu="" i
  local -A model=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --mtu) mtu="$2"; shift 2 ;;
      --ip) ip="$2"; shift 2 ;;
      --boot-script) boot_script="$2"; shift 2 ;;
      --nics) nics="$2"; shift 2 ;;
      --nic-model)
        case "$2" in
          [1-8]=[a-z]*) model[${2%%=*}]=${2#*=} ;;
          *) guest__err "guest_boot: --nic-model '$2' is not I=MODEL with I in 1..8"; return 2 ;;
        esac
        shift 2 ;;
      --host-root) host_root=1; shift ;;
      --cpu) cpu="$2"; shift 2 ;;
      *) guest__err "guest_boot: unknown option '$1'"; return 2 ;;
    esac
  done
  case "$mtu" in
    ''|*[!0-9]*) guest__err "guest_boot: --mtu '$mtu' is not a number in 1280..9000"; return 2 ;;
  esac
  if [ "$mtu" -lt 1280 ] || [ "$mtu" -gt 9000 ]; then
    guest__err "guest_boot: --mtu $mtu is outside 1280..9000"; return 2
  fi
  case "$nics" in
    [0-8]) ;;
    *) guest__err "guest_boot: --nics '$nics' is not a number in 0..8"; return 2 ;;
  esac
  for i in "${!model[@]}"; do
    [ "$i" -le "$nics" ] || { guest__err "guest_boot: --nic-model $i=${model[$i]} names no NIC of --nics $nics"; return 2; }
  done

  "$GUEST_HERE/build-guest.sh" || return 1
  guest__reap_stale
  local img="$GUEST_CACHE/guest"
  GUEST_NS="rocemu-rxe-$$-$RANDOM"
  GUEST_TAP=rxetap0
  GUEST_MTU="$mtu"
  GUEST_DIR="$GUEST_CACHE/runs/$GUEST_NS"
  GUEST_SHARE="$GUEST_DIR/share"
  GUEST_CONSOLE="$GUEST_DIR/console.log"
  mkdir -p "$GUEST_SHARE/cmd"
  [ -n "$boot_script" ] && cp "$boot_script" "$GUEST_SHARE/boot.sh"

  ip netns add "$GUEST_NS" || { guest__err "cannot create netns $GUEST_NS"; return 1; }
  guest_ns_exec ip link set lo up
  guest_ns_exec ip tuntap add dev "$GUEST_TAP" mode tap || { guest_shutdown; return 1; }
  # No IPv4 and no IPv6 on the tap: the host kernel must neither answer ARP
  # nor reject UDP 4791 in the place of the user-space peer.
  guest_ns_exec sysctl -qw "net.ipv6.conf.$GUEST_TAP.disable_ipv6=1"
  guest_ns_exec ip link set "$GUEST_TAP" mtu "$mtu" up || { guest_shutdown; return 1; }
  local extra=() dev
  for ((i = 1; i <= nics; i++)); do
    dev="virtio-net-pci,netdev=n$i,mac=$(guest_nic_mac "$i"),host_mtu=$mtu"
    [ -z "${model[$i]:-}" ] || dev="${model[$i]},netdev=n$i,mac=$(guest_nic_mac "$i")"
    guest_ns_exec ip tuntap add dev "rxetap$i" mode tap &&
      guest_ns_exec sysctl -qw "net.ipv6.conf.rxetap$i.disable_ipv6=1" &&
      guest_ns_exec ip link set "rxetap$i" mtu "$mtu" up || { guest_shutdown; return 1; }
    extra+=(-netdev "tap,id=n$i,ifname=rxetap$i,script=no,downscript=no"
            -device "$dev")
  done
  [ "$host_root" = 1 ] &&
    extra+=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap")
  [ -n "$cpu" ] && extra+=(-cpu "$cpu")

  local accel="${ROCEMU_GUEST_ACCEL:-tcg}"
  # Under TCG on a busy host the kernel's PIT-based TSC calibration can be off
  # by 20x, and guest time (jiffies, rxe's retransmit timer) then runs that
  # much fast. The emulated HPET follows host time, so time is kept with it.
  # exec keeps $! the QEMU process itself, so it can be waited for and killed.
  (exec ip netns exec "$GUEST_NS" qemu-system-x86_64 -accel "$accel" -nodefaults -no-user-config \
    -m "${GUEST_MEM_MB:-1024}" -smp "${GUEST_SMP:-1}" -display none -no-reboot \
    -serial "file:$GUEST_CONSOLE" \
    -kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
    -append "console=ttyS0 panic=-1 quiet clocksource=hpet tsc=unstable rocemu.ip=$ip rocemu.mtu=$mtu" \
    -netdev "tap,id=n0,ifname=$GUEST_TAP,script=no,downscript=no" \
    -device "virtio-net-pci,netdev=n0,mac=$GUEST_MAC,host_mtu=$mtu" \
    -virtfs "local,path=$GUEST_SHARE,mount_tag=share,security_model=none,multidevs=remap" \
    "${extra[@]}" > "$GUEST_DIR/qemu.log" 2>&1) &
  GUEST_QEMU_PID=$!
  GUEST_BOOT_START=$SECONDS

  guest__poll "${GUEST_BOOT_TIMEOUT:-180}" \
      eval '[ -e "$GUEST_SHARE/ready" ] || [ -e "$GUEST_SHARE/setup-failed" ]'
  local rc=$?
  if [ -e "$GUEST_SHARE/setup-failed" ] || [ $rc -ne 0 ]; then
    if [ -e "$GUEST_SHARE/setup-failed" ]; then
      guest__err "guest setup failed: $(head -1 "$GUEST_SHARE/setup-failed")"
    elif [ $rc -eq 2 ]; then
      guest__err "QEMU exited during boot: $(tail -3 "$GUEST_DIR/qemu.log" "$GUEST_CONSOLE" 2>/dev/null)"
    else
      guest__err "guest not ready after ${GUEST_BOOT_TIMEOUT:-180} s; console: $GUEST_CONSOLE"
    fi
    guest_shutdown
    return 1
  fi
  GUEST_READY_SECONDS=$((SECONDS - GUEST_BOOT_START))
  return 0
}

guest_fact() {
  sed -n "s/^$1=//p" "$GUEST_SHARE/ready"
}

guest__submit() {
  local name="$1" body="$2"
  printf '%s\n' "$body" > "$GUEST_SHARE/cmd/$name.tmp"
  mv "$GUEST_SHARE/cmd/$name.tmp" "$GUEST_SHARE/cmd/$name.sh"
}

guest_run() {
  local timeout=300
  if [ "${1:-}" = -t ]; then timeout="$2"; shift 2; fi
  # The sequence lives in a file: callers often run this in $(...) subshells.
  local seq=$(( $(cat "$GUEST_DIR/seq" 2>/dev/null || echo 0) + 1 ))
  echo "$seq" > "$GUEST_DIR/seq"
  local name="run$seq"
  guest__submit "$name" "$1"
  guest__poll "$timeout" test -e "$GUEST_SHARE/cmd/$name.rc"
  case $? in
    1) cat "$GUEST_SHARE/cmd/$name.out" 2>/dev/null
       guest__err "command $name did not finish within $timeout s"
       return 124 ;;
    2) guest__err "QEMU exited before command $name finished; console: $GUEST_CONSOLE"
       return 124 ;;
  esac
  cat "$GUEST_SHARE/cmd/$name.out"
  return "$(cat "$GUEST_SHARE/cmd/$name.rc")"
}

guest_spawn() {
  local name="$1" body="$2"
  rm -f "$GUEST_SHARE/cmd/bg-$name".* "$GUEST_SHARE/cmd/spawn-$name".*
  printf '%s\n' "$body" > "$GUEST_SHARE/cmd/bg-$name.body"
  guest__submit "spawn-$name" \
    "( bash \"\$SHARE/cmd/bg-$name.body\" > \"\$SHARE/cmd/bg-$name.out\" 2>&1; echo \$? > \"\$SHARE/cmd/bg-$name.rc.tmp\"; mv \"\$SHARE/cmd/bg-$name.rc.tmp\" \"\$SHARE/cmd/bg-$name.rc\" ) < /dev/null > /dev/null 2>&1 &"
  guest__poll 60 test -e "$GUEST_SHARE/cmd/spawn-$name.rc" || { guest__err "spawn $name not accepted"; return 1; }
}

guest_wait() {
  local name="$1" timeout="${2:-300}"
  if ! guest__poll "$timeout" test -e "$GUEST_SHARE/cmd/bg-$name.rc"; then
    cat "$GUEST_SHARE/cmd/bg-$name.out" 2>/dev/null
    guest__err "background job $name did not finish within $timeout s"
    return 124
  fi
  cat "$GUEST_SHARE/cmd/bg-$name.out"
  return "$(cat "$GUEST_SHARE/cmd/bg-$name.rc")"
}

# Waits for the guest to power itself off; a one-shot boot script ends so.
guest_wait_exit() {
  local timeout="${1:-300}"
  guest__poll "$timeout" eval '! kill -0 "$GUEST_QEMU_PID" 2>/dev/null'
  [ $? -eq 1 ] && return 1
  wait "$GUEST_QEMU_PID" 2>/dev/null
  GUEST_QEMU_PID=""
  return 0
}

guest_shutdown() {
  if [ -n "${GUEST_QEMU_PID:-}" ] && kill -0 "$GUEST_QEMU_PID" 2>/dev/null; then
    : > "$GUEST_SHARE/poweroff"
    if ! guest_wait_exit 30; then
      guest__err "guest did not power off within 30 s; killing QEMU $GUEST_QEMU_PID"
      kill "$GUEST_QEMU_PID" 2>/dev/null
      wait "$GUEST_QEMU_PID" 2>/dev/null
    fi
  fi
  GUEST_QEMU_PID=""
  [ -n "${GUEST_NS:-}" ] && ip netns del "$GUEST_NS" 2>/dev/null
  GUEST_NS=""
  return 0
}

guest__main() {
  local mode="${1:-}"; shift || true
  local args=()
  while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do args+=("$1" "$2"); shift 2; done
  trap guest_shutdown EXIT
  trap 'exit 130' INT TERM
  case "$mode" in
    oneshot)
      local script="$GUEST_CACHE/oneshot.$$.sh"
      mkdir -p "$GUEST_CACHE"
      printf '%s\n' "$1" > "$script"
      guest_boot "${args[@]}" --boot-script "$script" || { rm -f "$script"; return 1; }
      rm -f "$script"
      guest_wait_exit "${GUEST_RUN_TIMEOUT:-600}" || { guest__err "guest still running"; return 124; }
      cat "$GUEST_SHARE/boot.out" 2>/dev/null
      if [ ! -s "$GUEST_SHARE/boot.rc" ]; then
        guest__err "guest powered off without an exit code; console: $GUEST_CONSOLE"
        return 1
      fi
      return "$(cat "$GUEST_SHARE/boot.rc")"
      ;;
    shell)
      guest_boot "${args[@]}" || return 1
      echo "guest ready in ${GUEST_READY_SECONDS} s: $(tr '\n' ' ' < "$GUEST_SHARE/ready")" >&2
      local line
      while IFS= read -r line; do
        guest_run "$line"
        echo "[rc=$?]"
      done
      ;;
    *)
      echo "usage: guest.sh oneshot|shell [--mtu N] [--ip A.B.C.D/NN] ['commands']" >&2
      return 2
      ;;
  esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  guest__main "$@"
  exit $?
fi
