#!/usr/bin/env bash
# Interleaved pairs: is build (or flag set) B faster than A at training the
# MNIST model, beyond what this machine's drift moves the same job?
#
# Each pair runs one `elasticdl train` epoch (bench/mnist_jobs.sh's recipe:
# the seed CNN, batch 64, 8 minibatches a task, synchronous steps, one
# parameter server) with A's binaries and one with B's, a few seconds apart,
# the order alternating from pair to pair, and divides B's steady-state
# samples/s by A's (bench/steady_rate.py: the window opens when every worker
# has finished its first task). The summary gives the median of the ratios,
# their range, how many exceed 1, and the two-sided sign test's p: the
# chance that a build no faster than the other would be ahead in at least as
# lopsided a share of the pairs. Give both sides the same build for the
# machine's noise floor (an A/A run): its ratios scatter around 1 by what
# the machine moves a job from one minute to the next.
#
#   bench/pairs.sh BUILD_A BUILD_B     # a pair a minute or so at 2 x 1 on 2 cores
#
# A build is a directory with bin/elasticdl (a build tree, or an install
# prefix); to compare two commits, build each in a tree of its own (e.g.
# `git worktree add /tmp/old COMMIT`, then cmake and ninja there).
#
# BUILD_A may instead be the word `bare`: side A is then the bare LibTorch
# loop (B's bin/train_bench --only=bare with THREADS threads, our malloc
# setting through GLIBC_TUNABLES, its threads a core each where a worker's
# would be, its window after its warm-up minibatches) on the same records,
# and B ÷ A is P1 pair by pair (FLAGS_A then go to train_bench, e.g.
# FLAGS_A=--bind_team=false with FLAGS_B=--bind_workers=false):
#
#   WORKERS=1 THREADS=2 bench/pairs.sh bare build    # needs `ninja -C build train_bench`
#
# Environment: PAIRS (default 8), WORKERS and THREADS (default 2 and 1, the
# P2/P3 job), RECORDS (default 30000), FLAGS_A and FLAGS_B (flags added to
# that side's `elasticdl train`, e.g. FLAGS_B=--bind_workers=false with the
# same build on both sides), DATA (a folder with train/ from `elasticdl data
# mnist`; written under WORK when missing), WORK (scratch, default a new temp
# dir), PYTHON (default /usr/bin/python3), OMP_WAIT_POLICY (passed to both).
set -euo pipefail

if (($# != 2)); then
  echo "usage: bench/pairs.sh BUILD_A BUILD_B   (PAIRS, WORKERS, THREADS, FLAGS_A, FLAGS_B: see the header)" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
declare -A BUILDS=([A]=$1 [B]=$2)
BARE=false
if [[ $1 == bare ]]; then
  BARE=true
  BUILDS[A]=$2
  [[ -x $2/bin/train_bench ]] ||
    { echo "BUILD_A=bare: $2/bin/train_bench is missing (ninja -C $2 train_bench)" >&2; exit 2; }
fi
for side in A B; do
  [[ -x ${BUILDS[$side]}/bin/elasticdl ]] ||
    { echo "build $side: ${BUILDS[$side]}/bin/elasticdl is missing (BUILD_$side is a build tree or an install prefix)" >&2; exit 2; }
  BUILDS[$side]=$(cd "${BUILDS[$side]}" && pwd)
done
PAIRS=${PAIRS:-8}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "PAIRS=$PAIRS: expected a positive whole number of pairs" >&2; exit 2; }
WORKERS=${WORKERS:-2}
THREADS=${THREADS:-1}
RECORDS=${RECORDS:-30000}
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=${WORK:-$(mktemp -d -t pairs.XXXXXX)}
DATA=${DATA:-$WORK/mnist}
read -r -a FLAGS_A <<<"${FLAGS_A:-}"
read -r -a FLAGS_B <<<"${FLAGS_B:-}"
BIN=${BUILDS[A]}/bin
source "$ROOT/bench/mnist_jobs.sh"
mnist_subset
# Each build compiles (or finds cached) its zoo before any timed job.
for side in A B; do
  BIN=${BUILDS[$side]}/bin warm_zoo "$WORK/warm.$side"
done

side_a="${BUILDS[A]} ${FLAGS_A[*]:-}"
$BARE && side_a="the bare loop ($THREADS threads) ${FLAGS_A[*]:-}"
echo "# pairs: A=$side_a, B=${BUILDS[B]} ${FLAGS_B[*]:-};" \
  "$WORKERS x $THREADS, $RECORDS records, $PAIRS pairs, $(nproc) cores," \
  "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; logs in $WORK"

# The job's own account of its workers' time, e.g. "waiting for steps 5.5%, between tasks 2.4%";
# the bare loop's, its time per minibatch.
account() {  # log
  sed -n -e 's/.*(start-up [0-9.]*%, \(.*\))$/\1/p' \
    -e 's/.*per minibatch: \(.*\); cpu.*/\1/p' "$1" | head -n1
}

declare -A RATE
RATIOS=()
for ((i = 1; i <= PAIRS; i++)); do
  order=(A B)
  ((i % 2)) || order=(B A)
  for side in "${order[@]}"; do
    log=$WORK/$side.$i
    if [[ $side == A ]] && $BARE; then
      GLIBC_TUNABLES=$TUNED "${BUILDS[B]}/bin/train_bench" --data="$SUBSET" --threads="$THREADS" \
        --records="$RECORDS" --only=bare "${FLAGS_A[@]}" >"$log" 2>&1 ||
        { echo "pair $i, A: train_bench failed: see $log" >&2; exit 1; }
      RATE[A]=$(sed -n 's/^RESULT bare .*samples_per_s=\([0-9.]*\).*/\1/p' "$log")
      continue
    fi
    flags=("${FLAGS_A[@]}")
    [[ $side == B ]] && flags=("${FLAGS_B[@]}")
    BIN=${BUILDS[$side]}/bin train_mnist "$ROOT/model_zoo" "$WORKERS" "$THREADS" "$log" \
      --training_data="$SUBSET" "${flags[@]}" ||
      { echo "pair $i, $side: elasticdl train failed: see $log" >&2; exit 1; }
    RATE[$side]=$("$PYTHON" "$ROOT/bench/steady_rate.py" "$log.job")
  done
  r=$(ratio "${RATE[B]}" "${RATE[A]}")
  RATIOS+=("$r")
  echo "pair $i (${order[*]}): A ${RATE[A]} B ${RATE[B]} samples/s, B / A $r;" \
    "A: $(account "$WORK/A.$i"); B: $(account "$WORK/B.$i")"
done

printf '%s\n' "${RATIOS[@]}" | sort -g | awk '
  { r[NR] = $1; if ($1 > 1) above++; if ($1 < 1) below++ }
  END {
    n = NR
    median = (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
    # Two-sided sign test over the pairs that differ: P(X <= k) for
    # X ~ Binomial(m, 1/2), k the smaller side, doubled.
    m = above + below; k = (above < below) ? above : below
    tail = 0; c = 1
    for (j = 0; j <= k; j++) { tail += c; c = c * (m - j) / (j + 1) }
    p = (m > 0) ? 2 * tail / 2 ^ m : 1
    if (p > 1) p = 1
    printf "B / A over %d pairs: median %.3f, range %.3f-%.3f, %d of %d above 1; sign test p = %.3f\n",
      n, median, r[1], r[n], above, n, p
  }'
