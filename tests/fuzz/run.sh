#!/usr/bin/env bash
# Build the fuzz targets and run each for a while (CI: a short run; long
# runs: the same command with more seconds).
#
#   tests/fuzz/run.sh [--seconds N] [--jobs J] [TARGET...]   (frames batch cli macho symcache ring unwind)
#
# Each target starts from the committed seeds (tests/fuzz/corpus/TARGET, read
# only) plus its working corpus $STKR_FUZZ_OUT/corpus/TARGET, which keeps
# what earlier runs found. A crash, leak, sanitizer report, timeout (10 s per
# input) or over-2 GB input fails the target; its input is saved under
# $STKR_FUZZ_OUT/artifacts/TARGET/ — once the bug is fixed, copy it into
# tests/fuzz/crashes/TARGET/ so the replay tests (//tests:fuzz-replay-*)
# keep it fixed. Prints one line per target with its executions, then
# "N passed, N failed" (one case per target).
set -uo pipefail
cd "$(dirname "$0")/../.."

seconds=20
jobs=1
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -eq 0 ] && targets=(frames batch cli macho symcache ring unwind)
out=${STKR_FUZZ_OUT:-/tmp/stackrec-fuzz}

mkdir -p "$out"
if ! tests/fuzz/build.sh >"$out/build.log" 2>&1; then
  echo "fuzz: build.sh failed (log $out/build.log):"
  grep -E 'error|build.sh:' "$out/build.log" | head -n 10
fi

passed=0
failed=0
for t in "${targets[@]}"; do
  bin="$out/bin/fuzz_$t"
  work="$out/corpus/$t"
  art="$out/artifacts/$t"
  log="$out/fuzz_$t.log"
  mkdir -p "$work" "$art"
  if [ ! -x "$bin" ]; then
    failed=$((failed + 1))
    echo "fuzz $t: FAILED: not built"
    continue
  fi
  # -close_fd_mask=2: the CLI's warnings on stderr would drown the log.
  mask=0
  [ "$t" = cli ] && mask=2
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
        -print_final_stats=1 -close_fd_mask=$mask -artifact_prefix="$art/")
  if [ "$jobs" -gt 1 ]; then
    args+=(-fork="$jobs" -ignore_crashes=0)
  fi
  "$bin" "${args[@]}" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  status=$?
  execs=$(grep -E '^stat::number_of_executed_units:' "$log" | awk '{s+=$2} END {print s+0}')
  cov=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+' || true)
  files=$(find "$work" -type f | wc -l)
  if [ "$status" -eq 0 ]; then
    passed=$((passed + 1))
    echo "fuzz $t: ok, $execs executions in $seconds s, ${cov:-cov: ?}, working corpus $files files"
  else
    failed=$((failed + 1))
    echo "fuzz $t: FAILED (exit $status) after $execs executions; log $log; inputs in $art:"
    ls "$art" | head
    grep -E 'ERROR|check failed|SUMMARY|Test unit written' "$log" | head -n 10
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
