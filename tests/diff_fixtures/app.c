/*
 * app.c: the program of tests/test-diff.c, built twice (tests/diff_fixtures/
 * BUILD). Every 50 ms for 20 ticks it reads its configuration (files.open,
 * REPEAT times a tick: argv[2], default 1) and every other tick connects
 * (network.connect); built with -DEXTRA_PATH it also reads the device id
 * each tick (identifiers.device_id, through phone_home): exactly one call
 * path more. Usage: app DIR [REPEAT [offline]]; "offline": PCs and image
 * lists only (STKR_SYMBOLIZE_OFFLINE; tests/test-unsymbolized.c).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/stackrec.h"

static __attribute__((noinline)) void read_config(void) {
  STKR_EVENT("files.open", "/etc/app.conf", 13);
}

static __attribute__((noinline)) void connect_server(void) {
  STKR_EVENT("network.connect", "10.0.0.1:443", 12);
}

#ifdef EXTRA_PATH
static __attribute__((noinline)) void phone_home(void) {
  STKR_EVENT("identifiers.device_id", NULL, 0);
}
#endif

static __attribute__((noinline)) void tick(int i, int repeat) {
  int k;

  for (k = 0; k < repeat; k++)
    read_config();
  if (i % 2 == 0)
    connect_server();
#ifdef EXTRA_PATH
  phone_home();
#endif
}

int main(int argc, char **argv) {
  stkr_config cfg;
  int i, repeat = argc > 2 ? atoi(argv[2]) : 1;

  if (argc < 2)
    return 2;
  memset(&cfg, 0, sizeof cfg);
  cfg.dir = argv[1];
  cfg.symbolize = argc > 3 && strcmp(argv[3], "offline") == 0
                      ? STKR_SYMBOLIZE_OFFLINE
                      : STKR_SYMBOLIZE_INPROC;
  if (stkr_init(&cfg) != 0)
    return 3;
  for (i = 0; i < 20; i++) {
    tick(i, repeat);
    usleep(50000);
  }
  return stkr_shutdown() == 0 ? 0 : 4;
}
