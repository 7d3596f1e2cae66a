#!/usr/bin/env bash
# Embedding tables and DeepFM in one run, each figure beside its baseline
# measured in the same run:
#
#   P5     rows/s of pull and push, one parameter-server process, dimension
#          16, Zipf ids / the machine's bounds (memcpy; hash-map lookup loop)
#          goal >= 5 M rows/s
#   scale  1 M, 10 M, 50 M rows: bytes per row (with the optimizer's slot)
#          and pull latency; a table over one server's row budget spread
#          over three servers
#   P4     DeepFM samples/s, elasticdl train 1 worker x 2 threads + 1 PS /
#          the bare LibTorch loop (torch::nn::EmbeddingBag, 2 threads)
#          goal >= 0.95; and 2 workers x 1 thread + 2 PS (info)
#   AUC    DeepFM, one epoch of the generated training file, 2 workers +
#          2 PS: test AUC / the generator's optimum AUC on the test file
#          goal >= 0.97
#
# Same data for all (elasticdl data criteo_synth, seed 1, then elasticdl
# data criteo), same minibatch. The throughput configurations run REPS times
# in turn (interleaved); the table shows the best and the median. P4 compares
# like with like, as bench/train_bench.sh does: the bare loop gets our
# processes' malloc setting (GLIBC_TUNABLES), and our figures are of the
# steady state (bench/steady_rate.py: from every worker's first finished task
# on), as the bare loop's window opens after its first minibatches; the jobs'
# own figures (set-up included) are info rows. The verdict is of the medians.
#
#   bench/embedding_bench.sh [BUILD_DIR]     # default build-bench
#
# Environment: RECORDS (training lines, default 25000000), TEST_RECORDS
# (default 100000), THROUGHPUT_RECORDS (the first records trained in the
# throughput runs, a multiple of 100000; default 200000), MINIBATCH
# (default 512), REPS (default 2), WORK (scratch, default a new temp dir),
# ONLY (rows|deepfm: one half), ROWS_FLAGS (extra flags of embedding_bench's
# rows/scale/spread run, e.g. --scale_rows=1000000 for a small machine),
# ELASTICDL_CACHE_DIR (where the zoo build is cached).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench}
BIN=$BUILD/bin
RECORDS=${RECORDS:-25000000}
TEST_RECORDS=${TEST_RECORDS:-100000}
THROUGHPUT_RECORDS=${THROUGHPUT_RECORDS:-200000}
MINIBATCH=${MINIBATCH:-512}
REPS=${REPS:-2}
ONLY=${ONLY:-}
WORK=${WORK:-$(mktemp -d -t embedding_bench.XXXXXX)}
PER_FILE=100000  # records per shard written by `elasticdl data criteo`

# Benchmarks are not part of the default build: build (or bring up to date) what runs.
cmake --build "$BUILD" --target elasticdl embedding_bench >&2
(( THROUGHPUT_RECORDS % PER_FILE == 0 )) || { echo "THROUGHPUT_RECORDS: a multiple of $PER_FILE" >&2; exit 1; }
LOG=$WORK/log
mkdir -p "$LOG"
echo "# embedding_bench: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); logs in $LOG"

if [[ -z $ONLY || $ONLY == rows ]]; then
  # shellcheck disable=SC2086  # ROWS_FLAGS is a list of flags
  "$BIN/embedding_bench" --only=rows,scale,spread ${ROWS_FLAGS:-} | tee "$LOG/rows.txt"
fi
[[ -z $ONLY || $ONLY == deepfm ]] || exit 0

# The data.
DATA=$WORK/criteo
if [[ ! -d $DATA/train ]]; then
  mkdir -p "$DATA"
  "$BIN/elasticdl" data criteo_synth "$DATA/train.tsv" --records="$RECORDS" --seed=1 \
    --test_records="$TEST_RECORDS" --test_output="$DATA/test.tsv" >/dev/null
  "$BIN/elasticdl" data criteo "$DATA/train.tsv" "$DATA/train" \
    --records_per_shard=$PER_FILE >/dev/null
  "$BIN/elasticdl" data criteo "$DATA/test.tsv" "$DATA/test" --records_per_shard=$PER_FILE >/dev/null
fi
SUBSET=$WORK/subset-$THROUGHPUT_RECORDS
rm -rf "$SUBSET" && mkdir -p "$SUBSET"
mapfile -t FILES < <(ls "$DATA/train" | sort | head -n $((THROUGHPUT_RECORDS / PER_FILE)))
for f in "${FILES[@]}"; do ln -s "$DATA/train/$f" "$SUBSET/$f"; done

ours() {  # workers threads ps data log [flags...]
  local workers=$1 threads=$2 ps=$3 data=$4 log=$5
  shift 5
  rm -rf "$log.job"  # a job directory holds one job (a rerun in the same WORK)
  "$BIN/elasticdl" train --model_zoo="$ROOT/model_zoo" --model_def=deepfm.deepfm.DeepFM \
    --training_data="$data" --num_epochs=1 --num_workers="$workers" --num_ps_pods="$ps" \
    --num_threads="$threads" --minibatch_size="$MINIBATCH" --num_minibatches_per_task=8 \
    --no_progress --job_dir="$log.job" "$@" >"$log" 2>&1
}
rate() { sed -n 's/.*s of training: \([0-9.]*\) records\/s.*/\1/p' "$1"; }
steady() { /usr/bin/python3 "$ROOT/bench/steady_rate.py" "$1.job"; }
# Our workers and servers keep freed memory (src/common/process_tuning.h);
# the bare loop gets the same setting.
TUNED=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
bare() {  # log
  GLIBC_TUNABLES=$TUNED "$BIN/embedding_bench" --only=bare --data="$SUBSET" \
    --minibatch="$MINIBATCH" --threads=2 >"$1" 2>&1
  sed -n 's/^RESULT bare samples_per_s=\([0-9.]*\).*/\1/p' "$1"
}

