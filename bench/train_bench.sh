#!/usr/bin/env bash
# Training throughput in one run, each figure beside its baseline measured in
# the same run:
#
#   P1  elasticdl train, 1 worker x 2 threads + 1 PS  /  bare LibTorch loop, 2 threads   goal >= 0.97
#   P2  elasticdl train, 2 workers x 1 thread + 1 PS  /  torchrun DDP 2 procs x 1 thread goal >= 1.05
#   P3  elasticdl train, 2 workers x 1 thread + 1 PS  /  1 worker x 1 thread + 1 PS     goal >= 1.9
#
# and the limit of every 2 x 1 figure, measured in the same run: two bare
# loops of one thread each, side by side (L2, their samples/s summed), what two
# data-parallel processes that read their own data make on these cores with no
# communication at all; beside it the bare loop of one thread alone (L1). The
# highest P2 the run allowed is L2 / DDP, the highest P3 L2 / ours 1 x 1, and
# L2 / L1 is what the cores give two processes over one. A synchronous step
# waits for the slower worker, and the cores' speeds differ from moment to
# moment: LS2 is L2 replayed in lockstep from the two loops' traces
# (bench/lockstep_limit.py: each step waits for the core then slower, with
# free communication), the most any synchronous 2 x 1 job, ours or DDP, could
# make in the run; LS2 / ours 1 x 1 is the highest P3 it allowed.
#
# Like with like, by construction: every ratio with a goal compares processes
# given the same malloc setting (ours set it at start-up, src/common/
# process_tuning.h; the bare loop and DDP get it through GLIBC_TUNABLES; the
# peers at glibc's defaults are info rows), the same cores (on 2 cores our
# two one-thread workers run on a core each, README's Tuning; so do DDP's two
# processes, ddp_mnist.py --bind_cores, and L2's two loops, taskset; a lone
# worker of 2 threads on 2 cores gives each of its LibTorch threads a core
# while its pipeline keeps ahead, and so does the bare loop of 2 threads,
# train_bench's default; both unbound are info rows), and the same window: the bare
# loop and ddp_mnist.py open theirs after their first minibatches, ours opens
# when every worker has finished its first task (bench/steady_rate.py, from
# the job's event log), so no figure counts the steps in which LibTorch sets
# itself up. The jobs' own figures (from the first task handed out to the
# last one done) are info rows.
#
# Our jobs run with the default flags: synchronous steps, each averaging one
# minibatch of every worker, as DDP averages one minibatch of every process:
# P2 compares equal semantics. Asynchronous training (2 x 1, --use_async=true)
# is an info row.
#
# Same model (model_zoo/mnist/mnist_functional_api.cc; the DDP peer is the same
# layers in PyTorch), same data (the first RECORDS Fashion-MNIST training
# images), batch 64, SGD(lr=0.1). Every configuration runs REPS times in turn
# (interleaved, so that load from other processes on the machine spreads over
# all of them); the table shows the best and the median, and the ratios are of
# the best figures (and, beside them, of the medians).
#
#   bench/train_bench.sh [BUILD_DIR]      # default build-bench; REPS=5 took 27 minutes on 2 cores
#
# Environment: RECORDS (default 30000, i.e. 3 of the 6 training files),
# REPS (default 2), DATA (a folder with train/ from `elasticdl data mnist`;
# written under $WORK when missing), WORK (scratch, default a new temp dir),
# OMP_WAIT_POLICY (unset: libgomp's default spin-then-sleep; PASSIVE keeps
# 2-thread runs from collapsing when other processes hold a core: see
# docs/benchmark-notes.md, Training; it reaches every process of every
# configuration alike),
# ELASTICDL_CACHE_DIR (where the zoo build is cached; the first run builds it,
# about 30 s, outside every timed window), PYTHON (default /usr/bin/python3).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench}
BIN=$BUILD/bin
RECORDS=${RECORDS:-30000}
REPS=${REPS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=${WORK:-$(mktemp -d -t train_bench.XXXXXX)}
DATA=${DATA:-$WORK/mnist}
source "$ROOT/bench/mnist_jobs.sh"

# Benchmarks are not part of the default build: build (or bring up to date) what runs.
cmake --build "$BUILD" --target elasticdl train_bench >&2

# The data: the first RECORDS records, as whole files (symlinks).
mnist_subset

LOG=$WORK/log
mkdir -p "$LOG"
echo "# train_bench: $RECORDS records, $REPS reps, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; logs in $LOG"

# "steady job": samples/s of `elasticdl train` in steady state (its event
# log) and its own figure ("(X s of training: Y records/s)").
ours() {  # workers threads log [flags...]
  train_mnist "$ROOT/model_zoo" "$1" "$2" "$3" --training_data="$SUBSET" "${@:4}"
  echo "$("$PYTHON" "$ROOT/bench/steady_rate.py" "$3.job") $(records_per_second "$3")"
}
bare() {  # threads log [cpus: run there (taskset)] [flags...]
  local on=()
  [[ -n ${3:-} ]] && on=(taskset -c "$3")
  "${on[@]}" "$BIN/train_bench" --data="$SUBSET" --threads="$1" --records="$RECORDS" --only=bare \
    "${@:4}" >"$2" 2>&1
  sed -n 's/^RESULT bare .*samples_per_s=\([0-9.]*\).*/\1/p' "$2"
}

# L2: two one-thread bare loops started together, malloc tuned; prints their
# samples/s summed (each over its own window, which opens after its warm-up
# minibatches; the two run the same records, so the windows nearly coincide,
# and the one that ends first leaves the other a core to itself for its last
# minibatches: if anything, L2 is high). Where our two workers run on a core
# each (2 cores: ddp_binding), so do the two loops. Their traces replayed in
# lockstep give LS2: "L2 LS2".
bare_pair() {  # log
  local cpus=("" "")
  [[ -n $(ddp_binding) ]] && cpus=(0 1)
  GLIBC_TUNABLES=$TUNED bare 1 "$1.a" "${cpus[0]}" --trace="$1.a.trace" >"$1.a.rate" &
  local first=$!
  GLIBC_TUNABLES=$TUNED bare 1 "$1.b" "${cpus[1]}" --trace="$1.b.trace" >"$1.b.rate"
  wait "$first"
  local factor
  factor=$("$PYTHON" "$ROOT/bench/lockstep_limit.py" "$1.a.trace" "$1.b.trace" 2>&1 |
    tee "$1.lockstep" | sed -n 's/^lockstep_factor=\([0-9.]*\).*/\1/p') || true
  awk -v f="${factor:-0}" '{ s += $1; n++ } END {
    s = (n == 2 ? s : 0); printf "%.1f %.1f", s, s * f }' "$1.a.rate" "$1.b.rate"
}

