#!/usr/bin/env bash
# Test accuracy after training Fashion-MNIST with the seed CNN, several seeds
# per configuration, every configuration beside the same recipe run in one
# process (row a), in the same run:
#
#   a     the bare LibTorch loop with exactly the zoo's recipe (accuracy_bench:
#         dataset_fn's /255 and shuffle, SGD 0.1, batch 64, tasks of 64 x 8
#         shuffled per epoch), 2 threads
#   b     elasticdl train, 1 worker x 2 threads + 1 PS (default flags)
#   c     2 workers x 1 thread + 1 PS, --grads_to_wait=1 (one gradient per step)
#   d     2 workers, --use_async=true (default staleness bound)
#   e     2 workers, --grads_to_wait=2 (two gradients averaged per step)
#   A-E   a-e with the main job's recipe (--dataset_fn=standardized_dataset_fn
#         --optimizer=adam_optimizer: standardized pixels, Adam 1e-3), which
#         varies much less from seed to seed than the seed's: the difference
#         of B-E from A shows what the distributed configuration itself costs
#   wN    default flags (synchronous, one minibatch of every worker per step)
#         with N workers x 1 thread
#   mN    the main job (scripts/main_job.sh): default flags, the zoo's
#         standardized_dataset_fn and adam_optimizer, N workers x 1 thread
#   rN    the main job under --distribution_strategy=AllreduceStrategy, N
#         workers x 1 thread (no parameter server)
#   aN    N workers, --use_async=true (--max_staleness=1, the default)
#   auN   N workers, --use_async=true --max_staleness=-1 (no bound)
#   amN   N workers, --use_async=true --max_staleness=-1 --lr_staleness_modulation=true
#   gN    the main job started with 1 worker and grown to N (`elasticdl job scale`)
#         once a tenth of its records are trained: a job that starts small
#   pN    the main job with N workers, one of which gets SIGTERM (what Slurm sends a
#         preempted job) once a third of the records are trained; it hands its task
#         back and the master starts another in its place
#
# Per row: mean, min and max accuracy over the seeds, the difference of the
# mean from row a (rows B-E and mN: from row A), and the mean records/s of the
# training window.
#
#   bench/accuracy_bench.sh [BUILD_DIR]     # default build; ~90 s per run on 2 cores
#
# Environment: ROWS (default "a b c d e"), SEEDS (default "1 2 3 4 5"),
# EPOCHS (default 1), DATA (a folder with train/ and test/ from
# `elasticdl data mnist`; written under WORK when missing), WORK (scratch and
# logs; default a new temp dir), ELASTICDL_CACHE_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
BIN=$BUILD/bin
ROWS=${ROWS:-a b c d e}
SEEDS=${SEEDS:-1 2 3 4 5}
EPOCHS=${EPOCHS:-1}
WORK=${WORK:-$(mktemp -d -t accuracy_bench.XXXXXX)}
# Benchmarks are not part of the default build: build (or bring up to date) what runs.
cmake --build "$BUILD" --target elasticdl accuracy_bench >&2
DATA=${DATA:-$WORK/mnist}
[[ -d $DATA/train ]] || "$BIN/elasticdl" data mnist --output "$DATA" >/dev/null
LOG=$WORK/log
mkdir -p "$LOG"
echo "# accuracy_bench: rows '$ROWS', seeds '$SEEDS', $EPOCHS epoch(s), $(nproc) cores," \
  "load $(cut -d' ' -f1-3 /proc/loadavg); logs in $LOG"

