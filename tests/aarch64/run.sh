#!/usr/bin/env bash
# Cross-build the recorder (capture, ring, walk) and the format/reader code
# for aarch64 with Debian's gcc-aarch64-linux-gnu, and run their tests under
# qemu-user: the frame-pointer walk on the instruction set iOS devices use.
#
#   tests/aarch64/run.sh            (prints one line per test, then
#                                    "N passed, N failed")
#
# Tests: walk, ring, event (capture, rings, signals, fork), hostile (real
# stacks: code without frame pointers, sigaltstack, tiny/guarded stacks,
# deep recursion, PAC bits), format, reader, damage and hostile-files
# (recording format and the reader on damaged input), record, flush and
# flush-payloads (the whole product end to end: known call chains on
# threads read back with their exact PCs), async-walk (Swift async context
# chains, with extended frame records made by clang-14 for aarch64), sample
# and watchdog (another thread's stack from the aarch64 ucontext), unwind
# (compact unwind tables and the hybrid walk against glibc's backtrace()),
# unwind-eh-frame (tables from files: python3's images, hostile .eh_frame
# bytes), clock (the event clock: cntvct_el0 and its conversion), preload
# (tests/aarch64/preload.sh: the hook library preloaded into programs, read
# back by preload_read.c).
# Fork-follow cases are skipped under qemu-user, which
# cannot run threads in a child forked from a multi-threaded guest.
#
# Needs (tools/install-deps.sh): gcc-aarch64-linux-gnu, qemu-user, and the
# arm64 multiarch packages libcmocka-dev:arm64, libzstd-dev:arm64,
# libprotobuf-c-dev:arm64, libdw-dev:arm64,
# libelf-dev:arm64. STKR_AARCH64_OUT: build dir (default
# /tmp/stackrec-aarch64).
set -uo pipefail
cd "$(dirname "$0")/../.."

out=${STKR_AARCH64_OUT:-/tmp/stackrec-aarch64}
cc=${STKR_AARCH64_CC:-aarch64-linux-gnu-gcc}
qemu=${STKR_QEMU:-qemu-aarch64}
for tool in "$cc" "$qemu" protoc-c; do
  if ! command -v "$tool" >/dev/null; then
    echo "aarch64: $tool not installed (tools/install-deps.sh)"
    echo "0 passed, 1 failed"
    exit 1
  fi
done
rm -rf "$out"
mkdir -p "$out/gen" "$out/bin"
protoc-c -I. --c_out="$out/gen" proto/stackrec.proto

cflags=(-std=gnu11 -g -O1 -fno-omit-frame-pointer -Wall -Wextra
        -Werror=implicit-function-declaration -I. -I"$out/gen")
