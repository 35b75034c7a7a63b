#!/usr/bin/env bash
# Configures and builds one flavour of rocemu. Usage: scripts/build.sh [release|asan] [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
shift || true
case "$flavour" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DROCEMU_SANITIZE=ON -DROCEMU_DPDK=OFF) ;;
  *) echo "usage: scripts/build.sh [release|asan] [targets...]" >&2; exit 2 ;;
esac
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
fi
ninja -C "$dir" -j"$(nproc)" "$@" | grep -v '^\[' || true
test "${PIPESTATUS[0]}" -eq 0
