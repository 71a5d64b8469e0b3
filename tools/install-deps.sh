#!/usr/bin/env bash
# Install what stackrec needs, from Debian 12 packages only (nothing is
# downloaded at build time). Safe to re-run: installs only what is missing.
# Needs root (or sudo) when something is missing.
#
#   tools/install-deps.sh          build, record and read (the quick start)
#   tools/install-deps.sh --tests  also what the full suite needs: clang and
#                                  libFuzzer, the aarch64 cross toolchain,
#                                  qemu-user and arm64 libraries
set -euo pipefail

pkgs=(
  bazel-bootstrap bazel-platforms   # Bazel 4.2.3 + the platforms repo
  gcc g++ libc6-dev                 # the C toolchain Bazel auto-configures
  libzstd-dev zstd                  # segment compression (+ zstd -t)
  libprotobuf-c-dev protobuf-c-compiler  # batch encoding, protoc-c
  libcmocka-dev                     # unit tests
  libunwind-dev                     # benchmarks: unw_backtrace contender
  libdw-dev libelf-dev              # symbolization (elfutils)
  python3                           # the main job records tools/demo/privacy_probe.py
  zlib1g-dev                        # stackrec export --format pprof: gzip
  libcurl4-openssl-dev              # stackrec push: ClickHouse over HTTP(S) (issue 16)
  cmake pkg-config                  # embedding without Bazel: CMakeLists.txt, stackrec.pc (issue 17)
)
test_pkgs=(
  clang-14 libclang-rt-14-dev       # fuzzing: clang + libFuzzer (tests/fuzz);
                                    # clang-14 also builds the swiftasynccall
                                    # fixture of //tests:async-walk
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross  # aarch64 cross-build (tests/aarch64)
  qemu-user                         # runs the aarch64 tests (qemu-aarch64)
  libcmocka-dev:arm64 libzstd-dev:arm64 libprotobuf-c-dev:arm64  # aarch64 test libs (multiarch)
  libdw-dev:arm64 libelf-dev:arm64  # aarch64: symbolizer
  chromium                          # tests/test-html.c renders the HTML report headless
  golang-go                         # tests/test-export-pprof.c loads the pprof export in `go tool pprof`
  clickhouse-server clickhouse-client  # tests/test-push.py: real servers and a two-shard cluster on loopback (issue 16)
  lld-14 llvm-14                    # Mach-O fixtures (tests/apple): ld64.lld-14, llvm-lipo-14, dsymutil-14,
                                    # llvm-symbolizer-14 as the oracle (clang: the Swift toolchain's, /opt/swift)
  elfutils gdb                      # tools/bench/snapshot_vs.sh: eu-stack -p and gdb 'thread apply all bt',
                                    # the contenders of `stackrec snapshot` (issue 12)
  libc6-i386                        # tests/test-preload.c: a 32-bit program under record
)

if [ "${1:-}" = "--tests" ]; then
  pkgs+=("${test_pkgs[@]}")
  # The :arm64 packages need the arm64 architecture enabled (multiarch).
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "install-deps: enabling the arm64 architecture (multiarch)" >&2
    if [ "$(id -u)" -eq 0 ]; then dpkg --add-architecture arm64; else sudo dpkg --add-architecture arm64; fi
  fi
elif [ -n "${1:-}" ]; then
  echo "usage: tools/install-deps.sh [--tests]" >&2
  exit 2
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
