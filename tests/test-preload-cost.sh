#!/usr/bin/env bash
# What every process recorded by the hook library pays (issue 9, "costs
# that grow with processes"):
#  1. linkage: libstackrec_preload.so does not need libdw, libelf,
#     libstdc++, liblzma, libbz2 or libz (readelf -d): the symbolizer is a
#     module of its own, libstackrec_symbolize.so, beside it, exporting its
#     table (stkr__sym_dl_v1) and nothing of the recorder;
#  2. inproc mode (STACKREC_SYMBOLIZE=inproc) loads that module on the
#     flush worker: a recorded python3 (its open of /etc/passwd hooked) has
#     frames in its recording;
#  3. without the module (the hook library copied alone) the same run
#     records offline: no frames, a note naming the missing file on
#     stderr, the program's output and status untouched, and `stackrec
#     symbolize` resolves the PCs afterwards;
#  4. a process that ends cleanly removes its session and ring files (the
#     crash-proof rings' backing): the directory holds its segments only,
#     instead of ~0.5 MB per process for the next process or `record` to
#     recover and delete; a SIGKILLed one still leaves them (recovered).
# Skips under sanitizers (the hook library needs the sanitizer runtime
# first in the process; test-exit covers inproc loading there).
# Prints "N passed, N failed".
set -u
cd "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-.}" 2>/dev/null || true
tmp=${TEST_TMPDIR:-$(mktemp -d)}
tool=$PWD/tools/stackrec
lib=$PWD/preload/libstackrec_preload.so
mod=$PWD/preload/libstackrec_symbolize.so
pass=0; fail=0
ok() { echo "preload-cost: ok: $*"; pass=$((pass + 1)); }
bad() { echo "preload-cost: FAILED: $*"; fail=$((fail + 1)); }
if readelf -d "$lib" 2>/dev/null | grep -Eq 'lib(asan|tsan)'; then
  echo "preload-cost: SKIPPED: sanitizer build (runs in the plain phase)"
  echo "[  SKIPPED ] 4 test(s), listed below:"
  for c in linkage inproc fallback cleanup; do echo "[  SKIPPED ] $c"; done
  exit 0
fi
py=/usr/bin/python3
[ -x "$py" ] || { echo "preload-cost: $py missing"; echo "0 passed, 1 failed"; exit 1; }

