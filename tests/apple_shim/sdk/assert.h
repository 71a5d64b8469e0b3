/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_ASSERT_H
#define STKR_SHIM_ASSERT_H
void __assert_rtn(const char *func, const char *file, int line,
                  const char *expr) __attribute__((noreturn));
#endif
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) \
  (__builtin_expect(!(e), 0) ? __assert_rtn(__func__, __FILE__, __LINE__, #e) \
                             : (void)0)
#endif
