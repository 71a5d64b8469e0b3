#!/usr/bin/env bash
# The README's main job: build stackrec, record which call stacks of a real,
# unmodified program (Python running tools/demo/privacy_probe.py) touch
# privacy-sensitive APIs, and show what was recorded. Then the same for an
# app that embeds the recorder with its own hook sites (tools/demo/demo.c).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
bazel build -c opt //tools:stackrec //preload:libstackrec_preload.so //tools/demo 2>&1 |
  grep -E '^(ERROR|FAIL)' || true
out=$(mktemp -d /tmp/stackrec-quickstart.XXXXXX)
stackrec=bazel-bin/tools/stackrec

echo "\$ stackrec record -o $out/rec -- /usr/bin/python3 tools/demo/privacy_probe.py"
"$stackrec" record -o "$out/rec" -- /usr/bin/python3 tools/demo/privacy_probe.py
echo
echo "\$ stackrec report $out/rec"
"$stackrec" report "$out/rec"
echo
echo "Debian's python3 is built without frame pointers, so its stacks end at"
echo "the interpreter's own frame. An app built with them (as iOS apps are)"
echo "gets whole call stacks, resolved to functions by the recorder:"
echo
echo "\$ demo $out/demo    # 4 threads, 3 hook sites, 5 call chains"
bazel-bin/tools/demo/demo "$out/demo"
echo "\$ stackrec report --top 2 $out/demo"
"$stackrec" report --top 2 "$out/demo"
echo
echo "\$ stackrec report --html $out/demo.html $out/demo   # flame graphs in one page"
"$stackrec" report --html "$out/demo.html" "$out/demo"
echo
echo "recordings kept in $out"
