#!/usr/bin/env bash
# push_vs_jsonl.sh: events/s into one local ClickHouse server (issue 16),
# `stackrec push` (RowBinary, plain and gzip) side by side with
# `stackrec export --format jsonl | clickhouse-client --query "INSERT ...
# FORMAT JSONEachRow"`, and rows/s of the queries of docs/fleet.md.
#
#   tools/bench/push_vs_jsonl.sh [EVENTS [JSON_EVENTS [ROUNDS]]]
#
# STKR_PUSH_ARGS: more options for the new binary's pushes (e.g.
# "--streams 2"), not for the STKR_BENCH_BEFORE one.
#
# Methodology
# - The recording is made by //tools/bench:report_throughput (the recorder
#   itself: 512 stacks of 20 frames at 8 sites, Zipf-distributed, 2
#   producer threads), EVENTS events (default 5 M; the issue's 100 M does
#   not fit in a few minutes on a shared 2-core VM), kept in
#   $STKR_BENCH_DIR (default /tmp/stackrec-bench-push) and reused.
# - One clickhouse-server (Debian's 18.16) in a temp directory on free
#   127.0.0.1 ports, its own process group, killed on every exit.
# - Rounds interleave: push --compress none, push --compress gzip, push
#   into Null tables, the JSONEachRow path; with STKR_BENCH_BEFORE=BINARY
#   (a stackrec built from an earlier commit) also that binary's push
#   --compress none into its own schema, first in each round: before and
#   after measured side by side in one run. Each push goes into a freshly created database, so
#   nothing is skipped as "already there". Medians of ROUNDS (default 3).
# - The JSONEachRow path writes ~5.7 KB of JSON per event of this
#   recording (20 symbolized frames with full image paths): it runs over
#   the first JSON_EVENTS events (default 200,000; `head -n`), into a
#   table of the event's scalar columns (frames skipped by
#   input_format_skip_unknown_fields). Both are given as events/s.
# - Server CPU (utime+stime of the server process over the run) is shown
#   beside each push, with push's own CPU time and peak RSS (the largest
#   over the rounds): which side limits the rate, and that memory stays
#   bounded.
# - Queries: each docs/fleet.md query (without the _all of a cluster) over
#   the last pushed database, ROUNDS times; rows/s = rows of `events` /
#   median of the server's own elapsed time (FORMAT JSON statistics), and
#   rows/s = the rows the server read / that time.
# A benchmark, not a test: prints figures and PASS/MISS against the goals
# (>= 5 M events/s pushed, >= 10x the JSONEachRow path), always exits 0
# once it ran.
set -euo pipefail
cd "$(dirname "$0")/../.."

EVENTS=${1:-5000000}
JSON_EVENTS=${2:-200000}
ROUNDS=${3:-3}
DIR=${STKR_BENCH_DIR:-/tmp/stackrec-bench-push}
# shellcheck disable=SC2206
bazel=(bazel ${STKR_BAZEL_STARTUP:-})
CH=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
[ -x "$CH" ] || { echo "push_vs_jsonl: no clickhouse-server (tools/install-deps.sh --tests)" >&2; exit 2; }

"${bazel[@]}" build -c opt //tools:stackrec //tools/bench:report_throughput >/dev/null 2>&1 ||
  { echo "push_vs_jsonl: bazel build failed" >&2; exit 1; }
bin=$("${bazel[@]}" info -c opt bazel-bin 2>/dev/null)
S=$bin/tools/stackrec

mkdir -p "$DIR"
if ! ls "$DIR"/rec/stackrec-*.zst >/dev/null 2>&1; then
  echo "making a recording of $EVENTS events in $DIR/rec ..." >&2
  "$bin/tools/bench/report_throughput" --dir "$DIR/rec" --events "$EVENTS" --rounds 1 --stackrec "$S" >/dev/null
fi
N=$("$S" info "$DIR/rec" | awk '/^  events:/ {n += $2} END {print n}')
BYTES=$(du -sb "$DIR/rec" | cut -f1)

