#!/usr/bin/env bash
# Install what stackrec needs to build and test, from Debian 12 packages
# only (nothing is downloaded at build time). Safe to re-run: installs only
# what is missing. Needs root (or sudo) when something is missing.
set -euo pipefail

pkgs=(
  bazel-bootstrap bazel-platforms   # Bazel 4.2.3 + the platforms repo
  gcc g++ libc6-dev                 # the C toolchain Bazel auto-configures
  libuv1-dev                        # flush worker loop
  libzstd-dev zstd                  # segment compression (+ zstd -t)
  libprotobuf-c-dev protobuf-c-compiler  # batch encoding, protoc-c
  libcmocka-dev                     # unit tests
  libunwind-dev                     # benchmarks: unw_backtrace contender
  libdw-dev libelf-dev              # symbolization (elfutils)
)

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
