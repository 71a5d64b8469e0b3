/*
 * forkfirst.c: the first watched call, then a fork at once; the child makes
 * watched calls and exits 3. Prints "child exit 3", or how it ended.
 * Recorded with in-process symbolization (the hook library alone), its
 * worker loads the symbolizer module right after that first call: a child
 * forked mid-dlopen inherited the module half relocated and died of
 * SIGSEGV in a few percent of runs (QA, session 20). tests/test-preload-
 * procs.c runs it 200 times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
  char h[64];
  int st;
  pid_t p;

  (void)gethostname(h, sizeof h); /* the first event: recording starts */
  p = fork();
  if (p == 0) {
    (void)gethostname(h, sizeof h);
    if (getenv("HOME") == (const char *)1) _exit(1); /* the call must stay */
    _exit(3);
  }
  if (p < 0 || waitpid(p, &st, 0) != p) return 2;
  printf("child %s %d\n", WIFEXITED(st) ? "exit" : "signal",
         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  return 0;
}
