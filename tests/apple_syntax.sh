#!/usr/bin/env bash
# Syntax- and type-check the Apple-only platform files on Linux, with the
# declarations in tests/apple_shim/apple.h standing in for Apple's SDK.
# Counts one case per file and per architecture branch checked.
set -u
cd "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-.}" 2>/dev/null || true
cc=$(command -v clang || command -v gcc)
pass=0; fail=0
for f in recorder/platform_apple.c flush/images_apple.c symbolize/symbolize_apple.c \
    flush/wake_apple.c; do
  if [ ! -f "$f" ]; then
    echo "apple_syntax: $f missing from the test's data" >&2
    fail=$((fail + 1)); continue
  fi
  for arch in "" "-D__arm64__"; do
    if "$cc" -fsyntax-only -std=gnu11 -Wall -Wextra -Werror -D__APPLE__ $arch \
        -include tests/apple_shim/apple.h -I tests/apple_shim -I . "$f"; then
      pass=$((pass + 1))
    else
      echo "apple_syntax: $f ($arch) does not compile" >&2
      fail=$((fail + 1))
    fi
  done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
