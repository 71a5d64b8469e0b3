// The Swift package, end to end (issue 17): record from async code through
// the `Stackrec` module, read the recording back through the C reader API
// (proto/stkr_reader.h), and check that every event arrived with its site
// and payload and that the recorder's accounting adds up.
import CStackrec
import Foundation
import XCTest

@testable import Stackrec

final class StackrecTests: XCTestCase {
  static let location = Stackrec.Site("privacy.location.get")

  private func tempDir() throws -> String {
    let url = FileManager.default.temporaryDirectory
      .appendingPathComponent("stackrec-swift-\(getpid())-\(UUID().uuidString)")
    addTeardownBlock { try? FileManager.default.removeItem(at: url) }
    return url.appendingPathComponent("rec").path
  }

  /// What the reader gives back: events per site, payloads per site, and
  /// the first process's summary.
  private struct ReadBack {
    var perSite: [String: Int] = [:]
    var payloads: [String: Set<String>] = [:]
    var withStack = 0
    var events = 0
    var marks: [String] = []
    var processes = 0
    var cleanEnd = false
    var incomplete = true
    var warnings = 0
  }

  private func readBack(_ dir: String) throws -> ReadBack {
    var r: OpaquePointer? = nil
    var out = ReadBack()
    let err = stkr_reader_open(dir, nil, &r)
    XCTAssertEqual(err, 0, "stkr_reader_open(\(dir)): \(StackrecError(code: err))")
    guard err == 0, let reader = r else { throw StackrecError(code: err) }
    defer { stkr_reader_free(reader) }
    var ev = stkr_event_view()
    while true {
      let rc = stkr_reader_next(reader, &ev)
      XCTAssertGreaterThanOrEqual(rc, 0, "stkr_reader_next: \(StackrecError(code: rc))")
      if rc <= 0 { break }
      let site = String(cString: ev.site)
      if ev.is_mark {
        out.marks.append(site)
        continue
      }
      out.events += 1
      out.perSite[site, default: 0] += 1
      if ev.n_pcs > 0 { out.withStack += 1 }
      if let p = ev.payload {
        let text = String(decoding: UnsafeBufferPointer(start: p, count: ev.payload_len),
                          as: UTF8.self)
        out.payloads[site, default: []].insert(text)
      }
    }
    out.processes = stkr_reader_process_count(reader)
    if let info = stkr_reader_process(reader, 0) {
      out.cleanEnd = info.pointee.clean_end
      out.incomplete = info.pointee.incomplete
    }
    var counts = stkr_reader_counts()
    stkr_reader_get_counts(reader, &counts)
    out.warnings = Int(counts.warnings)
    return out
  }

  func testVersionMatchesHeader() {
    XCTAssertEqual(Stackrec.version, STKR_VERSION_STRING)
    // STKR_VERSION_NUMBER is an expression macro, which Swift cannot import.
    let header = (STKR_VERSION_MAJOR << 16) | (STKR_VERSION_MINOR << 8) | STKR_VERSION_PATCH
    XCTAssertEqual(stkr_version(), UInt32(header))
  }

  /// 4 tasks x 50 suspensions, each resumed wherever the executor likes,
  /// recording through both entry points; then 200 + 200 events read back.
  func testAsyncEventsReadBack() async throws {
    let dir = try tempDir()
    var opts = Stackrec.Options()
    opts.symbolize = .offline  // PCs only: this test reads sites, payloads
    try Stackrec.start(directory: dir, options: opts)
    XCTAssertTrue(try Stackrec.mark("consent.granted", payload: "v=2"))
    XCTAssertThrowsError(try Stackrec.mark("not a valid name")) { e in
      XCTAssertEqual(e as? StackrecError, StackrecError(code: -EINVAL))
    }
    let tasks = 4, perTask = 50
    let recorded = await withTaskGroup(of: Int.self) { group -> Int in
      for t in 0..<tasks {
        group.addTask {
          var ok = 0
          for i in 0..<perTask {
            await Task.yield()
            if Stackrec.event("privacy.contacts.read", payload: "task=\(t) i=\(i)") { ok += 1 }
            if StackrecTests.location.event(payload: "coarse") { ok += 1 }
          }
          return ok
        }
      }
      return await group.reduce(0, +)
    }
    try Stackrec.flush()
    let st = Stackrec.stats()
    try Stackrec.stop()
    XCTAssertEqual(recorded, 2 * tasks * perTask)
    XCTAssertEqual(st.attempted, UInt64(2 * tasks * perTask + 1))  // + the mark
    XCTAssertEqual(st.written, st.attempted)
    XCTAssertEqual(st.dropped, 0)

    let rb = try readBack(dir)
    XCTAssertEqual(rb.processes, 1)
    XCTAssertEqual(rb.marks, ["consent.granted"])
    XCTAssertEqual(rb.events, 2 * tasks * perTask)
    XCTAssertEqual(rb.perSite["privacy.contacts.read"], tasks * perTask)
    XCTAssertEqual(rb.perSite["privacy.location.get"], tasks * perTask)
    XCTAssertEqual(rb.payloads["privacy.contacts.read"]?.count, tasks * perTask,
                   "every task=T i=I payload once")
    XCTAssertEqual(rb.payloads["privacy.location.get"], ["coarse"])
    XCTAssertEqual(rb.withStack, rb.events, "every event has a stack")
    XCTAssertTrue(rb.cleanEnd)
    XCTAssertFalse(rb.incomplete)
    XCTAssertEqual(rb.warnings, 0)
  }

