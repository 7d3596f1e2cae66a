#!/usr/bin/env bash
# The main job on the embedded default (local processes): converts
# Fashion-MNIST into RecordIO shards of tf.train.Example, trains the seed
# functional model with 2 workers and 1 parameter server for one epoch,
# evaluates the trained model, runs batch prediction, and prints a summary.
#
# Training runs with the default flags: synchronous steps, each averaging
# one minibatch of every worker. The model is the seed's; its input function
# and optimizer are the zoo file's standardized_dataset_fn and adam_optimizer
# instead of the seed's pixels / 255 and SGD(0.1), which, when several
# workers' minibatches are averaged per step, end one epoch anywhere between
# 41 % and 85 % (docs/benchmarks.md, "Accuracy").
#
# With --python the model file is the same model's Python twin
# (model_zoo/python/mnist/mnist_functional_api.py: torch.nn layers, the same
# entries), run by the same workers, parameter servers and master; the
# trained model is then also exported as TorchScript (model.pt).
#
#   scripts/main_job.sh [--python] [OUT_DIR]   (default: out/main_job, out/main_job_python)
#
# Environment: NUM_WORKERS (default 2), SEED (default 0).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ELASTICDL_BUILD_DIR:-build}/bin/elasticdl
ZOO=model_zoo
OUT_DEFAULT=out/main_job
if [[ ${1:-} == --python ]]; then
  ZOO=model_zoo/python
  OUT_DEFAULT=out/main_job_python
  shift
fi
OUT=${1:-$OUT_DEFAULT}
DATA=$OUT/fashion-mnist
mkdir -p "$OUT"

"$BIN" data mnist --output "$DATA"

"$BIN" train \
  --model_zoo="$ZOO" \
  --model_def=mnist.mnist_functional_api.custom_model \
  --training_data="$DATA/train" \
  --validation_data="$DATA/test" \
  --dataset_fn=standardized_dataset_fn \
  --optimizer=adam_optimizer \
  --num_epochs=1 \
  --num_workers="${NUM_WORKERS:-2}" \
  --num_ps_pods=1 \
  --minibatch_size=64 \
  --seed="${SEED:-0}" \
  --output="$OUT/trained_model" | tee "$OUT/train.txt"

"$BIN" evaluate \
  --trained_model="$OUT/trained_model" \
  --validation_data="$DATA/test" | tee "$OUT/evaluate.txt"

"$BIN" predict \
  --trained_model="$OUT/trained_model" \
  --prediction_data="$DATA/test" \
  --output="$OUT/predictions.csv" | tee "$OUT/predict.txt"

if [[ $ZOO == model_zoo/python ]]; then
  "$BIN" export --trained_model="$OUT/trained_model" --output="$OUT/model.pt" |
    tee "$OUT/export.txt"
fi

evaluated=$(sed -n 's/^accuracy: \([0-9.]*\).*/\1/p' "$OUT/evaluate.txt")
predicted=$(/usr/bin/env python3 scripts/prediction_accuracy.py "$OUT/predictions.csv" \
  /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz)
echo
echo "== summary =="
sed -n 's/^trained /train:    /p' "$OUT/train.txt"
echo "evaluate: test accuracy $evaluated"
echo "predict:  $(($(wc -l < "$OUT/predictions.csv") - 1)) rows in $OUT/predictions.csv; accuracy from them $predicted"
if [[ -f $OUT/export.txt ]]; then echo "export:   $(sed -n 's/^exported //p' "$OUT/export.txt")"; fi
/usr/bin/env python3 -c "import sys; e, p = float(sys.argv[1]), float(sys.argv[2]); \
print(f'predict vs evaluate: {abs(e - p) * 100:.3f} % apart'); \
sys.exit(0 if abs(e - p) <= 0.005 else 'predict and evaluate disagree by more than 0.5 %')" \
  "$evaluated" "$predicted"
