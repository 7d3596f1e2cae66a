#!/usr/bin/env bash
# What a small local job costs from `elasticdl train` to its exit: the
# client, the master, the fork server, one parameter server and one worker
# training 512 records of tests/zoo/exactness (no sleeps) in one epoch. Wall
# seconds and CPU seconds (the whole machine's, from /proc/stat: run it on an
# idle machine), the runs interleaved after one warm-up job each (which
# compiles the zoo into the cache), of
#
#   spare     BUILD_DIR/bin/elasticdl: the master adopts the client's spare
#             fork server (cluster/fork_server.h);
#   exec      BUILD_DIR/bin/elasticdl-torch run directly without
#             OMP_WAIT_POLICY: the client's libgomp loads without the
#             PASSIVE the job's processes get, so the master refuses the
#             spare and execs its own server (checked in the log);
#   baseline  BASELINE_BUILD_DIR/bin/elasticdl, when given.
#
#   bench/job_start_bench.sh BUILD_DIR [BASELINE_BUILD_DIR] [REPETITIONS]
#
# Prints one line per run, then "best median" of each and the ratios of the
# medians to spare's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd)
NAMES=(spare exec)
COMMANDS=("$BUILD/bin/elasticdl" "env -u OMP_WAIT_POLICY $BUILD/bin/elasticdl-torch")
if [[ -n ${2:-} ]]; then
  NAMES+=(baseline)
  COMMANDS+=("$(cd "$2" && pwd)/bin/elasticdl")
fi
REPS=${3:-10}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/job-start-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

read -r ZOO MODEL_DEF PARAMS < <(cd "$ROOT/tests/scenario" && /usr/bin/python3 -c "
import exactness
exactness.write_records('$WORK/train.recordio', range(512))
print(exactness.MODEL_ZOO, exactness.MODEL_DEF, exactness.model_params(512, 0).replace(' ', ''))")

busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }

# "WALL CPU" seconds of one job run by COMMAND (words), its log in LOG.
job() {  # command log
  local start end ticks0 ticks1
  rm -rf "$WORK/job"
  ticks0=$(busy_ticks)
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  ELASTICDL_CACHE_DIR=$WORK/cache $1 train --model_zoo="$ZOO" --model_def="$MODEL_DEF" \
    --training_data="$WORK/train.recordio" --params="$PARAMS" --num_epochs=1 --num_workers=1 \
    --num_ps_pods=1 --minibatch_size=32 --num_threads=1 --optimizer=unit_step_optimizer \
    --job_dir="$WORK/job" --no_progress >"$2" 2>&1 || { echo "elasticdl train failed: see $2" >&2; exit 1; }
  end=$(date +%s.%N)
  ticks1=$(busy_ticks)
  awk -v a="$start" -v b="$end" -v t0="$ticks0" -v t1="$ticks1" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f %.2f\n", b - a, (t1 - t0) / hz }'
}

declare -A walls cpus
for i in "${!NAMES[@]}"; do job "${COMMANDS[$i]}" "$WORK/warm-$i.log" >/dev/null; done
for rep in $(seq 1 "$REPS"); do
  for i in "${!NAMES[@]}"; do
    log=$WORK/run-$i-$rep.log
    read -r wall cpu < <(job "${COMMANDS[$i]}" "$log")
    refused=$(grep -c "the client's spare server" "$log" || true)
    if [[ ${NAMES[$i]} == exec && $refused -eq 0 ]] || [[ ${NAMES[$i]} == spare && $refused -ne 0 ]]; then
      echo "run $rep ${NAMES[$i]}: the spare was not what this run measures; see $log" >&2
      cp "$log" "${TMPDIR:-/tmp}/job-start-bench-failed.log"
      exit 1
    fi
    echo "run $rep ${NAMES[$i]}: wall ${wall} s, CPU ${cpu} s"
    walls[$i]+="$wall "
    cpus[$i]+="$cpu "
  done
done

summary() {  # values...
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f\n", v[1], m }'
}
declare -A median
for i in "${!NAMES[@]}"; do
  # shellcheck disable=SC2086
  read -r wall_best wall_median < <(summary ${walls[$i]})
  # shellcheck disable=SC2086
  read -r cpu_best cpu_median < <(summary ${cpus[$i]})
  median[$i]="$wall_median $cpu_median"
  echo "${NAMES[$i]} (${COMMANDS[$i]}): wall best ${wall_best} median ${wall_median} s; CPU best ${cpu_best} median ${cpu_median} s"
done
read -r w0 c0 <<<"${median[0]}"
for i in "${!NAMES[@]}"; do
  [[ $i -eq 0 ]] && continue
  read -r w c <<<"${median[$i]}"
  awk -v n="${NAMES[$i]}" -v w0="$w0" -v w="$w" -v c0="$c0" -v c="$c" \
    'BEGIN { printf "spare / %s, medians: wall %.3f, CPU %.3f\n", n, w0 / w, c0 / c }'
done
