#!/usr/bin/env bash
# Model files in Python against the same model in C++ and against plain PyTorch,
# each figure beside its baseline measured in the same run:
#
#   P11   elasticdl train of model_zoo/python/mnist/mnist_functional_api.py  /  of
#         model_zoo/mnist/mnist_functional_api.cc, same flags: 1 worker x 2 threads
#         and 2 workers x 1 thread (+ 1 PS), median of REPS interleaved runs      goal >= 0.97
#   P12   the Python file, 1 worker x 2 threads + 1 PS  /  the bare PyTorch loop in
#         Python (bench/torch_mnist.py: python3-torch, the same layers, data decoded
#         into memory beforehand), 2 threads, median of REPS interleaved runs     goal >= 0.95
#   acc   test accuracy after one epoch over the whole training set, the main job's
#         recipe (standardized_dataset_fn, adam_optimizer, 2 workers x 1 thread,
#         synchronous), for each seed of SEEDS, Python file vs C++ file            goal: means within 0.5 points
#
# P11 and P12 use the seed's recipe (pixels / 255, shuffle(1024), SGD 0.1) on the first
# RECORDS training images, batch 64, tasks of 64 x 8. Figures of ours are the "records/s"
# of the job's training window (master: first task handed out -> last one finished); the
# bare loop's, from the end of its 5th minibatch to its last. Our workers and servers keep
# freed memory (mallopt at start-up); the bare loop gets the same setting through
# GLIBC_TUNABLES, and every process the same OMP_WAIT_POLICY and thread count.
#
#   bench/python_bench.sh [BUILD_DIR]      # default build; 15-25 minutes on 2 cores
#
# Environment: RECORDS (default 30000: 3 of the 6 training files), REPS (default 3),
# SEEDS (default "1 2 3 4 5"; empty: no accuracy rows), DATA (a folder with train/ and
# test/ from `elasticdl data mnist`; written under WORK when missing), WORK (scratch
# and logs), ELASTICDL_CACHE_DIR, PYTHON (default /usr/bin/python3).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
BIN=$BUILD/bin
RECORDS=${RECORDS:-30000}
REPS=${REPS:-3}
SEEDS=${SEEDS-1 2 3 4 5}
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=${WORK:-$(mktemp -d -t python_bench.XXXXXX)}
DATA=${DATA:-$WORK/mnist}
source "$ROOT/bench/mnist_jobs.sh"

cmake --build "$BUILD" --target elasticdl >&2
mnist_subset
LOG=$WORK/log
mkdir -p "$LOG"
echo "# python_bench: $RECORDS records, $REPS reps, seeds '$SEEDS', $(nproc) cores, load" \
  "$(cut -d' ' -f1-3 /proc/loadavg), OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; logs in $LOG"

# "accuracy records/s" of one `elasticdl train`.
ours() {  # zoo workers threads log [flags...]
  local log=$4
  train_mnist "$@" || { echo "0 0"; return; }
  local acc rate
  acc=$(sed -n 's/^accuracy: \([0-9.]*\) .*/\1/p' "$log" | tail -n1)
  rate=$(records_per_second "$log")
  echo "${acc:-0} ${rate:-0}"
}
bare() {  # log
  env $(blas_env) GLIBC_TUNABLES=$TUNED OMP_NUM_THREADS=2 "$PYTHON" "$ROOT/bench/torch_mnist.py" \
    --records="$RECORDS" --threads=2 >"$1" 2>&1
  sed -n 's/^RESULT torch .*samples_per_s=\([0-9.]*\).*/\1/p' "$1"
}
CXX=$ROOT/model_zoo
PY=$ROOT/model_zoo/python

# Build the C++ zoo (and copy the Python one) outside every timed run.
WARM=$WORK/warm && rm -rf "$WARM" && mkdir -p "$WARM" && ln -s "$SUBSET/${FILES[0]}" "$WARM/"
for zoo in "$CXX" "$PY"; do
  warm=$LOG/warm-$(basename "$zoo")
  [[ $(ours "$zoo" 1 2 "$warm" --training_data="$WARM") != "0 0" ]] ||
    { echo "elasticdl train failed: see $warm" >&2; exit 1; }
done

