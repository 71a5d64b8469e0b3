/*
 * test-recover-procs.c: crash-proof rings across processes and threads
 * (test-recover.c has the rest; the drops of a killed app:
 * test-recover-drops.c; helpers: recover_util.h). A child that forks
 * (follow and disable modes) or outlives its recording parent, rings
 * handed from exited threads to new ones, and a 4-thread program SIGKILLed
 * at 20 random moments: after recovery, every event the processes accepted
 * is read back exactly once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "proto/stkr_recover.h"
#include "recorder/stackrec.h"
#include "recorder/stkr_internal.h"
#include "tests/recover_util.h"
#include "tools/stackrec/agg.h"
#include "tests/testlib.h"


/* fork: in follow mode the child records into its own session (its ring
 * must not write into the parent's file), in disable mode it records
 * nothing; parent and child die uncleanly; everything is recovered exactly
 * once. */
static void fork_body(void *arg) {
  int status;
  (void)arg;
  record_seq(0, 100);
  pid_t c = fork();
  if (c == 0) {
    for (uint32_t i = 1000; i < 1070; i++) /* disable: -ENOTCONN */
      (void)stkr_event(&g_site, &i, 4);
    kill(getpid(), SIGKILL);
  }
  if (c < 0 || waitpid(c, &status, 0) != c) _exit(95);
  record_seq(100, 100);
}

static void fork_case(stkr_fork_mode mode) {
  const stkr_config cfg = {.fork_mode = mode};
  recovery r;
  readback rb;
  bool follow = mode == STKR_FORK_FOLLOW;

  assert_true(WIFSIGNALED(kill_and_recover(&r, cfg, fork_body, NULL)));
  assert_int_equal(r.st.sessions_recovered, follow ? 2 : 1);
  assert_int_equal(r.st.events, follow ? 270 : 200);
  read_dir(r.dir, &rb, 1070);
  assert_int_equal(rb.events, follow ? 270 : 200);
  for (int i = 0; i < 200; i++) assert_int_equal(rb.seen[i], 1);
  for (int i = 1000; i < 1070; i++) assert_int_equal(rb.seen[i], follow);
  rb_free(&rb);
}

/* A child that outlives its recording parent must not keep the parent's
 * session looking alive: the child closes its copy of the lock. The
 * recording parent's body: 50 events, then a child that sends its pid
 * down the pipe (arg: its write end) and waits to be killed. */
static void outlived_body(void *arg) {
  int wfd = *(const int *)arg;
  pid_t c;

  record_seq(0, 50);
  c = fork();
  if (c == 0) {
    /* Inherits every descriptor but the lock's, which the atfork
     * handler closed before fork() returned here. */
    c = getpid();
    if (write(wfd, &c, sizeof c) != sizeof c) _exit(96);
    for (;;) pause();
  }
  if (c < 0) _exit(97);
}

static void test_child_outlives_parent(void **state) {
  char dir[300];
  stkr_recover_stats st;
  msgs ms;
  int status, pfd[2];
  pid_t c = 0;
  (void)state;

  assert_int_equal(pipe(pfd), 0);
  status = run_killed_child_in_new_dir(dir, sizeof dir, (stkr_config){0},
                                       outlived_body, &pfd[1]);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  assert_int_equal(read(pfd[0], &c, sizeof c), (ssize_t)sizeof c);
  recover(dir, false, &st, &ms);
  kill(c, SIGKILL);
  assert_int_equal(st.sessions_live, 0);
  assert_int_equal(st.sessions_recovered, 1);
  assert_int_equal(st.events, 50);
  close(pfd[0]);
  close(pfd[1]);
}

static void test_fork_disable(void **state) {
  (void)state;
  fork_case(STKR_FORK_DISABLE);
}

static void test_fork_follow(void **state) {
  (void)state;
#if defined(__SANITIZE_THREAD__)
  /* TSan refuses to start threads after a multi-threaded fork, which is
   * exactly what follow mode does (test-flush.c skips the same way). */
  skip();
#endif
  fork_case(STKR_FORK_FOLLOW);
}

/* Rings outlive their threads: an exited thread's ring (or one the worker
 * made ahead) goes to the next thread that starts. Forty short threads with
 * flushes between them (so rings get reaped and handed on), the last ten
 * never flushed; then SIGKILL: every event once, under the right thread. */
typedef struct seq_arg {
  uint32_t from, n;
} seq_arg;

static void *seq_thread(void *arg) {
  const seq_arg *a = arg;
  record_seq(a->from, a->n);
  return NULL;
}

