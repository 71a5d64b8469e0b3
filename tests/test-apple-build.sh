#!/usr/bin/env bash
# recorder/ built for Apple targets, not only syntax-checked: every
# recorder/*.c is compiled to a Mach-O object for arm64-apple-ios15.0,
# arm64e-apple-ios15.0 and x86_64-apple-macos11 with -Werror by the Swift
# toolchain's clang (it knows arm64e and has ptrauth.h), against the Darwin
# stand-in headers in tests/apple_shim/sdk (no Apple SDK here; -nostdinc),
# then linked into a dylib with ld64.lld, and the arm64e code is checked
# with llvm-objdump for the pointer-authentication instructions the walk
# relies on.
#
# About the link: the Swift fork's ld64.lld refuses every input object that
# names an Apple platform (LC_BUILD_VERSION; a downstream guard, "This
# version of lld does not support linking for platform iOS"). So the link
# step re-assembles the compiler's own assembly output for the same target
# without its .build_version directive (the same instructions: checked,
# apart from alignment padding) and links that, with -platform_version on
# the command line. This lld also writes the arm64e dylib's header as
# ARM64/ALL: the link proves symbol resolution and relocations, not a
# loadable arm64e image.
#
# Also compiles `stackrec snapshot`'s Apple backend
# (tools/stackrec/snapshot_apple.c) and its end signals
# (snapshot_signals.c) for the same targets (not linked).
#
# Skips (0 cases) when the toolchain is missing (STKR_APPLE_BIN: another
# directory with clang, ld64.lld, llvm-objdump, llvm-nm). Prints
# "N passed, N failed".
set -u
cd "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-.}" 2>/dev/null || true
bin=${STKR_APPLE_BIN:-/opt/swift/usr/bin}
cc=$bin/clang ld=$bin/ld64.lld od=$bin/llvm-objdump nm=$bin/llvm-nm
out=${TEST_TMPDIR:-$(mktemp -d)}/apple-build
pass=0; fail=0
for t in "$cc" "$ld" "$od" "$nm"; do
  if [ ! -x "$t" ]; then
    echo "apple-build: SKIPPED: $t missing (the Swift toolchain, /opt/swift)"
    echo "[  SKIPPED ] 1 test(s), listed below:" # counted by tools/test.sh
    echo "[  SKIPPED ] apple-build"
    exit 0
  fi
done
ok() { pass=$((pass + 1)); }
bad() { echo "apple-build: FAILED: $*"; fail=$((fail + 1)); }
res=$("$cc" -print-resource-dir)/include
cflags=(-std=gnu11 -O2 -Wall -Wextra -Werror -fno-omit-frame-pointer
        -nostdinc -isystem "$res" -isystem tests/apple_shim/sdk -I .)
