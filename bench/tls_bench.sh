#!/usr/bin/env bash
# What securing a job's calls costs: each figure as jobs run by default
# (mutual TLS between hosts, the job's Unix sockets on one machine) beside
# the same run with --insecure_transport=true (plaintext), interleaved in one
# run; and, for P1's job and P5, TLS over TCP (what calls between hosts pay)
# beside plaintext over TCP (--local_sockets=false).
#
#   P1's job  elasticdl train, 1 worker x 2 threads + 1 PS     secure / plaintext  goal >= 0.97
#             the same over TCP                                 TLS / plaintext     info
#   P2's job  elasticdl train, 2 workers x 1 thread + 1 PS     secure / plaintext  goal >= 0.97
#   P5        embedding rows pulled and pushed per second, TCP  TLS / plaintext     info
#
# P1 and P2 divide these jobs by a limit and a peer that do not change with
# security, so the ratios here are what it takes off P1 and P2. The jobs are
# train_bench.sh's (same model, data, flags); P5's run is
# `embedding_bench --only=rows` with and without --credentials (a file: TCP).
#
#   bench/tls_bench.sh [BUILD_DIR]      # default build; about 10 minutes
#
# Environment: ONLY (some of "p1 p1tcp p2 p5", the figures to run; default all),
# RECORDS (default 30000), REPS (default 3), DATA (a folder with
# train/ from `elasticdl data mnist`; written under $WORK when missing), WORK
# (scratch, default a new temp dir). OMP_WAIT_POLICY reaches every run alike.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
BIN=$BUILD/bin
RECORDS=${RECORDS:-30000}
REPS=${REPS:-3}
WORK=${WORK:-$(mktemp -d -t tls_bench.XXXXXX)}
DATA=${DATA:-$WORK/mnist}
source "$ROOT/bench/mnist_jobs.sh"

cmake --build "$BUILD" --target elasticdl embedding_bench >&2
mnist_subset
LOG=$WORK/log
mkdir -p "$LOG"
echo "# tls_bench: $RECORDS records, $REPS reps, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); logs in $LOG"

ours() {  # workers threads log [flags...]: samples/s
  train_mnist "$ROOT/model_zoo" "$1" "$2" "$3" --training_data="$SUBSET" "${@:4}"
  records_per_second "$3"
}
rows() {  # log [flags...]: "pull push" rows/s
  local log=$1
  shift
  "$BIN/embedding_bench" --only=rows "$@" >"$log" 2>&1
  echo "$(sed -n 's/^P5 pull.* \([0-9.]*\) M rows\/s .*/\1/p' "$log") $(sed -n 's/^P5 push.* \([0-9.]*\) M rows\/s .*/\1/p' "$log")"
}

# The zoo built outside every timed run; its job's credentials serve P5's TLS runs.
ours 1 2 "$LOG/warm" >/dev/null || { echo "elasticdl train failed: see $LOG/warm" >&2; exit 1; }
CREDENTIALS=$LOG/warm.job/credentials

want() { [[ " ${ONLY:-p1 p1tcp p2 p5} " == *" $1 "* ]]; }
declare -A R
for ((i = 1; i <= REPS; i++)); do
  if want p1; then
    R[tls12]+=" $(ours 1 2 "$LOG/tls12.$i")"
    R[plain12]+=" $(ours 1 2 "$LOG/plain12.$i" --insecure_transport=true)"
  fi
  if want p1tcp; then
    R[tcptls12]+=" $(ours 1 2 "$LOG/tcptls12.$i" --local_sockets=false)"
    R[tcpplain12]+=" $(ours 1 2 "$LOG/tcpplain12.$i" --local_sockets=false --insecure_transport=true)"
  fi
  if want p2; then
    R[tls21]+=" $(ours 2 1 "$LOG/tls21.$i")"
    R[plain21]+=" $(ours 2 1 "$LOG/plain21.$i" --insecure_transport=true)"
  fi
  if want p5; then
    read -r pull push <<<"$(rows "$LOG/rows-tls.$i" --credentials="$CREDENTIALS")"
    R[tlspull]+=" $pull"; R[tlspush]+=" $push"
    read -r pull push <<<"$(rows "$LOG/rows-plain.$i")"
    R[plainpull]+=" $pull"; R[plainpush]+=" $push"
  fi
  line="# rep $i:"
  for k in tls12 plain12 tcptls12 tcpplain12 tls21 plain21 tlspull plainpull tlspush plainpush; do
    if [[ -v R[$k] ]]; then line+=" $k=${R[$k]##* }"; fi
  done
  echo "$line"
done

echo
printf '%-56s %12s %12s %12s %12s %7s %7s\n' "(best / median of $REPS)" "secure best" "median" "plain best" "median" ratio median
row() {  # label key_tls key_plain
  read -r TB TM <<<"$(stat "${R[$2]}")"
  read -r PB PM <<<"$(stat "${R[$3]}")"
  printf '%-56s %12s %12s %12s %12s %7s %7s\n' "$1" "$TB" "$TM" "$PB" "$PM" "$(ratio "$TB" "$PB")" "$(ratio "$TM" "$PM")"
}
if want p1; then row "P1's job, 1 worker x 2 threads + 1 PS (samples/s)" tls12 plain12; fi
if want p1tcp; then row "P1's job over TCP: TLS / plaintext (samples/s)" tcptls12 tcpplain12; fi
if want p2; then row "P2's job, 2 workers x 1 thread + 1 PS (samples/s)" tls21 plain21; fi
if want p5; then row "P5 pull over TCP: TLS / plaintext (M rows/s)" tlspull plainpull; fi
if want p5; then row "P5 push, Adagrad, over TCP: TLS / plaintext (M rows/s)" tlspush plainpush; fi
