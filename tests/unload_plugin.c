/* unload_plugin.c: a plugin that embeds the recorder (its own static copy,
 * through //:stackrec) for test-unload.c: the host that dlopens it does not
 * link the recorder, and dlcloses it once the plugin has ended its
 * recording. */
#include <string.h>

#include "recorder/stackrec.h"

STKR_SITE_DEFINE(g_plugin_site, "unload.plugin");

int unload_plugin_start(const char *dir) {
  stkr_config c;
  memset(&c, 0, sizeof c);
  c.dir = dir;
  c.symbolize = STKR_SYMBOLIZE_NONE;
  return stkr_init(&c);
}

int unload_plugin_event(void) { return stkr_event(&g_plugin_site, "p", 1); }

int unload_plugin_stop(void) { return stkr_shutdown(); }
