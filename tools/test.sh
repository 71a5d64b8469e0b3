#!/usr/bin/env bash
# Run the whole stackrec test suite and count test cases (not targets).
#
#   tools/test.sh [extra bazel args...]
#
# Installs missing Debian packages first, then runs, in order:
#   plain   bazel test of every package (gcc, fastbuild), then
#           tools/check_layering.py (the dependency rule, DEVELOPERS.md)
#   asan    the same suite under --config=asan (ASan + UBSan + LeakSanitizer)
#   tsan    the same suite under --config=tsan
#   fuzz    tests/fuzz/build.sh + a short libFuzzer run of every target
#   soak    tests/soak: plain build (flat RSS) for STKR_SOAK_SECONDS, then the
#           ASan build (LeakSanitizer) for a quarter of that
#   aarch64 tests/aarch64/run.sh: cross-built tests under qemu-aarch64
#   embed   tests/embed/run.sh: without Bazel (issue 17): source lists vs
#           BUILD files, a clean CMake build + install, an app built with
#           pkg-config only and read back by the installed CLI,
#           find_package(stackrec), the nm -D export check, swift build &&
#           swift test
# Every phase prints "<phase>: N passed, N failed"; the last line is the sum
# over all of them:
#   N passed, N failed
# A test target that fails without a summary (crash, timeout) counts as one
# failed case. Exit status: 0 when nothing failed.
#
# Environment:
#   STKR_PHASES         phases to run (default "plain asan tsan fuzz soak aarch64 embed")
#   STKR_BAZEL_STARTUP  bazel startup options, e.g. --output_base=DIR
#   STKR_FUZZ_SECONDS   seconds per fuzz target (default 20)
#   STKR_SOAK_SECONDS   plain soak duration (default 45; ASan: a quarter)
set -uo pipefail
cd "$(dirname "$0")/.."

phases=${STKR_PHASES:-plain asan tsan fuzz soak aarch64 embed}
# shellcheck disable=SC2206
bazel=(bazel ${STKR_BAZEL_STARTUP:-})

tools/install-deps.sh --tests || { echo "test.sh: could not install dependencies" >&2; echo "0 passed, 1 failed"; exit 1; }

# Every package of the workspace, without walking into the bazel-*
# convenience symlinks (a server with another output base does not know
# them as its own and would descend into them) or third_party's local
# repositories.
targets=("//:all")
for d in */; do
  d=${d%/}
  case $d in bazel-*|third_party) continue ;; esac
  [ -L "$d" ] && continue
  if [ -n "$(find "$d" \( -name BUILD -o -name BUILD.bazel \) -print -quit)" ]; then
    targets+=("//$d/...")
  fi
done

total_p=0
total_f=0
add() { total_p=$((total_p + $1)); total_f=$((total_f + $2)); }

# What failed, repeated just above the last line so that a CI page showing
# only the end of the output still names the case and its message.
failures=$(mktemp /tmp/stackrec-failures.XXXXXX)
trap 'rm -f "$failures"' EXIT

