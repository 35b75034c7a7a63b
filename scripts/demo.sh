#!/usr/bin/env bash
# The main job in one command: installs what is missing, builds, and runs the
# built-in demo on its embedded default configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh release rocemu
exec ./build/tools/rocemu/rocemu demo "$@"
