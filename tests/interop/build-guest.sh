#!/usr/bin/env bash
# Builds the rxe interop guest: a Debian 6.1 kernel plus an initramfs holding
# busybox, iproute2, rdma-core's tools, perftest, the rdma_ops test program and
# the kernel modules rdma_rxe needs.
#
# Everything comes from Debian packages that are downloaded and unpacked, never
# installed. The result is cached under .cache/guest-<key>, where the key hashes
# every package version used plus this script and the files in guest/, so
# a rebuild happens only when one of those changes. .cache/guest always points
# at the newest build.
#
# Usage: build-guest.sh [-v]     prints nothing on success unless -v.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${ROCEMU_INTEROP_CACHE:-$HERE/.cache}"
VERBOSE=0
[ "${1:-}" = "-v" ] && VERBOSE=1

log() { [ "$VERBOSE" = 1 ] && echo "build-guest: $*" >&2 || true; }
die() { echo "build-guest: error: $*" >&2; exit 1; }

# Userspace packages whose programs go into the guest. Their libraries are
# found by walking ELF NEEDED entries over the packages' dependency closure.
# Commands from the host run under bash: Debian's busybox sh runs its own
# applets (ip, tc, ...) in preference to the real tools on PATH.
TOOL_PKGS=(busybox-static bash iproute2 ibverbs-utils rdmacm-utils perftest)
# Loaded at run time through dlopen, so no NEEDED entry leads to them.
EXTRA_PKGS=(ibverbs-providers libgcc-s1)
# rxe asks the crypto API for "crc32" (its ICRC) when a link is added; with no
# modprobe in the guest that request fails unless crc32_generic is loaded first.
# The host kernel here has no netem, so loss and reordering are injected in the
# guest: netem on eth0 for what rxe sends, and through ifb (ingress redirect)
# for what it receives. uio_pci_generic hands one of the guest's virtio-net
# NICs to DPDK's own PMD (a PCI device as a live fabric's cable end).
MODULES=(virtio_pci virtio_net 9pnet_virtio 9p crc32_generic rdma_rxe ib_uverbs rdma_ucm ib_umad
         sch_netem sch_ingress ifb act_mirred cls_matchall uio_pci_generic)

command -v apt-cache >/dev/null || die "apt-cache missing: this needs a Debian host"
for t in dpkg-deb depmod modprobe cpio readelf gcc zstd; do
  command -v "$t" >/dev/null || die "'$t' missing: run tests/interop/install-deps.sh"
done
[ -f /usr/include/infiniband/verbs.h ] || die "libibverbs-dev missing: run tests/interop/install-deps.sh"

# Harnesses running in parallel share one cache: build one image at a time.
mkdir -p "$CACHE"
exec 9> "$CACHE/.build.lock"
flock 9

