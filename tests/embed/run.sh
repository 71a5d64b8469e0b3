#!/usr/bin/env bash
# tests/embed/run.sh: embedding without Bazel (issue 17), the `embed` phase
# of tools/test.sh. Every check prints "ok: ..." or "FAIL: ...", and the
# last line is "N passed, N failed".
#
#  1. the source lists of cmake/sources.cmake and Package.swift match the
#     BUILD files (cmake/check_sources.py), and swift/generated/ is
#     protoc-c's current output (swift/generate.sh --check);
#  2. a clean CMake build installs into a temporary prefix (the sources:
#     the files git tracks, as they are in the work tree, copied to a new
#     directory; an untracked file a build needs fails here as in a clean
#     clone; outside git, the tree itself): headers, libstackrec.{a,so},
#     stackrec.pc, the CMake package, the CLI and the preload library;
#  3. examples/pkgconfig/record_events.c built with nothing but
#     `pkg-config --cflags --libs stackrec` records events on 2 threads,
#     and the installed CLI reads them back (verify, report), symbolizes
#     them (the app's function names appear) and records a program through
#     the installed preload library;
#  4. examples/find_package, a second CMake project, finds the installed
#     package with find_package(stackrec) and links it shared and static;
#  5. libstackrec.so exports exactly the STKR_API functions
#     (tests/embed/check_exports.sh, nm -D);
#  6. `swift build && swift test` of Package.swift (skipped, saying so,
#     where /opt/swift is absent: STKR_SWIFT names another swift), and an
#     app that depends on it pinned by version (`from:`, as apps pin a
#     release: SwiftPM refuses that for a package with unsafe flags).
#
# Needs: cmake, pkg-config, cc, protoc-c, the -dev packages of
# tools/install-deps.sh. Uses a temporary directory, removed at the end
# (STKR_EMBED_KEEP=1 keeps it and prints its path).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/stackrec-embed.XXXXXX)
swift=${STKR_SWIFT:-/opt/swift/usr/bin/swift}
jobs=${STKR_EMBED_JOBS:-2}
pass=0 fail=0
cleanup() {
  if [ "${STKR_EMBED_KEEP:-0}" = 1 ]; then echo "embed: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
# Run a command quietly; on failure show the end of its output.
quiet() { # label cmd...
  local label=$1 log="$tmp/log.$RANDOM"
  shift
  if "$@" >"$log" 2>&1; then return 0; fi
  echo "embed: $label failed; the end of its output:"
  tail -n 25 "$log" | sed 's/^/  | /'
  return 1
}
# Add the "N passed, N failed" of a sub-check to ours.
sub() { # cmd...
  local out line
  out=$("$@" 2>&1)
  echo "$out" | grep -vE '^[0-9]+ passed, [0-9]+ failed$'
  line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ -z "$line" ]; then bad "$*: no summary"; return; fi
  pass=$((pass + ${line%% passed*}))
  line=${line#*passed, }
  fail=$((fail + ${line%% failed*}))
}

# Work on a copy of what git tracks (see 2. above).
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mkdir -p "$tmp/src"
  (cd "$repo" && git ls-files -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) |
    tar -xf - -C "$tmp/src"
  repo="$tmp/src"
fi

echo "== 1. source lists and generated code"
sub python3 "$repo/cmake/check_sources.py" "$repo"
sub "$repo/swift/generate.sh" --check
# A C target of a Swift package gets swift/CStackrec/include on its path:
# the public headers under the names the CMake install gives them; the
# marks file's API (stkr_marks.h, split from stkr_reader.h) may come first.
printf '#include <stackrec/stackrec.h>\n#include <stackrec/stkr_reader.h>\nint f(void) { return stkr_version() != 0; }\n' >"$tmp/inc.c"
printf '#include <stackrec/stkr_marks.h>\nint g(stkr_reader *r) { return stkr_mark_append(".", "a", 0, 0) + (int)sizeof(stkr_pid_map) + (int)stkr_reader_unrecorded_count(r); }\n' >"$tmp/marks.c"
for c in inc marks; do
  if quiet "the package's C headers ($c.c)" cc -fsyntax-only -Wall -Werror \
      -I "$repo/swift/CStackrec/include" "$tmp/$c.c"; then
    ok "$(head -1 "$tmp/$c.c") and the rest of $c.c through the package's include directory"
  else
    bad "the package's C headers ($c.c)"
  fi
done

echo "== 2. clean CMake build and install"
prefix="$tmp/prefix"
t0=$SECONDS
if quiet "cmake configure" cmake -S "$repo" -B "$tmp/build" -DCMAKE_INSTALL_PREFIX="$prefix" &&
   quiet "cmake build" cmake --build "$tmp/build" -j "$jobs" &&
   quiet "cmake install" cmake --install "$tmp/build"; then
  ok "cmake configure, build, install ($((SECONDS - t0)) s)"
else
  bad "cmake build and install"
fi
for f in include/stackrec/stackrec.h include/stackrec/stkr_reader.h \
         include/stackrec/stkr_marks.h \
         lib/libstackrec.a lib/libstackrec.so lib/pkgconfig/stackrec.pc \
         lib/cmake/stackrec/stackrecConfig.cmake bin/stackrec \
         lib/stackrec/libstackrec_preload.so; do
  [ -e "$prefix/$f" ] || bad "not installed: $f"
done
soname=$(objdump -p "$prefix/lib/libstackrec.so" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
want_so=$(sed -nE 's/^#define STKR_VERSION_(MAJOR|MINOR) ([0-9]+)$/\2/p' "$repo/recorder/stackrec.h" | paste -sd.)
[ "$soname" = "libstackrec.so.$want_so" ] && ok "SONAME $soname" || bad "SONAME '$soname', want libstackrec.so.$want_so"
cli="$prefix/bin/stackrec"

# The recording in $1 holds $2 events at the example's two sites, and the
# installed CLI says it is intact and complete.
check_recording() { # dir events label
  local dir=$1 n=$2 label=$3 out
  out=$("$cli" verify "$dir" 2>&1)
  if [ $? -eq 0 ] && echo "$out" | grep -q "intact: 1 process, .*, $n events\$"; then
    ok "$label: stackrec verify: $n events, intact"
  else
    bad "$label: stackrec verify (want $n events, exit 0):"; echo "$out" | tail -n 5
  fi
  out=$("$cli" report "$dir" 2>&1)
  if echo "$out" | grep -q "privacy.contacts.read: $((n / 2)) events" &&
     echo "$out" | grep -q "privacy.location.get: $((n / 2)) events"; then
    ok "$label: stackrec report: both sites, $((n / 2)) events each"
  else
    bad "$label: stackrec report:"; echo "$out" | head -n 12
  fi
}

echo "== 3. an app built with pkg-config only, read by the installed CLI"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
if ver=$(pkg-config --modversion stackrec) &&
   [ "$ver" = "$(sed -nE 's/^#define STKR_VERSION_STRING "(.*)"$/\1/p' "$repo/recorder/stackrec.h")" ]; then
  ok "pkg-config --modversion stackrec: $ver"
else
  bad "pkg-config --modversion stackrec: '${ver:-}'"
fi
# The installed headers alone, strictly: C99 and C++11 (-pedantic -Werror).
printf '%s\n' '#include <stackrec/stackrec.h>' '#include <stackrec/stkr_reader.h>' \
  'int main(void) { stkr_config c; stkr_config_init(&c); return c.size != sizeof c; }' >"$tmp/hdr.cc"
printf '%s\n' '#include <stackrec/stackrec.h>' '#include <stackrec/stkr_reader.h>' \
  'int main(void) { stkr_config c = STKR_CONFIG_INIT; return c.size != sizeof c; }' >"$tmp/hdr.c"
if quiet "headers (C99)" cc -std=c99 -pedantic -Wall -Wextra -Werror -c "$tmp/hdr.c" \
     -o "$tmp/hdr.o" $(pkg-config --cflags stackrec) &&
   quiet "headers (C++11)" c++ -std=c++11 -pedantic -Wall -Wextra -Werror -c "$tmp/hdr.cc" \
     -o "$tmp/hdrxx.o" $(pkg-config --cflags stackrec); then
  ok "the installed headers compile alone as C99 and C++11 (-pedantic -Werror)"
else
  bad "the installed headers do not compile alone"
fi
# The same build installed to another prefix than the configured one: its
# stackrec.pc finds its own tree (prefix from ${pcfiledir}; QA, session 21:
# it named the configured prefix's include directory).
if quiet "cmake install --prefix" cmake --install "$tmp/build" --prefix "$tmp/prefix2" &&
   quiet "headers (moved prefix)" cc -std=c99 -c "$tmp/hdr.c" -o "$tmp/hdr2.o" \
     $(PKG_CONFIG_PATH="$tmp/prefix2/lib/pkgconfig" pkg-config --cflags stackrec) &&
   [ "$(cd "$(PKG_CONFIG_PATH="$tmp/prefix2/lib/pkgconfig" pkg-config --variable=includedir stackrec)" && pwd -P)" = \
     "$(cd "$tmp/prefix2/include" && pwd -P)" ]; then
  ok "stackrec.pc is relocatable: installed with --prefix elsewhere, it names that tree"
else
  bad "stackrec.pc of a tree installed with --prefix elsewhere does not name that tree"
fi
app="$tmp/record_events"
# shellcheck disable=SC2046
if quiet "cc (pkg-config)" cc -Wall -Wextra -Werror -g -O1 -fno-omit-frame-pointer \
     "$repo/examples/pkgconfig/record_events.c" -o "$app" \
     $(pkg-config --cflags --libs stackrec) \
     -Wl,-rpath,"$(pkg-config --variable=libdir stackrec)"; then
  ok "built with: cc ... \$(pkg-config --cflags --libs stackrec)"
  if quiet "record_events" "$app" "$tmp/rec-pc" 300; then
    ok "the app recorded 1200 events (2 threads x 2 sites x 300)"
  else
    bad "the app failed"
  fi
  check_recording "$tmp/rec-pc" 1200 "pkg-config app"
  if quiet "stackrec symbolize" "$cli" symbolize -o "$tmp/rec-pc-sym" "$tmp/rec-pc" &&
     "$cli" report "$tmp/rec-pc-sym" 2>&1 | grep -q "contacts_read"; then
    ok "stackrec symbolize: the app's function contacts_read is named"
  else
    bad "stackrec symbolize: contacts_read not in the report"
  fi
else
  bad "the pkg-config build failed"
fi
if quiet "stackrec record" "$cli" record -q -o "$tmp/rec-preload" -- /bin/uname -a &&
   "$cli" report "$tmp/rec-preload" 2>&1 | grep -q "uname"; then
  ok "stackrec record through the installed preload library (lib/stackrec/)"
else
  bad "stackrec record -- uname: no uname event"
fi

echo "== 4. find_package(stackrec) from a second CMake project"
for link in shared static; do
  b="$tmp/fp-$link"
  if quiet "find_package ($link)" cmake -S "$repo/examples/find_package" -B "$b" \
       -DCMAKE_PREFIX_PATH="$prefix" -DSTKR_LINK="$link" &&
     quiet "find_package build ($link)" cmake --build "$b" -j "$jobs" &&
     quiet "find_package run ($link)" "$b/record_events" "$tmp/rec-fp-$link" 50; then
    ok "find_package(stackrec), stackrec::$([ $link = shared ] && echo stackrec || echo stackrec_static): built and ran"
    check_recording "$tmp/rec-fp-$link" 200 "find_package $link"
  else
    bad "find_package(stackrec) $link"
  fi
done
fp_ldd=$(ldd "$tmp/fp-shared/record_events" 2>&1)
if printf '%s\n' "$fp_ldd" | grep -q "libstackrec.so.$want_so => $prefix"; then
  ok "the shared build loads libstackrec.so.$want_so from the prefix"
else
  # What ldd said, for the log (seen once, under heavy load, in session 29's
  # CI; not reproduced alone).
  printf '%s\n' "$fp_ldd" | sed 's/^/  ldd: /'
  bad "the shared build does not load the installed libstackrec.so"
fi
if ldd "$tmp/fp-static/record_events" 2>/dev/null | grep -q libstackrec; then
  bad "the static build loads libstackrec.so"
else
  ok "the static build has the recorder linked in"
fi

echo "== 5. exported symbols"
sub "$repo/tests/embed/check_exports.sh" "$prefix/lib" \
    "$prefix/lib/stackrec/libstackrec_preload.so" \
    "$prefix/include/stackrec/stackrec.h" "$prefix/include/stackrec/stkr_reader.h" \
    "$prefix/include/stackrec/stkr_marks.h"

echo "== 6. swift build && swift test"
if [ ! -x "$swift" ]; then
  echo "embed: SKIPPED swift: no Swift toolchain at $swift (CI has /opt/swift)"
else
  t0=$SECONDS
  sp="$tmp/swift-build"
  if (cd "$repo" && quiet "swift build" "$swift" build --scratch-path "$sp"); then
    ok "swift build ($((SECONDS - t0)) s)"
    out=$(cd "$repo" && "$swift" test --scratch-path "$sp" 2>&1)
    st=$?
    n=$(echo "$out" | grep -E "Executed [0-9]+ tests?, with 0 failures" | tail -n 1)
    if [ $st -eq 0 ] && [ -n "$n" ] && echo "$out" | grep -q "testAsyncEventsReadBack' passed"; then
      ok "swift test: $(echo "$n" | sed -E 's/^[[:space:]]*//; s/ \(.*//') (async events read back)"
    else
      bad "swift test (exit $st):"; echo "$out" | grep -E "error|failed|Executed" | head -n 20
    fi
  else
    bad "swift build"
  fi
  # 6b. As an app depends on a release: pinned by version, which SwiftPM
  # refuses for a package with unsafe build flags, on every platform (QA,
  # session 30: `from: "0.3.0"` failed).
  t0=$SECONDS
  pin="$tmp/pinned"
  mkdir -p "$pin/app/Sources/App"
  cp -R "$repo" "$pin/repo" # (what git tracks: see above)
  ver=$(sed -n 's/^#define STKR_VERSION_STRING "\(.*\)"/\1/p' "$repo/recorder/stackrec.h")
  printf '%s\n' '// swift-tools-version:5.9' 'import PackageDescription' \
    'let package = Package(name: "App",' \
    "  dependencies: [.package(url: \"file://$pin/repo\", from: \"$ver\")]," \
    '  targets: [.executableTarget(name: "App",' \
    '    dependencies: [.product(name: "Stackrec", package: "repo")],' \
    '    path: "Sources/App")])' > "$pin/app/Package.swift"
  echo 'import Stackrec; print(Stackrec.version)' > "$pin/app/Sources/App/main.swift"
  if (cd "$pin/repo" && git init -q && git add -A &&
      git -c user.email=embed@test -c user.name=embed commit -qm release &&
      git tag "$ver") >/dev/null 2>&1 &&
     (cd "$pin/app" && quiet "swift build (pinned)" "$swift" build) &&
     [ "$(cd "$pin/app" && .build/debug/App)" = "$ver" ]; then
    ok "an app pinned to $ver builds and runs ($((SECONDS - t0)) s)"
  else
    bad "an app depending on the package pinned by version (from: \"$ver\")"
  fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
