/*
 * fuzz_cli.c: the CLI's input path on arbitrary bytes: the bytes become a
 * segment file in a directory, and `stackrec info DIR`, `stackrec dump DIR`,
 * `stackrec dump --json --limit 50 DIR`, `stackrec verify DIR` and
 * `stackrec report DIR` run on it.
 *
 * Two builds of this one file:
 * - libFuzzer (tests/fuzz/build.sh): in-process, through the CLI's own code
 *   (the .c files of tools/stackrec/ with main() renamed): reader,
 *   warnings, escaping and exit status, at tens of thousands of inputs/s.
 * - replay (tests/BUILD, -DSTKR_FUZZ_CLI_EXEC): runs the built
 *   //tools:stackrec binary named by $STKR_CLI on each input, so the
 *   regression test follows whatever sources the CLI is made of.
 *
 * Checked besides "no crash, no hang": the exit status is 0 or 1 (the
 * input exists, so never 2 or 3; never a signal), info, dump and report
 * agree; verify says 0, 1 or 4 (incomplete), and 1 whenever info does
 * (verify also counts inconsistencies, which lose no data).
 * Output goes to /dev/null; stderr (warnings) is the harness's business
 * (libFuzzer's -close_fd_mask=2, or the test log).
 */
#include "tests/fuzz/fuzz_util.h"

#include <fcntl.h>
#include <string.h>

#ifdef STKR_FUZZ_CLI_EXEC
#include <spawn.h>
#include <sys/wait.h>
extern char **environ;
#else
#include "tools/stackrec/cli.h"
#endif

static char g_dir[256];
static char g_file[300];

static void fz_cleanup(void) {
  unlink(g_file);
  rmdir(g_dir);
}

static void fz_init(void) {
  const char *base = getenv("TEST_TMPDIR");
  int fd;

  if (base == NULL)
    base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(g_dir, sizeof g_dir, "%s/stackrec-fuzz-XXXXXX", base);
  FZ_CHECK(mkdtemp(g_dir) != NULL);
  snprintf(g_file, sizeof g_file, "%s/stackrec-7-000001.zst", g_dir);
  atexit(fz_cleanup);
  fd = open("/dev/null", O_WRONLY);
  FZ_CHECK(fd >= 0);
  fflush(stdout);
  FZ_CHECK(dup2(fd, STDOUT_FILENO) == STDOUT_FILENO);
  close(fd);
}

#ifdef STKR_FUZZ_CLI_EXEC
/* Run $STKR_CLI with argv (argv[0] is the command name); its stdout is
 * ours (/dev/null). @return its exit status; a signal fails the check. */
static int run_cli(int argc, char **argv) {
  const char *cli = getenv("STKR_CLI");
  char *args[8];
  pid_t pid;
  int i, status;

  FZ_CHECK(cli != NULL && argc < 7);
  args[0] = (char *)cli;
  for (i = 0; i < argc; i++)
    args[i + 1] = argv[i];
  args[argc + 1] = NULL;
  FZ_CHECK(posix_spawn(&pid, cli, NULL, NULL, args, environ) == 0);
  FZ_CHECK(waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status))
    fprintf(stderr, "fuzz_cli: %s %s: killed by signal %d\n", cli, argv[0],
            WTERMSIG(status));
  FZ_CHECK(WIFEXITED(status));
  return WEXITSTATUS(status);
}
#define INFO(argc, argv) run_cli(argc, argv)
#define DUMP(argc, argv) run_cli(argc, argv)
#define VERIFY(argc, argv) run_cli(argc, argv)
#define REPORT(argc, argv) run_cli(argc, argv)
#else
#define INFO(argc, argv) stkr_cli_info(argc, argv)
#define DUMP(argc, argv) stkr_cli_dump(argc, argv)
#define VERIFY(argc, argv) stkr_cli_verify(argc, argv)
#define REPORT(argc, argv) stkr_cli_report(argc, argv)
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *info[] = {"info", g_dir, NULL};
  char *dump[] = {"dump", g_dir, NULL};
  char *json[] = {"dump", "--json", "--limit", "50", g_dir, NULL};
  char *verify[] = {"verify", g_dir, NULL};
  char *report[] = {"report", g_dir, NULL};
  FILE *f;
  int a, b, c, v, r;

  if (g_dir[0] == '\0')
    fz_init();
  f = fopen(g_file, "wb");
  FZ_CHECK(f != NULL);
  FZ_CHECK(size == 0 || fwrite(data, 1, size, f) == size);
  FZ_CHECK(fclose(f) == 0);
  a = INFO(2, info);
  b = DUMP(2, dump);
  c = DUMP(5, json);
  /* 0: all read; 1: data lost (reported on stderr). */
  FZ_CHECK(a == 0 || a == 1);
  FZ_CHECK(b == a);
  /* --limit may stop before the damage that made the others report 1. */
  FZ_CHECK(c == 0 || c == 1);
  v = VERIFY(2, verify);
  FZ_CHECK(v == 0 || v == 1 || v == 4);
  FZ_CHECK(a == 0 || v == 1);
  r = REPORT(2, report);
  FZ_CHECK(r == a);
  return 0;
}
