#!/usr/bin/env bash
# check_exports.sh LIBDIR PRELOAD_SO [HEADER...]
#
# The exported-symbol check of issue 17, on an installed copy:
# - LIBDIR/libstackrec.so exports (nm -D, defined) exactly the functions
#   declared STKR_API in the public headers: every one of them, and nothing
#   else (no stkr__ internal, no protobuf-c descriptor, no dependency's
#   symbol);
# - every function declared at the start of a line in those headers carries
#   STKR_API (a new one without it would silently stay hidden);
# - the preload library exports no stkr_ symbol at all: preload/exports.map
#   keeps the recorder inside it private.
# Prints one line per check and "N passed, N failed".
set -uo pipefail
libdir=$1 preload=$2
shift 2
pass=0 fail=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# A public function declared without STKR_API would be hidden from the
# shared library (and from the comparison below): name it.
unmarked=$(grep -hE '^(const |unsigned |signed |struct |enum )*[a-z_0-9]+[ *]+stkr_[a-z0-9_]+\(' "$@" |
           grep -vE '^(static|typedef)' || true)
if [ -z "$unmarked" ]; then
  ok "every public function declaration carries STKR_API"
else
  bad "public functions declared without STKR_API:"; echo "$unmarked"
fi

so="$libdir/libstackrec.so"
exported=$(nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | sort -u)
declared=$(grep -hoE '^STKR_API [^(]*\bstkr_[a-z0-9_]+\(' "$@" |
           grep -oE 'stkr_[a-z0-9_]+\($' | tr -d '(' | sort -u)
if [ -z "$exported" ] || [ -z "$declared" ]; then
  bad "nothing exported by $so or declared in $*"
else
  extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
  missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
  if [ -z "$extra" ]; then
    ok "$so exports only STKR_API functions ($(echo "$exported" | wc -l) symbols)"
  else
    bad "$so exports symbols not declared STKR_API:" $extra
  fi
  if [ -z "$missing" ]; then
    ok "every STKR_API function ($(echo "$declared" | wc -l)) is exported"
  else
    bad "declared STKR_API but not exported by $so:" $missing
  fi
  if echo "$exported" | grep -qvE '^stkr_[a-z0-9]'; then
    bad "an export outside stkr_ (or an internal stkr__)"
  else
    ok "every export is stkr_ and none is stkr__"
  fi
fi

leaked=$(nm -D --defined-only "$preload" | awk 'NF == 3 { print $3 }' | grep -E '^stkr_' || true)
if [ -z "$leaked" ]; then
  ok "$preload exports no stkr_ symbol (preload/exports.map)"
else
  bad "$preload exports recorder symbols:" $leaked
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
