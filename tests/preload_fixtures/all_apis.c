/*
 * all_apis.c: calls every hooked API once, each from its own known
 * function (fx_<name>), for tests/test-preload.c. Run under the hooks.
 *
 *   all_apis all     every API, plus: a constructor (before main), a signal
 *                    handler and an atexit handler (after main) that call a
 *                    hooked API; calls that must NOT be recorded (ordinary
 *                    paths and names, AF_UNIX, other ioctls); and checks
 *                    that results and errno come through unchanged. Prints
 *                    "port N" (the loopback listener's port), "ipv6 yes|no"
 *                    and "checks ok"; exits 0, or 3 naming a failed check.
 *   all_apis exit N  one event, then exit(N)
 *   all_apis kill N  one event, then raise(N) with the default action
 *   all_apis badptr  hooked calls given (void *)8 or 4095 where a path or
 *                    an address goes: each fails with EFAULT, as plainly
 *                    (QA, session 24: SIGSEGV in the hooks); prints
 *                    "badptr ok", exits 0, or 3 naming a failed check
 *   all_apis lowfd   RLIMIT_NOFILE down to 16, one event, then opens
 *                    /dev/null until EMFILE: prints "opened N"
 *   all_apis chroot DIR [child]  chroot(DIR), then one event (with
 *                    "child": one event first, then a forked child does
 *                    the chroot and its event); exits 0
 *   all_apis notsc [first]  PR_SET_TSC(PR_TSC_SIGSEGV), then one event
 *                    ("first": one event before too); x86_64; exits 0
 *   all_apis strict  one event, then seccomp's strict mode: writes
 *                    "strict ok" and ends by SYS_exit(0), all it allows
 *
 * $HOME must hold .ssh/id_fixture (the test creates it). The test expects
 * STACKREC_ENV_NAMES=HOME,STKR_FIXTURE_* and finds every fx_ function's
 * address range with nm: each event's first PC must lie in its function.
 */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "tests/preload_fixtures/fixture_home.h"

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
int __gethostname_chk(char *name, size_t len, size_t buflen);

#define NOINLINE __attribute__((noinline))
/* Keeps the call from being the function's last instruction (a tail call
 * would put the hook's caller elsewhere). */
#define BARRIER() __asm__ volatile("" ::: "memory")

static int g_failed;
static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "all_apis: check failed: %s (errno %d: %s)\n", what,
            errno, strerror(errno));
    g_failed = 1;
  }
}

static void close_if(int fd) {
  if (fd >= 0)
    close(fd);
}

/* ---- before main, after main, in a signal handler ---- */

NOINLINE static void fx_ctor(void) {
  volatile char *v = getenv("STKR_FIXTURE_CTOR");
  (void)v;
  BARRIER();
}
__attribute__((constructor)) static void ctor(void) { fx_ctor(); }

NOINLINE static void fx_atexit(void) {
  struct utsname u;
  uname(&u);
  BARRIER();
}

static volatile sig_atomic_t g_sig_fd = -2, g_sig_errno;
NOINLINE static void fx_sighandler(int sig) {
  int saved = errno;
  (void)sig;
  /* open(2) is async-signal-safe; so must the hook be. */
  g_sig_fd = open(home_path(".ssh/from_signal_handler"), O_RDONLY);
  g_sig_errno = errno;
  errno = saved;
  BARRIER();
}

/* ---- files, identifiers and devices by path ---- */

