"""stkr_test: one cmocka test binary per tests/test-<name>.c; stkr_cli_test:
one that runs the built tool on recordings it writes."""

# Every test links the shared test helpers (tests/testlib.h).
_TESTLIB = "//tests:testlib"

def stkr_test(name, deps = [], data = [], size = "small", **kwargs):
    native.cc_test(
        name = name,
        srcs = ["test-%s.c" % name] + kwargs.pop("extra_srcs", []),
        deps = deps + [_TESTLIB],
        data = data,
        size = size,
        linkopts = ["-lcmocka", "-lpthread"] + kwargs.pop("linkopts", []),
        **kwargs
    )

def stkr_cli_test(name, deps = [], data = [], **kwargs):
    """A test that runs the built //tools:stackrec (tests/cli_run.h) on
    recordings it writes with //tests:recordings."""
    stkr_test(
        name = name,
        deps = [":recordings", "//proto"] + deps,
        data = ["//tools:stackrec"] + data,
        extra_srcs = ["cli_run.h"] + kwargs.pop("extra_srcs", []),
        **kwargs
    )
