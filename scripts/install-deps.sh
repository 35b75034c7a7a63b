#!/usr/bin/env bash
# Installs the Debian packages rocemu needs to build, test and benchmark.
# Idempotent: prints nothing and installs nothing when everything is present.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  clang libclang-rt-14-dev
  libdpdk-dev dpdk dpdk-dev
  libboost-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libisal-dev libpcap-dev
  tshark iproute2 iputils-ping gnuplot-nox
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer once, quietly.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
