#!/usr/bin/env bash
# The README's main job: build, record the multi-threaded demo app, and show
# what was recorded (stackrec info, then the first events of stackrec dump).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
bazel build -c opt //tools/demo:demo //tools:stackrec 2>&1 | grep -E '^(ERROR|FAIL)' || true
out=$(mktemp -d /tmp/stackrec-demo.XXXXXX)
bazel-bin/tools/demo/demo "$out/rec"
echo
echo "\$ stackrec info $out/rec"
bazel-bin/tools/stackrec info "$out/rec"
echo
echo "\$ stackrec dump --limit 8 $out/rec"
bazel-bin/tools/stackrec dump --limit 8 "$out/rec"
echo
echo "\$ stackrec dump --json --limit 2 $out/rec"
bazel-bin/tools/stackrec dump --json --limit 2 "$out/rec"
echo
echo "recording kept in $out/rec"
