#!/usr/bin/env python3
"""Check that the CMake, SwiftPM and aarch64 source lists match the BUILD files.

    cmake/check_sources.py [REPO]     (default: the repository of this file)

Bazel is the primary build; cmake/sources.cmake and Package.swift list the
same .c files again (SwiftPM cannot read BUILD files). This evaluates each
BUILD file involved as Starlark-compatible Python with stub rules (glob() is
a real glob in the package directory), takes the .c files of the Bazel
targets below, and compares them with the matching CMake variable and with
Package.swift's CStackrec sources, and the hook library's preload/*.c files
with the ones tests/aarch64/preload.sh compiles (it lists them by name: a
missing one is a hook the aarch64 run never loads). Generated files (protoc-c, the report
assets) are not in srcs as .c files of the source tree, so they are not
compared.

Prints one line per case and "N passed, N failed" (the form tools/test.sh
counts); on a mismatch, the names of the files missing on either side and
the list to paste. Exit status 0 when every list matches, 1 otherwise, 2 on
a usage or parse error (naming the file).
"""
import glob as globmod
import os
import re
import sys

# CMake variable -> the Bazel targets (package, name) whose .c files it
# holds. The CLI's binary globs tools/stackrec/*.c minus its library's
# sources, and the library lists those: together, every .c of both.
CMAKE_VARS = {
    "STKR_RECORDER_SRCS": [("recorder", "recorder")],
    "STKR_UNWIND_SRCS": [("unwind", "unwind")],
    "STKR_PROTO_SRCS": [("proto", "proto")],
    "STKR_FLUSH_SRCS": [("flush", "core")],
    "STKR_FLUSH_DL_SRCS": [("flush", "flush_dl")],
    "STKR_SYMBOLIZE_DL_SRCS": [("symbolize", "libstackrec_symbolize.so")],
    "STKR_SYMBOLIZE_SRCS": [("symbolize", "symbolize")],
    "STKR_MACHO_SRCS": [("macho", "macho")],
    "STKR_PRELOAD_MATCH_SRCS": [("preload", "match")],
    "STKR_PRELOAD_SRCS": [("preload", "libstackrec_preload.so")],
    "STKR_CLI_SRCS": [("tools", "stackrec"), ("tools", "stackrec_lib"),
                      ("tools", "snapshot_walk")],
}
# tests/aarch64/preload.sh builds the hook library from these packages'
# files by name (the other packages by glob).
AARCH64_PRELOAD = [("preload", "libstackrec_preload.so"), ("preload", "match")]
AARCH64_SCRIPT = os.path.join("tests", "aarch64", "preload.sh")

# Package.swift's C target is the embeddable library: //:stackrec, i.e.
# //flush (:core and the symbolizer) with what it depends on.
SWIFT_TARGETS = [("recorder", "recorder"), ("unwind", "unwind"), ("proto", "proto"),
                 ("flush", "core"), ("symbolize", "symbolize"), ("macho", "macho")]


class BuildError(Exception):
    pass


def eval_build(repo, pkg):
    """The rules of pkg/BUILD as {name: [source paths relative to repo]}."""
    path = os.path.join(repo, pkg, "BUILD")
    rules = {}
    pkgdir = os.path.join(repo, pkg)

    def rule(**kw):
        if "name" in kw:
            rules[kw["name"]] = kw.get("srcs", [])

    def glob(include, exclude=(), **_):
        found = set()
        for pat in include:
            for f in globmod.glob(os.path.join(pkgdir, pat)):
                found.add(os.path.relpath(f, pkgdir))
        for pat in exclude:
            for f in globmod.glob(os.path.join(pkgdir, pat)):
                found.discard(os.path.relpath(f, pkgdir))
        return sorted(found)

    def ignore(*_, **__):
        return None

    env = {
        "load": ignore, "package": ignore, "exports_files": ignore,
        "glob": glob, "select": lambda d: d.get("//conditions:default", []),
        "cc_library": rule, "cc_binary": rule, "cc_test": rule,
        "genrule": rule, "filegroup": rule, "alias": rule, "sh_test": rule,
        "sh_binary": rule, "stkr_test": rule,
    }
    try:
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), env)
    except (OSError, SyntaxError, NameError, TypeError) as e:
        raise BuildError(f"{path}: cannot evaluate: {e}")
    return {name: [os.path.join(pkg, s) for s in srcs
                   if isinstance(s, str) and not s.startswith(":")]
            for name, srcs in rules.items()}


