#!/usr/bin/env bash
# Runs the whole test suite (unit, compatibility and scenario tests) against
# the build from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${ELASTICDL_BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@"
