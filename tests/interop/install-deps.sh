#!/usr/bin/env bash
# Host packages the interop harness needs: QEMU to boot the rxe guest, cpio and
# kmod to build its initramfs, binutils to walk ELF dependencies, gcc and
# libibverbs-dev to compile the guest test program, tshark for host captures.
# The guest's own packages (kernel, busybox, rdma-core tools) are only
# downloaded by build-guest.sh, never installed here.
# Idempotent: prints nothing and installs nothing when everything is present.
set -euo pipefail

PKGS=(
  qemu-system-x86 cpio kmod binutils gcc libibverbs-dev
  iproute2 tshark zstd xz-utils python3
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "interop install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
log="$(mktemp)"
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } > "$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