warm_zoo "$LOG/warm"

# The bare loop gets our processes' malloc setting ($TUNED, bench/mnist_jobs.sh),
# so P1 compares like with like; the peer runs as users run it, and once more
# with the setting (info).

# The two sides of every ratio with a goal run one right after the other
# (bare2m and ours1x2: P1; ddp2x1m, ours2x1 and ours1x1: P2 and P3), so that
# a ratio within a repetition compares minutes of the same machine speed.
declare -A R
run_ours() {  # key workers threads [flags...]: adds the steady and the job's figures
  local steady job
  read -r steady job <<<"$(ours "$2" "$3" "$LOG/$1.$i" "${@:4}")"
  R[$1]+=" $steady" R[${1}j]+=" $job"
}
for ((i = 1; i <= REPS; i++)); do
  R[bare2]+=" $(bare 2 "$LOG/bare2.$i")"
  R[bare2m]+=" $(GLIBC_TUNABLES=$TUNED bare 2 "$LOG/bare2m.$i")"
  run_ours ours1x2 1 2
  R[bare2mu]+=" $(GLIBC_TUNABLES=$TUNED bare 2 "$LOG/bare2mu.$i" "" --bind_team=false)"
  run_ours ours1x2u 1 2 --bind_workers=false
  R[ddp2x1]+=" $(ddp "$LOG/ddp2x1.$i")"
  R[ddp2x1m]+=" $(GLIBC_TUNABLES=$TUNED ddp "$LOG/ddp2x1m.$i" $(ddp_binding))"
  run_ours ours2x1 2 1
  run_ours ours1x1 1 1
  R[ddp2x1u]+=" $(GLIBC_TUNABLES=$TUNED ddp "$LOG/ddp2x1u.$i")"
  run_ours ours2x1u 2 1 --bind_workers=false
  run_ours async2x1 2 1 --use_async=true
  R[bare1m]+=" $(GLIBC_TUNABLES=$TUNED bare 1 "$LOG/bare1m.$i")"
  read -r l2 ls2 <<<"$(bare_pair "$LOG/pair1m.$i")"
  R[pair1m]+=" $l2" R[lock1m]+=" $ls2"
  line="# rep $i (load now $(cut -d' ' -f1 /proc/loadavg)):"
  for k in bare2 bare2m ours1x2 bare2mu ours1x2u ddp2x1 ddp2x1m ours2x1 ddp2x1u ours2x1u ours1x1 async2x1 bare1m pair1m lock1m ours1x2j ours2x1j; do
    line+=" $k=${R[$k]##* }"
  done
  echo "$line"
