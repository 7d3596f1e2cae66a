#!/usr/bin/env bash
# Style and static checks: clang-format on every C++ file, the relative links
# of README.md and docs/ (scripts/check_links.py), clang-tidy 22 on the
# translation units that do not include LibTorch (those would more than
# double its time: about 600 CPU-seconds against 225 for the rest; the
# compiler's warnings cover them).
# Needs the compile_commands.json of a build (scripts/setup.sh makes one).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${ELASTICDL_BUILD_DIR:-build}

mapfile -t files < <(git ls-files '*.cc' '*.h')
clang-format --dry-run --Werror "${files[@]}"
echo "lint: clang-format clean (${#files[@]} files)"

# The environment is read at the edge (src/common/environment.h): by the
# command line and the client, and for a child's PATH lookup.
if git grep -n 'getenv(' -- 'src/*.cc' 'src/*.h' ':!src/common/environment.cc' ':!src/cli/' \
  ':!src/client/' ':!src/experiment/' ':!src/testing/' ':!src/cluster/process.cc' ':!*_test.cc'; then
  echo "lint: getenv above: read the variable in common/environment.cc and pass it down" >&2
  exit 1
fi
echo "lint: the environment is read at the edge"

# README.md and docs/ link only to what is in the repository.
/usr/bin/python3 scripts/check_links.py

mapfile -t units < <(git ls-files 'src/common/*.cc' 'src/data/*.cc' 'src/cli/*.cc' \
  'src/master/*.cc' 'src/job/*.cc' 'src/rpc/*.cc' 'src/cluster/*.cc' 'src/client/*.cc' 'src/dashboard/*.cc' 'src/sql/*.cc' \
  'src/experiment/*.cc' \
  src/zoo/metric_state.cc src/zoo/zoo_sources.cc src/zoo/zoo_builder.cc src/zoo/git_zoo.cc |
  grep -v '_test.cc$' |
  grep -v -e example_parser.cc -e dataset.cc -e process_map.cc -e role_commands.cc -e tensor_codec.cc \
    -e client/api.cc -e client/export.cc -e experiment/trial_check.cc)
# A directory's units together (scripts/lint_tidy.py), as many at a time as
# there are cores.
/usr/bin/python3 scripts/lint_tidy.py "$BUILD_DIR" "${units[@]}"
echo "lint: clang-tidy clean (${#units[@]} translation units)"
