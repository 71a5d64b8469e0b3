#!/usr/bin/env bash
# Regenerate the committed seeds of the Mach-O target
# (tests/fuzz/corpus/macho) from the smallest fixtures tests/apple/fixtures.sh
# builds (one generated source file): a thin x86_64 executable, arm64 and
# DWARF 5 dSYMs, a universal file of an executable and a dSYM, and a torn
# universal file; and of the symbol cache target (corpus/symcache): the
# caches of those dSYMs (stackrec symcache build; the tool must be built).
# Run by hand; about 120 KB in all.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/stackrec-macho-seeds.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
tests/apple/fixtures.sh "$tmp" 1 1 2>/dev/null
out=tests/fuzz/corpus/macho
rm -rf "$out"
mkdir -p "$out"
cp "$tmp/App-x86_64" "$out/thin-x86_64"
cp "$tmp/App-arm64.dSYM/Contents/Resources/DWARF/App-arm64" "$out/dsym-arm64"
cp "$tmp/D5-arm64.dSYM/Contents/Resources/DWARF/D5-arm64" "$out/dsym-dwarf5"
/usr/bin/llvm-lipo-14 -create "$tmp/App-x86_64" "$out/dsym-arm64" -output "$out/fat"
head -c 6000 "$out/fat" >"$out/fat-torn"
stackrec=${STACKREC:-bazel-bin/tools/stackrec}
rm -rf tests/fuzz/corpus/symcache
"$stackrec" symcache build "$tmp/App-arm64.dSYM" "$tmp/D5-arm64.dSYM" \
  -o tests/fuzz/corpus/symcache >/dev/null
du -sh "$out" tests/fuzz/corpus/symcache