/* 40 threads one after the other, 5 events each; the first 30 flushed. */
static void ring_reuse_body(void *arg) {
  (void)arg;
  for (uint32_t i = 0; i < 40; i++) {
    seq_arg a = {i * 5, 5};
    pthread_t t;
    if (pthread_create(&t, NULL, seq_thread, &a) != 0) _exit(97);
    pthread_join(t, NULL);
    if (i < 30 && (stkr_flush() != 0 || stkr_flush() != 0)) _exit(98);
  }
}

static void test_ring_reuse(void **state) {
  const stkr_config cfg = {.ring_bytes = 16 << 10};
  recovery r;
  readback rb;
  (void)state;

  kill_and_recover(&r, cfg, ring_reuse_body, NULL);
  assert_int_equal(r.ms.n, 0);
  assert_int_equal(r.st.events, 50);
  read_dir(r.dir, &rb, 200);
  assert_int_equal(rb.events, 200);
  for (int i = 0; i < 200; i++) {
    assert_int_equal(rb.seen[i], 1);
    /* Each thread's 5 events under its own id, a new one per thread. */
    if (i % 5) assert_int_equal(rb.thread_of[i], rb.thread_of[i - 1]);
    else if (i) assert_int_not_equal(rb.thread_of[i], rb.thread_of[i - 5]);
  }
  rb_free(&rb);
  assert_int_equal(tl_count_files(r.dir, ".ring"), 0);
}

/* ---- SIGKILL at random moments -------------------------------------------
 * A program with 4 threads making events, each counting its own successful
 * events in memory shared with us, is killed at a random moment. What is
 * recorded (segments + recovery) must equal what it counted, per thread, up
 * to the one event per thread that can be in flight: committed to the ring
 * (recorded) but killed before the counter's increment. Never fewer. */
#define KTHREADS 4

static _Atomic uint64_t *g_counts;

