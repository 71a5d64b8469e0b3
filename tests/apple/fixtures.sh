#!/usr/bin/env bash
# fixtures.sh OUT [NFILES FUNCS]: build real Mach-O files and dSYM bundles
# from generated C and C++ sources (gen_source.sh), with no Apple SDK:
#
#   compiler  /opt/swift/usr/bin/clang (clang 21: knows arm64e) or
#             STKR_MACHO_CC; -g -O2 -ffreestanding, nothing from an SDK
#   linker    ld64.lld-14 (Debian lld-14; the Swift toolchain's ld64.lld is
#             built without Mach-O support): executables with their own
#             entry point (-e _entry), no libSystem
#   lipo      llvm-lipo-14; dsymutil-14 runs "lipo", so a temp dir with
#             lipo -> llvm-lipo-14 goes first on its PATH
#
# ld64.lld-14 writes arm64e executables with CPU subtype 0 (plain arm64):
# the subtype is patched to CPU_SUBTYPE_ARM64E (2) before dsymutil, which
# otherwise cannot match the arm64e objects.
#
# OUT gets:
#   App-arm64 App-arm64e App-x86_64   thin executables, DWARF 4
#   App                               universal (the three slices)
#   App.dSYM                          universal dSYM of App (dsymutil)
#   App-arm64.dSYM                    thin dSYM of App-arm64
#   D5-arm64 D5-arm64.dSYM            DWARF 5 (clang -gdwarf-5)
#   Other-arm64 Other-arm64.dSYM      same sources, other build (other UUID)
#   Objc-arm64 Objc-arm64.dSYM        an Objective-C dylib (-[Probe bump:])
#   Archive.xcarchive/dSYMs/App.dSYM  copy, as Xcode lays out an archive
#   uuids                             "NAME ARCH UUID" per slice
# Exit status 77 when a tool is missing (the caller skips).
set -euo pipefail
out=$1 nfiles=${2:-6} nfuncs=${3:-12}
here=$(cd "$(dirname "$0")" && pwd)
cc=${STKR_MACHO_CC:-/opt/swift/usr/bin/clang}
ld=/usr/bin/ld64.lld-14
lipo=/usr/bin/llvm-lipo-14
dsymutil=/usr/bin/dsymutil-14
dwarfdump=/usr/bin/llvm-dwarfdump-14
for t in "$cc" "$ld" "$lipo" "$dsymutil" "$dwarfdump"; do
  if [ ! -x "$t" ]; then
    echo "fixtures.sh: $t not found (tools/install-deps.sh --tests; clang: the Swift toolchain)" >&2
    exit 77
  fi
done
mkdir -p "$out/bin" "$out/src"
ln -sf "$lipo" "$out/bin/lipo"
export PATH="$out/bin:$PATH"
"$here/gen_source.sh" "$out/src" "$nfiles" "$nfuncs"

triple() {
  case $1 in
    arm64) echo arm64-apple-ios15.0 ;;
    arm64e) echo arm64e-apple-ios15.0 ;;
    x86_64) echo x86_64-apple-macos11 ;;
  esac
}
platform() {
  case $1 in
    x86_64) echo macos 11.0 11.0 ;;
    *) echo ios 15.0 15.0 ;;
  esac
}

# build NAME ARCH DWARFFLAG [CFLAGS...]: OUT/NAME-ARCH
build() {
  local name=$1 arch=$2 dw=$3
  shift 3
  local objdir="$out/obj-$name-$arch" objs=()
  mkdir -p "$objdir"
  for src in "$out"/src/*.c "$out"/src/*.cc; do
    local o="$objdir/$(basename "$src").o"
    "$cc" -target "$(triple "$arch")" "$dw" -O2 -ffreestanding -fno-exceptions \
      -fno-stack-protector "$@" -c "$src" -o "$o" &
    objs+=("$o")
  done
  wait
  # shellcheck disable=SC2046
  "$ld" -arch "$arch" -platform_version $(platform "$arch") -e _entry \
    -o "$out/$name-$arch" "${objs[@]}"
  if [ "$arch" = arm64e ]; then
    printf '\x02\x00\x00\x80' | dd of="$out/$name-$arch" bs=1 seek=8 conv=notrunc status=none
  fi
}

for a in arm64 arm64e x86_64; do build App $a -gdwarf-4; done
build D5 arm64 -gdwarf-5
build Other arm64 -gdwarf-4 -DSTKR_OTHER_BUILD=1 -O1
# Objective-C: a root class (no Foundation, no runtime to link: the class
# metadata's references stay dynamic), as a dylib.
cat >"$out/src/probe.m" <<'OBJC'
__attribute__((objc_root_class))
@interface Probe { int n; }
- (int)bump:(int)k;
+ (int)make;
@end
@implementation Probe
- (int)bump:(int)k { n += k; return n * 3; }
+ (int)make { return 7; }
@end
OBJC
mkdir -p "$out/obj-Objc-arm64"
"$cc" -target arm64-apple-ios15.0 -gdwarf-4 -O2 -c "$out/src/probe.m" \
  -o "$out/obj-Objc-arm64/probe.m.o"
"$ld" -arch arm64 -platform_version ios 15.0 15.0 -dylib -undefined dynamic_lookup \
  -o "$out/Objc-arm64" "$out/obj-Objc-arm64/probe.m.o"
"$lipo" -create "$out/App-arm64" "$out/App-arm64e" "$out/App-x86_64" -output "$out/App"
rm -rf "$out"/*.dSYM "$out/Archive.xcarchive"
"$dsymutil" "$out/App" -o "$out/App.dSYM" 2>"$out/dsymutil.log"
"$dsymutil" "$out/App-arm64" -o "$out/App-arm64.dSYM" 2>>"$out/dsymutil.log"
# dsymutil 14 warns about some DWARF 5 forms it does not copy; the dSYM
# is still what llvm-symbolizer (the oracle) reads too.
"$dsymutil" "$out/D5-arm64" -o "$out/D5-arm64.dSYM" 2>>"$out/dsymutil.log"
"$dsymutil" "$out/Other-arm64" -o "$out/Other-arm64.dSYM" 2>>"$out/dsymutil.log"
"$dsymutil" "$out/Objc-arm64" -o "$out/Objc-arm64.dSYM" 2>>"$out/dsymutil.log"
mkdir -p "$out/Archive.xcarchive/dSYMs"
cp -r "$out/App.dSYM" "$out/Archive.xcarchive/dSYMs/"
: >"$out/uuids"
for n in App D5-arm64 Other-arm64 Objc-arm64; do
  "$dwarfdump" --uuid "$out/$n" | while read -r _ uuid arch _; do
    arch=${arch#(}
    echo "$n ${arch%)} $uuid" >>"$out/uuids"
  done
done
