"""stkr_test: one cmocka test binary per tests/test-<name>.c; stkr_cli_test:
one that runs the built tool on recordings it writes; stkr_hook_test: one
that runs programs under the hook library; stkr_test_lib: a library of
helpers they share."""

# Every test links the shared test helpers (tests/testlib.h).
_TESTLIB = "//tests:testlib"

# The recorder at work: the library, its flush worker and the reader the
# test reads its recording back with.
RECORDER_DEPS = ["//flush", "//proto", "//recorder"]

# For tests that check the frames of a stack they recorded: each function
# a frame of its own, found by the frame-pointer walk.
WALK_COPTS = ["-fno-omit-frame-pointer", "-fno-optimize-sibling-calls"]

def stkr_test_lib(name, **kwargs):
    """A library of the tests' own helpers or fixtures: testonly, so that
    only tests (and other testonly targets) can link it."""
    native.cc_library(name = name, testonly = True, **kwargs)

def stkr_test(name, deps = [], data = [], size = "small", cli = False, **kwargs):
    """cli: the test runs the built //tools:stackrec (tests/cli_run.h)."""
    native.cc_test(
        name = name,
        # src: another target's file, built with other copts (a split of
        # one test's cases into two targets, each within the timeout).
        srcs = [kwargs.pop("src", "test-%s.c" % name)] + kwargs.pop("extra_srcs", []) +
               (["cli_run.h"] if cli else []),
        deps = deps + [_TESTLIB],
        data = data + (["//tools:stackrec"] if cli else []),
        size = size,
        linkopts = ["-lcmocka", "-lpthread"] + kwargs.pop("linkopts", []),
        **kwargs
    )

def stkr_cli_test(name, deps = [], **kwargs):
    """A test that runs the built //tools:stackrec (tests/cli_run.h) on
    recordings it writes with //tests:recordings."""
    stkr_test(
        name = name,
        cli = True,
        deps = [":recordings", "//proto"] + deps,
        **kwargs
    )

def stkr_hook_test(name, fixtures = [], data = [], **kwargs):
    """A test of the hook library under the built tool (`stackrec record`),
    with the programs of tests/preload_fixtures it names."""
    stkr_test(
        name = name,
        data = ["//preload:libstackrec_preload.so"] +
               ([] if kwargs.get("cli") else ["//tools:stackrec"]) +
               ["//tests/preload_fixtures:" + f for f in fixtures] + data,
        **kwargs
    )

def stkr_apple_test(name, data = [], **kwargs):
    """A test of the Mach-O/Apple symbolization on Linux, on fixtures that
    tests/apple/fixtures.sh builds at test time (tests/apple/macho_test.h;
    it skips, saying so, where the Apple toolchain is missing)."""
    stkr_test(
        name = name,
        size = "medium",
        # Paths are built into fixed buffers sized for any test directory.
        copts = ["-Wno-format-truncation"],
        data = native.glob(["apple/*.sh", "apple/*.py"]) + data,
        extra_srcs = ["apple/macho_test.h"],
        **kwargs
    )