static void *kill_worker(void *arg) {
  uint8_t idx = (uint8_t)(uintptr_t)arg;
  for (;;) {
    if (stkr_event(&g_site, &idx, 1) == 0)
      atomic_fetch_add_explicit(&g_counts[idx], 1, memory_order_relaxed);
    /* About 20 events per ms per thread: flushes (every 20 ms) and kills
     * land mid-stream, and reading back stays quick under sanitizers. */
    if ((rand() & 15) == 0) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

static void test_sigkill_random_moments(void **state) {
  (void)state;
  g_counts = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(g_counts != MAP_FAILED);
  srand((unsigned)time(NULL));
  for (int round = 0; round < 20; round++) {
    char dir[300];
    stkr_recover_stats st;
    readback rb;
    msgs ms;
    int status;

    new_dir(dir, sizeof dir);
    for (int i = 0; i < KTHREADS; i++) g_counts[i] = 0;
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
      stkr_config cfg = {.dir = dir, .flush_interval_ms = 20,
                         .ring_bytes = 1 << 20};
      pthread_t th[KTHREADS];
      if (stkr_init(&cfg) != 0) _exit(90);
      for (int i = 0; i < KTHREADS; i++)
        pthread_create(&th[i], NULL, kill_worker, (void *)(uintptr_t)i);
      for (;;) pause();
    }
    struct timespec ts = {0, (20 + rand() % 280) * 1000000L};
    nanosleep(&ts, NULL);
    kill(p, SIGKILL);
    assert_int_equal(waitpid(p, &status, 0), p);
    recover(dir, false, &st, &ms);
    assert_int_equal(st.damaged_rings, 0);
    read_dir(dir, &rb, 0);
    uint64_t total = 0;
    for (int i = 0; i < KTHREADS; i++) {
      uint64_t counted = g_counts[i], recorded = rb.by_byte[i];
      if (recorded < counted || recorded > counted + 1)
        fail_msg("round %d thread %d: recorded %llu, counted %llu (recovery: "
                 "%llu events, %llu rings, %llu orphans, %llu failed, %llu "
                 "duplicates; last message: %s)", round, i,
                 (unsigned long long)recorded, (unsigned long long)counted,
                 (unsigned long long)st.events, (unsigned long long)st.rings,
                 (unsigned long long)st.orphans,
                 (unsigned long long)st.sessions_failed,
                 (unsigned long long)st.duplicates, ms.n ? ms.last : "none");
      total += recorded;
    }
    assert_int_equal(rb.events, total);
    print_message("round %2d: killed after %3ld ms: %llu events, %llu of "
                  "them recovered\n", round, ts.tv_nsec / 1000000,
                  (unsigned long long)total, (unsigned long long)st.events);
    rb_free(&rb);
  }
  munmap(g_counts, 4096);
}

/* A process killed before the worker's first pass (an hour away) left
 * only its ring files: the image list written at init is in its segment,
 * so every recovered event's frames lie in a known image (offline mode
 * keeps PCs and the image list; `stackrec symbolize` names them later). */
static void seq_body(void *arg) {
  (void)arg;
  record_seq(0, 10);
}

static void test_killed_before_first_pass_keeps_images(void **state) {
  const stkr_config cfg = {.symbolize = STKR_SYMBOLIZE_OFFLINE};
  char exe[PATH_MAX], got[PATH_MAX];
  recovery r;
  stkr_reader *rd = NULL;
  stkr_event_view ev;
  int n = 0;
  (void)state;

  /* record_seq's image (the test binary, or a library in fastbuild). */
  Dl_info di;
  assert_true(dladdr((void *)record_seq, &di) != 0 && di.dli_fname != NULL);
  assert_non_null(realpath(di.dli_fname, exe));
  assert_true(WIFSIGNALED(kill_and_recover(&r, cfg, seq_body, NULL)));
  assert_int_equal(r.st.events, 10);
  assert_int_equal(stkr_reader_open(r.dir, NULL, &rd), 0);
  while (stkr_reader_next(rd, &ev) == 1) {
    const stkr_image_info *im;
    size_t n_im, k;
    n++;
    if (ev.n_pcs < 2)
      fail_msg("event %d: %zu PCs", n, ev.n_pcs);
    /* The innermost frame is record_seq's. */
    assert_int_equal(stkr_reader_images(rd, ev.process, &im, &n_im), 0);
    for (k = 0; k < n_im; k++)
      if (ev.pcs[0] >= im[k].text_start && ev.pcs[0] < im[k].text_end)
        break;
    if (k == n_im || realpath(im[k].path, got) == NULL || strcmp(got, exe) != 0)
      fail_msg("event %d: PC %#llx in %s (%zu images known), not in %s", n,
               (unsigned long long)ev.pcs[0],
               k < n_im ? im[k].path : "no image", n_im, exe);
  }
  stkr_reader_free(rd);
  assert_int_equal(n, 10);
}

/* The reader's incomplete findings, the last one kept. */
static void last_finding(void *arg, const stkr_warning *w) {
  snprintf((char *)arg, 512, "%s", w->message);
}

/* Read dir: the one process's unclean and live session counts and the
 * last incomplete finding into text (512 bytes). */
static void read_liveness(const char *dir, uint32_t *unclean, uint32_t *live,
                          char *text) {
  stkr_reader_opts o = {.incomplete = last_finding, .incomplete_arg = text};
  stkr_reader *rd;
  stkr_event_view v;

  text[0] = '\0';
  assert_int_equal(stkr_reader_create(&o, &rd), 0);
  assert_int_equal(stkr_reader_add(rd, dir), 0);
  while (stkr_reader_next(rd, &v) == 1) {
  }
  assert_int_equal(stkr_reader_process_count(rd), 1);
  *unclean = stkr_reader_process(rd, 0)->unclean_sessions;
  *live = stkr_reader_process(rd, 0)->live_sessions;
  stkr_reader_free(rd);
}

/* A session read while its process still records is "still recording",
 * not "killed" (record's summary called a program it left running
 * killed); once the process is killed, it has no clean end. */
static void test_live_session_is_still_recording(void **state) {
  char dir[300], text[512];
  uint32_t unclean, live;
  int pfd[2], status;
  char c;
  (void)state;

  new_dir(dir, sizeof dir);
  assert_int_equal(pipe(pfd), 0);
  pid_t p = fork();
  assert_true(p >= 0);
  if (p == 0) {
    stkr_config cfg = {.dir = dir, .flush_interval_ms = 3600000};
    if (stkr_init(&cfg) != 0) _exit(90);
    record_seq(0, 10);
    if (stkr_flush() != 0 || write(pfd[1], "r", 1) != 1) _exit(91);
    for (;;) pause();
  }
  assert_int_equal(read(pfd[0], &c, 1), 1);
  read_liveness(dir, &unclean, &live, text);
  assert_int_equal(unclean, 1);
  assert_int_equal(live, 1);
  if (strstr(text, "still recording") == NULL)
    fail_msg("live: %s", text);
  kill(p, SIGKILL);
  assert_int_equal(waitpid(p, &status, 0), p);
  read_liveness(dir, &unclean, &live, text);
  assert_int_equal(unclean, 1);
  assert_int_equal(live, 0);
  if (strstr(text, "no clean end") == NULL)
    fail_msg("killed: %s", text);
  close(pfd[0]);
  close(pfd[1]);
}


/* QA (session 22): a process recording in-process is killed; recovery
 * writes its last events with raw PCs only, and one call path read back as
 * two stacks (its frames, and image+offset), which `diff` called a new
 * path. The aggregation now gives a raw PC the frames an earlier,
 * symbolized stack of the same process gave the same image and offset
 * (tools/stackrec/agg_learn.h): one stack, with its function names. */
static void test_recovered_stack_merges_with_its_frames(void **state) {
  char dir[4096];
  stkr_reader *r = NULL;
  stkr_agg *a = NULL;
  (void)state;

  run_child_die(dir, sizeof dir, 50, 50, false);
  recover(dir, false, &(stkr_recover_stats){0}, &(msgs){0});
  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  assert_int_equal(stkr_agg_build(r, NULL, NULL, NULL, &a), 0);
  assert_int_equal(a->events, 100);
  if (a->n_distinct != 1 || a->stacks[0].n_frames == 0 ||
      a->stacks[0].frames[0].function == NULL)
    fail_msg("%zu stacks, the first %s", a->n_distinct,
             a->n_distinct && a->stacks[0].n_frames &&
                     a->stacks[0].frames[0].function
                 ? a->stacks[0].frames[0].function
                 : "unnamed");
  stkr_agg_free(a);
  stkr_reader_free(r);
}


/* A child records 20 events and dies. */
static void twenty_body(void *arg) {
  (void)arg;
  record_seq(0, 20);
}

/* recover's message callback: the first problem it reports (the ring
 * file made unusable below), and the directory is replaced under it, as
 * by `rm -rf DIR` and a new recording started in DIR. */
static void replace_dir_on_message(void *arg, const char *line) {
  const char *dir = arg;
  (void)line;
  if (tl_rm_rf(dir) != 0 || mkdir(dir, 0700) != 0) fail_msg("replace %s", dir);
}

/* QA (session 28): `stackrec recover DIR` ran while DIR was deleted and a
 * new app began recording into a new DIR; the old recovery wrote the dead
 * session's segment into the new recording, whose verify then found a
 * foreign process. A recovered segment now goes only into the directory
 * that was listed. */
static void test_directory_replaced_while_recovering(void **state) {
  char dir[4096], cmd[4300];
  stkr_recover_opts o = {.message = replace_dir_on_message};
  stkr_recover_stats st;
  (void)state;

  assert_true(WIFSIGNALED(run_killed_child_in_new_dir(
      dir, sizeof dir, (stkr_config){0}, twenty_body, NULL)));
  /* The ring's header names another pid: recovery reports the file (and
   * so calls the callback) before it writes the session's segment. */
  snprintf(cmd, sizeof cmd, "for f in '%s'/*.ring; do printf '\\377\\377' | "
           "dd of=\"$f\" bs=1 seek=32 conv=notrunc status=none; done", dir);
  assert_int_equal(tl_system("%s", cmd), 0);
  o.message_arg = dir;
  assert_int_equal(stkr_recover_dir(dir, &o, &st), 0);
  assert_int_equal(st.sessions_recovered, 0);
  assert_int_equal(st.sessions_failed, 1);
  assert_int_equal(tl_count_files(dir, ".zst"), 0); /* the new one: empty */
}

/* A recovered segment defines its stacks again, under its own ids, after
 * the flushed segment's: still the same stacks, counted once in the
 * process's distinct stacks (QA, session 29: info counted them twice). */
static void test_recovered_stacks_counted_once(void **state) {
  char dir[300];
  stkr_recover_stats st;
  stkr_reader *rd;
  stkr_event_view ev;
  uint64_t keys[64];
  size_t n_keys = 0;
  msgs ms;
  (void)state;

  run_child_die(dir, sizeof dir, 300, 80, false);
  recover(dir, false, &st, &ms);
  assert_int_equal(st.events, 80);
  assert_int_equal(stkr_reader_open(dir, NULL, &rd), 0);
  while (stkr_reader_next(rd, &ev) == 1) {
    uint64_t k = ev.site_id * 0x9E3779B97F4A7C15ull;
    for (size_t j = 0; j < ev.n_pcs; j++)
      k = (k ^ ev.pcs[j]) * 0x100000001B3ull;
    size_t j = 0;
    while (j < n_keys && keys[j] != k) j++;
    if (j == n_keys && n_keys < 64) keys[n_keys++] = k;
  }
  assert_true(n_keys >= 1);
  assert_int_equal(stkr_reader_process(rd, 0)->stacks, n_keys);
  stkr_reader_free(rd);
}

TL_TEST_MAIN("recover-procs", recover_group_setup, NULL, test_ring_reuse,
             test_child_outlives_parent, test_fork_disable, test_fork_follow,
             test_sigkill_random_moments,
             test_killed_before_first_pass_keeps_images,
             test_live_session_is_still_recording,
             test_recovered_stack_merges_with_its_frames,
             test_directory_replaced_while_recovering,
             test_recovered_stacks_counted_once)
