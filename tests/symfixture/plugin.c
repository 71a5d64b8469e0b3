/* plugin.c: a library the symbolization fixture dlopen()s (when
 * SYMFIXTURE_PLUGIN names it) to check that images loaded at run time are
 * listed and resolved, and that STACKREC_APP_PATHS marks them as the app's.
 * It calls back into the program, which records the event, so the stack
 * holds a frame of this library between two of the program. */

/* `line` is the program's g_line[L_PLUGIN]: the program exports nothing
 * (a stripped copy of it must have no symbols at all). */
__attribute__((visibility("default"), noinline)) void plugin_entry(
    void (*cb)(int), int i, volatile int *line) {
  *line = __LINE__ + 1;
  cb(i);
  __asm__ volatile("" ::: "memory");
}
