#!/usr/bin/env bash
# AllreduceStrategy's steady-state throughput in one run, each figure beside
# its peers measured in the same run:
#
#   P13  elasticdl train --distribution_strategy=AllreduceStrategy, 2 workers x 1 thread
#        / torchrun DDP (gloo), 2 procs x 1 thread                          goal >= 1.0
#        and / elasticdl train, ParameterServerStrategy, 2 x 1 + 1 PS (same semantics: a
#        synchronous step averages one minibatch of every worker)            (info)
#
# The model, data and recipe are train_bench.sh's: the seed CNN
# (model_zoo/mnist/mnist_functional_api.cc; the DDP peer is the same layers in
# PyTorch, bench/ddp_mnist.py), the first RECORDS Fashion-MNIST training
# images in memory for the peer, batch 64 per worker, SGD(lr=0.1), one epoch.
# Our processes tell glibc's malloc to keep freed memory (src/common/
# process_tuning.h); the peer gets the same setting through GLIBC_TUNABLES
# in the row with the goal, and runs with glibc's defaults in an info row.
# On 2 cores our two workers run on a core each (README, Tuning): so do the
# peer's two processes in the row with the goal (ddp_mnist.py --bind_cores).
# Every configuration runs REPS times, interleaved; the table shows the best
# and the median, and the ratios are of the best figures and of the medians.
#
# Steady state, as the goal says: ddp_mnist.py's window opens after its first
# minibatches; ours opens when every worker has finished its first task
# (bench/steady_rate.py, from the job's event log), so neither counts the
# steps in which LibTorch and Gloo set themselves up. The jobs' own figures
# (from the first task handed out to the last one done) are info rows.
# This machine's speed drifts by up to a fifth over minutes, in both
# directions: each repetition runs the configurations back to back, and the
# last rows are the medians of the ratios within a repetition.
#
#   bench/allreduce_bench.sh [BUILD_DIR]     # default build-bench; about 6 minutes
#
# Environment: RECORDS (default 30000), REPS (default 3), DATA, WORK,
# OMP_WAIT_POLICY, ELASTICDL_CACHE_DIR, PYTHON: as in train_bench.sh.
# ONLY_GOAL=1 runs only the two configurations of P13 (without the info rows
# of the others), so that the same time holds twice the repetitions of the
# ratio with a goal.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench}
BIN=$BUILD/bin
RECORDS=${RECORDS:-30000}
REPS=${REPS:-3}
ONLY_GOAL=${ONLY_GOAL:-0}
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=${WORK:-$(mktemp -d -t allreduce_bench.XXXXXX)}
DATA=${DATA:-$WORK/mnist}
source "$ROOT/bench/mnist_jobs.sh"

cmake --build "$BUILD" --target elasticdl >&2
mnist_subset

LOG=$WORK/log
mkdir -p "$LOG"
echo "# allreduce_bench: $RECORDS records, $REPS reps$( ((ONLY_GOAL)) && echo ", P13 only"), $(nproc) cores," \
  "load $(cut -d' ' -f1-3 /proc/loadavg), OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; logs in $LOG"

ours() {  # workers threads log [flags...]: "steady job" records/s
  train_mnist "$ROOT/model_zoo" "$1" "$2" "$3" --training_data="$SUBSET" "${@:4}"
  echo "$("$PYTHON" "$ROOT/bench/steady_rate.py" "$3.job") $(records_per_second "$3")"
}

warm_zoo "$LOG/warm"

AR=(--distribution_strategy=AllreduceStrategy)
declare -A R
for ((i = 1; i <= REPS; i++)); do
  read -r ar arj <<<"$(ours 2 1 "$LOG/ar.$i" "${AR[@]}")"
  R[ar]+=" $ar" R[arj]+=" $arj"
  R[ddpm]+=" $(GLIBC_TUNABLES=$TUNED ddp "$LOG/ddpm.$i" $(ddp_binding))"
  if ! ((ONLY_GOAL)); then
    read -r ps psj <<<"$(ours 2 1 "$LOG/ps.$i")"
    R[ps]+=" $ps" R[psj]+=" $psj"
    R[ddp]+=" $(ddp "$LOG/ddp.$i")"
  fi
  line="# rep $i (load now $(cut -d' ' -f1 /proc/loadavg)):"
  for k in ar ddpm ps ddp arj psj; do [[ -n ${R[$k]:-} ]] && line+=" $k=${R[$k]##* }"; done
  echo "$line"
