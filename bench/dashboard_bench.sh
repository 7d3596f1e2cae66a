#!/usr/bin/env bash
# What watching a job costs it: the main job's training throughput (the
# training command of scripts/main_job.sh: Fashion-MNIST, the seed's CNN,
# 2 workers + 1 parameter server, one epoch) alone, and with the job's
# dashboard watched every second:
#
#   alone     nobody looks (the master serves the dashboard all the same)
#   polled    a script makes the page's requests every second and scrapes
#             /metrics every second (bench/dashboard_poll.py): the cost of
#             serving
#   browser   headless Chromium with the page open (bench/dashboard_watch.js),
#             polling every second and redrawing its charts, on the same two
#             cores as the job: serving and drawing
#   niced     the same browser at the lowest CPU priority (nice 19): a
#             browser that does not take the job's cores, as on the person's
#             own machine
#
# goal: >= 0.99 of alone. The configurations run REPS
# times in turn (interleaved); the table shows the median and the spread of
# each, and the ratios of the medians. The first browser run saves a
# screenshot of the page when half the records are done, and the page of
# that job served afterwards by `elasticdl dashboard JOB_DIR`, into SHOTS.
#
#   bench/dashboard_bench.sh [BUILD_DIR]      # default build; about 12 minutes
#
# Environment: REPS (default 5), DATA (a folder with train/ and test/ from
# `elasticdl data mnist`; written under $WORK when missing), SHOTS (where the
# screenshots go, default $WORK), WORK (scratch, default a new temp dir),
# ELASTICDL_CACHE_DIR (where the zoo build is cached).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
BIN=$BUILD/bin/elasticdl
REPS=${REPS:-5}
WORK=${WORK:-$(mktemp -d -t dashboard_bench.XXXXXX)}
SHOTS=${SHOTS:-$WORK}
PYTHON=/usr/bin/python3
export NODE_PATH=$ROOT/web/node_modules

[[ -x $BIN ]] || { echo "missing $BIN: scripts/setup.sh builds it" >&2; exit 1; }
[[ -d $NODE_PATH/puppeteer-core ]] || { echo "missing $NODE_PATH: scripts/setup.sh" >&2; exit 1; }
mkdir -p "$WORK/log" "$SHOTS"
echo "# dashboard_bench: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); logs in $WORK/log"

DATA=${DATA:-$WORK/fashion-mnist}
[[ -d $DATA/train ]] || "$BIN" data mnist --output "$DATA" >/dev/null

# The main job's training, into job directory $1; its output on stdout.
train() {
  rm -rf "$1" "$1.model"  # a job directory holds one job
  "$BIN" train --model_zoo="$ROOT/model_zoo" --model_def=mnist.mnist_functional_api.custom_model \
    --training_data="$DATA/train" --validation_data="$DATA/test" \
    --dataset_fn=standardized_dataset_fn --optimizer=adam_optimizer --num_epochs=1 \
    --num_workers=2 --num_ps_pods=1 --minibatch_size=64 --seed=0 --no_progress \
    --job_dir="$1" --output="$1.model"
}
rate() { sed -n 's/.*s of training: \([0-9.]*\) records\/s.*/\1/p' "$1"; }