# Every recorder source (the Apple one compiles to nothing off Apple), and
# unwind/, which the recorder's table walk uses.
recorder=(recorder/*.c unwind/*.c)
proto=(proto/*.c "$out/gen/proto/stackrec.pb-c.c")
fixture=(tests/fixture.c)
# The shared test helpers (//tests:testlib): files, scratch directories, runs
# of the CLI, and the main() of every test (TL_TEST_MAIN).
testlib=(tests/testlib.c)

build() { # name, sources/flags...
  local name=$1; shift
  if ! "$cc" "${cflags[@]}" "$@" -o "$out/bin/$name" >"$out/$name.build.log" 2>&1; then
    echo "aarch64: $name: build failed:"; sed -n '1,20p' "$out/$name.build.log"
    return 1
  fi
}

fails=0
passed=0
failed=0
"$cc" "${cflags[@]}" -fomit-frame-pointer -O2 -c tests/hostile_fixtures/nofp.c \
  -o "$out/nofp.o" && "$cc" "${cflags[@]}" -c tests/hostile_fixtures/fpcall.c \
  -o "$out/fpcall.o" || fails=$((fails + 1))
build walk tests/test-walk.c "${testlib[@]}" "${recorder[@]}" -lcmocka -lpthread || fails=$((fails + 1))
# Swift async frames made by the compiler: gcc has no swiftasynccall, so
# clang-14 compiles the fixture for aarch64 and the cross gcc links it.
async_fixture=""
if command -v clang-14 >/dev/null &&
   clang-14 --target=aarch64-linux-gnu -O1 -fPIC -fno-omit-frame-pointer \
     -fno-optimize-sibling-calls -fswift-async-fp=always -Wall -Werror \
     -c tests/async_fixtures/chain.c -o "$out/async_chain.o" \
     >"$out/async_chain.build.log" 2>&1 &&
   "$cc" -shared -o "$out/async_chain.so" "$out/async_chain.o" \
     >>"$out/async_chain.build.log" 2>&1; then
  async_fixture=$out/async_chain.so
else
  echo "aarch64: async fixture not built (clang-14 missing or failed):"
  sed -n '1,10p' "$out/async_chain.build.log" 2>/dev/null
  fails=$((fails + 1))
fi
build ring tests/test-ring.c "${testlib[@]}" "${recorder[@]}" -lcmocka -lpthread || fails=$((fails + 1))
build event tests/test-event.c "${testlib[@]}" "${recorder[@]}" -lcmocka -lpthread || fails=$((fails + 1))
build hostile tests/test-hostile.c "$out/nofp.o" "$out/fpcall.o" "${testlib[@]}" \
  "${recorder[@]}" \
  -lcmocka -lpthread || fails=$((fails + 1))
for t in format reader damage hostile-files; do
  build "$t" "tests/test-$t.c" "${fixture[@]}" "${testlib[@]}" "${proto[@]}" -lzstd \
    -lprotobuf-c -lcmocka || fails=$((fails + 1))
done
# The whole product (recorder + flush worker + symbolizer): end to end.
flush=()
for f in flush/*.c symbolize/*.c; do
  # sym_dl.c / symbolize_dl.c: the hook library's dlopen'd symbolizer
  # (//flush:flush_dl, //symbolize:module); linked directly here.
  case $f in *_apple.c | flush/sym_dl.c | symbolize/symbolize_dl.c) ;;
    *) flush+=("$f") ;; esac
done
flush+=(macho/macho.c)  # the symbolizer's Mach-O reader (//macho)
product=("${recorder[@]}" "${flush[@]}" "${proto[@]}" -ldw -lelf -lzstd
         -lprotobuf-c -lcmocka -lpthread)
build record -fno-optimize-sibling-calls -Dmain=stkr__test_main \
  tests/test-record.c tests/aarch64/skip_main.c "${testlib[@]}" "${product[@]}" \
  || fails=$((fails + 1))
for t in flush flush-payloads; do
  build "$t" -Dmain=stkr__test_main "tests/test-$t.c" tests/test-flush-util.c \
    tests/aarch64/skip_main.c "${testlib[@]}" "${product[@]}" || fails=$((fails + 1))
done
build async-walk -fno-optimize-sibling-calls tests/test-async-walk.c \
  "${testlib[@]}" "${product[@]}" -ldl || fails=$((fails + 1))
# Sampling another thread (the handler reads the aarch64 ucontext) and the
# watchdog. The parks are leaves: gcc omits their frame record on aarch64
# unless told, and then their caller is missing (README, "Sampling").
for t in sample watchdog; do
  build "$t" -fno-optimize-sibling-calls -mno-omit-leaf-frame-pointer \
    -Dmain=stkr__test_main "tests/test-$t.c" tests/aarch64/skip_main.c \
    "${testlib[@]}" "${product[@]}" || fails=$((fails + 1))
done

# Compact unwind tables (unwind/): the oracle chain built without frame
# pointers, glibc's backtrace() as the oracle (no libunwind for arm64 here).
"$cc" "${cflags[@]}" -O2 -fomit-frame-pointer -c tests/unwind_fixtures/chain.c \
  -o "$out/uw_chain.o" || fails=$((fails + 1))
# gai.c defines malloc (a forwarder that calls the leaf from inside
# getaddrinfo): not a builtin there.
"$cc" "${cflags[@]}" -fno-builtin-malloc -c tests/unwind_fixtures/gai.c \
  -o "$out/uw_gai.o" || fails=$((fails + 1))
build unwind -DUWT_ORACLE_GLIBC tests/test-unwind.c unwind/*.c "$out/uw_chain.o" \
  "$out/uw_gai.o" "${testlib[@]}" -lcmocka -lpthread -ldl || fails=$((fails + 1))
build unwind-eh-frame tests/test-unwind-eh-frame.c unwind/*.c "${testlib[@]}" \
  -lcmocka -lpthread -ldl || fails=$((fails + 1))

# The event clock on aarch64: cntvct_el0 at cntfrq_el0 (under qemu-user
# too), converted to CLOCK_MONOTONIC ns by the worker (issue 18).
build clock tests/test-clock.c "${testlib[@]}" "${product[@]}" || fails=$((fails + 1))

for t in walk ring event hostile format reader damage hostile-files record flush \
    flush-payloads async-walk sample watchdog unwind unwind-eh-frame clock; do
  bin="$out/bin/$t"
  [ -x "$bin" ] || continue
  log="$out/$t.log"
  skip=""
  case $t in record|flush|flush-payloads) skip="test_fork_follow*" ;; esac
  ( cd "$out" && STKR_SKIP="$skip" TEST_TMPDIR="$out" STKR_NO_CLI=1 STKR_UNDER_QEMU=1 \
      STKR_ASYNC_FIXTURE="$async_fixture" timeout 600 "$qemu" "$bin" ) >"$log" 2>&1
  status=$?
  p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
  s=$(grep -E '^\[  SKIPPED \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
    f=1
  fi
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1
  fi
  echo "aarch64 $t: $p passed, $f failed, $s skipped${skip:+, not run: $skip} (exit $status; log $log)"
  [ "$f" -ne 0 ] && grep -E '^\[  (ERROR|FAILED|  LINE)' "$log" | head -n 10
  passed=$((passed + p))
  failed=$((failed + f))
done
# The hook library preloaded into programs: `stackrec record` on aarch64
# (tests/aarch64/preload.sh; its own "ok:"/"FAIL:" lines in its log).
log="$out/preload.log"
tests/aarch64/preload.sh "$out" "$cc" "$qemu" >"$log" 2>&1
status=$?
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
p=${line%% passed*}; p=${p:-0}
f=${line#*passed, }; f=${f%% failed*}; [ -n "$line" ] || f=1
[ "$status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
echo "aarch64 preload: $p passed, $f failed (exit $status; log $log)"
[ "$f" -ne 0 ] && grep -E -A3 '^FAIL' "$log" | head -n 12
passed=$((passed + p))
failed=$((failed + f))
failed=$((failed + fails))
# What the walk saw on aarch64: the real-stack test's frames.
echo "aarch64: built for $(aarch64-linux-gnu-readelf -h "$out/bin/walk" 2>/dev/null | sed -n "s/ *Machine: *//p"), run with $("$qemu" --version | head -n 1)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
