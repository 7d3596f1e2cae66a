#!/usr/bin/env bash
# Builds one libFuzzer target in build-fuzz/ and runs it on a copy of its seed
# corpus. See docs/fuzzing.md.
#
#   fuzz/run.sh TARGET [SECONDS] [libFuzzer flags...]
#       TARGET: one of `targets` below (docs/fuzzing.md). SECONDS defaults
#       to 600. Extra flags go to libFuzzer (e.g. -jobs=2, -fork=1
#       -ignore_crashes=1, -runs=0). The run works in
#       build-fuzz/fuzz-work/TARGET/: corpus/ (seeds plus what the fuzzer
#       found, kept between runs) and artifacts/ (crash-*, leak-*, ...).
#   fuzz/run.sh build [TARGET...]
#       Only configures and builds (all targets by default), e.g. to replay
#       reproducers: build-fuzz/bin/TARGET_fuzzer fuzz/crashes/TARGET-*
#   fuzz/run.sh seeds
#       Rewrites fuzz/corpus/*/ with each fuzzer's seed-writing mode.
#
# Environment: ELASTICDL_FUZZ_BUILD overrides the build folder.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${ELASTICDL_FUZZ_BUILD:-$root/build-fuzz}
targets=(recordio tfrecord compression example idx csv sql_statement params kubeconfig experiment_config
  events)

usage() {
  echo "usage: $0 {$(IFS='|'; echo "${targets[*]}")} [SECONDS] [libFuzzer flags...]" >&2
  echo "       $0 build [TARGET...]" >&2
  echo "       $0 seeds" >&2
  exit 2
}

# Longest input each target is given: a few chunks or records, or one Example.
max_len() {
  case $1 in
    example | kubeconfig | experiment_config) echo 8192 ;;
    sql_statement | params) echo 4096 ;;
    *) echo 32768 ;;
  esac
}

configure_and_build() {
  # The whole project is configured (so LibTorch must be findable), but only
  # the fuzz targets and the libraries they link are built.
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DELASTICDL_FUZZ=ON \
    -DELASTICDL_BUILD_TESTS=OFF -DELASTICDL_BUILD_BENCH=OFF >/dev/null
  ninja -C "$build" "${@/%/_fuzzer}"
}

[[ $# -ge 1 ]] || usage
target=$1
shift

if [[ $target == build ]]; then
  if [[ $# -eq 0 ]]; then set -- "${targets[@]}"; fi
  for t in "$@"; do [[ " ${targets[*]} " == *" $t "* ]] || usage; done
  configure_and_build "$@"
  exit 0
fi

if [[ $target == seeds ]]; then
  configure_and_build "${targets[@]}"
  for t in "${targets[@]}"; do
    rm -rf "$root/fuzz/corpus/$t"
    "$build/bin/${t}_fuzzer" --write_seeds="$root/fuzz/corpus/$t"
  done
  exit 0
fi

[[ " ${targets[*]} " == *" $target "* ]] || usage
seconds=600
if [[ $# -ge 1 && $1 =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi

configure_and_build "$target"
work=$build/fuzz-work/$target
mkdir -p "$work/corpus" "$work/artifacts"
cp "$root/fuzz/corpus/$target"/* "$work/corpus/"

# Leaks and UBSan reports are fatal, so libFuzzer saves the input for them.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
exec "$build/bin/${target}_fuzzer" \
  -max_total_time="$seconds" -rss_limit_mb=2048 -max_len="$(max_len "$target")" -timeout=30 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$@" "$work/corpus"