files=(recorder/*.c)

# The disassembly of one function of an object.
func_asm() { # object symbol
  "$od" -d --no-show-raw-insn "$1" | awk -v s="<_$2>:" '
    $0 ~ s {on = 1; next} on && /^[0-9a-f]+ </ {exit} on {print}'
}

# An object's instructions without addresses and alignment padding (the
# x86_64 assembler pads with other nop forms when re-assembling).
code() {
  "$od" -d --no-show-raw-insn --no-leading-addr "$1" | sed 1,3d |
    grep -Ev '^[[:space:]]*(nop[wl]?|xchg[[:space:]]+%ax, ?%ax|data16)\b'
}

rm -rf "$out"
for target in arm64-apple-ios15.0 arm64e-apple-ios15.0 x86_64-apple-macos11; do
  arch=${target%%-*}
  dir=$out/$target
  mkdir -p "$dir"
  built=0
  for f in "${files[@]}"; do
    b=$(basename "$f" .c)
    if "$cc" -target "$target" "${cflags[@]}" -c "$f" -o "$dir/$b.o" \
         >"$dir/$b.log" 2>&1 &&
       "$cc" -target "$target" "${cflags[@]}" -S "$f" -o "$dir/$b.s" \
         >>"$dir/$b.log" 2>&1; then
      ok; built=$((built + 1))
    else
      bad "$target: $f does not compile:"; sed -n '1,15p' "$dir/$b.log"
    fi
  done
  [ "$built" -eq "${#files[@]}" ] || continue

  # Mach-O objects of the right CPU (arm64e: subtype E, ptrauth ABI).
  want="ARM64 +ALL"; [ "$arch" = arm64e ] && want="ARM64 +E PAC"
  [ "$arch" = x86_64 ] && want="X86_64 +ALL"
  if "$od" --macho --private-header "$dir/walk.o" | grep -Eq "MH_MAGIC_64 +$want"; then
    ok
  else
    bad "$target: walk.o is not a Mach-O $want object:"
    "$od" --macho --private-header "$dir/walk.o" | sed -n '1,4p'
  fi

  # Link: the same assembly without .build_version (see the header).
  relinked=1
  for f in "${files[@]}"; do
    b=$(basename "$f" .c)
    sed '/^[[:space:]]*\.build_version/d' "$dir/$b.s" >"$dir/$b.link.s"
    if ! "$cc" -target "$arch-apple-none-macho" -c "$dir/$b.link.s" \
         -o "$dir/$b.link.o" >"$dir/$b.link.log" 2>&1; then
      relinked=0; bad "$target: re-assembling $b.s:"; sed -n '1,5p' "$dir/$b.link.log"
    elif ! cmp -s <(code "$dir/$b.o") <(code "$dir/$b.link.o"); then
      relinked=0; bad "$target: $b: re-assembled code differs from the compiled object"
    fi
  done
  case $target in *ios*) pv=(ios 15.0 15.0) ;; *) pv=(macos 11.0 11.0) ;; esac
  if [ "$relinked" -eq 1 ] &&
     "$ld" -dylib -arch "$arch" -platform_version "${pv[@]}" \
       -undefined dynamic_lookup -install_name @rpath/libstkr_recorder.dylib \
       -o "$dir/libstkr_recorder.dylib" "$dir"/*.link.o >"$dir/link.log" 2>&1; then
    exports=$("$nm" -g --defined-only "$dir/libstkr_recorder.dylib" | awk '{print $3}')
    missing=""
    for s in _stkr_event _stkr_site_register _stkr_thread_attach _stkr__walk \
             _stkr_thread_sample _stkr_watchdog_start _stkr__splat_deliver \
             _stkr__walk_set_task_fn _stkr__recorder_start; do
      grep -qx "$s" <<<"$exports" || missing="$missing $s"
    done
    # Undefined: only libc/libSystem (and TLV) symbols, no recorder symbol.
    undef=$("$nm" -u "$dir/libstkr_recorder.dylib" | grep '_stkr' || true)
    if [ -z "$missing" ] && [ -z "$undef" ] &&
       "$od" --macho --private-header "$dir/libstkr_recorder.dylib" | grep -q DYLIB; then
      ok
    else
      bad "$target: dylib: missing exports:$missing; undefined recorder symbols: $undef"
    fi
  else
    bad "$target: ld64.lld failed:"; sed -n '1,10p' "$dir/link.log" 2>/dev/null
  fi

  walk=$dir/walk.o
  case $arch in
  arm64e)
    # The frame walk strips saved return addresses with xpaci; the async
    # part strips resume pointers with xpaci and context (data) pointers
    # with xpacd, and calls the dlsym'd swift_task_getCurrent with an
    # authenticated branch; functions sign their own return address.
    w=$(func_asm "$walk" stkr__walk)
    a=$(func_asm "$walk" stkr__walk_async)
    grep -Eq '\bxpaci\b' <<<"$w" && ok || bad "arm64e: stkr__walk has no xpaci"
    grep -Eq '\bxpaci\b' <<<"$a" && ok || bad "arm64e: stkr__walk_async has no xpaci"
    grep -Eq '\bxpacd\b' <<<"$a" && ok || bad "arm64e: stkr__walk_async has no xpacd"
    grep -Eq '\bblraaz?\b' <<<"$a" && ok || bad "arm64e: stkr__walk_async calls the task probe without blraa(z)"
    grep -Eq '\bpacibsp\b' <<<"$w" && ok || bad "arm64e: stkr__walk does not sign its return address"
    ;;
  arm64)
    # Plain arm64 has no ptrauth ABI: the strip is a mask, no PAC
    # instruction at all (what makes the arm64e check above meaningful).
    if "$od" -d --no-show-raw-insn "$walk" | grep -Eq '\b(xpac[id]|xpaclri|pacibsp|retab)\b'; then
      bad "arm64: walk.o uses pointer-authentication instructions"
    else
      ok
    fi
    ;;
  esac

  # `stackrec snapshot`'s Apple backend (tools/, not part of the dylib):
  # it compiles, calls the Mach thread and VM functions it is built on,
  # and on arm64e strips the target's signed pc/lr/fp/sp with xpaci.
  snap=$dir/snapshot_apple.o
  if "$cc" -target "$target" "${cflags[@]}" -c tools/stackrec/snapshot_apple.c \
       -o "$snap" >"$dir/snapshot_apple.log" 2>&1; then
    ok
    und=$("$nm" -u "$snap")
    for s in _task_for_pid _task_threads _thread_suspend _thread_get_state \
             _mach_vm_read_overwrite _thread_resume; do
      grep -qx "$s" <<<"$und" && ok || bad "$target: snapshot_apple.o does not call $s"
    done
    if [ "$arch" = arm64e ]; then
      "$od" -d --no-show-raw-insn "$snap" | grep -Eq '\bxpaci\b' && ok ||
        bad "arm64e: snapshot_apple.o does not strip with xpaci"
    fi
  else
    bad "$target: tools/stackrec/snapshot_apple.c does not compile:"
    sed -n '1,15p' "$dir/snapshot_apple.log"
  fi
  # Its end signals: Apple has no sigtimedwait, so a handler notes them
  # (review, session 43: that branch had never been compiled).
  sig=$dir/snapshot_signals.o
  if "$cc" -target "$target" "${cflags[@]}" -c \
       tools/stackrec/snapshot_signals.c -o "$sig" \
       >"$dir/snapshot_signals.log" 2>&1; then
    und=$("$nm" -u "$sig")
    grep -qx _sigaction <<<"$und" && ! grep -q sigtimedwait <<<"$und" && ok ||
      bad "$target: snapshot_signals.o does not take its signals by handler"
  else
    bad "$target: tools/stackrec/snapshot_signals.c does not compile:"
    sed -n '1,15p' "$dir/snapshot_signals.log"
  fi
done
echo "apple-build: objects and dylibs under $out"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
