#!/usr/bin/env bash
# Configure and build ghfit.  usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bdir=${1:-$here/build}
shift || true
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$here" -B "$bdir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$bdir" -j "$jobs"
