/* Darwin stand-in (tests/apple_shim/sdk/README): recorder/ includes it for
 * sig_atomic_t-style use only. */
#ifndef STKR_SHIM_SIGNAL_H
#define STKR_SHIM_SIGNAL_H
typedef int sig_atomic_t;
typedef unsigned int sigset_t;
#endif
