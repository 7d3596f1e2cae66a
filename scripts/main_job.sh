#!/usr/bin/env bash
# The main job on the embedded default: converts Fashion-MNIST into shards of
# tf.train.Example records in RecordIO and summarizes what was written.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ELASTICDL_BUILD_DIR:-build}/bin/elasticdl
OUT=${1:-data/fashion-mnist}

"$BIN" data mnist --output "$OUT"
"$BIN" data validate "$OUT"/train/*.recordio "$OUT"/test/*.recordio --examples
"$BIN" data inspect "$OUT"/train/data-00000-of-00006.recordio --records 2
