# Helpers for the benchmarks that train the MNIST model (train_bench.sh,
# python_bench.sh, tls_bench.sh). Source it after setting ROOT and BIN.

PER_FILE=10000  # records per file written by `elasticdl data mnist`

# The first RECORDS records of Fashion-MNIST as whole files: DATA/train
# (written there by `elasticdl data mnist` when missing) linked into
# WORK/subset-RECORDS, which SUBSET then names; FILES lists them.
mnist_subset() {
  [[ -d $DATA/train ]] || "$BIN/elasticdl" data mnist --output "$DATA" >/dev/null
  (( RECORDS % PER_FILE == 0 )) || { echo "RECORDS must be a multiple of $PER_FILE" >&2; exit 1; }
  SUBSET=$WORK/subset-$RECORDS
  rm -rf "$SUBSET" && mkdir -p "$SUBSET"
  mapfile -t FILES < <(ls "$DATA/train" | sort | head -n $((RECORDS / PER_FILE)))
  for f in "${FILES[@]}"; do ln -s "$DATA/train/$f" "$SUBSET/$f"; done
}

# One epoch of `elasticdl train` of mnist.mnist_functional_api.custom_model
# with the benchmarks' flags; its output goes to LOG, its job directory to
# LOG.job. Flags after LOG are added (--training_data among them).
train_mnist() {  # zoo workers threads log [flags...]
  local zoo=$1 workers=$2 threads=$3 log=$4
  shift 4
  "$BIN/elasticdl" train --model_zoo="$zoo" --model_def=mnist.mnist_functional_api.custom_model \
    --num_epochs=1 --num_workers="$workers" --num_ps_pods=1 --num_threads="$threads" \
    --minibatch_size=64 --num_minibatches_per_task=8 --no_progress --job_dir="$log.job" "$@" \
    >"$log" 2>&1
}

# The samples/s a train_mnist log reports ("X s of training: Y records/s").
records_per_second() {  # log
  sed -n 's/.*s of training: \([0-9.]*\) records\/s.*/\1/p' "$1"
}