# 1. linkage
needed=$(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
if [ -z "$needed" ]; then
  bad "linkage: readelf -d $lib lists no libraries"
elif echo "$needed" | grep -Eq 'libdw|libelf|libstdc\+\+|liblzma|libbz2|libz\.'; then
  bad "linkage: the hook library needs: $needed"
else
  ok "linkage: the hook library needs only: $needed"
fi
if [ ! -f "$mod" ]; then
  bad "linkage: no $mod beside the hook library"
else
  exports=$(nm -D --defined-only "$mod" | awk '{print $3}' | grep -v '^_' | tr '\n' ' ')
  if [ "$exports" = "stkr__sym_dl_v1 " ] && readelf -d "$mod" | grep -q 'libdw'; then
    ok "linkage: the module exports its table only and brings libdw"
  else
    bad "linkage: the module exports '$exports'"
  fi
fi

# A recorded python3: one hooked open of /etc/passwd, then long enough (0.6 s,
# flushes every 20 ms) for the worker to symbolize before the exit.
prog=("$py" -c 'import time; open("/etc/passwd").close(); print(True); time.sleep(0.6)')
run_hooked() { # libpath dir -> stdout in $dir.out, stderr in $dir.err, status in $rc
  rm -rf "$2"
  STACKREC_DIR=$2 STACKREC_SYMBOLIZE=inproc STACKREC_FLUSH_MS=20 \
    LD_PRELOAD=$1 "${prog[@]}" >"$2.out" 2>"$2.err"
  rc=$?
}
# Frames (resolved, or image+offset where python3's symbols stop) exist
# only where a symbolizer ran: in the process (the module) or afterwards.
frames_of() { # dir -> count of frames of its events
  "$tool" dump --json "$1" | "$py" -c '
import json, sys
print(sum(len(json.loads(line).get("frames") or []) for line in sys.stdin))'
}
events() { "$tool" dump "$1" | grep -c 'files.open'; }

# 2. inproc with the module
run_hooked "$lib" "$tmp/inproc"
frames=$(frames_of "$tmp/inproc")
if [ "$rc" = 0 ] && [ "$(cat "$tmp/inproc.out")" = True ] && [ ! -s "$tmp/inproc.err" ] &&
   [ "$(events "$tmp/inproc")" -ge 1 ] && [ "${frames:-0}" -ge 1 ]; then
  ok "inproc: $frames frames, resolved in the recording process"
else
  bad "inproc: status $rc, out '$(cat "$tmp/inproc.out")', err '$(head -c 300 "$tmp/inproc.err")', $(events "$tmp/inproc") events, ${frames:-?} frames"
fi

# 3. the hook library alone: offline, with a note
mkdir -p "$tmp/alone"
cp "$lib" "$tmp/alone/libstackrec_preload.so"
run_hooked "$tmp/alone/libstackrec_preload.so" "$tmp/off"
frames=$(frames_of "$tmp/off")
if [ "$rc" = 0 ] && [ "$(cat "$tmp/off.out")" = True ] &&
   grep -q "cannot load $tmp/alone/libstackrec_symbolize.so" "$tmp/off.err" &&
   [ "$(events "$tmp/off")" -ge 1 ] && [ "${frames:-1}" = 0 ]; then
  ok "fallback: offline with a note, no frames"
else
  bad "fallback: status $rc, out '$(cat "$tmp/off.out")', err '$(head -c 300 "$tmp/off.err")', $(events "$tmp/off") events, ${frames:-?} frames"
fi
if "$tool" symbolize -o "$tmp/off-sym" "$tmp/off" >/dev/null 2>&1 &&
   [ "$(frames_of "$tmp/off-sym")" -ge 1 ]; then
  ok "fallback: stackrec symbolize resolves the offline recording"
else
  bad "fallback: stackrec symbolize did not resolve $tmp/off"
fi

# 4. clean ends leave segments only; a SIGKILL leaves the rings
rm -rf "$tmp/clean"
for i in 1 2 3; do
  STACKREC_DIR=$tmp/clean LD_PRELOAD=$lib "$py" -c 'open("/etc/passwd").close()'
  STACKREC_DIR=$tmp/clean LD_PRELOAD=$lib /bin/true
done
STACKREC_DIR=$tmp/clean LD_PRELOAD=$lib bash -c 'getent passwd root >/dev/null; (exit 0)'
left=$(ls "$tmp/clean" | grep -Ev '^stackrec-[0-9]+-[0-9]+\.zst$' | tr '\n' ' ')
nseg=$(ls "$tmp/clean" | grep -c '\.zst$')
# /bin/true makes no watched call: it starts no recording and writes nothing
# (the three pythons and bash's getent do: 4 segments at least).
if [ -z "$left" ] && [ "$nseg" -ge 4 ] && "$tool" verify "$tmp/clean" >/dev/null; then
  ok "cleanup: $nseg segments, no session or ring file left, verify 0"
else
  bad "cleanup: left '$left', $nseg segments, verify $("$tool" verify "$tmp/clean" >/dev/null 2>&1; echo $?)"
fi
rm -rf "$tmp/quiet"
mkdir "$tmp/quiet"
STACKREC_DIR=$tmp/quiet LD_PRELOAD=$lib /bin/true
STACKREC_DIR=$tmp/quiet LD_PRELOAD=$lib ls / >/dev/null
STACKREC_DIR=$tmp/quiet LD_PRELOAD=$lib cat /etc/hostname >/dev/null
if [ -z "$(ls -A "$tmp/quiet")" ]; then
  ok "cleanup: processes that make no watched call write nothing"
else
  bad "cleanup: /bin/true, ls and cat left: $(ls -A "$tmp/quiet" | tr '\n' ' ')"
fi
rm -rf "$tmp/killed"
(STACKREC_DIR=$tmp/killed LD_PRELOAD=$lib "$py" -c 'import os, signal; open("/etc/passwd").close(); os.kill(os.getpid(), signal.SIGKILL)') 2>/dev/null  # the shell's "Killed" note
if ls "$tmp/killed" | grep -q '\.session$' && ls "$tmp/killed" | grep -q '\.ring$' &&
   "$tool" recover "$tmp/killed" >/dev/null 2>&1 &&
   [ "$(events "$tmp/killed")" -ge 1 ]; then
  ok "cleanup: a SIGKILLed process leaves its rings, and its event is recovered"
else
  bad "cleanup: after SIGKILL: $(ls "$tmp/killed" | tr '\n' ' '), $(events "$tmp/killed") events"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
