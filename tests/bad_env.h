/*
 * bad_env.h: a malformed value for each STACKREC_* variable of the
 * recorder's configuration (flush/config.c). stkr_init refuses each with
 * -EINVAL, naming the variable (test-flush-config.c); `stackrec record`
 * refuses each before it runs the command, through the same code
 * (stkr_config_check_env; test-record-setup.c). One list for both, so that
 * every variable is checked at both layers: with a list each, each test
 * had missed a variable the other checked (STACKREC_SYMBOLIZE,
 * STACKREC_EXIT_MS). Header-only, like reader_util.h.
 */
#ifndef STKR_TEST_BAD_ENV_H
#define STKR_TEST_BAD_ENV_H

typedef struct bad_env {
  const char *var, *value;
} bad_env;

static const bad_env k_bad_env[] __attribute__((unused)) = {
    {"STACKREC_RING_BYTES", "12Q"},     {"STACKREC_DEPTH", "0"},
    {"STACKREC_DEPTH", "abc"},          {"STACKREC_SKIP", "-1"},
    {"STACKREC_FLUSH_MS", "0"},         {"STACKREC_SEGMENT_BYTES", "1T"},
    {"STACKREC_DISK_CAP_BYTES", "x"},   {"STACKREC_PAYLOAD_MAX", "99999"},
    {"STACKREC_FORK", "sometimes"},     {"STACKREC_SYMBOLIZE", "later"},
    {"STACKREC_UNWIND", "dwarf"},       {"STACKREC_EXIT_MS", "100ms"},
    {"STACKREC_STACK_TABLE_BYTES", "8Mi"},
#if defined(__linux__) /* Apple samples without a signal: any value */
    {"STACKREC_SAMPLE_SIGNAL", "bogus"}, {"STACKREC_SAMPLE_SIGNAL", "5"},
    {"STACKREC_SAMPLE_SIGNAL", "RTMAX-99"},
#endif
};
#define N_BAD_ENV (sizeof k_bad_env / sizeof k_bad_env[0])

#endif
