#!/usr/bin/env python3
"""Check the dependency rule (DEVELOPERS.md, "Layout and the dependency rule").

    tools/check_layering.py [--bazel "bazel --output_base=DIR"]

Three parts, because Bazel 4 with gcc enforces only the first itself:

1. Visibility (Bazel's own check). The probe targets of
   tools/layering_probe/ (tagged manual: never part of //...) each depend
   on one restricted target from a package that may not use it; Bazel must
   refuse each with "is not visible from target", naming that target. A
   control probe that uses the public targets only must build, and a probe
   that includes an internal header without depending on anything must be
   refused at compile time (undeclared inclusion).

2. The package graph (this script): every cc target outside //tests/...
   lists in deps only targets of the packages PACKAGE_DEPS allows its own
   package (DEVELOPERS.md's graph). Visibility cannot do this for public
   targets: nothing else would stop recorder/ from depending on //proto.

3. Strict header dependencies (this script). Bazel hands a compile every
   header of every transitive dependency, including the private headers in
   a dependency's srcs: a target that depends on the public //proto could
   #include "proto/stkr__reader.h" and Bazel 4 (no implementation_deps, no
   layering_check with gcc) would build it. So every quoted #include of
   every source and header of every cc target outside //tests/... (tests
   may use anything) must name a file of the target itself or one in the
   hdrs of a target it lists in deps (aliases followed). With (1) this is
   the rule: tools cannot list //proto:internal, so they cannot include
   its headers either. The probe //tools/layering_probe:via_public does
   exactly that and must be flagged (and the control, :public_ok, not).

Prints one line per case and "N passed, N failed" (tools/test.sh counts it
in the plain phase). Exit status 0 when every case passes, 1 otherwise.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET

PROBE_PKG = "tools/layering_probe"
# Probe -> the restricted target it must be refused. Each of these is
# visible to its own package, //tests and //tools/bench only (//proto:format
# also to flush/ and the tools/ package itself, not to its subpackages).
REFUSED = {
    "recorder_internal": "//recorder:internal",
    "flush_internal": "//flush:internal",
    "flush_direct": "//flush:flush",
    "proto_internal": "//proto:internal",
    "proto_format": "//proto:format",
    "preload_hooks": "//preload:hooks",
    "common_ringfile": "//common:common",
    "file_srcs": "//proto:stkr__reader.h",
}
# The package graph of DEVELOPERS.md: package -> the other packages its
# cc targets may list in deps ("" is the root package, //:stackrec). Which
# target of an allowed package is Bazel's visibility to say; a public
# target (//proto, //macho) is refused nowhere, so this table is what keeps
# recorder/ off it. None: anything (benchmarks measure internals). A
# package missing here fails: add it, and to DEVELOPERS.md, first. common/
# (header only, libc only) is what every package may use.
PACKAGE_DEPS = {
    "": {"flush", "recorder"},
    "common": set(),
    "macho": set(),
    "unwind": set(),
    "proto": set(),
    "recorder": {"unwind"},
    "symbolize": {"macho", "proto"},
    "flush": {"proto", "recorder", "symbolize", "unwind"},
    "preload": {""},
    "tools": {"", "preload", "proto", "symbolize"},
    "tools/demo": {""},
    "tools/bench": None,
}
ANY_PACKAGE_MAY_USE = {"common"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
CC_KINDS = ("cc_library", "cc_binary", "cc_test")

results = []


def case(ok, name, why=""):
    results.append(ok)
    print("%s: %s%s" % ("ok" if ok else "FAIL", name, (": " + why) if why else ""))


def label_path(label):
    """//pkg:name -> pkg/name (the path an #include names)."""
    pkg, _, name = label.lstrip("/").partition(":")
    return name if not pkg else pkg + "/" + name


def canonical(label):
    if ":" not in label:
        label = label + ":" + label.rsplit("/", 1)[-1]
    return label


def query_rules(bazel, expr):
    """{label: {"class":, "srcs":, "hdrs":, "deps":, "actual":}}."""
    out = subprocess.run(bazel + ["query", "--output=xml", expr],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-3000:])
        raise SystemExit("check_layering: bazel query %r failed" % expr)
    rules = {}
    for r in ET.fromstring(out.stdout).iter("rule"):
        d = {"class": r.get("class"), "srcs": [], "hdrs": [], "deps": [],
             "textual_hdrs": [], "actual": None}
        for lst in r.findall("list"):
            if lst.get("name") in d:
                d[lst.get("name")] = [l.get("value") for l in lst.findall("label")]
        for l in r.findall("label"):
            if l.get("name") == "actual":
                d["actual"] = l.get("value")
        rules[r.get("name")] = d
    return rules


