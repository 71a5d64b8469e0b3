// Stackrec: the Swift face of stackrec's recorder (recorder/stackrec.h).
//
//   try Stackrec.start(directory: cachesURL.appendingPathComponent("stackrec").path)
//   Stackrec.event("privacy.location.get", payload: "accuracy=coarse")
//   try Stackrec.flush()     // everything so far is on disk
//   try Stackrec.stop()
//
// The recorder is process-wide, as in C: one start/stop pair, called from
// one controlling thread (or task); events come from any thread or task.
// Errors are the C API's negative errno values (StackrecError.code), with
// stkr_strerror's text as the description.
//
// Hook sites. `Stackrec.event(_:payload:)` finds the site for its name in
// a table under a lock (one lookup per event; the first use of a name
// allocates its site, which lives as long as the process, as the C API
// requires). On a hot path, make a `Stackrec.Site` once and call its
// `event(payload:)`: no lock, no allocation (a payload String may still be
// copied to make it contiguous UTF-8).
//
// Stacks. Stackrec's own frame is never recorded: event(_:payload:),
// Site.event(payload:) and mark(_:payload:) call the recorder from their
// own frame (never inlined, no closure in between) and have it skip that
// one frame (stkr_event_skip), so the first PC is their caller's and
// Options.skipFrames counts the app's wrapper frames alone, as it does for
// a hook written in C (QA, session 30: 2 to 5 frames of ours came first,
// their number varying with the build and the payload, and `stackrec
// compliance` blamed the app, not the SDK that made the call). In Swift async code the recorder follows the task's
// async context chain (README, "Swift concurrency"): build with
// `-Xfrontend -swift-async-frame-pointer=always` to get the awaiting callers.
//
// Marks. `Stackrec.mark("consent.granted")` records a mark (a state change
// such as consent.granted/revoked, app.background/foreground, screen.X) that
// `stackrec compliance`, the timeline and every view read (README, "Marks
// and states"): stkr_mark_site() then stkr_event(), as the C inline
// stkr_mark() does.
import CStackrec

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed stackrec call: `code` is the negative errno the C API returned.
public struct StackrecError: Error, Equatable, CustomStringConvertible {
  public let code: Int32
  public init(code: Int32) { self.code = code }
  public var description: String { String(cString: stkr_strerror(code)) }
}

public enum Stackrec {
  /// How recorded stacks get function names (stkr_symbolize_mode).
  public enum Symbolize {
    case inProcess, offline, none
    var c: stkr_symbolize_mode {
      switch self {
      case .inProcess: return STKR_SYMBOLIZE_INPROC
      case .offline: return STKR_SYMBOLIZE_OFFLINE
      case .none: return STKR_SYMBOLIZE_NONE
      }
    }
  }

  /// Settings of `start`; nil (or 0) takes the recorder's default, after
  /// the STACKREC_* environment (see stkr_config in stackrec.h).
  public struct Options {
    public var maxDepth: UInt32 = 0
    public var skipFrames: UInt32 = 0
    public var ringBytes: Int = 0
    public var flushIntervalMs: UInt32 = 0
    public var payloadMax: UInt32 = 0
    public var diskCapBytes: UInt64 = 0
    /// What the worker's table of distinct stacks may hold (64 KiB to
    /// 1 GiB; 0: 8 MiB): past it the table is renewed, never an event lost.
    public var stackTableBytes: UInt64 = 0
    public var symbolize: Symbolize? = nil
    public init() {}
  }

  /// The library's version ("0.3.0"), stkr_version_string().
  public static var version: String { String(cString: stkr_version_string()) }

  /// Start recording into `directory` (created 0700 if missing).
  /// Throws StackrecError (-EALREADY when already recording, -EINVAL for a
  /// bad setting, the errno of a directory that cannot be created or used).
  public static func start(directory: String, options: Options = Options()) throws {
    var cfg = stkr_config()
    stkr_config_init(&cfg)  // declares this caller's layout (cfg.size)
    cfg.max_depth = options.maxDepth
    cfg.skip_frames = options.skipFrames
    cfg.ring_bytes = options.ringBytes
    cfg.flush_interval_ms = options.flushIntervalMs
    cfg.payload_max = options.payloadMax
    cfg.disk_cap_bytes = options.diskCapBytes
    cfg.stack_table_bytes = options.stackTableBytes
    if let s = options.symbolize { cfg.symbolize = s.c }
    // stkr_init copies dir before it returns.
    let err = directory.withCString { dir -> Int32 in
      cfg.dir = dir
      return stkr_init(&cfg)
    }
    try check(err)
  }

  /// Record one event at the site named `name` (e.g. "privacy.location.get")
  /// with an optional payload (cut at payload_max). Never throws: an event
  /// is recorded, or dropped and counted. @return false if not recorded
  /// (not recording, ring full, ...). The stack starts at the caller;
  /// `skip` leaves out that many more of the app's own frames, beyond
  /// Options.skipFrames (a hook reached through thunks of its own).
  @inline(never) @discardableResult
  public static func event(_ name: StaticString, payload: String? = nil,
                           skip: UInt32 = 0) -> Bool {
    let site = SiteTable.shared.site(name)
    return emit(site, payload, skip)
  }

