"""stkr_bench: one benchmark program, tools/bench/<name>.c, built as the
recorder's hot path is (frame pointers, no sibling calls) with the shared
helpers of bench_util.h."""

# Keep every frame of the synthetic call stacks: frame pointers everywhere,
# and no sibling-call (tail-call) optimization that would fold frames away.
BENCH_COPTS = [
    "-fno-omit-frame-pointer",
    "-fno-optimize-sibling-calls",
]

# What most benchmarks of the recorder link: libunwind (a comparison),
# dlopen (glibc's own backtrace) and threads.
UNWIND_LINKOPTS = [
    "-lunwind",
    "-ldl",
    "-lpthread",
]

def stkr_bench(name, srcs = None, copts = [], deps = [], **kwargs):
    native.cc_binary(
        name = name,
        srcs = srcs if srcs != None else [name + ".c"],
        copts = BENCH_COPTS + copts,
        deps = [":bench_util"] + deps,
        **kwargs
    )
