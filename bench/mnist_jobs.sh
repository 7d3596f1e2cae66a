# Helpers for the benchmarks that train the MNIST model (train_bench.sh,
# python_bench.sh, tls_bench.sh, allreduce_bench.sh). Source it after setting
# ROOT and BIN (and PYTHON, RECORDS for ddp).

PER_FILE=10000  # records per file written by `elasticdl data mnist`

# Our workers and servers tell glibc's malloc to keep freed memory (mallopt at
# start-up; src/common/process_tuning.h). Peers and bare loops get the same
# setting through GLIBC_TUNABLES=$TUNED wherever a ratio with a goal compares
# them with our jobs.
TUNED=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824

# Our processes run the matrix kernels OpenBLAS should pick for this CPU, where
# its own pick falls back to Prescott's (src/common/blas_kernels.h; the bare
# loops of train_bench and embedding_bench choose as they do). Python peers get
# the same kernels: `env $(blas_env) python3 ...` ("OPENBLAS_CORETYPE=X", or
# nothing where `elasticdl --version` names no OpenBLAS).
blas_env() {
  local kernels
  kernels=$("$BIN/elasticdl" --version | sed -n 's/.*(OpenBLAS: \([A-Za-z0-9]*\) kernels).*/\1/p')
  [[ -z $kernels ]] || echo "OPENBLAS_CORETYPE=$kernels"
}

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
# LOG.job. Flags after LOG are added (--training_data among them); one
# parameter server unless they name --distribution_strategy=AllreduceStrategy.
train_mnist() {  # zoo workers threads log [flags...]
  local zoo=$1 workers=$2 threads=$3 log=$4
  shift 4
  # One parameter server, unless the flags pick a strategy without any.
  local servers=(--num_ps_pods=1)
  [[ " $* " =~ " --distribution_strategy=AllreduceStrategy " ]] && servers=()
  rm -rf "$log.job"  # a job directory holds one job (a rerun in the same WORK)
  "$BIN/elasticdl" train --model_zoo="$zoo" --model_def=mnist.mnist_functional_api.custom_model \
    --num_epochs=1 --num_workers="$workers" "${servers[@]}" --num_threads="$threads" \
    --minibatch_size=64 --num_minibatches_per_task=8 --no_progress --job_dir="$log.job" "$@" \
    >"$log" 2>&1
}

# The samples/s a train_mnist log reports ("X s of training: Y records/s").
records_per_second() {  # log
  sed -n 's/.*s of training: \([0-9.]*\) records\/s.*/\1/p' "$1"
}

# Builds (or finds cached) the zoo outside every timed run: a job of one
# worker on the subset's first file (output in LOG).
warm_zoo() {  # log
  local warm=$WORK/warm
  rm -rf "$warm" && mkdir -p "$warm" && ln -s "$SUBSET/${FILES[0]}" "$warm/"
  train_mnist "$ROOT/model_zoo" 1 1 "$1" --training_data="$warm" ||
    { echo "elasticdl train failed: see $1" >&2; exit 1; }
}

# samples/s of torchrun DDP over gloo (bench/ddp_mnist.py), 2 processes x 1
# thread, on the first RECORDS records; its output goes to LOG. Flags after
# LOG go to ddp_mnist.py (--bind_cores: a core each, as our workers get).
ddp() {  # log [flags...]
  env $(blas_env) OMP_NUM_THREADS=1 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
    --redirects 2 --tee 2 "$ROOT/bench/ddp_mnist.py" --records="$RECORDS" --threads=1 "${@:2}" \
    >"$1" 2>&1
  sed -n 's/.*RESULT ddp .*samples_per_s=\([0-9.]*\).*/\1/p' "$1" | head -n1
}

# The flag that gives DDP's two one-thread processes the binding our two
# one-thread workers get: `elasticdl train` runs each worker on a core of its
# own when their threads fill the cores (README, Tuning), i.e. here on a
# machine of two; elsewhere neither is bound.
ddp_binding() {
  if (( $(nproc) == 2 )); then echo --bind_cores; fi
}

# "best median" of a list of numbers.
stat() {
  tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {
    if (NR == 0) { print "0 0"; exit }
    m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; print a[NR], m }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
# Within each repetition: "best median" of the ratios a[i] / b[i] (the
# caller's loop variable is left alone).
paired() {  # "a1 a2 ..." "b1 b2 ..."
  local -a a b
  read -r -a a <<<"$1"
  read -r -a b <<<"$2"
  local out="" k
  for k in "${!a[@]}"; do out+=" $(ratio "${a[$k]}" "${b[$k]}")"; done
  stat "$out"
}
verdict() { awk -v r="$1" -v g="$2" 'BEGIN { print (r >= g ? "goal met" : "goal NOT met") }'; }
