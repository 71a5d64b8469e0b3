#!/usr/bin/env bash
# Run the whole stackrec test suite and count test cases (not targets).
#
#   tools/test.sh [extra bazel args...]
#
# Installs missing Debian packages first. Every test binary prints a cmocka
# summary; this script adds them up across the suite and ends with the line
#   N passed, N failed
# A test target that fails without a summary (crash, timeout) counts as one
# failed case. Exit status: 0 when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh || { echo "test.sh: could not install dependencies" >&2; echo "0 passed, 1 failed"; exit 1; }

bazel test --keep_going "$@" //... 2>&1 | grep -v -E '^(Loading|Analyzing|\[[0-9,]+ / [0-9,]+\])' | tail -n 60
status=${PIPESTATUS[0]}

passed=0
failed=0
for target in $(bazel query 'tests(//...)' 2>/dev/null | sort); do
  pkg=${target#//}; pkg=${pkg%%:*}; name=${target##*:}
  log="bazel-testlogs/$pkg/$name/test.log"
  if [ ! -f "$log" ]; then
    echo "test.sh: $target: no log (not built?)" >&2
    failed=$((failed + 1))
    continue
  fi
  # cmocka: "[  PASSED  ] N test(s)." and "[  FAILED  ] N test(s), listed below:"
  p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
  # Plain-count tests (shell/integration) print "N passed, N failed".
  pc=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | awk '{p+=$1; f+=$3} END {print p+0, f+0}')
  p=$((p + ${pc%% *})); f=$((f + ${pc##* }))
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
    # No summary at all: the binary crashed or timed out.
    echo "test.sh: $target: no test summary in its log (crash or timeout?)" >&2
    f=1
  fi
  passed=$((passed + p))
  failed=$((failed + f))
done

if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "test.sh: bazel test exited $status" >&2
  failed=1
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
