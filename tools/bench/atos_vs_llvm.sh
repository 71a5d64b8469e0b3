#!/usr/bin/env bash
# atos_vs_llvm.sh: `stackrec atos` against llvm-symbolizer-14 on the same
# dSYM and the same addresses, side by side in one run (issue 10).
#
#   bazel run -c opt //tools/bench:atos_vs_llvm -- [FIXTURE_DIR [NFILES FUNCS]]
#   bazel run -c opt //tools/bench:atos_vs_llvm -- SOME.dSYM [WORK_DIR]
#
# The second form measures a dSYM built elsewhere (e.g. the ~100 MB one of
# tests/apple/gen_source.sh with 1060 x 60 functions, arm64 only), its
# addresses, cache and timings kept in WORK_DIR (default
# /tmp/stackrec-bench-dsym). LLVM_SYMBOLIZER names the oracle (default
# llvm-symbolizer-14), COMPARE_STEP the stride of the answer check (64).
# FIXTURE_DIR (default /tmp/stackrec-bench-macho) gets the Mach-O fixtures
# of tests/apple/fixtures.sh, built once with NFILES x FUNCS generated
# functions (default 60 x 40: about 4.4 MB of DWARF per slice, 13 MB of
# dSYM; building it takes minutes on 2 cores). Then, for N random
# addresses of the arm64 slice's code (inline chains expanded, -i, JSON
# out), 5 interleaved rounds of each tool, one process per round with all
# addresses on stdin ("cold": the DWARF is read from the dSYM in each
# run), and 5 rounds with a single address (start-up + DWARF open).
# Prints medians, per-address time (after start-up) in wall and in CPU
# seconds (user + system), peak RSS, the ratios, and whether both gave the
# same answers. BENCH_ADDRS sets N (default 20000). Always exits 0 (a program, not a
# test: figures are for people).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
[ -n "${BUILD_WORKSPACE_DIRECTORY:-}" ] && here=$BUILD_WORKSPACE_DIRECTORY
fx=${1:-/tmp/stackrec-bench-macho}
nfiles=${2:-60}
nfuncs=${3:-40}
dsym=
if [[ $fx == *.dSYM ]]; then
  dsym=$(ls -d "$fx"/Contents/Resources/DWARF/* | head -n 1)
  fx=${2:-/tmp/stackrec-bench-dsym}
  mkdir -p "$fx"
fi
stackrec=${STACKREC:-$here/bazel-bin/tools/stackrec}
[ -x "$stackrec" ] || stackrec=$(dirname "$0")/../stackrec
llvm=${LLVM_SYMBOLIZER:-llvm-symbolizer-14}
n=${BENCH_ADDRS:-20000}
step=${COMPARE_STEP:-64}

if [ -z "$dsym" ]; then
  if [ ! -f "$fx/App.dSYM/Contents/Resources/DWARF/App" ]; then
    echo "building the fixtures ($nfiles x $nfuncs) into $fx ..."
    "$here/tests/apple/fixtures.sh" "$fx" "$nfiles" "$nfuncs" 2>/dev/null || exit 0
  fi
  dsym=$fx/App.dSYM/Contents/Resources/DWARF/App
fi
read -r size lo < <(llvm-objdump-14 --macho --arch=arm64 --section-headers "$dsym" |
  awk '$2 == "__text" {print $3, $4}')
dwarf=0
while read -r hexsize; do dwarf=$((dwarf + 16#$hexsize)); done < <(
  llvm-objdump-14 --macho --arch=arm64 --section-headers "$dsym" |
  awk '$2 ~ /^__debug_/ {print $3}')
python3 - "$lo" "$size" "$n" >"$fx/addrs" <<'PY'
import random, sys
lo, size, n = int(sys.argv[1], 16), int(sys.argv[2], 16), int(sys.argv[3])
r = random.Random(42)
for _ in range(n):
    print("0x%x" % (lo + r.randrange(size)))
PY
head -n 1 "$fx/addrs" >"$fx/addr1"

# timed OUT CMD...: run CMD; OUT gets "wall_s peak_RSS_KB user_s system_s"
# from wait4, in microseconds (/usr/bin/time prints hundredths: 0.01 s
# over 20 000 addresses is 0.5 us each, more than the cache's whole
# per-address cost). Exits with CMD's status.
timed() {
  python3 -c '
import os, sys, time
t = time.monotonic()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, st, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write("%.4f %d %.6f %.6f\n" % (time.monotonic() - t, ru.ru_maxrss,
                                     ru.ru_utime, ru.ru_stime))
sys.exit(os.waitstatus_to_exitcode(st))
' "$@"
}

# The symbol cache of the arm64 slice: build time = conversion speed.
rm -rf "$fx/cache"
timed "$fx/time" "$stackrec" symcache build -arch arm64 "$dsym" -o "$fx/cache" >"$fx/cache.log" || exit 0
read -r build_wall _ build_user build_sys <"$fx/time"
cache=$(ls "$fx"/cache/*.stkrsym)
ours() { "$stackrec" atos -o "$dsym" -arch arm64 -i --json <"$1"; }
warm() { "$stackrec" atos -o "$cache" -i --json <"$1"; }
theirs() { "$llvm" --obj="$dsym" --default-arch=arm64 -C -i --output-style=JSON <"$1"; }
# run NAME INPUT: wall seconds, peak RSS KB and CPU seconds of one run
run() {
  timed "$fx/time" bash -c "$(declare -f ours warm theirs); \
    stackrec='$stackrec' llvm='$llvm' dsym='$dsym' cache='$cache' $1 '$2' >/dev/null 2>&1"
  cat "$fx/time"
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

declare -A t rss
for round in 1 2 3 4 5; do
  for who in ours warm theirs; do
    read -r s k u y < <(run "$who" "$fx/addrs")
    t[$who,all]+="$s "
    t[$who,cpuall]+="$(echo "$u + $y" | bc -l) "
    rss[$who]=$k
    read -r s k u y < <(run "$who" "$fx/addr1")
    t[$who,one]+="$s "
    t[$who,cpuone]+="$(echo "$u + $y" | bc -l) "
  done
done
same=no
if python3 "$here/tests/apple/compare.py" "$stackrec" "$dsym" arm64 "$step" "$llvm" >/dev/null 2>&1; then same=yes; fi

printf 'dSYM: %s (arm64 slice: %.1f MB of DWARF); %d random addresses, -i, JSON\n' \
  "$dsym" "$(echo "$dwarf / 1048576" | bc -l)" "$n"
printf '%-22s %10s %10s %14s %10s %16s %14s\n' tool "1 addr s" "all s" "per addr us" "peak RSS MB" \
  "CPU s (1 / all)" "CPU/addr us"
for who in ours warm theirs; do
  one=$(echo "${t[$who,one]}" | tr ' ' '\n' | grep . | median)
  all=$(echo "${t[$who,all]}" | tr ' ' '\n' | grep . | median)
  per=$(echo "($all - $one) * 1000000 / $n" | bc -l)
  cone=$(echo "${t[$who,cpuone]}" | tr ' ' '\n' | grep . | median)
  call=$(echo "${t[$who,cpuall]}" | tr ' ' '\n' | grep . | median)
  cper=$(echo "($call - $cone) * 1000000 / $n" | bc -l)
  eval "per_$who=\$per cper_$who=\$cper"
  case $who in
    ours) name="stackrec atos (DWARF)" ;;
    warm) name="stackrec atos (cache)" ;;
    *) name=$(basename "$llvm") ;;
  esac
  printf '%-22s %10s %10s %14.1f %10.1f %7s / %-7s %14.2f\n' "$name" "$one" "$all" "$per" \
    "$(echo "${rss[$who]} / 1024" | bc -l)" "$cone" "$call" "$cper"
done
printf 'per-address ratio %s / stackrec atos: %.2f (goal >= 1: never slower)\n' "$(basename "$llvm")" \
  "$(echo "$per_theirs / $per_ours" | bc -l)"
echo "same answers as $llvm (every ${step}th byte of the slice): $same"
printf 'per-address ratio stackrec DWARF / cache: %.2f (goal >= 10)\n' \
  "$(echo "$per_ours / $per_warm" | bc -l)"
# On a loaded machine wall time counts the waits for a core: the ratios
# of CPU time per address (user + system, after start-up) say more there.
printf 'per-address CPU ratios: %s / stackrec atos %.2f, DWARF / cache %.2f\n' \
  "$(basename "$llvm")" "$(echo "$cper_theirs / $cper_ours" | bc -l)" \
  "$(echo "$cper_ours / $cper_warm" | bc -l)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'symbol cache build: %.2f s for %.1f MB of DWARF: %.1f MB/s (goal >= 100); cache %s bytes\n' \
  "$build_wall" "$(echo "$dwarf / 1048576" | bc -l)" \
  "$(echo "$dwarf / 1048576 / $build_wall" | bc -l)" "$(stat -c %s "$cache")"
printf 'symbol cache build CPU: %.2f s user + %.2f s system: %.1f MB of DWARF per CPU second\n' \
  "$build_user" "$build_sys" "$(echo "$dwarf / 1048576 / ($build_user + $build_sys)" | bc -l)"
