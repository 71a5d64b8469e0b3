#!/usr/bin/env bash
# Regenerate the committed seed corpora (tests/fuzz/corpus/{frames,batch,cli})
# from real recordings: the demo app (tools/demo) recorded three ways
# (plain, rotating small segments, tiny rings with drops), plus the test
# fixture's standard recording (tests/fixture.c), plus one torn file (cut
# inside a frame, as a SIGKILL or a full disk leaves it). Run by hand after a
# format change; the output is kept small (well under 1 MB).
#
# STKR_BAZEL_STARTUP: bazel startup options (e.g. --output_base=DIR).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck disable=SC2206
bazel=(bazel ${STKR_BAZEL_STARTUP:-})
tmp=$(mktemp -d /tmp/stackrec-seeds.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"${bazel[@]}" build --symlink_prefix=/ //tools/demo:demo >/dev/null 2>&1
demo="$("${bazel[@]}" info bazel-bin 2>/dev/null)/tools/demo/demo"
"$demo" "$tmp/plain" 20 >/dev/null
STACKREC_SEGMENT_BYTES=2K "$demo" "$tmp/rotate" 40 >/dev/null
DEMO_BURST=1 STACKREC_RING_BYTES=4K STACKREC_DEPTH=8 STACKREC_PAYLOAD_MAX=8 \
  "$demo" "$tmp/drops" 200 >/dev/null
first=$(ls "$tmp"/plain/*.zst | head -n 1)
size=$(stat -c %s "$first")
head -c $((size * 2 / 3)) "$first" > "$tmp/torn-stackrec-1-000001.zst"

out=tests/fuzz/corpus
rm -rf "$out"/frames "$out"/batch "$out"/cli
gen="$tmp/gen_seeds"
protoc-c -I. --c_out="$tmp" proto/stackrec.proto
cc -std=gnu11 -O1 -I. -I"$tmp" tests/fuzz/gen_seeds.c tests/fixture.c \
  proto/*.c "$tmp/proto/stackrec.pb-c.c" -lzstd -lprotobuf-c -o "$gen"
# At most 3 segments per recording: enough shapes, little bulk.
segs=()
for d in plain rotate drops; do
  while IFS= read -r f; do segs+=("$f"); done < <(ls "$tmp/$d"/*.zst | head -n 3)
done
"$gen" "$out" "${segs[@]}" "$tmp/torn-stackrec-1-000001.zst"
du -sh "$out"
ls "$out"/* | head -n 50
