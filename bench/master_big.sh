#!/usr/bin/env bash
# The master on a large data set (P6 at 100 M records): one epoch of RECORDS
# one-byte records in tasks of 1024 (97 657 tasks at 100 M), WORKERS simulated
# workers (bench/master_scale.cc) against a real master and parameter server
# (--cluster=external). Prints how long the master took to serve (client and
# master start, indexing, the journal's first snapshot), the master's peak
# resident memory, the task RPCs per second and their latency, and the
# journal's size. With KILL_AT (a fraction of the epoch, e.g. 0.5) the master
# is SIGKILLed when that share of the tasks is done; the client restarts it,
# it resumes from its journal, and `longest_pause_in_hand_outs` is the time
# from the kill to its next task (and a little before). With LOSE=K the first
# K workers are lost holding a task (their leases lapse after LEASE_MS); the
# run checks that every record was still trained exactly once. With RATE the
# workers together offer RATE task RPCs per second (latency below
# saturation); without, each calls again at once (the master's capacity).
#
#   bench/master_big.sh [BUILD_DIR]
#
# Environment: RECORDS (default 100000000), WORKERS (1000), KILL_AT (none),
# LOSE (0), RATE (none), LEASE_MS (3000 with LOSE, else 60000), WORK (scratch, logs and the
# data file, kept between runs), ELASTICDL_CACHE_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
BIN=$BUILD/bin
RECORDS=${RECORDS:-100000000}
WORKERS=${WORKERS:-1000}
KILL_AT=${KILL_AT:-}
LOSE=${LOSE:-0}
RATE=${RATE:-0}
LEASE_MS=${LEASE_MS:-$([[ $LOSE -gt 0 ]] && echo 3000 || echo 60000)}
WORK=${WORK:-/tmp/master_big}
mkdir -p "$WORK"

cmake --build "$BUILD" --target elasticdl master_scale >&2
DATA=$WORK/records-$RECORDS.recordio
if [[ ! -s $DATA ]]; then
  t=$(date +%s.%N)
  "$BIN/master_scale" --write_records="$RECORDS" --output="$DATA.partial"
  mv "$DATA.partial" "$DATA"
  echo "data: $RECORDS records written in $(echo "$(date +%s.%N) - $t" | bc) s," \
    "$(stat -c %s "$DATA") bytes"
fi
JOB=$WORK/job
rm -rf "$JOB"
tasks=$(((RECORDS + 1023) / 1024))
echo "# master_big: $RECORDS records in $tasks tasks of 1024, $WORKERS workers," \
  "kill at ${KILL_AT:-never}, $LOSE lost, rate ${RATE/#0/unpaced}; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
"$BIN/elasticdl" train --cluster=external --model_zoo="$ROOT/model_zoo" \
  --model_def=mnist.mnist_functional_api.custom_model --training_data="$DATA" \
  --num_epochs=1 --num_workers="$WORKERS" --num_ps_pods=1 --minibatch_size=64 \
  --num_minibatches_per_task=16 --use_async=true --worker_lease_ms="$LEASE_MS" --no_progress \
  --job_dir="$JOB" >"$WORK/client.log" 2>&1 &
client=$!
"$BIN/master_scale" --job_dir="$JOB" --workers="$WORKERS" --minibatch_size=64 --lose="$LOSE" \
  --rate="$RATE" >"$WORK/scale.out" 2>&1 &
scale=$!

# The master's pid from its event, its start-up, and its peak memory.
until [[ -s $JOB/master.addr ]]; do
  kill -0 "$client" 2>/dev/null || { tail -20 "$WORK/client.log" >&2; exit 1; }
  sleep 0.05
done
master_pid() { grep '"master_started"' "$JOB/events.jsonl" | tail -1 | sed 's/.*"pid":\([0-9]*\).*/\1/'; }
# Seconds since process $1 started (/proc: clock ticks since boot).
age() {
  awk -v hz="$(getconf CLK_TCK)" -v up="$(cut -d' ' -f1 /proc/uptime)" \
    '{ sub(/.*\) /, ""); print up - $20 / hz }' "/proc/$1/stat"
}
pid=$(master_pid)
echo "master serving $(age "$pid") s after its process started" \
  "($(echo "$(date +%s.%N) - $start" | bc) s after train started)"
peak_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
killed=0
peak=0
while kill -0 "$scale" 2>/dev/null; do
  now_pid=$(master_pid)
  if [[ $now_pid != "$pid" ]]; then pid=$now_pid; fi
  kb=$(peak_kb "$pid")
  ((kb > peak)) && peak=$kb
  if [[ -n $KILL_AT && $killed == 0 ]]; then
    done_tasks=$(grep -c '"task_done"' "$JOB/events.jsonl" || true)
    if awk -v d="$done_tasks" -v t="$tasks" -v k="$KILL_AT" 'BEGIN { exit !(d >= t * k) }'; then
      echo "SIGKILL to the master (pid $pid, peak $((kb / 1024)) MB) after $done_tasks tasks"
      kill -9 "$pid"
      killed=1
    fi
  fi
  sleep 0.2
done
wait "$scale" || { cat "$WORK/scale.out"; tail -20 "$WORK/client.log" >&2; exit 1; }
wait "$client" || { tail -20 "$WORK/client.log" >&2; exit 1; }
cat "$WORK/scale.out"
echo "master peak resident memory: $((peak / 1024)) MB"
echo "journal: $(stat -c %s "$JOB/journal.log") bytes; $(grep -m1 '^trained' "$WORK/client.log" || true)"
done_records=$(sed -n 's/.*records_done: \([0-9]*\).*/\1/p' "$JOB/status.pbtxt")
echo "records trained: $done_records of $RECORDS"
[[ $done_records == "$RECORDS" ]] || { echo "records lost or doubled" >&2; exit 1; }
