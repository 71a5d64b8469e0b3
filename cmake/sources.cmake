# The C sources of every product, per Bazel target: the same lists as the
# BUILD files (Bazel stays the primary build). cmake/check_sources.py,
# run by the `embed` phase of tools/test.sh, fails when a BUILD file and
# this file (or Package.swift) disagree and prints the lines to paste.
# Only .c files are listed; headers are found through the include path.

# //recorder:recorder
set(STKR_RECORDER_SRCS
  recorder/cachedir.c
  recorder/clock.c
  recorder/event.c
  recorder/fork_start.c
  recorder/mark.c
  recorder/pin_image.c
  recorder/ownfd.c
  recorder/platform_apple.c
  recorder/platform_linux.c
  recorder/ring.c
  recorder/ringcache.c
  recorder/ringfile.c
  recorder/ringpool.c
  recorder/sample.c
  recorder/sample_apple.c
  recorder/sample_linux.c
  recorder/session_drops.c
  recorder/site.c
  recorder/strerror.c
  recorder/thread.c
  recorder/unwind_tables.c
  recorder/walk.c
  recorder/watchdog.c
)

# //unwind:unwind
set(STKR_UNWIND_SRCS
  unwind/assemble.c
  unwind/build.c
  unwind/image.c
  unwind/store.c
  unwind/walk.c
)

# //proto:proto (plus the generated proto/stackrec.pb-c.c)
set(STKR_PROTO_SRCS
  proto/stkr_accounting.c
  proto/stkr_batch.c
  proto/stkr_copies.c
  proto/stkr_header.c
  proto/stkr_format.c
  proto/stkr_frames.c
  proto/stkr_extmarks.c
  proto/stkr_marks.c
  proto/stkr_marks_running.c
  proto/stkr_marks_scope.c
  proto/stkr_reader.c
  proto/stkr_reader_links.c
  proto/stkr_readutil.c
  proto/stkr_recover.c
  proto/stkr_recover_cache.c
  proto/stkr_recover_known.c
  proto/stkr_recover_scan.c
  proto/stkr_recover_session.c
  proto/stkr_symbols.c
  proto/stkr_tombstones.c
)

# //flush:core
set(STKR_FLUSH_SRCS
  flush/alone.c
  flush/batch.c
  flush/config.c
  flush/drain.c
  flush/drain_batch.c
  flush/drain_images.c
  flush/drain_pass.c
  flush/fd.c
  flush/images.c
  flush/images_apple.c
  flush/images_linux.c
  flush/lifecycle.c
  flush/log.c
  flush/pmirror.c
  flush/segment.c
  flush/segment_cap.c
  flush/stacktable.c
  flush/stats.c
  flush/timer.c
  flush/wake_apple.c
  flush/wake_linux.c
  flush/wake_target.c
  flush/worker.c
  flush/worker_create.c
)

# //flush:flush_dl (the preload library's: the symbolizer loaded on demand)
set(STKR_FLUSH_DL_SRCS
  flush/sym_dl.c
)

# //symbolize:libstackrec_symbolize.so (the module it loads)
set(STKR_SYMBOLIZE_DL_SRCS
  symbolize/symbolize_dl.c
)

# //symbolize
set(STKR_SYMBOLIZE_SRCS
  symbolize/symbolize.c
  symbolize/symbolize_apple.c
  symbolize/symbolize_dwarf.c
  symbolize/symbolize_dwscope.c
  symbolize/symbolize_elf.c
  symbolize/symbolize_macho.c
  symbolize/symbolize_machodir.c
  symbolize/backtrace_line.c
  symbolize/symcache.c
  symbolize/symcache_build.c
  symbolize/symcache_stream.c
  symbolize/symcache_elf.c
  symbolize/symcache_walk.c
)

# //macho:macho
set(STKR_MACHO_SRCS
  macho/macho.c
)

