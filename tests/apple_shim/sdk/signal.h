/* Darwin stand-in (tests/apple_shim/sdk/README): recorder/ includes it for
 * sig_atomic_t-style use only. */
#ifndef STKR_SHIM_SIGNAL_H
#define STKR_SHIM_SIGNAL_H
typedef int sig_atomic_t;
typedef unsigned int sigset_t;
/* tools/stackrec/snapshot_apple.c: holding signals during a stop. */
#include <sys/types.h>
#define SIGHUP 1
#define SIGINT 2
#define SIGQUIT 3
#define SIGPIPE 13
#define SIGALRM 14
#define SIGTERM 15
#define SIGTSTP 18
#define SIGUSR1 30
#define SIGUSR2 31
#define SIGVTALRM 26
#define SIGPROF 27
#define SIG_BLOCK 1
#define SIG_UNBLOCK 2
#define SIG_SETMASK 3
int sigemptyset(sigset_t *set);
int sigaddset(sigset_t *set, int signo);
int sigprocmask(int how, const sigset_t *restrict set, sigset_t *restrict oset);
int kill(pid_t pid, int sig);
int sigfillset(sigset_t *set);
int pthread_sigmask(int how, const sigset_t *set, sigset_t *old);
/* recorder/event.c: an event on the alternate signal stack. Darwin's
 * struct __darwin_sigaltstack. */
typedef struct {
  void *ss_sp;
  __SIZE_TYPE__ ss_size;
  int ss_flags;
} stack_t;
#define SS_ONSTACK 0x0001
#define SS_DISABLE 0x0004
int sigaltstack(const stack_t *restrict ss, stack_t *restrict old);
/* tools/stackrec/snapshot_signals.c: a series' end signals (Darwin's
 * struct sigaction, __DARWIN_NSIG, SIG_DFL and SIG_IGN). */
#define NSIG 32
#define SIG_DFL ((void (*)(int))0)
#define SIG_IGN ((void (*)(int))1)
struct __siginfo;
union __sigaction_u {
  void (*__sa_handler)(int);
  void (*__sa_sigaction)(int, struct __siginfo *, void *);
};
struct sigaction {
  union __sigaction_u __sigaction_u;
  sigset_t sa_mask;
  int sa_flags;
};
#define sa_handler __sigaction_u.__sa_handler
#define sa_sigaction __sigaction_u.__sa_sigaction
int sigaction(int sig, const struct sigaction *restrict act,
              struct sigaction *restrict oact);
int sigismember(const sigset_t *set, int signo);
int sigdelset(sigset_t *set, int signo);
void (*signal(int sig, void (*func)(int)))(int);
int raise(int sig);
#endif
