#!/usr/bin/env bash
# Runs the whole test suite (unit, compatibility and scenario tests) against
# the build from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${ELASTICDL_BUILD_DIR:-build}
# One test more than cores: scenario tests spend about a sixth of their time
# waiting (leases to lapse, processes to die, jobs to start), which the extra
# test fills (scenario tests on 2 cores: 505 s with -j2, 435 s with -j3).
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(($(nproc) + 1))" "$@"
