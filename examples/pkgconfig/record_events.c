/* record_events.c: an app embedding stackrec through an installed copy,
 * built with nothing but pkg-config (issue 17):
 *
 *   cc record_events.c $(pkg-config --cflags --libs stackrec) -o record_events
 *     (a prefix the loader does not search, as /tmp/prefix: add
 *     -Wl,-rpath,$(pkg-config --variable=libdir stackrec); /usr/local:
 *     ldconfig after the install)
 *   ./record_events DIR [N]      # N events per site on 2 threads
 *   stackrec verify DIR          # the installed CLI reads them back
 *
 * Exits 0 when the header's and the library's versions agree and every
 * event was written; otherwise 1, saying why on stderr. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackrec/stackrec.h>

STKR_SITE_DEFINE(g_location, "privacy.location.get");

static long g_per_site = 100;

/* A hook site an app would put in front of a sensitive API. */
static void contacts_read(int i) {
  char p[32];
  int n = snprintf(p, sizeof p, "limit=%d", i);
  STKR_EVENT("privacy.contacts.read", p, (size_t)n);
}

static void *worker(void *arg) {
  (void)arg;
  for (long i = 0; i < g_per_site; i++) {
    contacts_read((int)i);
    stkr_event(&g_location, "coarse", 6);
  }
  return NULL;
}

int main(int argc, char **argv) {
  stkr_config cfg = STKR_CONFIG_INIT;
  stkr_stats st;
  pthread_t t[2];
  int err;

  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: record_events DIR [N]\n");
    return 2;
  }
  if (argc == 3) g_per_site = strtol(argv[2], NULL, 10);
  if (stkr_version() != STKR_VERSION_NUMBER) {
    fprintf(stderr, "record_events: header %s, library %s\n",
            STKR_VERSION_STRING, stkr_version_string());
    return 1;
  }
  cfg.dir = argv[1];
  cfg.symbolize = STKR_SYMBOLIZE_OFFLINE;
  if ((err = stkr_init(&cfg)) != 0) {
    fprintf(stderr, "record_events: stkr_init(%s): %s\n", argv[1],
            stkr_strerror(err));
    return 1;
  }
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  if ((err = stkr_flush()) != 0 || (err = stkr_stats_get(&st)) != 0) {
    fprintf(stderr, "record_events: %s\n", stkr_strerror(err));
    return 1;
  }
  stkr_shutdown();
  printf("stackrec %s: %llu events written, %llu dropped\n",
         stkr_version_string(), (unsigned long long)st.written,
         (unsigned long long)st.dropped);
  return st.written == st.attempted ? 0 : 1;
}