declare -A R
for ((i = 1; i <= REPS; i++)); do
  R[cxx1x2]+=" $(ours "$CXX" 1 2 "$LOG/cxx1x2.$i" --training_data="$SUBSET" | cut -d' ' -f2)"
  R[py1x2]+=" $(ours "$PY" 1 2 "$LOG/py1x2.$i" --training_data="$SUBSET" | cut -d' ' -f2)"
  R[bare2]+=" $(bare "$LOG/bare2.$i")"
  R[py2x1]+=" $(ours "$PY" 2 1 "$LOG/py2x1.$i" --training_data="$SUBSET" | cut -d' ' -f2)"
  R[cxx2x1]+=" $(ours "$CXX" 2 1 "$LOG/cxx2x1.$i" --training_data="$SUBSET" | cut -d' ' -f2)"
  line="# rep $i (load now $(cut -d' ' -f1 /proc/loadavg)):"
  for k in cxx1x2 py1x2 bare2 py2x1 cxx2x1; do line+=" $k=${R[$k]##* }"; done
  echo "$line"
done

RECIPE=(--dataset_fn=standardized_dataset_fn --optimizer=adam_optimizer)
declare -A A
for seed in $SEEDS; do
  for lang in cxx py; do
    zoo=$CXX && [[ $lang == py ]] && zoo=$PY
    read -r acc rate < <(ours "$zoo" 2 1 "$LOG/acc-$lang.$seed" --training_data="$DATA/train" \
      --validation_data="$DATA/test" --seed="$seed" "${RECIPE[@]}")
    A[$lang]+=" $acc"
    A[${lang}_rate]+=" $rate"
  done
  echo "# seed $seed: accuracy cxx=${A[cxx]##* } py=${A[py]##* }," \
    "records/s cxx=${A[cxx_rate]##* } py=${A[py_rate]##* }"
done

median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {
  if (NR == 0) { print 0; exit } print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
range() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk 'NR == 1 {lo=$1} {hi=$1} END {
  printf "%s-%s", lo, hi }'; }
mean() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | awk '{s+=$1} END { printf "%.4f", NR ? s / NR : 0 }'; }

echo
printf '%-58s %9s  %s\n' "samples/s (median of $REPS; range)" median range
printf '%-58s %9s  %s\n' "C++ file, 1 worker x 2 threads + 1 PS" "$(median "${R[cxx1x2]}")" "$(range "${R[cxx1x2]}")"
printf '%-58s %9s  %s\n' "Python file, 1 worker x 2 threads + 1 PS" "$(median "${R[py1x2]}")" "$(range "${R[py1x2]}")"
printf '%-58s %9s  %s\n' "C++ file, 2 workers x 1 thread + 1 PS" "$(median "${R[cxx2x1]}")" "$(range "${R[cxx2x1]}")"
printf '%-58s %9s  %s\n' "Python file, 2 workers x 1 thread + 1 PS" "$(median "${R[py2x1]}")" "$(range "${R[py2x1]}")"
printf '%-58s %9s  %s\n' "bare PyTorch loop in Python, 2 threads, data in memory" "$(median "${R[bare2]}")" "$(range "${R[bare2]}")"
echo
P11A=$(ratio "$(median "${R[py1x2]}")" "$(median "${R[cxx1x2]}")")
P11B=$(ratio "$(median "${R[py2x1]}")" "$(median "${R[cxx2x1]}")")
P12=$(ratio "$(median "${R[py1x2]}")" "$(median "${R[bare2]}")")
printf '%-5s %-52s %7s %8s  %s\n' "" "ratio of medians" value goal verdict
printf '%-5s %-52s %7s %8s  %s\n' P11 "Python / C++ file, 1 worker x 2 threads" "$P11A" ">= 0.97" "$(verdict "$P11A" 0.97)"
printf '%-5s %-52s %7s %8s  %s\n' P11 "Python / C++ file, 2 workers x 1 thread" "$P11B" ">= 0.97" "$(verdict "$P11B" 0.97)"
printf '%-5s %-52s %7s %8s  %s\n' P12 "Python file 1x2 + PS / bare PyTorch loop, 2 threads" "$P12" ">= 0.95" "$(verdict "$P12" 0.95)"
if [[ -n $SEEDS ]]; then
  echo
  printf '%-40s %8s  %-15s %9s\n' "accuracy, one epoch (seeds: $SEEDS)" mean range "records/s"
  printf '%-40s %8s  %-15s %9s\n' "C++ file, 2 workers x 1 thread" "$(mean "${A[cxx]}")" "$(range "${A[cxx]}")" "$(mean "${A[cxx_rate]}")"
  printf '%-40s %8s  %-15s %9s\n' "Python file, 2 workers x 1 thread" "$(mean "${A[py]}")" "$(range "${A[py]}")" "$(mean "${A[py_rate]}")"
  awk -v a="$(mean "${A[py]}")" -v b="$(mean "${A[cxx]}")" 'BEGIN {
    d = (a - b) * 100; printf "difference of means: %+.2f points (goal: within 0.5): %s\n", d,
    (d <= 0.5 && d >= -0.5) ? "goal met" : "goal NOT met" }'
fi