# //preload:match
set(STKR_PRELOAD_MATCH_SRCS
  preload/match.c
)

# //preload:libstackrec_preload.so
set(STKR_PRELOAD_SRCS
  preload/hooks_dl.c
  preload/exec_escape.c
  preload/hooks_env.c
  preload/hooks_exec.c
  preload/hooks_files.c
  preload/hooks_net.c
  preload/hooks_signal.c
  preload/hooks_stat.c
  preload/hooks_thread.c
  preload/preload.c
  preload/sanitizer.c
  preload/setup_check.c
  preload/sites.c
  preload/start_room.c
  preload/static_deps.c
)

# //tools:stackrec and //tools:stackrec_lib (plus the generated pprof and report assets)
set(STKR_CLI_SRCS
  tools/stackrec/agg.c
  tools/stackrec/agg_framelist.c
  tools/stackrec/agg_learn.c
  tools/stackrec/agg_marks.c
  tools/stackrec/agg_runs.c
  tools/stackrec/agg_stacks.c
  tools/stackrec/atos.c
  tools/stackrec/attrib.c
  tools/stackrec/boots.c
  tools/stackrec/breakdown.c
  tools/stackrec/compliance.c
  tools/stackrec/compliance_cmd.c
  tools/stackrec/compliance_finish.c
  tools/stackrec/compliance_out.c
  tools/stackrec/compliance_rules.c
  tools/stackrec/diff.c
  tools/stackrec/diff_out.c
  tools/stackrec/dump.c
  tools/stackrec/escape.c
  tools/stackrec/export.c
  tools/stackrec/export_chrome.c
  tools/stackrec/export_folded.c
  tools/stackrec/export_jsonl.c
  tools/stackrec/export_pprof.c
  tools/stackrec/filter.c
  tools/stackrec/filter_opts.c
  tools/stackrec/frame_text.c
  tools/stackrec/hangs.c
  tools/stackrec/html.c
  tools/stackrec/info.c
  tools/stackrec/info_json.c
  tools/stackrec/json.c
  tools/stackrec/json_event.c
  tools/stackrec/main.c
  tools/stackrec/mark.c
  tools/stackrec/merge.c
  tools/stackrec/merge_lost.c
  tools/stackrec/merge_pids.c
  tools/stackrec/output_check.c
  tools/stackrec/paytab.c
  tools/stackrec/plist.c
  tools/stackrec/policy.c
  tools/stackrec/privacy_manifest.c
  tools/stackrec/progress.c
  tools/stackrec/push.c
  tools/stackrec/push_args.c
  tools/stackrec/push_http.c
  tools/stackrec/push_native.c
  tools/stackrec/push_rows.c
  tools/stackrec/push_schema.c
  tools/stackrec/rate.c
  tools/stackrec/reasons.c
  tools/stackrec/record.c
  tools/stackrec/record_setup.c
  tools/stackrec/record_signals.c
  tools/stackrec/record_notify.c
  tools/stackrec/record_summary.c
  tools/stackrec/recover.c
  tools/stackrec/report.c
  tools/stackrec/report_tree.c
  tools/stackrec/snapshot.c
  tools/stackrec/snapshot_apple.c
  tools/stackrec/snapshot_images.c
  tools/stackrec/snapshot_linux.c
  tools/stackrec/snapshot_signals.c
  tools/stackrec/symcache_dir.c
  tools/stackrec/snapshot_unwind.c
  tools/stackrec/snapshot_write.c
  tools/stackrec/states.c
  tools/stackrec/inherit.c
  tools/stackrec/strtab.c
  tools/stackrec/symbolize.c
  tools/stackrec/symbolize_canon.c
  tools/stackrec/symbolize_cmd.c
  tools/stackrec/symbolize_mixed.c
  tools/stackrec/symcache.c
  tools/stackrec/timeline.c
  tools/stackrec/verify.c
  tools/stackrec/zst_out.c
)
