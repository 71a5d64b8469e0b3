/*
 * compliance_app CTLDIR: the fixture app. Between phases it writes
 * CTLDIR/ready.N and waits (at most 60 s) for CTLDIR/go.N, so that the test
 * can set a mark with `stackrec mark` at a known point:
 *   phase 0: the SDK fingerprints the device 3 times (before consent), the
 *            app itself calls uname once, the SDK probes the disk (2 stat,
 *            1 statfs), the app's statically linked "PaySDK" code calls
 *            statvfs once
 *   -> the test marks consent.granted
 *   phase 1: the SDK fingerprints 40 times in a burst (too often)
 *   -> the test marks app.background
 *   phase 2: the SDK asks for the location 4 times (in the background)
 *   -> the test marks app.foreground
 *   phase 3: the SDK asks for the location 2 times
 * Waiting uses access(2), which no hook records.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tests/compliance_fixtures/acme_sdk.h"

static const char *g_ctl;

static void step(int n) {
  char path[4096];
  int fd, i;

  snprintf(path, sizeof path, "%s/ready.%d", g_ctl, n);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0)
    close(fd);
  snprintf(path, sizeof path, "%s/go.%d", g_ctl, n);
  for (i = 0; i < 60000 && access(path, F_OK) != 0; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/* A statically linked SDK's code: named by a module map's symbol prefix. */
__attribute__((noinline)) static void pay_sdk_disk_check(void) {
  struct statvfs v;
  (void)statvfs("/", &v);
}

__attribute__((noinline)) static void app_about_screen(void) {
  struct utsname u;
  (void)uname(&u);
}

int main(int argc, char **argv) {
  int i;

  if (argc != 2)
    return 2;
  g_ctl = argv[1];
  for (i = 0; i < 3; i++)
    acme_fingerprint();
  app_about_screen();
  acme_disk_probe();
  pay_sdk_disk_check();
  step(0);
  for (i = 0; i < 40; i++)
    acme_fingerprint();
  step(1);
  for (i = 0; i < 4; i++)
    acme_location();
  step(2);
  for (i = 0; i < 2; i++)
    acme_location();
  return 0;
}