# ---- the server ----
T=$(mktemp -d /tmp/stackrec-bench-ch.XXXXXX)
read -r HTTP TCP < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
cat >"$T/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$T/server.log</log><errorlog>$T/server.err.log</errorlog><console>0</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$HTTP</http_port><tcp_port>$TCP</tcp_port>
  <path>$T/data/</path><tmp_path>$T/tmp/</tmp_path>
  <user_files_path>$T/user_files/</user_files_path><format_schema_path>$T/format_schemas/</format_schema_path>
  <mark_cache_size>268435456</mark_cache_size>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile><default_database>default</default_database>
</yandex>
EOF
cat >"$T/users.xml" <<'EOF'
<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
EOF
setsid "$CH" --config-file="$T/config.xml" >"$T/stdout.log" 2>&1 </dev/null &
CHPID=$!
cleanup() { kill -KILL -- "-$CHPID" 2>/dev/null || true; wait "$CHPID" 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
URL=http://127.0.0.1:$HTTP
for _ in $(seq 300); do curl -sf "$URL/ping" >/dev/null && break; sleep 0.1; done
q() { curl -sS "$URL/" --data-binary "$1"; }

now() { date +%s.%N; }
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$CHPID/stat"; }
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

# bench_null: the same tables with ENGINE = Null (the server parses the
# rows and drops them): what the client and the wire can do, without
# the MergeTree's sort and write.
tables="events recordings site_names threads payloads marks stacks frames images sites processes drops pushes"
"$S" push -q --url "$URL" --database bench_schema --create-schema >/dev/null
declare -A times scpu rsss ccpu
BEFORE=${STKR_BENCH_BEFORE:-}
modes="none gzip null"
[ -z "$BEFORE" ] || modes="before $modes"
for r in $(seq "$ROUNDS"); do
  for mode in $modes; do
    q "DROP DATABASE IF EXISTS bench_$mode" >/dev/null
    bin=$S
    [ "$mode" != before ] || bin=$BEFORE
    if [ "$mode" = null ]; then
      q "CREATE DATABASE bench_null" >/dev/null
      for t in $tables; do q "CREATE TABLE bench_null.$t AS bench_schema.$t ENGINE = Null" >/dev/null; done
    else
      "$bin" push -q --url "$URL" --database "bench_$mode" --create-schema >/dev/null
    fi
    c0=$(cpu); t0=$(now)
    z=none
    [ "$mode" != gzip ] || z=gzip
    extra=()
    [ "$mode" = before ] || read -r -a extra <<<"${STKR_PUSH_ARGS:-}"
    /usr/bin/time -f '%M %U %S' -o "$T/time" \
      "$bin" push -q --url "$URL" --database "bench_$mode" --compress "$z" \
      "${extra[@]}" "$DIR/rec"
    t1=$(now); c1=$(cpu)
    read -r rss ucpu scpu_ <"$T/time"
    rsss[$mode]+="$rss "
    ccpu[$mode]+="$(echo "$ucpu + $scpu_" | bc) "
    n=$(q "SELECT count() FROM bench_$mode.events")
    # (the earlier schema kept marks as events rows: not compared)
    [ "$mode" = null ] || [ "$mode" = before ] || [ "$n" = "$N" ] || echo "push_vs_jsonl: bench_$mode holds $n events, not $N" >&2
    times[$mode]+="$(echo "$t1 - $t0" | bc) "
    scpu[$mode]+="$(echo "$c1 - $c0" | bc) "
  done
  q "DROP TABLE IF EXISTS default.events_json" >/dev/null
  q "CREATE TABLE default.events_json (ts_ns UInt64, pid UInt32, site String, tid UInt64,
     thread String, payload Nullable(String), payload_truncated UInt8, stack Array(String),
     stack_truncated UInt8) ENGINE = MergeTree ORDER BY (site, ts_ns)" >/dev/null
  c0=$(cpu); t0=$(now)
  { "$S" export --format jsonl "$DIR/rec" 2>/dev/null || true; } | head -n "$JSON_EVENTS" |
    clickhouse-client --port "$TCP" --input_format_skip_unknown_fields=1 \
      --query "INSERT INTO default.events_json FORMAT JSONEachRow"
  t1=$(now); c1=$(cpu)
  times[json]+="$(echo "$t1 - $t0" | bc) "
  scpu[json]+="$(echo "$c1 - $c0" | bc) "