  /// Record mark `name` (1 to 64 bytes of [A-Za-z0-9._-]) with an optional
  /// payload, with the caller's stack. Throws StackrecError for an invalid
  /// name (-EINVAL) or past STKR_MAX_MARKS names (-ENOSPC); @return false
  /// if not recorded (not recording, ring full: dropped and counted).
  @inline(never) @discardableResult
  public static func mark(_ name: String, payload: String? = nil) throws -> Bool {
    var site: UnsafeMutablePointer<stkr_site>? = nil
    try check(stkr_mark_site(name, &site))
    guard let s = site else { return false }
    return emit(s, payload, 0)
  }

  /// Barrier: returns once every event recorded before it is on disk.
  public static func flush() throws { try check(stkr_flush()) }

  /// flush(), waiting at most `milliseconds` (stkr_flush_timeout): before
  /// the app is suspended, or before dlclose of a library whose frames its
  /// threads just recorded. Throws ETIMEDOUT past the deadline (the events
  /// are still written, later).
  public static func flush(timeoutMilliseconds milliseconds: UInt32) throws {
    try check(stkr_flush_timeout(milliseconds))
  }

  /// Stop recording: drain, write and close everything (stkr_shutdown).
  /// Throws EIO when the last batch could not be written (a full disk):
  /// recording has stopped all the same, and stkr_shutdown's header says
  /// where that batch's events are; calling stop() again throws ENOTCONN.
  /// Throws -ENOTCONN when not recording.
  public static func stop() throws { try check(stkr_shutdown()) }

  /// The recorder's counters since start (stkr_stats).
  public static func stats() -> stkr_stats {
    var st = stkr_stats()
    _ = stkr_stats_get(&st)
    return st
  }

  /// A hook site made once and recorded from anywhere: no lookup per event.
  /// Sites are never freed (the recorder keeps a pointer for the life of
  /// the process), so make them once (a `static let`), not per call.
  public final class Site: @unchecked Sendable {
    let raw: UnsafeMutablePointer<stkr_site>
    public init(_ name: StaticString) { raw = makeSite(name) }
    /// As `Stackrec.event`, for this site.
    @discardableResult
    @inline(never)
    public func event(payload: String? = nil, skip: UInt32 = 0) -> Bool {
      emit(raw, payload, skip)
    }
  }

  private static func check(_ err: Int32) throws {
    if err != 0 { throw StackrecError(code: err) }
  }
}

/// The recorder called from the frame this is inlined into (always, also
/// at -Onone: @_transparent, where @inline(__always) leaves a frame of its
/// own), leaving that frame and `skip` more out. The payload goes as a C
/// string of its UTF-8 (an implicit conversion made in that frame, no
/// closure: every closure was a frame of ours on top of the stack, their
/// number varying with the build).
@_transparent
private func emit(_ site: UnsafeMutablePointer<stkr_site>, _ payload: String?,
                  _ skip: UInt32) -> Bool {
  let extra = 1 &+ min(skip, UInt32(STKR_MAX_DEPTH))
  guard let p = payload else { return stkr_event_skip(site, nil, 0, extra) == 0 }
  return stkr_event_skip(site, p, p.utf8.count, extra) == 0
}

/// A site for `name`, allocated for the life of the process: the recorder
/// keeps pointers to the site and its name (a NUL-terminated copy, so any
/// StaticString representation works).
private func makeSite(_ name: StaticString) -> UnsafeMutablePointer<stkr_site> {
  let bytes = name.withUTF8Buffer { Array($0) }
  let cname = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
  for (i, b) in bytes.enumerated() { cname[i] = CChar(bitPattern: b) }
  cname[bytes.count] = 0
  let site = UnsafeMutablePointer<stkr_site>.allocate(capacity: 1)
  site.initialize(to: stkr_site(name: UnsafePointer(cname), id: 0))
  return site
}

/// Name -> site for Stackrec.event(_:payload:), keyed by the literal's
/// address (no allocation per event): each literal is a site, as each
/// STKR_EVENT is in C. The lock is held for a dictionary lookup only.
private final class SiteTable: @unchecked Sendable {
  static let shared = SiteTable()
  private var sites: [UInt: UnsafeMutablePointer<stkr_site>] = [:]
  private let mutex: UnsafeMutablePointer<pthread_mutex_t> = {
    let m = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    m.initialize(to: pthread_mutex_t())
    pthread_mutex_init(m, nil)
    return m
  }()

  func site(_ name: StaticString) -> UnsafeMutablePointer<stkr_site> {
    // A one-scalar StaticString has no address; its scalar (< 2^21) can
    // never equal a pointer.
    let key = name.hasPointerRepresentation
      ? UInt(bitPattern: name.utf8Start) : UInt(name.unicodeScalar.value)
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    if let s = sites[key] { return s }
    let s = makeSite(name)
    sites[key] = s
    return s
  }
}
