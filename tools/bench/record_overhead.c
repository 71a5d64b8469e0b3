/*
 * record_overhead.c: wall time of fork- and exec-heavy work under
 * `stackrec record`, divided by the same work run plainly, side by side in
 * one run (issue 9, defect 5: each recorded process used to load libc's
 * debug info, 200 forks took 7.3 s instead of 0.03 s).
 *
 * Target: recorded / plain <= 1.3 for every workload.
 *
 * Workloads (generated in a temporary directory):
 *   make      `make -j2` of a generated C project: 16 .c files, one header,
 *             linked into one program (each round starts from a clean tree;
 *             cleaning is not timed)
 *   bash      a bash script starting 200 subprocesses: 100 `/bin/true`
 *             (fork + exec) and 100 command substitutions `$(echo $i)`
 *             (fork of bash)
 *   forks     this program in --forks mode: 200 fork()s, each child calls
 *             getenv("HOME") (a watched name: one recorded event per
 *             child) and _exit(0); the parent waits for each
 * Each workload runs plain, under `stackrec record -q -o DIR` (a fresh
 * DIR each time, removed afterwards, not timed), and with the hooks alone
 * (LD_PRELOAD, offline mode, fork follow, unwind tables, as record sets
 * them for its processes, into a fresh DIR: what the processes pay,
 * without record's symbolization at the end), interleaved
 * in rotating order, ROUNDS rounds (default 5); the table shows medians. Wall time is measured around fork/exec/wait of the
 * whole command, so for the recorded run it includes record's own work:
 * setup and symbolizing the recording once at the end; the summary is
 * left out (-q) unless --summary is given.
 *
 * record resolves the recording at its end from symbol caches by build-id
 * (`--symcache`), which it fills from DWARF when they are missing. The
 * bench gives it a cache directory of its own (STACKREC_SYMCACHE in its
 * temporary directory): empty for one recorded run of each workload
 * before the rounds (the "cold" column: a first run ever, which reads
 * libc's DWARF and writes its cache after the summary), then kept, as a
 * user's is from run to run.
 *
 * Usage: record_overhead [--rounds N] [--summary] [--stackrec PATH]
 *   PATH defaults to ../stackrec next to this binary (bazel-bin/tools/).
 *   The workloads, their recordings and the symbol caches go in a
 *   directory under $TMPDIR (default /tmp): the file system is part of
 *   what a recorded process pays (it creates files).
 * Prints the table and a PASS/MISS line; exits 0 either way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench/bench_util.h"

#define N_FORKS 200
#define N_SOURCES 16
#define MAX_ROUNDS 101

static char g_lib[2 * PATH_MAX]; /* the hook library */

/* --forks: the fork workload itself. */
static int fork_workload(void) {
  for (int i = 0; i < N_FORKS; i++) {
    pid_t p = fork();
    if (p < 0) return 1;
    if (p == 0) {
      volatile const char *h = getenv("HOME");
      (void)h;
      _exit(0);
    }
    if (waitpid(p, NULL, 0) != p) return 1;
  }
  return 0;
}

/* Run argv (stdout and stderr to /dev/null) in dir; @return wall seconds,
 * or -1 if it failed. */
static double run_timed(char *const argv[], const char *dir,
                        const char *hooks_dir) {
  double t0 = bench_now_s();
  int st;
  pid_t p = fork();

  if (p < 0) return -1;
  if (p == 0) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    if (dir && chdir(dir) != 0) _exit(126);
    if (hooks_dir != NULL &&
        (setenv("LD_PRELOAD", g_lib, 1) != 0 ||
         setenv("STACKREC_DIR", hooks_dir, 1) != 0 ||
         setenv("STACKREC_SYMBOLIZE", "offline", 1) != 0 ||
         setenv("STACKREC_FORK", "follow", 1) != 0 ||
         setenv("STACKREC_UNWIND", "tables", 1) != 0 ||
         setenv("STACKREC_SKIP", "1", 1) != 0))
      _exit(126);
    execvp(argv[0], argv);
    _exit(127);
  }
  if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return -1;
  return bench_now_s() - t0;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  return system(cmd);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    exit(1);
  }
  fputs(text, f);
  fclose(f);
}

