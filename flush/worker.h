/*
 * worker.h: the flush worker's state, shared by worker.c (loop, requests,
 * init/shutdown/fork, stats) and drain.c (rings -> batches -> segments).
 */
#ifndef STKR_FLUSH_WORKER_H
#define STKR_FLUSH_WORKER_H

#include <pthread.h>
#include <uv.h>
#include <zstd.h>

#include "flush/flush_internal.h"
#include "proto/stkr_format.h"

/* zstd level of every frame: level 3 (zstd's default) compresses stack
 * records well at a CPU cost the single worker easily sustains. */
#define STKR__ZSTD_LEVEL 3

enum { STKR__REQ_FLUSH = 1, STKR__REQ_SHUTDOWN = 2 };

/* A control request, on the caller's stack; the caller blocks on req_cv
 * until the loop sets `done`. */
typedef struct stkr__req {
  int kind;
  int result;
  bool done;
  struct stkr__req *next;
} stkr__req;

typedef struct stkr__worker {
  stkr__fconfig cfg;
  uint32_t pid, parent_pid;
  uint64_t start_mono_ns, start_wall_ns;
  /* Header.session_id, and the name of the session's file and ring files
   * (recorder/ringfile.c); drawn once by stkr__session_id_new(). */
  uint64_t session_id;
  char process_name[64];

  /* ---- loop (only the worker thread touches these after start) ---- */
  uv_loop_t loop;
  uv_async_t wake_async; /* producers past half-full rings */
  uv_async_t req_async;  /* control requests */
  uv_timer_t timer;      /* periodic drain */
  pthread_t thread;

  /* ---- requests: req_mu protects the queue and every req->done ---- */
  pthread_mutex_t req_mu;
  pthread_cond_t req_cv;
  stkr__req *req_head, **req_tail;

  /* ---- worker-thread-only state ---- */
  stkr__stacktab stacks;
  stkr__segw seg;
  stkr__batchb bb;
  stkr__images imgs;
  uint64_t imgs_gen_sent; /* images.gen last put in a batch */
  /* Inproc symbolization (NULL in the offline and none modes): each stack
   * new to the recording gets its frames here, on this thread only. */
  stkr__symc *symc;
  uint64_t imgs_gen_app;  /* images.gen whose app flags (and symbolizer
                             image list) are set */
  ZSTD_CCtx *cctx;
  stkr_fmt_buf out;
  /* Definitions are re-emitted per "epoch": a fresh epoch starts with each
   * segment file and after any failed batch, so every segment carries the
   * definitions its events use even when an earlier batch was lost. */
  uint32_t epoch;
  bool seg_first;         /* the next batch starts a segment: Header+images */
  uint32_t site_epoch[STKR_MAX_SITES + 1];
  uint64_t batch_seq;
  bool io_error;          /* a batch failed since the last stkr_flush */
  uint64_t other_reported; /* counts.dropped_other in the last Drops */
  uint8_t *thread_seen;   /* bitmap by thread id: counted in stats.threads */
  size_t thread_seen_bytes;

  /* ---- stats: stats_mu protects the worker's counters below; the
   * producers' counters come from stkr__threads_counts() ---- */
  pthread_mutex_t stats_mu;
  uint64_t written, dropped_write_error, dropped_worker; /* ENOMEM */
  uint64_t threads, batches, bytes, segments, segments_deleted, write_errors;
  uint64_t stacks_count;
} stkr__worker;

/* drain.c */
uint32_t stkr__new_epoch(void);
/* Drain every ring into batches and write them. `last`: the shutdown batch
 * (always written, Batch.last set, segment closed). */
void stkr__drain_all(stkr__worker *w, bool last);

/* worker.c; caller holds w->stats_mu. */
void stkr__stats_compute(stkr__worker *w, stkr_stats *out);

#endif /* STKR_FLUSH_WORKER_H */