# Resolving versions through apt-cache takes seconds; while apt's package
# lists and the inputs here are unchanged, the previous answer still holds.
inputs_hash() {
  { stat -c '%n %s %Y' /var/lib/apt/lists/*_Packages* /var/lib/dpkg/status 2>/dev/null
    cat "$HERE/build-guest.sh" "$HERE"/guest/*; } | sha256sum | cut -c1-16
}
FAST="$CACHE/resolved-$(inputs_hash)"
if [ -f "$FAST" ] && [ -f "$CACHE/$(cat "$FAST")/done" ]; then
  ln -sfn "$(cat "$FAST")" "$CACHE/guest"
  log "cached: $CACHE/$(cat "$FAST") (package lists unchanged)"
  exit 0
fi

if ! apt-cache show --no-all-versions linux-image-amd64 >/dev/null 2>&1; then
  apt-get update -qq
fi

KPKG="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
[ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 to a kernel package"

mapfile -t CLOSURE < <(apt-cache depends --recurse --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances \
    "${TOOL_PKGS[@]}" "${EXTRA_PKGS[@]}" | grep -v '^[ <]' | sort -u)

# pkg=version for every package, in a stable order: the cache key's input.
mapfile -t PINNED < <(apt-cache show --no-all-versions "$KPKG" "${CLOSURE[@]}" |
    awk '/^Package:/ {p=$2} /^Version:/ {print p "=" $2}' | sort -u)

# rdma_ops is compiled on the host, so its compiler and headers count too.
HOST_TOOLS="$(dpkg-query -W -f '${Package}=${Version}\n' gcc libibverbs-dev 2>/dev/null)"
KEY="$( { printf '%s\n' "${PINNED[@]}" "$HOST_TOOLS"; cat "$HERE/build-guest.sh" "$HERE"/guest/*; } |
        sha256sum | cut -c1-16)"
OUT="$CACHE/guest-$KEY"
if [ -f "$OUT/done" ]; then
  ln -sfn "guest-$KEY" "$CACHE/guest"
  echo "guest-$KEY" > "$FAST"
  log "cached: $OUT"
  exit 0
fi

T0=$(date +%s.%N)
DEBS="$CACHE/debs"
WORK="$CACHE/work-$KEY"
rm -rf "$CACHE"/work-* "$OUT"
mkdir -p "$DEBS" "$WORK/pkgs" "$WORK/root" "$WORK/kroot"

# apt names files pkg_version_arch.deb with ':' in the version written as %3a.
deb_file() {
  local p="${1%%=*}" v="${1#*=}"
  compgen -G "$DEBS/${p}_${v//:/%3a}_*.deb" | head -1 || true
}
need=()
for pv in "${PINNED[@]}"; do
  [ -n "$(deb_file "$pv")" ] || need+=("$pv")
done
if [ ${#need[@]} -gt 0 ]; then
  log "downloading ${#need[@]} packages"
  (cd "$DEBS" && apt-get download -qq -o APT::Sandbox::User=root "${need[@]}" >/dev/null) ||
    die "apt-get download failed for: ${need[*]}"
fi

log "unpacking"
for pv in "${PINNED[@]}"; do
  p="${pv%%=*}"
  f="$(deb_file "$pv")"
  [ -n "$f" ] || die "downloaded package $pv not found in $DEBS"
  if [ "$p" = "$KPKG" ]; then
    dpkg-deb -x "$f" "$WORK/kroot"
  else
    mkdir -p "$WORK/pkgs/$p"
    dpkg-deb -x "$f" "$WORK/pkgs/$p"
    cp -a "$WORK/pkgs/$p/." "$WORK/root/"
  fi
done

KVER="$(ls "$WORK/kroot/lib/modules")"
[ "$(echo "$KVER" | wc -l)" = 1 ] || die "expected one kernel version in $KPKG, got: $KVER"

INITRD="$WORK/initramfs"
mkdir -p "$INITRD"/{bin,sbin,usr/bin,usr/sbin,lib/x86_64-linux-gnu,lib64,etc/libibverbs.d,proc,sys,dev,tmp,share,lib/modules}
mkdir -p "$INITRD/usr/lib/x86_64-linux-gnu/libibverbs"

log "kernel modules for $KVER"
depmod -b "$WORK/kroot" "$KVER"
: > "$INITRD/etc/modules.load"
declare -A seen_mod=()
for m in "${MODULES[@]}"; do
  deps="$(modprobe -d "$WORK/kroot" -S "$KVER" --show-depends "$m")" || die "kernel $KVER has no module $m"
  while read -r kind path _; do
    [ "$kind" = insmod ] || continue
    [ -n "${seen_mod[$path]:-}" ] && continue
    seen_mod[$path]=1
    name="$(basename "$path")"
    case "$name" in
      *.ko.xz)  xz -dc "$path" > "$INITRD/lib/modules/${name%.xz}"; name="${name%.xz}" ;;
      *.ko.zst) zstd -qdc "$path" > "$INITRD/lib/modules/${name%.zst}"; name="${name%.zst}" ;;
      *.ko)     cp "$path" "$INITRD/lib/modules/$name" ;;
      *) die "unexpected module file $path" ;;
    esac
    echo "$name" >> "$INITRD/etc/modules.load"
  done <<< "$deps"
done
[ -s "$INITRD/etc/modules.load" ] || die "modprobe resolved no modules"

log "busybox"
cp "$WORK/root/bin/busybox" "$INITRD/bin/busybox"
# Applets live in /bin only; the real tools go to /usr/bin, which PATH puts first.
for applet in $("$INITRD/bin/busybox" --list); do
  [ -e "$INITRD/bin/$applet" ] || ln -s busybox "$INITRD/bin/$applet"
done

ROOT="$WORK/root"
LIBDIRS=("$ROOT/lib/x86_64-linux-gnu" "$ROOT/usr/lib/x86_64-linux-gnu" "$ROOT/lib64" "$ROOT/usr/lib")
declare -A have_lib=()
copy_needed() {
  local elf="$1" lib d found
  for lib in $(readelf -d "$elf" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [ -n "${have_lib[$lib]:-}" ] && continue
    found=""
    for d in "${LIBDIRS[@]}"; do
      if [ -e "$d/$lib" ]; then found="$d/$lib"; break; fi
    done
    [ -n "$found" ] || die "$(basename "$elf") needs $lib, which no unpacked package provides"
    have_lib[$lib]=1
    cp -L "$found" "$INITRD/lib/x86_64-linux-gnu/$lib"
    copy_needed "$found"
  done
}

log "tools and their libraries"
for p in "${TOOL_PKGS[@]}"; do
  [ "$p" = busybox-static ] && continue
  while IFS= read -r -d '' f; do
    readelf -h "$f" >/dev/null 2>&1 || continue
    cp "$f" "$INITRD/usr/bin/"
    copy_needed "$f"
  done < <(find "$WORK/pkgs/$p" -path '*bin/*' -type f -print0)
done

cp -L "$ROOT/lib64/ld-linux-x86-64.so.2" "$INITRD/lib64/" 2>/dev/null ||
  cp -L "$ROOT/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$INITRD/lib64/"
# libibverbs dlopens the provider named by the .driver file; rping's
# pthread_cancel dlopens libgcc_s. Neither shows up as NEEDED.
rxe_so="$(ls "$ROOT"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so)"
cp -L "$rxe_so" "$INITRD/usr/lib/x86_64-linux-gnu/libibverbs/"
copy_needed "$rxe_so"
cp "$ROOT/etc/libibverbs.d/rxe.driver" "$INITRD/etc/libibverbs.d/"
cp -L "$ROOT/lib/x86_64-linux-gnu/libgcc_s.so.1" "$INITRD/lib/x86_64-linux-gnu/"
have_lib[libgcc_s.so.1]=1

log "rdma_ops"
gcc -O2 -Wall -Wextra -Werror -std=gnu11 -o "$INITRD/usr/bin/rdma_ops" "$HERE/guest/rdma_ops.c" -libverbs
copy_needed "$INITRD/usr/bin/rdma_ops"

install -m 755 "$HERE/guest/init" "$INITRD/init"
install -m 755 "$HERE/guest/wait-listen" "$INITRD/usr/bin/wait-listen"
printf 'root:x:0:0:root:/:/bin/sh\n' > "$INITRD/etc/passwd"
printf '127.0.0.1 localhost\n' > "$INITRD/etc/hosts"
{ printf 'kernel %s\n' "$KVER"; printf '%s\n' "${PINNED[@]}"; printf 'host %s\n' $HOST_TOOLS; } > "$INITRD/etc/rocemu-guest.manifest"

mkdir -p "$OUT"
cp "$WORK/kroot/boot/vmlinuz-$KVER" "$OUT/vmlinuz"
(cd "$INITRD" && find . -print0 | cpio --null -o -H newc --quiet) | zstd -q -3 -T2 > "$OUT/initrd.img"
cp "$INITRD/etc/rocemu-guest.manifest" "$OUT/manifest"
rm -rf "$WORK"
T1=$(date +%s.%N)
awk -v a="$T0" -v b="$T1" 'BEGIN { printf "build_seconds %.1f\n", b - a }' >> "$OUT/manifest"
touch "$OUT/done"
ln -sfn "guest-$KEY" "$CACHE/guest"
rm -f "$CACHE"/resolved-*
for old in "$CACHE"/guest-*; do
  [ "$old" = "$OUT" ] || rm -rf "$old"
done
echo "guest-$KEY" > "$FAST"
log "built $OUT in $(tail -1 "$OUT/manifest" | cut -d' ' -f2) s"
