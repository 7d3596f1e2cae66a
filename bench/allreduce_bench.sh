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
# Every configuration runs REPS times, interleaved; the table shows the best
# and the median, and the ratios are of the best figures and of the medians.
#
#   bench/allreduce_bench.sh [BUILD_DIR]     # default build-bench; about 6 minutes
#
# Environment: RECORDS (default 30000), REPS (default 3), DATA, WORK,
# OMP_WAIT_POLICY, ELASTICDL_CACHE_DIR, PYTHON: as in train_bench.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench}
BIN=$BUILD/bin
RECORDS=${RECORDS:-30000}
REPS=${REPS:-3}
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=${WORK:-$(mktemp -d -t allreduce_bench.XXXXXX)}
DATA=${DATA:-$WORK/mnist}
source "$ROOT/bench/mnist_jobs.sh"

cmake --build "$BUILD" --target elasticdl >&2
mnist_subset

LOG=$WORK/log
mkdir -p "$LOG"
echo "# allreduce_bench: $RECORDS records, $REPS reps, $(nproc) cores," \
  "load $(cut -d' ' -f1-3 /proc/loadavg), OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; logs in $LOG"

ours() {  # workers threads log [flags...]
  train_mnist "$ROOT/model_zoo" "$1" "$2" "$3" --training_data="$SUBSET" "${@:4}"
  records_per_second "$3"
}

warm_zoo "$LOG/warm"

TUNED=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
AR=(--distribution_strategy=AllreduceStrategy)
declare -A R
for ((i = 1; i <= REPS; i++)); do
  R[ar]+=" $(ours 2 1 "$LOG/ar.$i" "${AR[@]}")"
  R[ddpm]+=" $(GLIBC_TUNABLES=$TUNED ddp "$LOG/ddpm.$i")"
  R[ps]+=" $(ours 2 1 "$LOG/ps.$i")"
  R[ddp]+=" $(ddp "$LOG/ddp.$i")"
  line="# rep $i (load now $(cut -d' ' -f1 /proc/loadavg)):"
  for k in ar ddpm ps ddp; do line+=" $k=${R[$k]##* }"; done
  echo "$line"
done

read -r A AM <<<"$(stat "${R[ar]}")"
read -r DT DTM <<<"$(stat "${R[ddpm]}")"
read -r P PM <<<"$(stat "${R[ps]}")"
read -r D DM <<<"$(stat "${R[ddp]}")"

echo
printf '%-60s %10s %10s\n' "samples/s (best / median of $REPS)" best median
printf '%-60s %10.1f %10.1f\n' "elasticdl train, AllreduceStrategy, 2 workers x 1 thread" "$A" "$AM"
printf '%-60s %10.1f %10.1f\n' "torchrun DDP (gloo), 2 procs x 1 thread, malloc tuned" "$DT" "$DTM"
printf '%-60s %10.1f %10.1f\n' "elasticdl train, ParameterServerStrategy, 2 x 1 + 1 PS" "$P" "$PM"
printf '%-60s %10.1f %10.1f\n' "(info) torchrun DDP 2 x 1, glibc defaults" "$D" "$DM"
echo
printf '%-6s %-48s %7s %7s %8s  %s\n' "" "ratio" best median goal verdict
P13=$(ratio "$A" "$DT"); P13M=$(ratio "$AM" "$DTM")
printf '%-6s %-48s %7s %7s %8s  %s\n' P13 "AllreduceStrategy 2x1 / DDP 2x1 (malloc tuned)" "$P13" "$P13M" ">= 1.0" "$(verdict "$P13M" 1.0)"
printf '%-6s %-48s %7s %7s %8s  %s\n' "(info)" "AllreduceStrategy 2x1 / ParameterServer 2x1" "$(ratio "$A" "$P")" "$(ratio "$AM" "$PM")" "" ""
printf '%-6s %-48s %7s %7s %8s  %s\n' "(info)" "AllreduceStrategy 2x1 / DDP 2x1 (glibc defaults)" "$(ratio "$A" "$D")" "$(ratio "$AM" "$DM")" "" ""
