/* Darwin stand-in (tests/apple_shim/sdk/README): recorder/ includes it for
 * sig_atomic_t-style use only. */
#ifndef STKR_SHIM_SIGNAL_H
#define STKR_SHIM_SIGNAL_H
typedef int sig_atomic_t;
typedef unsigned int sigset_t;
#define SIG_BLOCK 1
#define SIG_UNBLOCK 2
#define SIG_SETMASK 3
int sigfillset(sigset_t *set);
int pthread_sigmask(int how, const sigset_t *set, sigset_t *old);
#endif
