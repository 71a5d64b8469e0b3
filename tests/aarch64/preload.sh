#!/usr/bin/env bash
# The hook library (preload/) cross-built for aarch64 and preloaded into
# programs under qemu-aarch64: what `stackrec record` does on an aarch64
# Linux machine, without the CLI (the recording is read by preload_read,
# built for aarch64 with the reader). Run by tests/aarch64/run.sh:
#
#   tests/aarch64/preload.sh OUT CC QEMU   (prints "ok: ..." / "FAIL: ..."
#                                           lines, then "N passed, N failed")
#
# Cases (tests/preload_fixtures/omitfp, built as Debian builds: -O2, no
# frame pointers, and a frame-pointer register zeroed mid-chain):
#   chain    the program's output and exit status are its own; one event
#            whose stack goes through the zeroed frame to main (the unwind
#            tables on aarch64)
#   dlopen   passes a minute apart, the library loaded by bare name through
#            the program's RUNPATH ($ORIGIN: the hook's aarch64 dlopen keeps
#            the program as the caller) and called 40 times over 2 s: every
#            event is recorded, and the last one's stack, from the library
#            to main, lies in images the recording lists (the hook told the
#            worker; tables for the new image)
#   usage    a failing run (exit 2, a message on stderr) is the same plain
#            and recorded; it makes no watched call, so it writes nothing
# Note: the guest must use the multiarch libc (/lib/ld-linux-aarch64.so.1,
# libc6:arm64), as here: with `qemu-aarch64 -L /usr/aarch64-linux-gnu` (the
# cross toolchain's libc) any program that starts a thread hangs under
# qemu 7.2, hooks or not.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$1 cc=$2 qemu=$3
d=$out/preload
rm -rf "$d"
mkdir -p "$d/bin"
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