  /// The first frame of a stack is the caller of Stackrec's function (it
  /// leaves its own out, stkr_event_skip), and `skip` leaves out more of
  /// the app's; before, 2 to 5 frames of Stackrec's came first (QA,
  /// session 30: `stackrec compliance` blamed the app for an SDK's call).
  func testStackStartsAtTheCaller() throws {
    let dir = try tempDir()
    var opts = Stackrec.Options()
    opts.symbolize = .inProcess  // frames named as the app's DWARF says
    try Stackrec.start(directory: dir, options: opts)
    StackrecTests.hookOuter()
    try Stackrec.flush()
    try Stackrec.stop()
    var r: OpaquePointer? = nil
    XCTAssertEqual(stkr_reader_open(dir, nil, &r), 0)
    guard let reader = r else { return }
    defer { stkr_reader_free(reader) }
    var ev = stkr_event_view()
    var names: [String: [String]] = [:]
    while stkr_reader_next(reader, &ev) == 1 {
      names[String(cString: ev.site)] = (0..<Int(ev.n_frames)).map {
        ev.frames[$0].function.map { String(cString: $0) } ?? "?"
      }
    }
    for site in ["test.event", "test.site", "test.mark"] {
      XCTAssertTrue(names[site]?.first?.contains("hookInner") ?? false,
                    "\(site): first frame \(names[site]?.first ?? "none")")
    }
    // skip 1: the same callers, hookInner's own frame left out (a release
    // build may call it through a thunk of the same name: compared whole).
    XCTAssertEqual(names["test.skip"], names["test.event"].map { Array($0.dropFirst()) })
  }

  static let testSite = Stackrec.Site("test.site")

  @inline(never) static func hookOuter() {
    hookInner()
    blackHole()
  }

  @inline(never) static func hookInner() {
    Stackrec.event("test.event", payload: "p")
    testSite.event()
    _ = try? Stackrec.mark("test.mark")
    Stackrec.event("test.skip", skip: 1)
    blackHole()
  }

  @inline(never) static func blackHole() {}

  /// Errors come back as the C API's errno values, with its text.
  func testErrors() throws {
    XCTAssertThrowsError(try Stackrec.stop()) { e in
      XCTAssertEqual(e as? StackrecError, StackrecError(code: -ENOTCONN))
    }
    XCTAssertFalse(Stackrec.event("privacy.never.recorded"))
    let dir = try tempDir()
    try Stackrec.start(directory: dir)
    XCTAssertThrowsError(try Stackrec.start(directory: dir)) { e in
      XCTAssertEqual(e as? StackrecError, StackrecError(code: -EALREADY))
      XCTAssertTrue("\(e)".hasPrefix("already recording ("), "\(e)")
    }
    try Stackrec.stop()
    var bad = Stackrec.Options()
    bad.maxDepth = UInt32(STKR_MAX_DEPTH) + 1
    XCTAssertThrowsError(try Stackrec.start(directory: dir, options: bad)) { e in
      XCTAssertEqual(e as? StackrecError, StackrecError(code: -EINVAL))
    }
  }
}