NOINLINE static void fx_open(void) {
  int fd = open(home_path(".ssh/id_fixture"), O_RDONLY);
  check(fd >= 0, "open ~/.ssh/id_fixture");
  close_if(fd);
  BARRIER();
}
NOINLINE static void fx_open_missing(void) {
  errno = 0;
  int fd = open(home_path(".ssh/missing"), O_RDONLY);
  check(fd == -1 && errno == ENOENT, "open ~/.ssh/missing: -1, ENOENT");
  BARRIER();
}
NOINLINE static void fx_open_creat(void) {
  /* O_CREAT: the hook must pass the mode on. */
  int fd = open(home_path(".ssh/created"), O_WRONLY | O_CREAT | O_TRUNC, 0640);
  struct stat st;
  check(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 0777) == 0640,
        "open(O_CREAT, 0640) keeps the mode");
  close_if(fd);
  BARRIER();
}
NOINLINE static void fx_open64(void) {
  int fd = open64("/etc/passwd", O_RDONLY);
  check(fd >= 0, "open64 /etc/passwd");
  close_if(fd);
  BARRIER();
}
NOINLINE static void fx_open_2(void) {
  int fd = __open_2("/etc/machine-id", O_RDONLY);
  close_if(fd);
  BARRIER();
}
NOINLINE static void fx_open64_2(void) {
  int fd = __open64_2("/sys/class/net/lo/address", O_RDONLY);
  close_if(fd);
  BARRIER();
}
NOINLINE static void fx_openat(void) {
  errno = 0;
  int fd = openat(AT_FDCWD, home_path(".gnupg/pubring.kbx"), O_RDONLY);
  check(fd == -1 && errno == ENOENT, "openat ~/.gnupg/...: -1, ENOENT");
  BARRIER();
}
NOINLINE static void fx_openat64(void) {
  int fd = openat64(AT_FDCWD, "/dev/video0", O_RDONLY | O_NONBLOCK);
  close_if(fd);
  BARRIER();
}
NOINLINE static void fx_openat_2(void) {
  int fd = __openat_2(AT_FDCWD, "/dev/snd/controlC0", O_RDONLY | O_NONBLOCK);
  close_if(fd);
  BARRIER();
}
NOINLINE static void fx_openat64_2(void) {
  int fd = __openat64_2(AT_FDCWD, "/var/lib/dbus/machine-id", O_RDONLY);
  close_if(fd);
  BARRIER();
}
NOINLINE static void fx_fopen(void) {
  FILE *f = fopen(home_path(".ssh/id_fixture"), "r");
  char buf[16] = "";
  check(f != NULL && fgets(buf, sizeof buf, f) != NULL &&
            strcmp(buf, "fixture-key\n") == 0,
        "fopen ~/.ssh/id_fixture reads its content");
  if (f)
    fclose(f);
  BARRIER();
}
NOINLINE static void fx_fopen64(void) {
  errno = 0;
  FILE *f = fopen64(home_path(".mozilla/firefox/profiles.ini"), "r");
  check(f == NULL && errno == ENOENT, "fopen64 missing: NULL, ENOENT");
  if (f)
    fclose(f);
  BARRIER();
}

/* ---- identifiers ---- */

NOINLINE static void fx_gethostname(void) {
  char name[256];
  check(gethostname(name, sizeof name) == 0, "gethostname");
  BARRIER();
}
NOINLINE static void fx_gethostname_chk(void) {
  char name[256];
  check(__gethostname_chk(name, sizeof name, sizeof name) == 0,
        "__gethostname_chk");
  BARRIER();
}
NOINLINE static void fx_uname(void) {
  struct utsname u;
  check(uname(&u) == 0 && u.sysname[0] != '\0', "uname");
  BARRIER();
}
NOINLINE static void fx_getifaddrs(void) {
  struct ifaddrs *ifa = NULL;
  check(getifaddrs(&ifa) == 0, "getifaddrs");
  if (ifa)
    freeifaddrs(ifa);
  BARRIER();
}
NOINLINE static void fx_ioctl(void) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "lo");
  check(ioctl(s, SIOCGIFHWADDR, &ifr) == 0, "ioctl SIOCGIFHWADDR lo");
  close_if(s);
  BARRIER();
}

/* ---- network ---- */