def bazel_c_files(repo, targets, cache):
    files = set()
    for pkg, name in targets:
        if pkg not in cache:
            cache[pkg] = eval_build(repo, pkg)
        if name not in cache[pkg]:
            raise BuildError(f"{pkg}/BUILD: no target '{name}'")
        files.update(f for f in cache[pkg][name]
                     if f.endswith(".c")
                     and os.path.isfile(os.path.join(repo, f)))
    return files


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise BuildError(f"{path}: {e}")


def cmake_lists(repo):
    path = os.path.join(repo, "cmake", "sources.cmake")
    text = read_text(path)
    text = re.sub(r"#[^\n]*", "", text)
    return {m.group(1): set(m.group(2).split())
            for m in re.finditer(r"set\(\s*(\w+)\s+([^)]*)\)", text)}


def swift_sources(repo):
    """The quoted .c paths between the BEGIN/END markers of Package.swift."""
    path = os.path.join(repo, "Package.swift")
    text = read_text(path)
    m = re.search(r"// BEGIN sources.*?\n(.*?)// END sources", text, re.S)
    if not m:
        raise BuildError(f"{path}: no '// BEGIN sources' ... '// END sources'")
    return {s for s in re.findall(r'"([^"]+\.c)"', m.group(1))
            if not s.startswith("swift/")}


def aarch64_preload_sources(repo):
    """The preload/*.c files named in the hook library's compile command of
    tests/aarch64/preload.sh (from its -o .../libstackrec_preload.so to the
    version script)."""
    path = os.path.join(repo, AARCH64_SCRIPT)
    text = read_text(path)
    m = re.search(r"libstackrec_preload\.so\"(.*?)--version-script", text, re.S)
    if not m:
        raise BuildError(f"{path}: no hook library command "
                         "(-o .../libstackrec_preload.so ... --version-script)")
    return set(re.findall(r"preload/\w+\.c", m.group(1)))


def compare(label, want, have, where, fmt):
    if want == have:
        print(f"ok: {label}: {len(want)} files")
        return True
    print(f"FAIL: {label} differs from the BUILD files:")
    for f in sorted(want - have):
        print(f"  missing in {where}: {f}")
    for f in sorted(have - want):
        print(f"  not in the BUILD files: {f}")
    print(f"  expected in {where}:")
    for f in sorted(want):
        print("    " + fmt(f))
    return False


def main(argv):
    if len(argv) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    repo = argv[1] if len(argv) == 2 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    cache = {}
    results = []  # one bool per list compared
    try:
        lists = cmake_lists(repo)
        for var, targets in CMAKE_VARS.items():
            want = bazel_c_files(repo, targets, cache)
            have = lists.get(var)
            if have is None:
                print(f"FAIL: cmake/sources.cmake: no set({var} ...)")
                results.append(False)
                continue
            label = f"{var} = " + " + ".join(f"//{p}:{n}" for p, n in targets)
            results.append(compare(label, want, have, "cmake/sources.cmake", str))
        want = bazel_c_files(repo, SWIFT_TARGETS, cache)
        results.append(compare("Package.swift CStackrec = //:stackrec", want,
                               swift_sources(repo), "Package.swift",
                               lambda f: f'"{f}",'))
        want = {f for f in bazel_c_files(repo, AARCH64_PRELOAD, cache)
                if f.startswith("preload/")}
        results.append(compare(f"{AARCH64_SCRIPT} hook library = //preload:"
                               "libstackrec_preload.so + //preload:match", want,
                               aarch64_preload_sources(repo), AARCH64_SCRIPT, str))
    except BuildError as e:
        print(f"check_sources: {e}", file=sys.stderr)
        print(f"{results.count(True)} passed, {results.count(False) + 1} failed")
        return 2
    print(f"{results.count(True)} passed, {results.count(False)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
