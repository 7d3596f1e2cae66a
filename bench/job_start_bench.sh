#!/usr/bin/env bash
# What a small local job costs from `elasticdl train` to its exit: the
# client, the master, the fork server, one parameter server and one worker
# training 512 records of tests/zoo/exactness (no sleeps) in one epoch. Each
# build's wall seconds and CPU seconds (the whole machine's, from
# /proc/stat: run it on an idle machine) are printed side by side with those
# of a baseline build's binary when one is given, the runs interleaved, after
# one warm-up job each (which compiles the zoo into the cache).
#
#   bench/job_start_bench.sh BUILD_DIR [BASELINE_BUILD_DIR] [REPETITIONS]
#
# Prints one line per run, then "best median" of each build and the ratio of
# the medians (this build ÷ the baseline).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILDS=("$(cd "$1" && pwd)")
[[ -n ${2:-} ]] && BUILDS+=("$(cd "$2" && pwd)")
REPS=${3:-10}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/job-start-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

read -r ZOO MODEL_DEF PARAMS < <(cd "$ROOT/tests/scenario" && /usr/bin/python3 -c "
import exactness
exactness.write_records('$WORK/train.recordio', range(512))
print(exactness.MODEL_ZOO, exactness.MODEL_DEF, exactness.model_params(512, 0).replace(' ', ''))")

busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }

# "WALL CPU" seconds of one job with BIN, its log in LOG.
job() {  # bin log
  local start end ticks0 ticks1
  rm -rf "$WORK/job"
  ticks0=$(busy_ticks)
  start=$(date +%s.%N)
  ELASTICDL_CACHE_DIR=$WORK/cache "$1" train --model_zoo="$ZOO" --model_def="$MODEL_DEF" \
    --training_data="$WORK/train.recordio" --params="$PARAMS" --num_epochs=1 --num_workers=1 \
    --num_ps_pods=1 --minibatch_size=32 --num_threads=1 --optimizer=unit_step_optimizer \
    --job_dir="$WORK/job" --no_progress >"$2" 2>&1 || { echo "elasticdl train failed: see $2" >&2; exit 1; }
  end=$(date +%s.%N)
  ticks1=$(busy_ticks)
  awk -v a="$start" -v b="$end" -v t0="$ticks0" -v t1="$ticks1" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f %.2f\n", b - a, (t1 - t0) / hz }'
}

declare -A walls cpus
for b in "${!BUILDS[@]}"; do job "${BUILDS[$b]}/bin/elasticdl" "$WORK/warm-$b.log" >/dev/null; done
for rep in $(seq 1 "$REPS"); do
  for b in "${!BUILDS[@]}"; do
    read -r wall cpu < <(job "${BUILDS[$b]}/bin/elasticdl" "$WORK/run-$b-$rep.log")
    echo "run $rep ${BUILDS[$b]}: wall ${wall} s, CPU ${cpu} s"
    walls[$b]+="$wall "
    cpus[$b]+="$cpu "
  done
done

summary() {  # values...
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f\n", v[1], m }'
}
declare -A median
for b in "${!BUILDS[@]}"; do
  # shellcheck disable=SC2086
  read -r wall_best wall_median < <(summary ${walls[$b]})
  # shellcheck disable=SC2086
  read -r cpu_best cpu_median < <(summary ${cpus[$b]})
  median[$b]="$wall_median $cpu_median"
  echo "${BUILDS[$b]}: wall best ${wall_best} median ${wall_median} s; CPU best ${cpu_best} median ${cpu_median} s"
done
if [[ ${#BUILDS[@]} -eq 2 ]]; then
  read -r w0 c0 <<<"${median[0]}"
  read -r w1 c1 <<<"${median[1]}"
  awk -v w0="$w0" -v w1="$w1" -v c0="$c0" -v c1="$c1" \
    'BEGIN { printf "this build / baseline, medians: wall %.3f, CPU %.3f\n", w0 / w1, c0 / c1 }'
fi
