// swift-tools-version:5.9
//
// stackrec as a Swift package (issue 17): the recorder and the reader as a
// C target built from the repository's own sources, and a small Swift API,
// `Stackrec` (swift/Sources/Stackrec). Bazel stays the primary build.
//
//   swift build && swift test          (Linux: tested here)
//   .package(url: "<this repository>", from: "0.3.0") in an app
//
// Dependencies. Linux: zstd, protobuf-c and elfutils' libdw/libelf from the
// system, found through pkg-config (Debian: libzstd-dev libprotobuf-c-dev
// libdw-dev). Apple: zstd and protobuf-c as the same system-library
// targets work for macOS with Homebrew; an iOS app needs them built for
// iphoneos/iphonesimulator (docs/ios.md: an XCFramework script, or the
// podspec) and libdw is not used there.
//
// Generated code: SwiftPM cannot run protoc-c, so proto/stackrec.proto's
// output is checked in under swift/generated/proto/ (swift/generate.sh
// writes it; the `embed` phase of tools/test.sh fails when it is stale).
//
// Sources: the list below is //:stackrec's (recorder, proto, flush,
// symbolize, macho); cmake/check_sources.py compares it with the BUILD
// files, so keep the markers.
import PackageDescription

let package = Package(
  name: "Stackrec",
  platforms: [.iOS(.v15), .macOS(.v11)],
  products: [
    .library(name: "Stackrec", targets: ["Stackrec"]),
    .library(name: "CStackrec", targets: ["CStackrec"]),
  ],
  targets: [
    .systemLibrary(
      name: "CZstd", path: "swift/system/CZstd", pkgConfig: "libzstd",
      providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]),
    .systemLibrary(
      name: "CProtobufC", path: "swift/system/CProtobufC",
      pkgConfig: "libprotobuf-c",
      providers: [.apt(["libprotobuf-c-dev"]), .brew(["protobuf-c"])]),
    .systemLibrary(
      name: "CLibdw", path: "swift/system/CLibdw", pkgConfig: "libdw",
      providers: [.apt(["libdw-dev", "libelf-dev"])]),
    .target(
      name: "CStackrec",
      dependencies: [
        "CZstd", "CProtobufC",
        .target(name: "CLibdw", condition: .when(platforms: [.linux])),
      ],
      path: ".",
      sources: [
        // BEGIN sources (cmake/check_sources.py compares these with BUILD)
        "recorder/event.c",
        "recorder/fork_start.c",
        "recorder/platform_apple.c",
        "recorder/platform_linux.c",
        "recorder/ring.c",
        "recorder/cachedir.c",
        "recorder/ringcache.c",
        "recorder/ringfile.c",
        "recorder/ringpool.c",
        "recorder/session_drops.c",
        "recorder/site.c",
        "recorder/strerror.c",
        "recorder/thread.c",
        "recorder/walk.c",
        "recorder/sample.c",
        "recorder/sample_apple.c",
        "recorder/sample_linux.c",
        "recorder/watchdog.c",
        "recorder/mark.c",
        "recorder/pin_image.c",
        "recorder/ownfd.c",
        "recorder/clock.c",
        "recorder/unwind_tables.c",
        "unwind/assemble.c",
        "unwind/build.c",
        "unwind/image.c",
        "unwind/store.c",
        "unwind/walk.c",
        "proto/stkr_accounting.c",
        "proto/stkr_batch.c",
        "proto/stkr_copies.c",
        "proto/stkr_extmarks.c",
        "proto/stkr_header.c",
        "proto/stkr_format.c",
        "proto/stkr_frames.c",
        "proto/stkr_reader.c",
        "proto/stkr_reader_links.c",
        "proto/stkr_readutil.c",
        "proto/stkr_recover.c",
        "proto/stkr_recover_cache.c",
        "proto/stkr_recover_session.c",
        "proto/stkr_symbols.c",
        "proto/stkr_tombstones.c",
        "proto/stkr_marks.c",
        "proto/stkr_marks_running.c",
        "proto/stkr_marks_scope.c",
        "proto/stkr_recover_known.c",
        "proto/stkr_recover_scan.c",
        "flush/alone.c",
        "flush/batch.c",
        "flush/config.c",
        "flush/drain.c",
        "flush/drain_batch.c",
        "flush/drain_images.c",
        "flush/drain_pass.c",
        "flush/fd.c",
        "flush/images.c",
        "flush/images_apple.c",
        "flush/images_linux.c",
        "flush/lifecycle.c",
        "flush/log.c",
        "flush/pmirror.c",
        "flush/segment.c",
        "flush/segment_cap.c",
        "flush/stacktable.c",
        "flush/stats.c",
        "flush/timer.c",
        "flush/wake_apple.c",
        "flush/wake_linux.c",
        "flush/wake_target.c",
        "flush/worker.c",
        "flush/worker_create.c",
        "symbolize/backtrace_line.c",
        "symbolize/symcache.c",
        "symbolize/symcache_build.c",
        "symbolize/symcache_stream.c",
        "symbolize/symcache_elf.c",
        "symbolize/symcache_walk.c",
        "symbolize/symbolize.c",
        "symbolize/symbolize_apple.c",
        "symbolize/symbolize_dwarf.c",
        "symbolize/symbolize_dwscope.c",
        "symbolize/symbolize_elf.c",
        "symbolize/symbolize_macho.c",
        "symbolize/symbolize_machodir.c",
        "macho/macho.c",
        // END sources
        "swift/generated/proto/stackrec.pb-c.c",
      ],
      publicHeadersPath: "swift/CStackrec/include",
      cSettings: [
        // Sources include "recorder/...", "proto/stackrec.pb-c.h", ...
        .headerSearchPath("."),
        .headerSearchPath("swift/generated"),
        // No -fno-omit-frame-pointer (recorder/BUILD's copts): the walk
        // starts at stkr_event's own frame record, which the compiler keeps
        // whatever the flags (stkr_event takes __builtin_frame_address(0)),
        // and no other function of this target is on an app's stack
        // (stkr_mark is inline). An unsafeFlags setting, even one for
        // Linux only, made SwiftPM refuse the package as a dependency
        // pinned by version, on every platform (QA, session 30).
      ],
      linkerSettings: [
        .linkedLibrary("dl", .when(platforms: [.linux])),
        .linkedLibrary("pthread", .when(platforms: [.linux])),
        // symbolize/symbolize_apple.c: objc_msgSend, and _NSCallStackArray
        // from Foundation (looked up at run time).
        .linkedLibrary("objc", .when(platforms: [.macOS, .iOS])),
        .linkedFramework("Foundation", .when(platforms: [.macOS, .iOS])),
      ]),
    .target(
      name: "Stackrec", dependencies: ["CStackrec"],
      path: "swift/Sources/Stackrec"),
    .testTarget(
      name: "StackrecTests", dependencies: ["Stackrec", "CStackrec"],
      path: "swift/Tests/StackrecTests"),
  ]
)