NOINLINE static void fx_getaddrinfo(void) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  check(getaddrinfo("127.0.0.1", "9", &hints, &res) == 0, "getaddrinfo");
  if (res)
    freeaddrinfo(res);
  BARRIER();
}
NOINLINE static void fx_connect(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  check(connect(s, (struct sockaddr *)&a, sizeof a) == 0,
        "connect 127.0.0.1");
  close_if(s);
  BARRIER();
}
NOINLINE static void fx_connect6(void) {
  int s = socket(AF_INET6, SOCK_STREAM, 0), s2, r, e, r2, e2;
  struct sockaddr_in6 a;
  if (s < 0) {
    printf("ipv6 no\n");
    return;
  }
  memset(&a, 0, sizeof a);
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(1);
  a.sin6_addr = in6addr_loopback;
  /* Port 1 on ::1 fails (refused, or no IPv6 loopback): the hooked call
   * must give exactly what the system call gives. */
  errno = 0;
  r = connect(s, (struct sockaddr *)&a, sizeof a);
  e = errno;
  s2 = socket(AF_INET6, SOCK_STREAM, 0);
  errno = 0;
  r2 = (int)syscall(SYS_connect, s2, (struct sockaddr *)&a, sizeof a);
  e2 = errno;
  check(r == -1 && r == r2 && e == e2,
        "connect [::1]:1: the system call's result and errno");
  close_if(s);
  close_if(s2);
  printf("ipv6 yes\n");
  BARRIER();
}

/* ---- environment ---- */

NOINLINE static void fx_getenv(void) {
  errno = EXDEV; /* a hooked call that succeeds must not touch errno */
  check(getenv("HOME") != NULL && errno == EXDEV, "getenv HOME keeps errno");
  BARRIER();
}
NOINLINE static void fx_secure_getenv(void) {
  const char *v = secure_getenv("STKR_FIXTURE_SECRET");
  check(v != NULL && strcmp(v, "s3cret") == 0, "secure_getenv value");
  BARRIER();
}

/* ---- must not be recorded ---- */

NOINLINE static void fx_not_sensitive(void) {
  struct termios t;
  int fd = open("/dev/null", O_RDONLY), s;
  struct sockaddr_un un;
  FILE *f = fopen("/etc/hostname", "r");

  close_if(fd);
  if (f)
    fclose(f);
  check(getenv("PATH") != NULL || 1, "getenv PATH");
  (void)ioctl(0, TCGETS, &t); /* not SIOCGIFHWADDR */
  s = socket(AF_UNIX, SOCK_STREAM, 0);
  memset(&un, 0, sizeof un);
  un.sun_family = AF_UNIX;
  strcpy(un.sun_path, "/nonexistent/stkr.sock");
  (void)connect(s, (struct sockaddr *)&un, sizeof un); /* not network */
  close_if(s);
  fd = open("relative/.ssh/id_rsa", O_RDONLY); /* relative: not resolved */
  close_if(fd);
  BARRIER();
}

static int listener(int *port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;

  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(s, 4) != 0 || getsockname(s, (struct sockaddr *)&a, &len) != 0)
    return -1;
  *port = ntohs(a.sin_port);
  return s;
}

NOINLINE static int run_all(void) {
  int port = 0, srv = listener(&port);

  check(srv >= 0, "loopback listener");
  printf("port %d\n", port);
  fx_open();
  fx_open_missing();
  fx_open_creat();
  fx_open64();
  fx_open_2();
  fx_open64_2();
  fx_openat();
  fx_openat64();
  fx_openat_2();
  fx_openat64_2();
  fx_fopen();
  fx_fopen64();
  fx_gethostname();
  fx_gethostname_chk();
  fx_uname();
  fx_getifaddrs();
  fx_ioctl();
  fx_getaddrinfo();
  fx_connect(port);
  fx_connect6();
  fx_getenv();
  fx_secure_getenv();
  fx_not_sensitive();
  signal(SIGUSR1, fx_sighandler);
  raise(SIGUSR1);
  check(g_sig_fd == -1 && g_sig_errno == ENOENT,
        "open in a signal handler: -1, ENOENT");
  close_if(srv);
  atexit(fx_atexit);
  BARRIER();
  return g_failed;
}

/* Each call fails with EFAULT (fopen: NULL, EFAULT), nothing read. Not
 * NULL itself: these functions are declared nonnull (UBSan's check). */