done
# Breakdown of the limit and of the parameter-server round trip (info).
"$BIN/train_bench" --data="$SUBSET" --threads=1 --records=6000 --only=bare >"$LOG/bare1" 2>&1 || true
"$BIN/train_bench" --data="$SUBSET" --threads=2 --records=6000 --only=tensors >"$LOG/tensors2" 2>&1 || true
"$BIN/train_bench" --threads=1 --only=ps >"$LOG/ps" 2>&1 || true

read -r B2 B2M <<<"$(stat "${R[bare2]}")"
read -r B2T B2TM <<<"$(stat "${R[bare2m]}")"
read -r O12 O12M <<<"$(stat "${R[ours1x2]}")"
read -r B2U B2UM <<<"$(stat "${R[bare2mu]}")"
read -r O12U O12UM <<<"$(stat "${R[ours1x2u]}")"
read -r D21 D21M <<<"$(stat "${R[ddp2x1]}")"
read -r D21T D21TM <<<"$(stat "${R[ddp2x1m]}")"
read -r O21 O21M <<<"$(stat "${R[ours2x1]}")"
read -r D21U D21UM <<<"$(stat "${R[ddp2x1u]}")"
read -r O21U O21UM <<<"$(stat "${R[ours2x1u]}")"
read -r O11 O11M <<<"$(stat "${R[ours1x1]}")"
read -r A21 A21M <<<"$(stat "${R[async2x1]}")"
read -r L1 L1M <<<"$(stat "${R[bare1m]}")"
read -r L2 L2M <<<"$(stat "${R[pair1m]}")"
read -r LS2 LS2M <<<"$(stat "${R[lock1m]}")"
read -r O12J O12JM <<<"$(stat "${R[ours1x2j]}")"
read -r O21J O21JM <<<"$(stat "${R[ours2x1j]}")"