flags=(-std=gnu11 -g -I. -I"$out/gen")
pl=(-O2 -fPIC -fno-omit-frame-pointer -fno-delete-null-pointer-checks)
omitfp=(-O2 -fomit-frame-pointer -fno-optimize-sibling-calls -fno-inline)
# The hook library as preload/BUILD links it: the recorder, the worker
# (with sym_dl.c: the symbolizer is loaded on demand, not linked), the
# format; only the hooks exported.
if ! "$cc" "${flags[@]}" "${pl[@]}" -shared -o "$d/bin/libstackrec_preload.so" \
     preload/exec_escape.c preload/hooks_dl.c preload/hooks_env.c \
     preload/hooks_exec.c preload/hooks_files.c \
     preload/hooks_net.c \
     preload/hooks_signal.c preload/hooks_stat.c preload/hooks_thread.c \
     preload/preload.c preload/sanitizer.c preload/setup_check.c \
     preload/sites.c preload/start_room.c preload/static_deps.c \
     preload/match.c recorder/*.c \
     unwind/*.c flush/*.c proto/*.c "$out/gen/proto/stackrec.pb-c.c" \
     -Wl,--version-script=preload/exports.map -Wl,-z,defs -lzstd \
     -lprotobuf-c -ldl -lpthread >"$d/build.log" 2>&1 ||
   ! "$cc" "${flags[@]}" "${omitfp[@]}" -o "$d/bin/omitfp" \
     tests/preload_fixtures/omitfp.c -ldl '-Wl,-rpath,$ORIGIN' >>"$d/build.log" 2>&1 ||
   ! "$cc" "${flags[@]}" "${omitfp[@]}" -fPIC -shared -o "$d/bin/libomitfp_lib.so" \
     tests/preload_fixtures/omitfp_lib.c >>"$d/build.log" 2>&1 ||
   ! "$cc" "${flags[@]}" -O1 -o "$d/bin/preload_read" tests/aarch64/preload_read.c \
     proto/*.c "$out/gen/proto/stackrec.pb-c.c" -lzstd -lprotobuf-c >>"$d/build.log" 2>&1; then
  echo "FAIL: build:"; sed -n '1,20p' "$d/build.log"
  echo "0 passed, 1 failed"
  exit 1
fi

# run NAME FLUSH_MS ARGS...: the fixture plain, then under the hooks into
# $d/NAME with the environment `stackrec record` gives its command
# (tools/stackrec/record.c); sets rc_plain, rc_rec and compares their
# stdout and stderr.
run() {
  local name=$1 flush=$2; shift 2
  ( cd "$d/bin" && timeout -s KILL 300 "$qemu" ./omitfp "$@" ) \
    >"$d/$name.plain.out" 2>"$d/$name.plain.err"
  rc_plain=$?
  ( cd "$d/bin" && timeout -s KILL 300 "$qemu" \
      -E LD_PRELOAD="$d/bin/libstackrec_preload.so" -E STACKREC_DIR="$d/$name" \
      -E STACKREC_SYMBOLIZE=offline -E STACKREC_UNWIND=tables -E STACKREC_FORK=follow \
      -E STACKREC_FLUSH_MS="$flush" ./omitfp "$@" ) \
    >"$d/$name.rec.out" 2>"$d/$name.rec.err"
  rc_rec=$?
  if [ "$rc_plain" -eq "$rc_rec" ] && cmp -s "$d/$name.plain.out" "$d/$name.rec.out" &&
     cmp -s "$d/$name.plain.err" "$d/$name.rec.err"; then
    ok "$name: exit $rc_rec, output the same plain and recorded"
  else
    bad "$name: plain exit $rc_plain, recorded $rc_rec; recorded stderr:"
    sed -n '1,10p' "$d/$name.rec.err"
  fi
  # No directory: the program made no watched call (recording starts at
  # a process's first event); the cases below say whether that is right.
  if [ ! -e "$d/$name" ]; then
    : >"$d/$name.read"
  elif ! timeout -s KILL 300 "$qemu" "$d/bin/preload_read" "$d/$name" >"$d/$name.read" 2>&1; then
    bad "$name: preload_read failed: $(head -n 3 "$d/$name.read")"
  fi
}

# "event SITE N IMG..." lines of NAME's recording.
events() { grep -c '^event ' "$d/$1.read"; }
accounting_adds_up() { # NAME EVENTS: attempted = written = EVENTS, 0 drops
  if grep -qx "accounting $2 $2 0 0 0" "$d/$1.read"; then
    ok "$1: accounting: attempted $2, written $2, nothing dropped or missing"
  else
    bad "$1: accounting: $(grep '^accounting' "$d/$1.read") (want $2 written)"
  fi
}

run chain 200 chain
# uw_inner uw_middle uw_outer main: the first four in the program, through
# uw_middle's zeroed frame pointer.
line=$(grep '^event identifiers.gethostname ' "$d/chain.read")
set -- $line
if [ "$(events chain)" -eq 1 ] && [ "${3:-0}" -ge 5 ] &&
   [ "$4 $5 $6 $7" = "omitfp omitfp omitfp omitfp" ]; then
  ok "chain: 1 event, $3 PCs, the first four in omitfp (through the zeroed frame pointer)"
else
  bad "chain: want 1 gethostname event through omitfp x4; got: $(head -n 3 "$d/chain.read")"
fi
accounting_adds_up chain 1

run dlopen 60000 dlopen libomitfp_lib.so 40
last=$(grep '^event identifiers.gethostname ' "$d/dlopen.read" | tail -n 1)
set -- $last
if [ "$(events dlopen)" -eq 40 ] && [ "${4:-}" = libomitfp_lib.so ] &&
   [ "${5:-}" = libomitfp_lib.so ] && [ "${6:-}" = omitfp ]; then
  ok "dlopen: 40 events; the last: lib_inner, lib_outer in libomitfp_lib.so, then omitfp ($3 PCs)"
else
  bad "dlopen: want 40 events, the last through libomitfp_lib.so x2 then omitfp; got $(events dlopen): $last"
fi
accounting_adds_up dlopen 40

run usage 200 nonsense
if [ "$rc_rec" -eq 2 ] && [ -s "$d/usage.rec.err" ] && [ ! -e "$d/usage" ]; then
  ok "usage: exit 2 with its message, as plain; no watched call, nothing written"
else
  bad "usage: exit $rc_rec$([ -e "$d/usage" ] && echo ", $d/usage written")"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
