#!/usr/bin/env bash
# The master at many workers (P6): WORKERS simulated workers (threads of
# bench/master_scale.cc: join, register, then get a task and report it done,
# no model work) against a real job's master and parameter server, started
# with --cluster=external so that the master waits for them. Prints the task
# RPCs per second while every worker is in, the p50/p99 latency of GetTask
# and ReportTask, and the journal's size at the end.
#
#   bench/master_scale.sh [BUILD_DIR]
#
# Environment: WORKERS (default 200), EPOCHS over the 60 000 Fashion-MNIST
# training records in tasks of 1024 (default 20: 1 172 tasks), DATA (a folder
# with train/ from `elasticdl data mnist`; written under WORK when missing),
# WORK (scratch and logs), ELASTICDL_CACHE_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
BIN=$BUILD/bin
WORKERS=${WORKERS:-200}
EPOCHS=${EPOCHS:-20}
WORK=${WORK:-$(mktemp -d -t master_scale.XXXXXX)}
mkdir -p "$WORK"

cmake --build "$BUILD" --target elasticdl master_scale >&2
DATA=${DATA:-$WORK/mnist}
[[ -d $DATA/train ]] || "$BIN/elasticdl" data mnist --output "$DATA" >/dev/null
JOB=$WORK/job
rm -rf "$JOB"
echo "# master_scale: $WORKERS workers, $EPOCHS epochs of 60000 records in tasks of 1024," \
  "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); logs in $WORK"
"$BIN/elasticdl" train --cluster=external --model_zoo="$ROOT/model_zoo" \
  --model_def=mnist.mnist_functional_api.custom_model --training_data="$DATA/train" \
  --num_epochs="$EPOCHS" --num_workers="$WORKERS" --num_ps_pods=1 --minibatch_size=64 \
  --num_minibatches_per_task=16 --use_async=true --worker_lease_ms=60000 --no_progress \
  --job_dir="$JOB" >"$WORK/client.log" 2>&1 &
client=$!
"$BIN/master_scale" --job_dir="$JOB" --workers="$WORKERS" --minibatch_size=64 ||
  { kill "$client" 2>/dev/null; tail -20 "$WORK/client.log" >&2; exit 1; }
wait "$client" || { tail -20 "$WORK/client.log" >&2; exit 1; }
# The journal: a log (journal.log), or one snapshot rewritten whole (journal.pb, before the log).
journal=$(ls "$JOB"/journal.log "$JOB"/journal.pb 2>/dev/null | head -1 || true)
echo "journal: $(stat -c %s "$journal") bytes ($(basename "$journal")); $(grep -m1 '^trained' "$WORK/client.log")"