done

rate() { python3 -c "print('%.2f' % ($1 / $2 / 1e6))"; }
echo
echo "recording: $N events, $BYTES bytes; $ROUNDS rounds, medians; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %10s %12s %14s\n' path events "seconds" "M events/s"
declare -A mrate
for mode in $modes json; do
  t=$(echo "${times[$mode]}" | tr ' ' '\n' | grep . | median)
  c=$(echo "${scpu[$mode]}" | tr ' ' '\n' | grep . | median)
  n=$N; [ "$mode" = json ] && n=$JSON_EVENTS
  mrate[$mode]=$(rate "$n" "$t")
  case $mode in
    before) label="before: push (RowBinary rows)" ;;
    none) label="push (Native ids)" ;;
    gzip) label="push (Native ids, gzip)" ;;
    null) label="push into Null tables (no storage)" ;;
    json) label="export jsonl | JSONEachRow" ;;
  esac
  extra=""
  if [ "$mode" != json ]; then
    r=$(echo "${rsss[$mode]}" | tr ' ' '\n' | grep . | sort -g | tail -n 1)
    k=$(echo "${ccpu[$mode]}" | tr ' ' '\n' | grep . | median)
    extra=$(printf ', push CPU %.1f s, peak RSS %.1f MB' "$k" "$(echo "$r / 1024" | bc -l)")
  fi
  printf '%-34s %10s %12.2f %14s   (server CPU %.1f s%s)\n' "$label" "$n" "$t" "${mrate[$mode]}" "$c" "$extra"
done
best=$(python3 -c "print(max(${mrate[none]}, ${mrate[gzip]}))")
ratio=$(python3 -c "print('%.1f' % (${best} / max(${mrate[json]}, 1e-9)))")
verdict() { python3 -c "print('PASS' if $1 else 'MISS')"; }
echo "push vs JSONEachRow: ${ratio}x (goal >= 10x: $(verdict "$ratio >= 10"))"
echo "push: ${best} M events/s into MergeTree tables (goal >= 5: $(verdict "$best >= 5"));" \
  "${mrate[null]} M events/s when the server stores nothing"
[ -z "$BEFORE" ] || echo "before (the STKR_BENCH_BEFORE binary): ${mrate[before]} M events/s;" \
  "after/before $(python3 -c "print('%.1f' % (${mrate[none]} / max(${mrate[before]}, 1e-9)))")x"

echo
echo "docs/fleet.md queries over bench_none ($N events):"
python3 - "$URL" "$ROUNDS" "$N" docs/fleet.md <<'EOF'
import json, re, sys, urllib.request
url, rounds, n, md = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
for name, q in re.findall(r"<!-- query: (\w+) -->\n```sql\n(.*?)```", open(md).read(), re.S):
    q = q.replace("stackrec.", "bench_none.").replace("_all", "")
    runs = []
    for _ in range(rounds):
        req = urllib.request.Request(url + "/", data=(q + " FORMAT JSON").encode())
        with urllib.request.urlopen(req) as r:
            d = json.loads(r.read())
        runs.append((d["statistics"]["elapsed"], d["statistics"]["rows_read"], d["rows"]))
    t, read, rows = sorted(runs)[len(runs) // 2]
    print("  %-16s %7.3f s  %10d rows read  %8.1f M rows/s  (%d result rows)"
          % (name, t, read, read / max(t, 1e-9) / 1e6, rows))
EOF
