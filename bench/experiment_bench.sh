#!/usr/bin/env bash
# Hyperparameter search on the Fashion-MNIST trial (model_zoo/mnist/
# mnist_trial.cc), on the first 4096 training and 4096 test images:
#
#   asha    model_zoo/mnist/mnist_trial_asha.yaml: 16 trials, 2 at a time,
#           rungs of 1, 4 and 16 epochs (16 x 1 + 4 x 3 + 1 x 12 = 40 epochs)
#   random  model_zoo/mnist/mnist_trial_random.yaml: 10 trials of 4 epochs,
#           2 at a time: the same 40 epochs of records
#
# Both share 4 workers among their running trials. Per searcher: the best
# validation accuracy and its trial, wall time, records trained, and the
# workers' busy fraction (worker-seconds with a trial's workers alive over
# 4 x the experiment's seconds: the rest is jobs starting, evaluating at a
# rung's end or no trial to run); then ASHA's figures as ratios of random
# search's, the peer with the same budget.
#
# SEEDS="1 2 3" runs both with each seed (the configs' `seed`: trial i of
# both draws the same hyperparameters at a seed).
#
#   bench/experiment_bench.sh [OUT_DIR]     # default out/bench_experiment; ~2.5 min per seed on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ELASTICDL_BUILD_DIR:-build}/bin/elasticdl
OUT=${1:-out/bench_experiment}
mkdir -p "$OUT"
[ -x "$BIN" ] || ninja -C "${ELASTICDL_BUILD_DIR:-build}" bin/elasticdl
if [ ! -d data/fashion-mnist-4096/train ]; then
  "$BIN" data mnist --output data/fashion-mnist-4096 --limit 4096 > /dev/null
fi

# The config with absolute paths and `seed` set, beside the outputs.
config_for() {
  sed -e "s|^model_zoo: ..\$|model_zoo: $PWD/model_zoo|" \
      -e "s|: ../../data/|: $PWD/data/|" \
      -e "s|^seed: .*|seed: $2|" "model_zoo/mnist/mnist_trial_$1.yaml" > "$OUT/$1-seed$2.yaml"
  echo "$OUT/$1-seed$2.yaml"
}

rows=()
for seed in ${SEEDS:-1}; do
  declare -A best=() seconds=() records=() busy=()
  for searcher in asha random; do
    dir="$OUT/$searcher-seed$seed"
    rm -rf "$dir"
    log="$OUT/$searcher-seed$seed.txt"
    "$BIN" experiment --config="$(config_for "$searcher" "$seed")" --experiment_dir="$dir" > "$log"
    line=$(grep '^experiment finished in' "$log")
    seconds[$searcher]=$(sed -E 's/^experiment finished in ([0-9.]+) s.*/\1/' <<< "$line")
    records[$searcher]=$(sed -E 's/.*: ([0-9]+) records trained.*/\1/' <<< "$line")
    busy[$searcher]=$(sed -E 's/.*workers busy ([0-9.]+)%.*/\1/' <<< "$line")
    best[$searcher]=$(sed -nE 's/^best trial: ([0-9]+) \(([0-9.]+)\)$/\2 (trial \1)/p' "$log")
    echo "== $searcher, seed $seed ($log)"
    sed -n '/^trial /,/^$/p' "$log"
    rows+=("$(printf '%-5s %-8s %-22s %10s %10s %7s%%' "$seed" "$searcher" "${best[$searcher]}" \
      "${seconds[$searcher]}" "${records[$searcher]}" "${busy[$searcher]}")")
  done
  rows+=("$(awk -v a="${best[asha]%% *}" -v r="${best[random]%% *}" -v ta="${seconds[asha]}" \
    -v tr="${seconds[random]}" -v s="$seed" 'BEGIN {
      printf "%-5s asha / random: best accuracy %.3f, time %.2f", s, a / r, ta / tr }')")
done

printf '\n%-5s %-8s %-22s %10s %10s %8s\n' seed searcher "best accuracy" seconds records busy
printf '%s\n' "${rows[@]}"