static int run_badptr(void) {
  const char *bad[] = {(const char *)8, (const char *)4095};
  struct stat st;
  for (size_t i = 0; i < 2; i++) {
    const char *p = bad[i];
    int s = socket(AF_INET, SOCK_STREAM, 0);
    errno = 0;
    check(open(p, O_RDONLY) == -1 && errno == EFAULT, "open: EFAULT");
    errno = 0;
    check(openat(AT_FDCWD, p, O_RDONLY) == -1 && errno == EFAULT,
          "openat: EFAULT");
    errno = 0;
    check(fopen(p, "r") == NULL && errno == EFAULT, "fopen: EFAULT");
    errno = 0;
    check(stat(p, &st) == -1 && errno == EFAULT, "stat: EFAULT");
    errno = 0;
    check(connect(s, (const struct sockaddr *)(const void *)p, 16) == -1 &&
              errno == EFAULT,
          "connect: EFAULT");
    errno = 0;
    check(ioctl(s, SIOCGIFHWADDR, (void *)p) == -1 && errno == EFAULT,
          "ioctl SIOCGIFHWADDR: EFAULT");
    close_if(s);
  }
  return g_failed;
}

/* The descriptors the program gets under a limit it set itself. */
static int run_lowfd(void) {
  struct rlimit rl = {16, 16};
  int n = 0;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 3;
  fx_uname();
  while (open("/dev/null", O_RDONLY) >= 0) n++;
  printf("opened %d\n", n);
  return 0;
}

static int run_chroot(const char *dir, bool child) {
  pid_t p = 0;
  int st = 0;
  if (child) {
    fx_uname(); /* the parent records */
    if ((p = fork()) < 0) return 3;
  }
  if (p == 0) {
    if (chroot(dir) != 0 || chdir("/") != 0) _exit(4);
    fx_uname();
    if (child) _exit(0);
    return 0;
  }
  return waitpid(p, &st, 0) == p && st == 0 ? 0 : 5;
}

/* The thread forbids itself what the recorder's clock reads (QA, session
 * 24: SIGSEGV at the next event, SIGKILL in strict mode). */
static int run_sandboxed(bool strict, bool first) {
  if (first || strict) fx_uname();
  if (strict) {
    static const char ok[] = "strict ok\n";
    if (prctl(PR_SET_SECCOMP, 1 /* SECCOMP_MODE_STRICT */, 0, 0, 0) != 0)
      return 3;
    if (write(1, ok, sizeof ok - 1) < 0) syscall(SYS_exit, 4);
    syscall(SYS_exit, 0);
  }
#if defined(__x86_64__)
  if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) != 0) return 3;
#endif
  fx_uname();
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc >= 2 && strcmp(argv[1], "lowfd") == 0) return run_lowfd();
  if (argc >= 2 && strcmp(argv[1], "notsc") == 0)
    return run_sandboxed(false, argc >= 3);
  if (argc >= 2 && strcmp(argv[1], "strict") == 0)
    return run_sandboxed(true, true);
  if (argc >= 3 && strcmp(argv[1], "chroot") == 0)
    return run_chroot(argv[2], argc >= 4);
  if (argc >= 2 && strcmp(argv[1], "badptr") == 0) {
    if (run_badptr() != 0)
      return 3;
    printf("badptr ok\n");
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "reopen") == 0) {
    /* creat and freopen, each on a watched path (QA, session 41). */
    int fd = creat(home_path(".ssh/created_by_creat"), 0600);
    FILE *f = fopen("/dev/null", "r");
    check(fd >= 0, "creat ~/.ssh/created_by_creat");
    close_if(fd);
    check(f != NULL && (f = freopen("/etc/passwd", "r", f)) != NULL,
          "freopen /etc/passwd");
    if (f != NULL)
      fclose(f);
    printf("reopen %s\n", g_failed ? "failed" : "ok");
    return g_failed ? 3 : 0;
  }
  if (argc >= 2 && strcmp(argv[1], "all") == 0) {
    if (run_all() != 0)
      return 3;
    printf("checks ok\n");
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "exit") == 0) {
    fx_uname();
    exit(atoi(argv[2]));
  }
  if (argc >= 3 && strcmp(argv[1], "kill") == 0) {
    fx_uname();
    signal(atoi(argv[2]), SIG_DFL);
    raise(atoi(argv[2]));
    return 4;
  }
  fprintf(stderr, "usage: all_apis all | exit N | kill SIG\n");
  return 2;
}