echo
printf '%-56s %10s %10s\n' "samples/s (best / median of $REPS)" best median
printf '%-56s %10.1f %10.1f\n' "bare LibTorch loop, 2 threads, malloc tuned, a core each" "$B2T" "$B2TM"
printf '%-56s %10.1f %10.1f\n' "elasticdl train, 1 worker x 2 threads + 1 PS" "$O12" "$O12M"
printf '%-56s %10.1f %10.1f\n' "torchrun DDP (gloo), 2 x 1 thread, malloc tuned, bound" "$D21T" "$D21TM"
printf '%-56s %10.1f %10.1f\n' "elasticdl train, 2 workers x 1 thread + 1 PS" "$O21" "$O21M"
printf '%-56s %10.1f %10.1f\n' "elasticdl train, 1 worker x 1 thread + 1 PS" "$O11" "$O11M"
printf '%-56s %10.1f %10.1f\n' "(info) elasticdl train, 2 x 1, --use_async=true" "$A21" "$A21M"
printf '%-56s %10.1f %10.1f\n' "(limit) L2: two bare loops x 1 thread side by side" "$L2" "$L2M"
printf '%-56s %10.1f %10.1f\n' "(limit) LS2: L2 replayed in lockstep" "$LS2" "$LS2M"
printf '%-56s %10.1f %10.1f\n' "(limit) L1: bare loop, 1 thread, alone" "$L1" "$L1M"
printf '%-56s %10.1f %10.1f\n' "(info) 1 x 2 + PS, the job's figure (set-up included)" "$O12J" "$O12JM"
printf '%-56s %10.1f %10.1f\n' "(info) 2 x 1 + PS, the job's figure (set-up included)" "$O21J" "$O21JM"
printf '%-56s %10.1f %10.1f\n' "(info) bare loop, 2 threads, glibc defaults" "$B2" "$B2M"
printf '%-56s %10.1f %10.1f\n' "(info) DDP 2x1, glibc defaults" "$D21" "$D21M"
printf '%-56s %10.1f %10.1f\n' "(info) DDP 2x1, malloc tuned, not bound" "$D21U" "$D21UM"
printf '%-56s %10.1f %10.1f\n' "(info) ours 2x1 + PS, --bind_workers=false" "$O21U" "$O21UM"
printf '%-56s %10.1f %10.1f\n' "(info) bare loop, 2 threads, malloc tuned, not bound" "$B2U" "$B2UM"
printf '%-56s %10.1f %10.1f\n' "(info) ours 1x2 + PS, --bind_workers=false" "$O12U" "$O12UM"
echo
P1=$(ratio "$O12" "$B2T"); P1M=$(ratio "$O12M" "$B2TM")
P2=$(ratio "$O21" "$D21T"); P2M=$(ratio "$O21M" "$D21TM")
P3=$(ratio "$O21" "$O11"); P3M=$(ratio "$O21M" "$O11M")
printf '%-6s %-46s %7s %7s %8s  %s\n' "" "ratio" best median goal verdict
printf '%-6s %-46s %7s %7s %8s  %s\n' P1 "ours 1x2 + PS / bare loop 2 threads" "$P1" "$P1M" ">= 0.97" "$(verdict "$P1M" 0.97)"
printf '%-6s %-46s %7s %7s %8s  %s\n' P2 "ours 2x1 + PS / DDP 2x1 (malloc tuned)" "$P2" "$P2M" ">= 1.05" "$(verdict "$P2M" 1.05)"
printf '%-6s %-46s %7s %7s %8s  %s\n' P3 "ours 2x1 + PS / ours 1x1 + PS" "$P3" "$P3M" ">= 1.9" "$(verdict "$P3M" 1.9)"
printf '%-6s %-46s %7s %7s %8s  %s\n' "(info)" "ours 1x2 + PS / bare loop, glibc defaults" "$(ratio "$O12" "$B2")" "$(ratio "$O12M" "$B2M")" "" ""
printf '%-6s %-46s %7s %7s %8s  %s\n' "(info)" "ours 2x1 + PS / DDP 2x1, glibc defaults" "$(ratio "$O21" "$D21")" "$(ratio "$O21M" "$D21M")" "" ""
printf '%-6s %-46s %7s %7s %8s  %s\n' "(info)" "both not bound: ours 1x2 / bare loop 2 threads" "$(ratio "$O12U" "$B2U")" "$(ratio "$O12UM" "$B2UM")" "" ""
printf '%-6s %-46s %7s %7s %8s  %s\n' "(info)" "bare loop 2 threads bound / not bound" "$(ratio "$B2T" "$B2U")" "$(ratio "$B2TM" "$B2UM")" "" ""
printf '%-6s %-46s %7s %7s %8s  %s\n' "(info)" "both not bound: ours 2x1 / DDP 2x1 (tuned)" "$(ratio "$O21U" "$D21U")" "$(ratio "$O21UM" "$D21UM")" "" ""
printf '%-6s %-46s %7s %7s %8s  %s\n' "(info)" "ours 2x1 / DDP 2x1 (tuned) not bound" "$(ratio "$O21" "$D21U")" "$(ratio "$O21M" "$D21UM")" "" ""
printf '%-6s %-46s %7s %7s %8s  %s\n' "(info)" "ours 2x1 bound / not bound" "$(ratio "$O21" "$O21U")" "$(ratio "$O21M" "$O21UM")" "" ""
printf '%-6s %-46s %7s %7s %8s  %s\n' "(info)" "DDP 2x1 (tuned) bound / not bound" "$(ratio "$D21T" "$D21U")" "$(ratio "$D21TM" "$D21UM")" "" ""
printf '%-6s %-46s %7s %7s %8s  %s\n' "(info)" "the job's figure 1x2 / bare loop 2 threads" "$(ratio "$O12J" "$B2T")" "$(ratio "$O12JM" "$B2TM")" "" ""
echo
printf '%-6s %-46s %7s\n' "" "median of the ratios within a repetition" median
read -r _ PAIR <<<"$(paired "${R[ours1x2]}" "${R[bare2m]}")"
printf '%-6s %-46s %7s\n' P1 "ours 1x2 + PS / bare loop 2 threads" "$PAIR"
read -r _ PAIR <<<"$(paired "${R[ours1x2u]}" "${R[bare2mu]}")"
printf '%-6s %-46s %7s\n' "(info)" "both not bound: ours 1x2 / bare loop 2 threads" "$PAIR"
read -r _ PAIR <<<"$(paired "${R[ours2x1]}" "${R[ddp2x1m]}")"
printf '%-6s %-46s %7s\n' P2 "ours 2x1 + PS / DDP 2x1 (malloc tuned)" "$PAIR"
read -r _ PAIR <<<"$(paired "${R[ours2x1]}" "${R[ours1x1]}")"
printf '%-6s %-46s %7s\n' P3 "ours 2x1 + PS / ours 1x1 + PS" "$PAIR"
echo
echo "# the limit of a 2 x 1 figure in this run, L2 (two one-thread bare loops side by side):"
printf '%-6s %-46s %7s %7s %7s\n' "" "ratio" best median within
limit() {  # name label a b
  read -r _ PAIR <<<"$(paired "${R[$3]}" "${R[$4]}")"
  local a b am bm
  read -r a am <<<"$(stat "${R[$3]}")"
  read -r b bm <<<"$(stat "${R[$4]}")"
  printf '%-6s %-46s %7s %7s %7s\n' "$1" "$2" "$(ratio "$a" "$b")" "$(ratio "$am" "$bm")" "$PAIR"
}
limit "P2 max" "L2 / DDP 2x1 (malloc tuned)" pair1m ddp2x1m
limit "P3 max" "L2 / ours 1x1 + PS" pair1m ours1x1
limit "P3 max" "LS2 / ours 1x1 + PS: synchronous" lock1m ours1x1
limit "" "L2 / L1: two processes over one" pair1m bare1m
limit "" "LS2 / L2: what the barrier alone leaves" lock1m pair1m
limit "" "ours 2x1 + PS / L2" ours2x1 pair1m
limit "" "DDP 2x1 (malloc tuned) / L2" ddp2x1m pair1m
limit "" "ours 2x1 + PS / LS2" ours2x1 lock1m
limit "" "DDP 2x1 (malloc tuned) / LS2" ddp2x1m lock1m
echo
echo "# where the time goes (info):"
grep -h '^bare\|^tensors\|^ps' "$LOG/bare2m.1" "$LOG/bare1" "$LOG/tensors2" "$LOG/ps" 2>/dev/null || true
