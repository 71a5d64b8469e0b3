"""stkr_test: one cmocka test binary per tests/test-<name>.c."""

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
