#!/usr/bin/env bash
# Recovery figures under faults (see bench/chaos_bench.py for what each is):
#
#   bench/chaos_bench.sh [BUILD_DIR] [chaos_bench.py flags...]   # default build; a few minutes
#
# Environment: ELASTICDL_CACHE_DIR (compiled-zoo cache; default zoo-cache in
# BUILD_DIR), PYTHON (default /usr/bin/python3).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
shift || true
BIN=$BUILD/bin/elasticdl
[[ -x $BIN ]] || { echo "missing $BIN: cmake --build $BUILD --target elasticdl" >&2; exit 1; }
export ELASTICDL_CACHE_DIR=${ELASTICDL_CACHE_DIR:-$BUILD/zoo-cache}
exec "${PYTHON:-/usr/bin/python3}" "$ROOT/bench/chaos_bench.py" --bin="$BIN" "$@"
