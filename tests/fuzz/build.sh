#!/usr/bin/env bash
# Build the libFuzzer targets with clang (Bazel's toolchain is gcc, which
# has no libFuzzer): every target links the real sources of proto/ (and
# tools/stackrec/ for the CLI target), instrumented for coverage, with ASan
# and UBSan.
#
#   tests/fuzz/build.sh            -> $STKR_FUZZ_OUT/bin/fuzz_{frames,batch,cli,macho,symcache,ring,unwind}
#
# STKR_FUZZ_OUT defaults to /tmp/stackrec-fuzz. Needs clang-14 and
# libclang-rt-14-dev (libFuzzer), protobuf-c-compiler, libzstd-dev,
# libprotobuf-c-dev (tools/install-deps.sh installs them).
set -uo pipefail
cd "$(dirname "$0")/../.."

out=${STKR_FUZZ_OUT:-/tmp/stackrec-fuzz}
cc=${STKR_FUZZ_CC:-$(command -v clang-14 || command -v clang)}
mkdir -p "$out/gen" "$out/obj" "$out/bin"

protoc-c -I. --c_out="$out/gen" proto/stackrec.proto || exit 1
# The CLI's other generated sources (pprof's profile.pb-c.c, the HTML
# report's embedded assets) come from their Bazel genrules, so there is
# one recipe for each.
# shellcheck disable=SC2206
bazel=(bazel ${STKR_BAZEL_STARTUP:-})
"${bazel[@]}" build //tools:profile_pb_c //tools:report_assets_c >/dev/null 2>&1 ||
  { echo "build.sh: bazel build of the CLI's generated sources failed" >&2; exit 1; }
genbin=$("${bazel[@]}" info bazel-bin 2>/dev/null)

san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
cflags=(-std=gnu11 -g -O1 -fno-omit-frame-pointer -Wall -Wextra
        -Wno-unused-parameter -I. -I"$out/gen" -I"$genbin" $san
        -fsanitize=fuzzer-no-link)

# The code under test, instrumented: proto/ (with the generated pb-c.c)
# and the CLI with its main() renamed so a target can call the commands.
lib=()
for src in proto/*.c "$out/gen/proto/stackrec.pb-c.c"; do
  obj="$out/obj/$(basename "${src%.c}").o"
  "$cc" "${cflags[@]}" -c "$src" -o "$obj" || exit 1
  lib+=("$obj")
done
# The CLI links the symbolizer (//symbolize: elfutils) too. A CLI
# that does not build here fails the cli target only.
cli=()
cli_ok=1
symsrc=(symbolize/symbolize.c symbolize/symbolize_elf.c symbolize/symbolize_dwarf.c
        symbolize/symbolize_dwscope.c
        symbolize/symbolize_macho.c symbolize/symbolize_machodir.c symbolize/symcache.c
        symbolize/symcache_build.c symbolize/symcache_elf.c symbolize/symcache_walk.c
        symbolize/symcache_stream.c macho/macho.c)
# `record` also needs the recorder itself (stkr_config_check_env checks the
# STACKREC_* values with the recorder's parser; it walks with unwind/'s
# tables) and the hooks' matchers.
declare -A seen=()
for src in tools/stackrec/*.c "${symsrc[@]}" recorder/*.c unwind/*.c flush/*.c \
           preload/match.c \
           "$genbin/tools/pprof_pb/profile.pb-c.c" "$genbin/tools/report_assets.c"; do
  [ -f "$src" ] || continue
  # flush/sym_dl.c forwards to a dlopen'd symbolizer (the hook library's
  # flush, //flush:flush_dl): the CLI links the symbolizer itself.
  case $src in *_apple.c | flush/sym_dl.c) continue ;; esac
  [ -n "${seen[$src]:-}" ] && continue
  seen[$src]=1
  obj="$out/obj/cli_$(echo "${src%.c}" | tr / _).o"
  if ! "$cc" "${cflags[@]}" -Dmain=stkr__cli_main -c "$src" -o "$obj"; then
    cli_ok=0
  fi
  cli+=("$obj")
done

rm -f "$out"/bin/fuzz_*
status=0
# The Mach-O reader (libc only); the symbolizer for the cache loader.
"$cc" "${cflags[@]}" -c macho/macho.c -o "$out/obj/macho.o" || exit 1
sym=()
for src in "${symsrc[@]}"; do
  obj="$out/obj/sym_$(echo "${src%.c}" | tr / _).o"
  "$cc" "${cflags[@]}" -c "$src" -o "$obj" || exit 1
  sym+=("$obj")
done
for t in frames batch cli macho symcache ring; do
  extra=()
  [ "$t" = macho ] && extra=("$out/obj/macho.o")
  [ "$t" = symcache ] && extra=("${sym[@]}" -ldw -lelf -ldl -lpthread)
  if [ "$t" = cli ]; then
    [ "$cli_ok" -eq 1 ] || { echo "build.sh: the CLI does not compile" >&2; status=1; continue; }
    extra=("${cli[@]}" -ldw -lelf -lz -lpthread -ldl)
  fi
  "$cc" "${cflags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$t.c" \
    "${lib[@]}" "${extra[@]}" -lzstd -lprotobuf-c -o "$out/bin/fuzz_$t" || status=1
done
# The unwind table builder and walk (unwind/, libc only).
uw=()
for src in unwind/assemble.c unwind/build.c unwind/image.c unwind/store.c \
    unwind/walk.c; do
  obj="$out/obj/uw_$(basename "${src%.c}").o"
  "$cc" "${cflags[@]}" -c "$src" -o "$obj" || exit 1
  uw+=("$obj")
done
"$cc" "${cflags[@]}" -fsanitize=fuzzer tests/fuzz/fuzz_unwind.c "${uw[@]}" \
  -o "$out/bin/fuzz_unwind" || status=1
echo "fuzz targets in $out/bin: $(cd "$out/bin" && echo fuzz_*)"
exit $status
