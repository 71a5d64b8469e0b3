#!/usr/bin/env bash
# cmake/ios/build-xcframeworks.sh ZSTD_SRC PROTOBUF_C_SRC [OUT]
#
# NEEDS A MAC (Xcode 15+, cmake, Homebrew's protobuf-c for the host
# protoc-c). Never run in this repository's CI (Linux): see docs/ios.md,
# "What ran here".
#
# Builds static libraries of zstd, protobuf-c and stackrec (the recorder
# and the reader; no CLI, no preload library) for iOS devices (iphoneos,
# arm64) and the simulator (iphonesimulator, arm64 + x86_64), each with
# CMake's own iOS support (CMAKE_SYSTEM_NAME=iOS, CMAKE_OSX_SYSROOT,
# CMAKE_OSX_ARCHITECTURES, CMAKE_OSX_DEPLOYMENT_TARGET), and packs each
# into an XCFramework:
#   OUT/zstd.xcframework  OUT/protobuf_c.xcframework  OUT/CStackrec.xcframework
# CStackrec.xcframework's headers carry a module map (module CStackrec),
# so Swift code imports it as swift/Sources/Stackrec does.
#
# ZSTD_SRC and PROTOBUF_C_SRC are source checkouts of
# https://github.com/facebook/zstd (its CMake project is build/cmake) and
# https://github.com/protobuf-c/protobuf-c (build-cmake), at releases you
# choose (tested by us: none; Debian 12 ships zstd 1.5.4, protobuf-c 1.4.1).
#
# Environment: IOS_DEPLOYMENT_TARGET (default 15.0, Package.swift's),
# JOBS (default: sysctl hw.ncpu).
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  sed -n '2,25p' "$0" >&2
  exit 2
fi
zstd_src=$(cd "$1" && pwd)
pbc_src=$(cd "$2" && pwd)
out=$(mkdir -p "${3:-build-ios}" && cd "${3:-build-ios}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
target=${IOS_DEPLOYMENT_TARGET:-15.0}
jobs=${JOBS:-$(sysctl -n hw.ncpu 2>/dev/null || echo 2)}
for tool in cmake xcodebuild xcrun protoc-c; do
  command -v "$tool" >/dev/null || { echo "build-xcframeworks: $tool not found (see docs/ios.md)" >&2; exit 3; }
done

# One configure + build + install of a CMake project for one platform.
cmake_ios() { # platform archs source build prefix [cmake args...]
  local sdk=$1 archs=$2 src=$3 bld=$4 prefix=$5
  shift 5
  cmake -S "$src" -B "$bld" \
    -DCMAKE_SYSTEM_NAME=iOS \
    -DCMAKE_OSX_SYSROOT="$sdk" \
    -DCMAKE_OSX_ARCHITECTURES="$archs" \
    -DCMAKE_OSX_DEPLOYMENT_TARGET="$target" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DBUILD_SHARED_LIBS=OFF \
    "$@"
  cmake --build "$bld" -j "$jobs"
  cmake --install "$bld"
}

for plat in "iphoneos arm64" "iphonesimulator arm64;x86_64"; do
  sdk=${plat%% *} archs=${plat#* }
  prefix="$out/prefix-$sdk"
  cmake_ios "$sdk" "$archs" "$zstd_src/build/cmake" "$out/build-$sdk/zstd" "$prefix" \
    -DZSTD_BUILD_PROGRAMS=OFF -DZSTD_BUILD_TESTS=OFF \
    -DZSTD_BUILD_SHARED=OFF -DZSTD_BUILD_STATIC=ON
  cmake_ios "$sdk" "$archs" "$pbc_src/build-cmake" "$out/build-$sdk/protobuf-c" "$prefix" \
    -DBUILD_PROTOC=OFF -DBUILD_TESTS=OFF
  # stackrec finds both through the .pc files just installed (its
  # CMakeLists uses pkg-config), never the Mac's own copies; protoc-c runs
  # on the Mac. libdw is Linux-only and not looked for.
  PKG_CONFIG_LIBDIR="$prefix/lib/pkgconfig" PKG_CONFIG_PATH="" \
    cmake_ios "$sdk" "$archs" "$repo" "$out/build-$sdk/stackrec" "$prefix" \
      -DSTKR_BUILD_TOOLS=OFF
done

# Headers per library, each in its own directory (an XCFramework's headers
# are copied into the app's build: they must not collide).
headers() { # name prefix files...
  local name=$1 prefix=$2 dir
  shift 2
  dir="$out/headers-${prefix##*/}/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$prefix/include" && cp -R "$@" "$dir/")
  echo "$dir"
}

pack() { # name lib headers-files...
  local name=$1 lib=$2 args=() sdk prefix
  shift 2
  for sdk in iphoneos iphonesimulator; do
    prefix="$out/prefix-$sdk"
    args+=(-library "$prefix/lib/$lib" -headers "$(headers "$name" "$prefix" "$@")")
  done
  rm -rf "$out/$name.xcframework"
  xcodebuild -create-xcframework "${args[@]}" -output "$out/$name.xcframework"
}

for sdk in iphoneos iphonesimulator; do
  cat > "$out/prefix-$sdk/include/stackrec/module.modulemap" <<'MAP'
module CStackrec {
  header "stackrec.h"
  header "stkr_reader.h"
  header "stkr_marks.h"
  export *
}
MAP
done
pack zstd libzstd.a zstd.h zstd_errors.h zdict.h
pack protobuf_c libprotobuf-c.a protobuf-c
# The headers of CStackrec sit at the top of its Headers directory (the
# module map names them without a stackrec/ prefix).
pack CStackrec libstackrec.a stackrec/stackrec.h stackrec/stkr_reader.h \
  stackrec/stkr_marks.h stackrec/module.modulemap
echo "build-xcframeworks: wrote $out/{zstd,protobuf_c,CStackrec}.xcframework"