# One run of configuration $1 (alone|polled|browser), number $2; prints its
# records/s. A watcher is started (the browser launched) before the job, as a
# person's browser is open before they look, and opens the dashboard as soon
# as the master serves it.
run() {
  local mode=$1 r=$2 job=$WORK/job-$1-$2 log=$WORK/log/$1-$2 watcher=
  rm -rf "$job"
  if [[ $mode == polled ]]; then
    "$PYTHON" "$ROOT/bench/dashboard_poll.py" "$job" >"$log.watcher" 2>&1 &
    watcher=$!
  elif [[ $mode == browser || $mode == niced ]]; then
    local shot=() nice=()
    [[ $mode == browser && $r == 1 ]] && shot=("$SHOTS/dashboard-live.png")
    [[ $mode == niced ]] && nice=(nice -n 19)
    "${nice[@]}" node "$ROOT/bench/dashboard_watch.js" "$job" watch "${shot[@]}" \
      >"$log.watcher" 2>&1 &
    watcher=$!
  fi
  if [[ -n $watcher ]]; then
    until grep -q '^ready' "$log.watcher"; do
      kill -0 $watcher 2>/dev/null || { cat "$log.watcher" >&2; exit 1; }
      sleep 0.1
    done
  fi
  train "$job" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  if [[ -n $watcher ]]; then
    kill $watcher 2>/dev/null || true
    wait $watcher 2>/dev/null || true
  fi
  rate "$log"
}

# The zoo is built (and cached) outside every timed window.
rm -rf "$WORK/warm-up"
train "$WORK/warm-up" >"$WORK/log/warm-up" 2>&1 || { cat "$WORK/log/warm-up" >&2; exit 1; }

declare -A RUNS
for ((r = 1; r <= REPS; r++)); do
  for mode in alone polled browser niced; do
    RUNS[$mode]+="$(run $mode $r) "
  done
done

# The first browser run's job, after it ended.
"$BIN" dashboard "$WORK/job-browser-1" >"$WORK/log/served" 2>&1 &
server=$!
while ! grep -q '^dashboard: ' "$WORK/log/served"; do sleep 0.1; done
url=$(sed -n 's/^dashboard: //p' "$WORK/log/served")
node "$ROOT/bench/dashboard_watch.js" "$url" ended "$SHOTS/dashboard-ended.png"
kill -INT $server
wait $server

stats() {  # "a b c" -> "median min max"
  tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g |
    awk '{v[NR]=$1} END {printf "%s %s %s", v[int((NR+1)/2)], v[1], v[NR]}'
}
read -r ALONE ALONE_MIN ALONE_MAX <<<"$(stats "${RUNS[alone]}")"
echo
echo "# main job training throughput (records/s), $REPS runs each, interleaved"
printf "%-58s %8s %8s %8s %7s %s\n" configuration median min max ratio goal
printf "%-58s %8.0f %8.0f %8.0f %7s %s\n" "alone (dashboard served, nobody looks)" \
  "$ALONE" "$ALONE_MIN" "$ALONE_MAX" 1.000 baseline
for mode in polled browser niced; do
  read -r MED MIN MAX <<<"$(stats "${RUNS[$mode]}")"
  case $mode in
    polled) name="polled: the page's requests + /metrics every second" ;;
    browser) name="browser: Chromium with the page open, same cores" ;;
    niced) name="niced: the same browser at nice 19" ;;
  esac
  printf "%-58s %8.0f %8.0f %8.0f %7.3f %s\n" "$name" "$MED" "$MIN" "$MAX" \
    "$(echo "$MED / $ALONE" | bc -l)" ">= 0.99"
done
# How long the master took to answer: one round of the polled configuration's
# four requests (/api/job, /api/curves, /api/events, /metrics), as the
# polling script measured it, per run.
echo "# polled: one round of the page's three requests + /metrics took (median ms / max ms per run):" \
  "$(for ((r = 1; r <= REPS; r++)); do
       sed -n 's/^rounds [0-9]* median_ms \([0-9.]*\) max_ms \([0-9.]*\)$/\1\/\2/p' "$WORK/log/polled-$r.watcher"
     done | tr '\n' ' ')"
csv() { tr -s ' ' ',' <<<"${1% }"; }
echo "RESULT dashboard alone=$(csv "${RUNS[alone]}") polled=$(csv "${RUNS[polled]}")" \
  "browser=$(csv "${RUNS[browser]}") niced=$(csv "${RUNS[niced]}")"
echo "screenshots: $SHOTS/dashboard-live.png $SHOTS/dashboard-ended.png"
