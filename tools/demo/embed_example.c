/*
 * embed_example.c: an app that defines its own hook sites with the C API
 * (the README's embedding guide; built and run by tests/test-preload-embed.c).
 *
 *   embed_example DIR
 *
 * Each site sits in the function that does the sensitive thing (an API of
 * the app, or a wrapper around one), and skip_frames = 1 drops that
 * function's own frame: every event's first PC is then the code that
 * called it, which is what a privacy review asks about. Three ways to
 * define a site:
 *  1. STKR_EVENT("name", payload, len) in the function: the site is a
 *     hidden static, registered on first use;
 *  2. STKR_SITE_DEFINE(var, "name") once, then stkr_event(&var, ...) (one
 *     site, one name in reports, however many places record it);
 *  3. a wrapper around an API the app wants watched (here: open), which
 *     records and then calls the real function. On iOS a fishhook
 *     rebinding or a swizzled method is exactly such a wrapper.
 *
 * Prints the recorder's counters after a flush, then shuts down.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "recorder/stackrec.h"

#define NOINLINE __attribute__((noinline))

/* 1. A site inside the function that does the sensitive thing. */
NOINLINE static int contacts_read_all(int limit) {
  char payload[32];
  int n = snprintf(payload, sizeof payload, "limit=%d", limit);

  STKR_EVENT("privacy.contacts.read", payload, (size_t)n);
  return limit; /* ... the app's real work ... */
}

/* 2. A site declared once, used by every path that gets a location. */
STKR_SITE_DEFINE(g_location_site, "privacy.location.get");

NOINLINE static void location_get(const char *accuracy) {
  (void)stkr_event(&g_location_site, accuracy, strlen(accuracy));
}
NOINLINE static void weather_refresh(void) {
  location_get("accuracy=city");
  __asm__ volatile("" ::: "memory"); /* not a tail call: keep this frame */
}
NOINLINE static void map_screen_open(void) {
  location_get("accuracy=best");
  __asm__ volatile("" ::: "memory");
}

/* 3. A wrapper: record, then call the real API; errno and the result are
 * the real function's. Every caller of app_open goes through here. */
NOINLINE static int app_open(const char *path, int flags) {
  int saved = errno;

  STKR_EVENT("files.open", path, strlen(path));
  errno = saved; /* the recorder never sets errno; a habit worth keeping */
  return open(path, flags);
}

NOINLINE static void load_settings(void) {
  int fd = app_open("/etc/hostname", O_RDONLY);
  if (fd >= 0)
    close(fd);
}

int main(int argc, char **argv) {
  stkr_config cfg;
  stkr_stats st;
  int err, i;

  if (argc != 2) {
    fprintf(stderr, "usage: embed_example DIR\n");
    return 2;
  }
  memset(&cfg, 0, sizeof cfg); /* 0 = default (or STACKREC_* env) */
  cfg.dir = argv[1];
  cfg.skip_frames = 1; /* the frame holding the site: see above */
  err = stkr_init(&cfg);
  if (err != 0) {
    fprintf(stderr, "embed_example: stkr_init: %s\n", stkr_strerror(err));
    return 1;
  }
  for (i = 0; i < 3; i++)
    (void)contacts_read_all(10 * (i + 1)); /* first PC: here, in main */
  weather_refresh();
  map_screen_open();
  load_settings();

  err = stkr_flush(); /* barrier: all the above is on disk */
  stkr_stats_get(&st);
  printf("attempted %llu written %llu dropped %llu sites %llu\n",
         (unsigned long long)st.attempted, (unsigned long long)st.written,
         (unsigned long long)st.dropped, (unsigned long long)st.sites);
  stkr_shutdown();
  return err == 0 ? 0 : 1;
}