def resolve(rules, label):
    seen = 0
    while label in rules and rules[label]["class"] == "alias" and seen < 10:
        label = canonical(rules[label]["actual"])
        seen += 1
    return label


def check_includes(rules, repo, targets):
    """[(target, file, include)] for each include the rule does not allow."""
    bad = []
    for t in targets:
        r = rules[t]
        own = {label_path(l) for l in r["srcs"] + r["hdrs"] + r["textual_hdrs"]}
        allowed = set(own)
        for dep in r["deps"]:
            d = rules.get(resolve(rules, canonical(dep)))
            if d is not None:
                allowed |= {label_path(l) for l in d["hdrs"] + d["textual_hdrs"]}
        for f in sorted(own):
            path = os.path.join(repo, f)
            if not os.path.isfile(path):
                continue  # generated (protoc-c, report assets)
            with open(path, errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if "/" not in inc:
                        inc = os.path.normpath(os.path.join(os.path.dirname(f), inc))
                    if inc not in allowed:
                        bad.append((t, "%s:%d" % (f, n), inc))
    return bad


def package(label):
    return label.lstrip("/").partition(":")[0]


def check_packages(rules, targets):
    """[(target, dep)] for each dep outside PACKAGE_DEPS[target's package]."""
    bad = []
    for t in targets:
        pkg = package(t)
        if pkg not in PACKAGE_DEPS:
            bad.append((t, "(package %r is not in PACKAGE_DEPS)" % pkg))
            continue
        allowed = PACKAGE_DEPS[pkg]
        if allowed is None:
            continue
        for dep in rules[t]["deps"]:
            dp = package(canonical(dep))
            if (dep.startswith("@") or dp == pkg or dp in allowed or
                    (dp in ANY_PACKAGE_MAY_USE and pkg != "common")):
                continue
            bad.append((t, dep))
    return bad


def owners(rules, path):
    return sorted(l for l, r in rules.items()
                  if path in {label_path(h) for h in r["hdrs"]})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bazel", default=os.environ.get("STKR_BAZEL", "bazel"))
    args = ap.parse_args()
    bazel = shlex.split(args.bazel)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(repo)

    # ---- 1. Bazel refuses the probes ----
    probes = ["//%s:%s" % (PROBE_PKG, p) for p in sorted(REFUSED)]
    out = subprocess.run(bazel + ["build", "--nobuild", "--keep_going"] + probes,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout
    for p in sorted(REFUSED):
        want = "target '%s' is not visible from target '//%s:%s'" % (
            REFUSED[p], PROBE_PKG, p)
        case(want in out, "//%s:%s refused by visibility" % (PROBE_PKG, p),
             "" if want in out else "bazel did not say: " + want)
    ctl = subprocess.run(bazel + ["build", "//%s:public_ok" % PROBE_PKG],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    case(ctl.returncode == 0, "//%s:public_ok (public headers only) builds" % PROBE_PKG,
         "" if ctl.returncode == 0 else ctl.stdout[-2000:])
    und = subprocess.run(bazel + ["build", "//%s:undeclared" % PROBE_PKG],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    refused = und.returncode != 0 and "stkr_internal.h" in und.stdout
    case(refused, "//%s:undeclared (no deps) refused at compile time" % PROBE_PKG,
         "" if refused else "it built, or failed for another reason")

    # ---- 2. the package graph; 3. strict header dependencies ----
    rules = query_rules(bazel, "//...")
    cc = sorted(l for l, r in rules.items() if r["class"] in CC_KINDS)
    tree = [l for l in cc if not l.startswith("//tests")
            and not l.startswith("//%s:" % PROBE_PKG)]
    bad = check_includes(rules, repo, tree)
    for t, where, inc in bad:
        print("  %s (%s) includes %s: not in the hdrs of any of its deps "
              "(owned by %s)" % (where, t, inc,
                                 ", ".join(owners(rules, inc)) or "no target"))
    case(not bad, "includes of %d cc targets outside //tests follow their deps"
         % len(tree), "%d violation(s)" % len(bad) if bad else "")

    pbad = check_packages(rules, tree)
    for t, dep in pbad:
        print("  %s depends on %s: not allowed for its package (DEVELOPERS.md)"
              % (t, dep))
    case(not pbad, "deps of %d cc targets outside //tests follow the package graph"
         % len(tree), "%d violation(s)" % len(pbad) if pbad else "")

    probe_bad = check_includes(rules, repo, ["//%s:public_ok" % PROBE_PKG,
                                             "//%s:via_public" % PROBE_PKG])
    want = [("//%s:via_public" % PROBE_PKG, "recorder/stkr_internal.h")]
    got = [(t, inc) for t, _, inc in probe_bad]
    case(got == want, "the include check flags //%s:via_public, not public_ok" % PROBE_PKG,
         "" if got == want else "flagged %s" % got)

    failed = results.count(False)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