/* The C project and the bash script under root. */
static void generate(const char *root) {
  char p[PATH_MAX + 64], text[4096];
  size_t n = 0;

  snprintf(p, sizeof p, "%s/proj", root);
  mkdir(p, 0700);
  snprintf(p, sizeof p, "%s/proj/common.h", root);
  write_file(p, "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
                "int work(int);\n");
  for (int i = 0; i < N_SOURCES; i++) {
    char src[1024];
    snprintf(p, sizeof p, "%s/proj/f%02d.c", root, i);
    snprintf(src, sizeof src,
             "#include \"common.h\"\n"
             "static int helper%d(int x) { char b[64]; snprintf(b, sizeof b, "
             "\"%%d\", x * %d); return (int)strlen(b) + atoi(b); }\n"
             "int f%02d(int x) { int s = 0; for (int i = 0; i < x; i++) s += "
             "helper%d(i); return s; }\n",
             i, i + 3, i, i);
    write_file(p, src);
  }
  n += (size_t)snprintf(text + n, sizeof text - n, "#include \"common.h\"\n");
  for (int i = 0; i < N_SOURCES; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, "int f%02d(int);\n", i);
  n += (size_t)snprintf(text + n, sizeof text - n,
                        "int main(void) { int s = 0;\n");
  for (int i = 0; i < N_SOURCES; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, "  s += f%02d(10);\n", i);
  snprintf(text + n, sizeof text - n,
           "  printf(\"%%d %%s\\n\", s, getenv(\"HOME\")); return 0; }\n");
  snprintf(p, sizeof p, "%s/proj/main.c", root);
  write_file(p, text);
  n = (size_t)snprintf(text, sizeof text, "OBJS = main.o");
  for (int i = 0; i < N_SOURCES; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, " f%02d.o", i);
  snprintf(text + n, sizeof text - n,
           "\nprog: $(OBJS)\n\tcc -o $@ $(OBJS)\n"
           "%%.o: %%.c common.h\n\tcc -O1 -g -c $< -o $@\n"
           "clean:\n\trm -f prog *.o\n");
  snprintf(p, sizeof p, "%s/proj/Makefile", root);
  write_file(p, text);

  snprintf(p, sizeof p, "%s/subprocs.sh", root);
  write_file(p, "#!/bin/bash\n"
                "for i in $(seq 100); do\n"
                "  /bin/true\n"
                "  x=$(echo $i)\n"
                "done\n");
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The medians of t[workload][mode][round] beside the cold runs, and the
 * verdict. */
static void print_table(double t[3][3][MAX_ROUNDS], const double cold[3],
                        const char *const names[3], int rounds) {
  printf("%-24s %8s %10s %7s %10s %7s %8s %7s\n", "workload", "plain s",
         "recorded s", "ratio", "hooks s", "ratio", "cold s", "ratio");
  double worst = 0;
  for (int w = 0; w < 3; w++) {
    double p = median(t[w][0], rounds), q = median(t[w][1], rounds);
    double h = median(t[w][2], rounds);
    printf("%-24s %8.3f %10.3f %6.2fx %10.3f %6.2fx %8.3f %6.2fx\n", names[w],
           p, q, q / p, h, h / p, cold[w], cold[w] / p);
    if (q / p > worst) worst = q / p;
  }
  printf("(recorded: stackrec record -q, symbolizing at the end from symbol "
         "caches; hooks: LD_PRELOAD alone, offline, tables, no record; cold: one "
         "recorded run on an empty symbol cache directory, which it fills)\n");
  printf("worst ratio %.2fx (target <= 1.30x): %s\n", worst,
         worst <= 1.3 ? "PASS" : "MISS");
}

/* This program (self, for --forks), the stackrec binary (bin: --stackrec
 * PATH, else ../stackrec next to this one) and the hook library (g_lib).
 * @return 0, or 1 with a message. */
static int locate(const char *bin_opt, char self[PATH_MAX], char *bin,
                  size_t bin_len) {
  if (realpath("/proc/self/exe", self) == NULL) return 1;
  if (bin_opt != NULL) {
    snprintf(bin, bin_len, "%s", bin_opt);
  } else {
    char *slash;
    snprintf(bin, bin_len, "%s", self);
    slash = strrchr(bin, '/');
    *slash = '\0';
    slash = strrchr(bin, '/');
    snprintf(slash, bin_len - (size_t)(slash - bin), "/stackrec");
  }
  if (access(bin, X_OK) != 0) {
    fprintf(stderr, "no stackrec at %s (--stackrec PATH)\n", bin);
    return 1;
  }
  {
    /* bazel-bin/tools/stackrec -> bazel-bin/preload/ */
    char tmp[PATH_MAX + 32], *slash;
    snprintf(tmp, sizeof tmp, "%s", bin);
    slash = strrchr(tmp, '/');
    if (slash) *slash = '\0';
    snprintf(g_lib, sizeof g_lib, "%s/../preload/libstackrec_preload.so",
             slash ? tmp : ".");
    if (getenv("STACKREC_PRELOAD")) snprintf(g_lib, sizeof g_lib, "%s",
                                             getenv("STACKREC_PRELOAD"));
    if (access(g_lib, R_OK) != 0) {
      fprintf(stderr, "no hook library at %s (set STACKREC_PRELOAD)\n", g_lib);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  char self[PATH_MAX], bin[PATH_MAX + 32], root[PATH_MAX / 2];
  char proj[PATH_MAX], script[PATH_MAX], recdir[PATH_MAX + 32];
  const char *bin_opt = NULL;
  int rounds = 5;
  bool summary = false;
  static double t[3][3][MAX_ROUNDS], cold[3];
  char cache_dir[PATH_MAX + 32];
  static const char *const names[3] = {"make -j2 (16 files)",
                                       "bash, 200 subprocesses",
                                       "C, 200 forks"};

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--forks") == 0)
      return fork_workload();
    if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--summary") == 0)
      summary = true;
    else if (strcmp(argv[i], "--stackrec") == 0 && i + 1 < argc)
      bin_opt = argv[++i];
    else {
      fprintf(stderr, "usage: record_overhead [--rounds N] [--summary] "
                      "[--stackrec PATH]\n");
      return 2;
    }
  }
  if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 5;
  if (locate(bin_opt, self, bin, sizeof bin) != 0) return 1;
  /* $TMPDIR: the file system matters (every recorded process creates
   * files; a journal-less ext4 scans for a free inode at each create). */
  snprintf(root, sizeof root, "%s/stkr-recbench-XXXXXX",
           getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(root) == NULL) {
    fprintf(stderr, "record_overhead: cannot create %s: %s\n", root,
            strerror(errno));
    return 1;
  }
  printf("record_overhead: working directory %s\n", root);
  generate(root);
  snprintf(cache_dir, sizeof cache_dir, "%s/symcache", root);
  if (setenv("STACKREC_SYMCACHE", cache_dir, 1) != 0) return 1;
  snprintf(proj, sizeof proj, "%s/proj", root);
  snprintf(script, sizeof script, "%s/subprocs.sh", root);

  printf("record_overhead: %s, %d rounds, plain and recorded interleaved%s\n",
         bin, rounds, summary ? ", with the summary" : " (-q)");
  for (int r = -1; r < rounds; r++) {
    for (int w = 0; w < 3; w++) {
      for (int rec = 0; rec < (r < 0 ? 1 : 3); rec++) {
        /* Rotate which goes first, so drift hits all alike. Round -1: the
         * cold recorded run, on an empty symbol cache directory. */
        int mode = r < 0 ? 1 : (rec + r) % 3; /* 0 plain, 1 record, 2 hooks */
        int recorded = mode == 1;
        char *plain_argv[3][4] = {{"make", "-s", "-j2", NULL},
                                  {"bash", script, NULL, NULL},
                                  {self, "--forks", NULL, NULL}};
        char *argv_rec[12];
        int k = 0;
        if (w == 0 && sh("make -s -C '%s' clean >/dev/null", proj) != 0)
          return 1;
        snprintf(recdir, sizeof recdir, "%s/rec-%d-%d", root, r + 1, w);
        if (r < 0) sh("rm -rf '%s'", cache_dir);
        if (recorded) {
          argv_rec[k++] = bin;
          argv_rec[k++] = "record";
          if (!summary) argv_rec[k++] = "-q";
          argv_rec[k++] = "-o";
          argv_rec[k++] = recdir;
          argv_rec[k++] = "--";
          for (int j = 0; plain_argv[w][j] != NULL; j++)
            argv_rec[k++] = plain_argv[w][j];
          argv_rec[k] = NULL;
        }
        if (mode == 2) mkdir(recdir, 0700);
        double dt = run_timed(recorded ? argv_rec : plain_argv[w],
                              w == 0 ? proj : root,
                              mode == 2 ? recdir : NULL);
        if (dt < 0) {
          fprintf(stderr, "%s (mode %d) failed\n", names[w], mode);
          return 1;
        }
        if (r < 0)
          cold[w] = dt;
        else
          t[w][mode][r] = dt;
        if (mode != 0) sh("rm -rf '%s'", recdir);
      }
    }
  }
  print_table(t, cold, names, rounds);
  sh("rm -rf '%s'", root);
  return 0;
}
