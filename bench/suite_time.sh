#!/usr/bin/env bash
# The test suite's time as CI sees it: .ci/run (scripts/setup.sh, then
# scripts/test.sh) in a fresh clone of HEAD, against the 25 minutes the suite
# may take on 2 cores, build included.
#
#   bench/suite_time.sh [WORK_DIR]      (default: a new directory under /tmp)
#
# Prints the wall and CPU seconds of the build and of the tests, the build's
# longest steps (from ninja's log), and, when run as root with BSD process
# accounting available (Debian's acct: accton, sa), the tests' CPU seconds by
# program: LibTorch processes, zoo compilers, clang-tidy, ...
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
WORK=${1:-$(mktemp -d /tmp/suite-time.XXXXXX)}
GOAL_S=1500

git clone -q "$REPO" "$WORK/src"
cd "$WORK/src"

cpu_of() {  # /usr/bin/time's "wall user sys" line -> "wall cpu"
  tail -n 1 "$1" | awk '{printf "%.0f %.0f\n", $1, $2 + $3}'
}

/usr/bin/time -f "%e %U %S" -o "$WORK/build.time" bash scripts/setup.sh > "$WORK/build.log" 2>&1

accounting=0
if [[ $(id -u) == 0 ]] && command -v accton > /dev/null && command -v sa > /dev/null; then
  : > "$WORK/pacct"
  accton "$WORK/pacct" > /dev/null && accounting=1
fi
set +e
/usr/bin/time -f "%e %U %S" -o "$WORK/test.time" \
  bash scripts/test.sh > "$WORK/test.log" 2>&1
tests_rc=$?
set -e
if ((accounting)); then accton off > /dev/null; fi

read -r build_wall build_cpu < <(cpu_of "$WORK/build.time")
read -r test_wall test_cpu < <(cpu_of "$WORK/test.time")
total=$((build_wall + test_wall))
echo "commit $(git rev-parse --short HEAD), $(nproc) cores, $(date -u +%F)"
printf '%-34s %8s %8s\n' "" "wall s" "CPU s"
printf '%-34s %8s %8s\n' "scripts/setup.sh (the build)" "$build_wall" "$build_cpu"
printf '%-34s %8s %8s\n' "scripts/test.sh" "$test_wall" "$test_cpu"
printf '%-34s %8s %8s   goal <= %s s: %s\n' "suite" "$total" "$((build_cpu + test_cpu))" \
  "$GOAL_S" "$([[ $total -le $GOAL_S ]] && echo met || echo NOT met)"
grep -E "tests passed|tests failed" "$WORK/test.log" || true

echo
echo "the build's longest steps (s):"
/usr/bin/python3 - build/.ninja_log << 'EOF'
import sys
steps = {}
for line in open(sys.argv[1]):
    if not line.startswith("#"):
        start, end, _, out, _ = line.split("\t")
        steps[out] = (int(end) - int(start)) / 1000
for out, s in sorted(steps.items(), key=lambda kv: -kv[1])[:12]:
    print(f"  {s:6.1f}  {out}")
print(f"  {sum(steps.values()):6.0f}  all {len(steps)} steps")
EOF

if ((accounting)); then
  echo
  echo "the tests' CPU by program (s, processes):"
  # sa: one line per program, its CPU in minutes ("NNcp"); the first line is the total.
  sa -f "$WORK/pacct" -a 2>/dev/null | awk 'NR > 1 { for (i = 1; i <= NF; i++) if ($i ~ /cp$/) {
      cpu = $i; sub(/cp$/, "", cpu); printf "  %7.0f  %6d  %s\n", cpu * 60, $1, $NF } }' |
    sort -rn | head -10
fi
echo
echo "logs: $WORK (build.log, test.log)"
exit "$tests_rc"