# Count the cases of every test target in one testlogs tree.
# Sets P, F, S (passed, failed, skipped).
count_logs() {
  local logs=$1 target pkg name log p f s pc
  P=0; F=0; S=0
  local expr
  expr=$(printf ' + %s' "${targets[@]}"); expr=${expr# + }
  for target in $("${bazel[@]}" query "tests($expr)" 2>/dev/null | sort); do
    pkg=${target#//}; pkg=${pkg%%:*}; name=${target##*:}
    log="$logs/$pkg/$name/test.log"
    if [ ! -f "$log" ]; then
      echo "test.sh: $target: no log (not built?)" >&2
      F=$((F + 1))
      continue
    fi
    # cmocka: "[  PASSED  ] N test(s).", "[  FAILED  ] N test(s), listed
    # below:" and "[  SKIPPED ] N test(s), listed below:".
    p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
    f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
    s=$(grep -E '^\[  SKIPPED \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
    # Plain-count tests (shell/integration) print "N passed, N failed".
    pc=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | awk '{p+=$1; f+=$3} END {print p+0, f+0}')
    p=$((p + ${pc%% *})); f=$((f + ${pc##* }))
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
      echo "test.sh: $target: no test summary in its log (crash or timeout?)" >&2
      f=1
      { echo "-- $target (${label:-}): no summary; the end of $log:"
        tail -n 15 "$log"; } >>"$failures"
    elif [ "$f" -gt 0 ]; then
      { echo "-- $target (${label:-}): $f failed, from $log:"
        grep -E -B2 '^\[  (ERROR|FAILED) +\]|^ERROR|^FAIL' "$log" | head -n 30; } >>"$failures"
    fi
    P=$((P + p)); F=$((F + f)); S=$((S + s))
  done
}

# "N passed, N failed..." -> p=N, f=N (the caller's locals).
split_counts() {
  p=${1%% passed*}
  f=${1#*passed, }; f=${f%% failed*}
}

# The end of every phase: a failing exit status with no failure counted is
# one failure (something died without saying so); print
# "<label>: N passed, N failed<extra>" and add to the totals.
#   phase_done LABEL WHAT STATUS PASSED FAILED [EXTRA]
phase_done() {
  local label=$1 what=$2 status=$3 p=$4 f=$5
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "test.sh: $label: ${what}exited $status" >&2
    f=1
  fi
  echo "$label: $p passed, $f failed${6:-}"
  add "$p" "$f"
}

bazel_suite() {
  local label=$1; shift
  local status logs
  echo "== $label: bazel test $*"
  "${bazel[@]}" test --keep_going "$@" "${targets[@]}" 2>&1 |
    grep -v -E '^(Loading|Analyzing|\[[0-9,]+ / [0-9,]+\]|INFO: From )' | tail -n 40
  status=${PIPESTATUS[0]}
  logs=$("${bazel[@]}" info "$@" bazel-testlogs 2>/dev/null)
  count_logs "$logs"
  phase_done "$label" "bazel test " "$status" "$P" "$F" "${S:+, $S skipped}"
}

# A script phase: its last "N passed, N failed" line counts; none, or a
# failing exit status without failures counted, is one failure.
script_phase() {
  local label=$1; shift
  local out status line p f
  echo "== $label: $*"
  out=$(mktemp)
  "$@" 2>&1 | tee "$out" | tail -n 30
  status=${PIPESTATUS[0]}
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
  rm -f "$out"
  if [ -z "$line" ]; then
    p=0; f=1
    echo "test.sh: $label: no 'N passed, N failed' line (exit $status)" >&2
  else
    split_counts "$line"
  fi
  phase_done "$label" "" "$status" "$p" "$f"
}

# The soak program twice: the plain build (RSS must stay flat) for
# STKR_SOAK_SECONDS, then the ASan build (LeakSanitizer at exit) for a
# quarter of that. Prints the sum of both as "N passed, N failed".
soak_phase() {
  local secs=${STKR_SOAK_SECONDS:-45} p=0 f=0 cfg bin line dir
  for cfg in plain asan; do
    local opt=()
    [ "$cfg" = asan ] && opt=(--config=asan)
    "${bazel[@]}" build "${opt[@]}" "$@" //tests:soak 2>&1 | grep -E '^(ERROR|FAIL)'
    bin="$("${bazel[@]}" info "${opt[@]}" "$@" bazel-bin 2>/dev/null)/tests/soak"
    dir=$(mktemp -d /tmp/stackrec-soak.XXXXXX)
    if [ ! -x "$bin" ]; then
      echo "soak ($cfg): not built"
      f=$((f + 1))
      continue
    fi
    [ "$cfg" = asan ] && secs=$(( (secs + 3) / 4 ))
    line=$(ASAN_OPTIONS=detect_leaks=1 "$bin" --seconds "$secs" --dir "$dir/out" 2>&1 |
           tee /dev/stderr | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    rm -rf "$dir"
    if [ -z "$line" ]; then
      echo "soak ($cfg): no result (crash or leak report above)"
      f=$((f + 1))
    else
      echo "soak ($cfg): $line"
      local sum_p=$p sum_f=$f
      split_counts "$line"
      p=$((sum_p + p)); f=$((sum_f + f))
    fi
  done
  echo "$p passed, $f failed"
  [ "$f" -eq 0 ]
}

start=$SECONDS
for phase in $phases; do
  t0=$SECONDS
  case $phase in
    plain)
      bazel_suite plain "$@"
      # The dependency rule (DEVELOPERS.md): Bazel refuses the probes of
      # tools/layering_probe/, and every #include follows the target's deps.
      script_phase layering tools/check_layering.py --bazel "${bazel[*]}" ;;
    asan) bazel_suite asan --config=asan "$@" ;;
    tsan) bazel_suite tsan --config=tsan "$@" ;;
    fuzz) script_phase fuzz tests/fuzz/run.sh --seconds "${STKR_FUZZ_SECONDS:-20}" ;;
    soak) script_phase soak soak_phase "$@" ;;
    aarch64) script_phase aarch64 tests/aarch64/run.sh ;;
    embed) script_phase embed tests/embed/run.sh ;;
    *) echo "test.sh: unknown phase '$phase'" >&2; add 0 1 ;;
  esac
  echo "   ($phase took $((SECONDS - t0)) s)"
done
echo "test.sh: all phases took $((SECONDS - start)) s"
if [ -s "$failures" ]; then
  echo "== what failed (the test logs' own lines)"
  cat "$failures"
fi
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