done

read -r A AM <<<"$(stat "${R[ar]}")"
read -r AJ AJM <<<"$(stat "${R[arj]}")"
read -r DT DTM <<<"$(stat "${R[ddpm]}")"
read -r P PM <<<"$(stat "${R[ps]:-}")"
read -r PJ PJM <<<"$(stat "${R[psj]:-}")"
read -r D DM <<<"$(stat "${R[ddp]:-}")"

echo
printf '%-64s %10s %10s\n' "samples/s (best / median of $REPS)" best median
printf '%-64s %10.1f %10.1f\n' "elasticdl train, AllreduceStrategy, 2 workers x 1 thread" "$A" "$AM"
printf '%-64s %10.1f %10.1f\n' "torchrun DDP (gloo), 2 x 1 thread, malloc tuned, bound as ours" "$DT" "$DTM"
((ONLY_GOAL)) ||
  printf '%-64s %10.1f %10.1f\n' "elasticdl train, ParameterServerStrategy, 2 x 1 + 1 PS" "$P" "$PM"
printf '%-64s %10.1f %10.1f\n' "(info) AllreduceStrategy, the job's figure (set-up included)" "$AJ" "$AJM"
if ! ((ONLY_GOAL)); then
  printf '%-64s %10.1f %10.1f\n' "(info) ParameterServerStrategy, the job's figure" "$PJ" "$PJM"
  printf '%-64s %10.1f %10.1f\n' "(info) torchrun DDP 2 x 1, glibc defaults" "$D" "$DM"
fi
echo
printf '%-6s %-52s %7s %7s %8s  %s\n' "" "ratio" best median goal verdict
P13=$(ratio "$A" "$DT"); P13M=$(ratio "$AM" "$DTM")
printf '%-6s %-52s %7s %7s %8s  %s\n' P13 "AllreduceStrategy 2x1 / DDP 2x1 (malloc tuned)" "$P13" "$P13M" ">= 1.0" "$(verdict "$P13M" 1.0)"
((ONLY_GOAL)) ||
  printf '%-6s %-52s %7s %7s %8s  %s\n' "(info)" "AllreduceStrategy 2x1 / ParameterServer 2x1" "$(ratio "$A" "$P")" "$(ratio "$AM" "$PM")" "" ""
printf '%-6s %-52s %7s %7s %8s  %s\n' "(info)" "the job's figure / DDP 2x1 (malloc tuned)" "$(ratio "$AJ" "$DT")" "$(ratio "$AJM" "$DTM")" "" ""
((ONLY_GOAL)) ||
  printf '%-6s %-52s %7s %7s %8s  %s\n' "(info)" "AllreduceStrategy 2x1 / DDP 2x1 (glibc defaults)" "$(ratio "$A" "$D")" "$(ratio "$AM" "$DM")" "" ""
read -r _ PAIR13 <<<"$(paired "${R[ar]}" "${R[ddpm]}")"
echo
printf '%-6s %-52s %7s\n' "" "median of the ratios within a repetition" median
printf '%-6s %-52s %7s\n' P13 "AllreduceStrategy 2x1 / DDP 2x1 (malloc tuned)" "$PAIR13"
if ! ((ONLY_GOAL)); then
  read -r _ PAIRPS <<<"$(paired "${R[ar]}" "${R[ps]}")"
  printf '%-6s %-52s %7s\n' "(info)" "AllreduceStrategy 2x1 / ParameterServer 2x1" "$PAIRPS"
fi
