#!/usr/bin/env bash
# The modeler's edit-run loop on the shipped zoo: a copy of model_zoo/ and an
# empty zoo cache; `elasticdl train` of mnist.mnist_functional_api.custom_model
# to its first step (--max_steps=1, one worker, one parameter server, the
# first 10 000 records of Fashion-MNIST); then a one-line edit to
# mnist/mnist_functional_api.cc and the same command again. Each build's
# seconds are printed side by side with those of a baseline build's binary
# when one is given, the runs interleaved.
#
#   bench/zoo_edit_bench.sh BUILD_DIR [BASELINE_BUILD_DIR] [REPETITIONS]
#
# Prints one line per run and a summary: "cold" (a first job on an empty
# cache), "edit" (the job after the edit), and "whole zoo" (`elasticdl zoo
# build` of another copy on another empty cache: every file of the zoo
# compiled and linked, as for a Kubernetes image; it names buildah as the
# builder, which must not be installed, so it stops there, having written the
# build context), as "best median" of the runs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILDS=("$(cd "$1" && pwd)")
[[ -n ${2:-} ]] && BUILDS+=("$(cd "$2" && pwd)")
REPS=${3:-3}
if command -v buildah >/dev/null; then
  echo "buildah is on PATH: the whole-zoo row would build an image" >&2
  exit 1
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zoo-edit-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

"${BUILDS[0]}/bin/elasticdl" data mnist --output "$WORK/data" >/dev/null
DATA=$WORK/data/train/$(ls "$WORK/data/train" | sort | head -n1)

# Seconds of one `elasticdl train` to its first step with BIN, zoo ZOO, cache CACHE.
first_step() {  # bin zoo cache log
  local start end
  rm -rf "$4.job"  # a job directory holds one job
  start=$(date +%s.%N)
  ELASTICDL_CACHE_DIR=$3 "$1" train --model_zoo="$2" \
    --model_def=mnist.mnist_functional_api.custom_model --training_data="$DATA" \
    --max_steps=1 --num_workers=1 --num_ps_pods=1 --minibatch_size=64 --no_progress \
    --job_dir="$4.job" >"$4" 2>&1 || { echo "elasticdl train failed: see $4" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}

# Seconds of `elasticdl zoo build` of ZOO with BIN and an empty cache CACHE.
whole_zoo() {  # bin zoo cache log
  local start end
  start=$(date +%s.%N)
  if ! ELASTICDL_CACHE_DIR=$3 "$1" zoo build --model_zoo="$2" --image=bench/zoo:1 \
    --base_image=bench/elasticdl:1 --builder=buildah --context_dir="$4.context" >"$4" 2>&1 &&
    ! grep -q "the build context is ready" "$4"; then
    echo "elasticdl zoo build failed: see $4" >&2
    exit 1
  fi
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}

declare -A cold edit whole
for ((rep = 1; rep <= REPS; rep++)); do
  for ((b = 0; b < ${#BUILDS[@]}; b++)); do
    run=$WORK/run-$rep-$b
    mkdir -p "$run"
    cp -r "$ROOT/model_zoo" "$run/zoo"
    c=$(first_step "${BUILDS[$b]}/bin/elasticdl" "$run/zoo" "$run/cache" "$run/cold.log")
    echo "    // edited: run $rep" >>"$run/zoo/mnist/mnist_functional_api.cc"
    e=$(first_step "${BUILDS[$b]}/bin/elasticdl" "$run/zoo" "$run/cache" "$run/edit.log")
    cp -r "$ROOT/model_zoo" "$run/whole-zoo"
    w=$(whole_zoo "${BUILDS[$b]}/bin/elasticdl" "$run/whole-zoo" "$run/whole-cache" "$run/whole.log")
    echo "${BUILDS[$b]}: run $rep: cold $c s, after the edit $e s, whole zoo $w s"
    cold[$b]+="$c "
    edit[$b]+="$e "
    whole[$b]+="$w "
    rm -rf "$run"
  done
done

seconds() {  # "best median" of a list of seconds (best: the least)
  tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g |
    awk '{a[NR] = $1} END {m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
                           printf "%.1f %.1f", a[1], m}'
}
for ((b = 0; b < ${#BUILDS[@]}; b++)); do
  echo "${BUILDS[$b]}: cold (best median) $(seconds "${cold[$b]}") s; after a one-line edit" \
    "$(seconds "${edit[$b]}") s; whole zoo $(seconds "${whole[$b]}") s"
done
