/*
 * static_deps.c: what the zstd linked into the hook library (its static
 * archive: preload/BUILD) would otherwise ask of the program it runs in.
 *
 * zstd calls its tracing hooks, ZSTD_trace_{compress,decompress}_{begin,
 * end}, through weak references that the loader resolves against the whole
 * program at its start: a program that defines them for its own zstd would
 * be handed our compressions too, and ld.so looks the four names up in
 * every recorded process. Defined here, hidden, they bind inside the
 * library at link time, and "begin" answers 0: no trace, no "end" call.
 * With a dynamic libzstd (the CMake option off, tests/aarch64) they are
 * unused. The signatures are zstd's (lib/common/zstd_trace.h: the context
 * is an unsigned long long, the arguments pointers).
 */
#define STKR__PL_HIDDEN __attribute__((visibility("hidden")))

typedef unsigned long long stkr__pl_zstd_trace_ctx;

STKR__PL_HIDDEN stkr__pl_zstd_trace_ctx
ZSTD_trace_compress_begin(const void *cctx) {
  (void)cctx;
  return 0;
}
STKR__PL_HIDDEN void ZSTD_trace_compress_end(stkr__pl_zstd_trace_ctx ctx,
                                             const void *trace) {
  (void)ctx;
  (void)trace;
}
STKR__PL_HIDDEN stkr__pl_zstd_trace_ctx
ZSTD_trace_decompress_begin(const void *dctx) {
  (void)dctx;
  return 0;
}
STKR__PL_HIDDEN void ZSTD_trace_decompress_end(stkr__pl_zstd_trace_ctx ctx,
                                               const void *trace) {
  (void)ctx;
  (void)trace;
}
