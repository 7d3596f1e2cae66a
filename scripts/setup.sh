#!/usr/bin/env bash
# Installs every Debian package ElasticDL needs (idempotently) and builds it
# into build/. Safe to run again: installed packages and an up-to-date build
# are left as they are.
#
#   scripts/setup.sh            install + build
#   scripts/setup.sh --no-build install only
set -euo pipefail

cd "$(dirname "$0")/.."

PACKAGES=(
  # toolchain; clang-tidy 22 (bookworm-security) leaves the code of system
  # headers unchecked, which makes scripts/lint.sh about twice as fast as
  # with clang-tidy 14
  g++ cmake ninja-build clang libclang-rt-14-dev clang-format clang-tidy-22 git
  # tensors and autograd; LibTorch's BLAS (Debian's libtorch links the
  # generic libblas.so.3, whose reference implementation makes a dense layer
  # several times slower; OpenBLAS with OpenMP takes LibTorch's thread count)
  libtorch-dev libopenblas0-openmp
  # AllreduceStrategy: c10d's Gloo process group, shipped in libtorch, needs
  # Gloo's headers and library
  libgloo-dev
  # protocol, RPC and status types
  libprotobuf-dev protobuf-compiler libabsl-dev libgrpc++-dev protobuf-compiler-grpc
  # model-zoo identity (SHA-256)
  libssl-dev
  # record formats: compression and checksums
  libsnappy-dev zlib1g-dev libisal-dev
  # command line, CSV, formatting and logs
  libcli11-dev libcsv-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
  # the dashboard's HTTP server, and the HTTP client of its tests (found
  # through pkg-config)
  libmicrohttpd-dev libcpp-httplib-dev pkg-config
  # SQL users' databases: SQLite, and PostgreSQL's client library; the tests
  # start a PostgreSQL server of their own (initdb, pg_ctl) and use psql and
  # pg_dump
  libsqlite3-dev sqlite3 libpq-dev postgresql
  # model zoos fetched from Git URLs (--model_zoo=https://.../models.git#v1);
  # the tests serve repositories with git daemon and git http-backend
  libgit2-dev
  # experiment configuration files
  libyaml-cpp-dev
  # the dashboard's tests: a real browser, a real Prometheus server, and
  # protobuf for Python to read TensorBoard's event files back
  chromium fonts-dejavu-core prometheus python3-protobuf
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev python3 python3-snappy python3-crc32c
  # model files in Python: CPython embedded with pybind11, running Debian's
  # PyTorch (the same libtorch as libtorch-dev), which is also the peer the
  # benchmarks compare with (torchrun)
  python3-torch python3-dev pybind11-dev
  # the data set of the main job
  dataset-fashion-mnist
  # docs/architecture.png is drawn from docs/architecture.dot; the
  # benchmarks' plots (bench/cluster_makespan.py) with matplotlib
  graphviz python3-matplotlib
  # --cluster=slurm and its tests (scripts/slurm_cluster.sh starts a cluster
  # on this machine); network namespaces for the tests of external workers
  slurmctld slurmd slurm-client munge iproute2
  # --cluster=kubernetes's tests: the API's object model checks the manifests
  # and the official client checks the tests' fake API server
  python3-kubernetes python3-yaml
  # the security tests' gRPC client (plaintext, another job's certificate,
  # a 900 MB request without the job's token) and the certificates of that
  # other job
  python3-grpcio python3-cryptography
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
SUDO_APT="$SUDO env DEBIAN_FRONTEND=noninteractive"
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  $SUDO_APT apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages already installed"
fi

# The dashboard's chart library (and the browser driver of its tests), from
# npm at the versions web/package-lock.json pins; nothing is fetched when the
# page is served.
if ! command -v npm > /dev/null; then
  echo "setup: installing npm"
  $SUDO_APT apt-get install -y -q --no-install-recommends nodejs npm
fi
if [ ! -f web/node_modules/.package-lock.json ] ||
   [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
  echo "setup: installing web/node_modules (npm ci)"
  (cd web && npm ci --no-audit --no-fund)
fi

if [ "${1:-}" = "--no-build" ]; then exit 0; fi

BUILD_DIR=${ELASTICDL_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${ELASTICDL_BUILD_TYPE:-RelWithDebInfo}"
# LibTorch translation units take ~1.2 GB each to compile; two at a time fit
# comfortably in small machines.
cmake --build "$BUILD_DIR" -j "${ELASTICDL_JOBS:-$(nproc)}"
echo "setup: built $BUILD_DIR/bin/elasticdl"