# "accuracy records/s" of one run.
bare() {  # seed log [flags...]
  local seed=$1 log=$2
  shift 2
  "$BIN/accuracy_bench" --train="$DATA/train" --test="$DATA/test" --seed="$seed" \
    --epochs="$EPOCHS" --threads=2 "$@" >"$log" 2>&1
  sed -n 's/^RESULT accuracy=\([0-9.]*\) .*/\1 0/p' "$log"
}
ours() {  # seed log workers threads flags...
  local seed=$1 log=$2 workers=$3 threads=$4
  shift 4
  local servers=(--num_ps_pods=1)
  [[ " $* " =~ " --distribution_strategy=AllreduceStrategy " ]] && servers=()
  rm -rf "$log.job"  # a job directory holds one job (a rerun in the same WORK)
  "$BIN/elasticdl" train --model_zoo="$ROOT/model_zoo" \
    --model_def=mnist.mnist_functional_api.custom_model --training_data="${TRAIN:-$DATA/train}" \
    --validation_data="$DATA/test" --num_epochs="$EPOCHS" --num_workers="$workers" \
    --num_threads="$threads" "${servers[@]}" --minibatch_size=64 --seed="$seed" \
    --no_progress --job_dir="$log.job" "$@" >"$log" 2>&1 || { echo "0 0"; return; }
  local acc rate
  acc=$(sed -n 's/^accuracy: \([0-9.]*\) .*/\1/p' "$log" | tail -n1)
  rate=$(sed -n 's/.*s of training: \([0-9.]*\) records\/s.*/\1/p' "$log")
  echo "${acc:-0} ${rate:-0}"
}
RECIPE=(--dataset_fn=standardized_dataset_fn --optimizer=adam_optimizer)
# Records of the job's training tasks done so far, from its event log.
trained() {  # job_dir
  grep -h '"event":"task_done"' "$1/events.jsonl" 2>/dev/null |
    sed -n 's/.*"records":\([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }'
}
# `ours`, with ACTION run on the job once FRACTION of its records are trained.
ours_then() {  # fraction action seed log workers threads flags...
  local fraction=$1 action=$2 log=$4
  local total=$((60000 * EPOCHS))
  ours "${@:3}" >"$log.result" &
  local job=$!
  until [[ $(trained "$log.job") -ge $(awk -v t="$total" -v f="$fraction" 'BEGIN { print int(t * f) }') ]]; do
    kill -0 "$job" 2>/dev/null || break
    sleep 0.2
  done
  kill -0 "$job" 2>/dev/null && "$action" "$log.job"
  wait "$job" || true
  cat "$log.result"
}
grow() { "$BIN/elasticdl" job scale "$1" --num_workers="$GROW_TO" >/dev/null; }
preempt() {  # SIGTERM to the first worker the job started
  kill -TERM "$(grep -h '"event":"worker_started"' "$1/events.jsonl" | head -n1 |
    sed -n 's/.*"pid":\([0-9]*\).*/\1/p')"
}
run() {  # row seed log
  case $1 in
    A) bare "$2" "$3" "${RECIPE[@]}" ;;
    [B-E]) run "${1,,}" "$2" "$3" "${RECIPE[@]}" ;;
    a) bare "$2" "$3" "${@:4}" ;;
    b) ours "$2" "$3" 1 2 "${@:4}" ;;
    c) ours "$2" "$3" 2 1 --grads_to_wait=1 "${@:4}" ;;
    d) ours "$2" "$3" 2 1 --use_async=true "${@:4}" ;;
    e) ours "$2" "$3" 2 1 --grads_to_wait=2 "${@:4}" ;;
    w*) ours "$2" "$3" "${1#w}" 1 ;;
    m*) ours "$2" "$3" "${1#m}" 1 --dataset_fn=standardized_dataset_fn --optimizer=adam_optimizer ;;
    r*) ours "$2" "$3" "${1#r}" 1 --dataset_fn=standardized_dataset_fn --optimizer=adam_optimizer \
          --distribution_strategy=AllreduceStrategy ;;
    g*) GROW_TO=${1#g} ours_then 0.1 grow "$2" "$3" 1 1 "${RECIPE[@]}" --max_workers="${1#g}" ;;
    p*) ours_then 0.33 preempt "$2" "$3" "${1#p}" 1 "${RECIPE[@]}" ;;
    au*) ours "$2" "$3" "${1#au}" 1 --use_async=true --max_staleness=-1 ;;
    am*) ours "$2" "$3" "${1#am}" 1 --use_async=true --max_staleness=-1 \
           --lr_staleness_modulation=true ;;
    a*) ours "$2" "$3" "${1#a}" 1 --use_async=true ;;
    *) echo "unknown row $1" >&2; exit 2 ;;
  esac
}

# Build (or find cached) the zoo outside every measured run: a job on the
# test records.
TRAIN=$DATA/test ours 0 "$LOG/warm" 1 2 >/dev/null

declare -A ACC RATE
for seed in $SEEDS; do  # seeds outermost: load from other work spreads over the rows
  line="# seed $seed (load $(cut -d' ' -f1 /proc/loadavg)):"
  for row in $ROWS; do
    read -r acc rate <<<"$(run "$row" "$seed" "$LOG/$row.$seed")"
    ACC[$row]+=" $acc"
    RATE[$row]+=" $rate"
    line+=" $row=$acc"
  done
  echo "$line"
done

echo
printf '%-6s %-62s %7s %7s %7s %8s %9s\n' row configuration mean min max "mean-a" "records/s"
describe() {
  case $1 in
    A) echo "bare LibTorch loop, the main job's recipe, 2 threads" ;;
    [B-E]) echo "$(describe "${1,,}"), main recipe" ;;
    a) echo "bare LibTorch loop, the zoo's recipe, 2 threads" ;;
    b) echo "1 worker x 2 threads + 1 PS, default (sync)" ;;
    c) echo "2 workers + 1 PS, --grads_to_wait=1" ;;
    d) echo "2 workers, --use_async=true" ;;
    e) echo "2 workers, --grads_to_wait=2" ;;
    w*) echo "${1#w} workers, default flags (sync, one minibatch per worker)" ;;
    m*) echo "the main job with ${1#m} workers (standardized inputs, Adam)" ;;
    r*) echo "the main job, AllreduceStrategy, ${1#r} workers" ;;
    g*) echo "the main job grown from 1 worker to ${1#g} after a tenth" ;;
    p*) echo "the main job with ${1#p} workers, one preempted (SIGTERM) after a third" ;;
    au*) echo "${1#au} workers, async, no staleness bound" ;;
    am*) echo "${1#am} workers, async, no bound, lr staleness modulation" ;;
    a*) echo "${1#a} workers, async, --max_staleness=1 (default)" ;;
  esac
}
for row in $ROWS; do
  base=a
  [[ $row == [A-E] || $row == m* || $row == r* || $row == g* || $row == p* ]] && base=A
  mean_a=$(tr ' ' '\n' <<<"${ACC[$base]:-}" | awk 'NF { s += $1; n++ } END { print n ? s / n : 0 }')
  read -r mean min max <<<"$(tr ' ' '\n' <<<"${ACC[$row]}" | awk 'NF { s += $1; n++;
    if (n == 1 || $1 < lo) lo = $1; if (n == 1 || $1 > hi) hi = $1 }
    END { printf "%.4f %.4f %.4f", s / n, lo, hi }')"
  rate=$(tr ' ' '\n' <<<"${RATE[$row]}" | awk 'NF { s += $1; n++ } END { printf "%.0f", s / n }')
  diff=$(awk -v m="$mean" -v a="$mean_a" -v has="${ACC[$base]:+1}" \
    'BEGIN { if (has) printf "%+.4f", m - a; else printf "-" }')
  printf '%-6s %-62s %7s %7s %7s %8s %9s\n' "$row" "$(describe "$row")" "$mean" "$min" "$max" \
    "$diff" "$([[ $row == [aA] ]] && echo - || echo "$rate")"
done