# The zoo is built (and cached) outside every timed window.
ours 1 1 1 "$SUBSET" "$LOG/warm-up" || { cat "$LOG/warm-up" >&2; exit 1; }

declare -A RUNS
last() { awk '{print $NF}' <<<"$1"; }  # the last of a list
for ((r = 1; r <= REPS; r++)); do
  RUNS[bare]+="$(bare "$LOG/bare-$r") "
  ours 1 2 1 "$SUBSET" "$LOG/ours-1x2-$r"
  RUNS[ours1]+="$(steady "$LOG/ours-1x2-$r") "
  RUNS[ours1j]+="$(rate "$LOG/ours-1x2-$r") "
  ours 2 1 2 "$SUBSET" "$LOG/ours-2x1-$r"
  RUNS[ours2]+="$(steady "$LOG/ours-2x1-$r") "
  RUNS[ours2j]+="$(rate "$LOG/ours-2x1-$r") "
  echo "# rep $r: bare=$(last "${RUNS[bare]}") ours1x2=$(last "${RUNS[ours1]}")" \
    "ours2x1=$(last "${RUNS[ours2]}")"
done

stats() {  # "a b c" -> "best median"
  tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{v[NR]=$1} END {printf "%s %s", v[NR], v[int((NR+1)/2)]}'
}
read -r BARE_BEST BARE_MED <<<"$(stats "${RUNS[bare]}")"
read -r O1_BEST O1_MED <<<"$(stats "${RUNS[ours1]}")"
read -r O2_BEST O2_MED <<<"$(stats "${RUNS[ours2]}")"
read -r O1J_BEST O1J_MED <<<"$(stats "${RUNS[ours1j]}")"
read -r O2J_BEST O2J_MED <<<"$(stats "${RUNS[ours2j]}")"
echo
echo "# DeepFM throughput: $THROUGHPUT_RECORDS records, minibatch $MINIBATCH, best (median) of $REPS"
printf "%-58s %10s %10s %7s %7s %s\n" configuration "samples/s" median ratio median goal
printf "%-58s %10.1f %10.1f %7s %7s %s\n" "bare LibTorch loop, EmbeddingBag, 2 threads, malloc tuned" \
  "$BARE_BEST" "$BARE_MED" 1.000 1.000 baseline
P4M=$(echo "$O1_MED / $BARE_MED" | bc -l)
printf "%-58s %10.1f %10.1f %7.3f %7.3f %s\n" "P4 elasticdl train, 1 worker x 2 threads + 1 PS" \
  "$O1_BEST" "$O1_MED" "$(echo "$O1_BEST / $BARE_BEST" | bc -l)" "$P4M" \
  ">= 0.95: $(awk -v r="$P4M" 'BEGIN { print (r >= 0.95 ? "goal met" : "goal NOT met") }')"
printf "%-58s %10.1f %10.1f %7.3f %7.3f %s\n" "(info) elasticdl train, 2 workers x 1 thread + 2 PS" \
  "$O2_BEST" "$O2_MED" "$(echo "$O2_BEST / $BARE_BEST" | bc -l)" \
  "$(echo "$O2_MED / $BARE_MED" | bc -l)" "info"
printf "%-58s %10.1f %10.1f %7s %7s %s\n" "(info) the jobs' own figures (set-up included), 1 x 2" \
  "$O1J_BEST" "$O1J_MED" "" "" "info"
printf "%-58s %10.1f %10.1f %7s %7s %s\n" "(info) the jobs' own figures (set-up included), 2 x 1" \
  "$O2J_BEST" "$O2J_MED" "" "" "info"
echo "RESULT deepfm bare=$BARE_BEST ours_1x2_1ps=$O1_BEST ours_2x1_2ps=$O2_BEST" \
  "bare_median=$BARE_MED ours_1x2_median=$O1_MED ours_2x1_median=$O2_MED"

# AUC after one epoch of the whole training file.
ours 2 1 2 "$DATA/train" "$LOG/auc" --validation_data="$DATA/test" --output="$WORK/deepfm-model"
AUC=$(sed -n 's/^auc: \([0-9.]*\) (model version.*/\1/p' "$LOG/auc")
LOGLOSS=$(sed -n 's/^log_loss: \([0-9.]*\) (model version.*/\1/p' "$LOG/auc")
OPT=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["optimum_auc"])' \
  "$DATA/test.tsv.truth.json")
OPT_LL=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["optimum_log_loss"])' \
  "$DATA/test.tsv.truth.json")
echo
echo "# DeepFM accuracy: 1 epoch of $RECORDS records, 2 workers + 2 PS; test file of $TEST_RECORDS"
printf "test AUC %.4f / optimum %.4f = %.3f (goal >= 0.97); log-loss %.4f (optimum %.4f); %s\n" \
  "$AUC" "$OPT" "$(echo "$AUC / $OPT" | bc -l)" "$LOGLOSS" "$OPT_LL" \
  "$(sed -n 's/.*\(([0-9.]* s of training: [0-9.]* records\/s)\).*/\1/p' "$LOG/auc")"
echo "RESULT auc auc=$AUC optimum=$OPT log_loss=$LOGLOSS optimum_log_loss=$OPT_LL"
