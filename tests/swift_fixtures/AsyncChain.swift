// AsyncChain.swift: suspending async functions four levels deep, each
// awaiting Task.yield() between levels, so that every level after the
// first runs as a resumed partial function with only the executor below it
// on the thread's stack. The innermost level calls getenv("HOME") (watched
// by the LD_PRELOAD hooks) and, when built with -DEMBEDDED, stkr_event()
// through the recorder's C API. tests/test-swift-async.sh builds and runs
// it (swiftc -Xfrontend -swift-async-frame-pointer=always).
#if canImport(Glibc)
import Glibc
#endif
#if EMBEDDED
import StackrecC
#endif

@inline(never) func asyncLeaf(_ i: Int) async -> Int {
  await Task.yield()
  let home = getenv("HOME")
#if EMBEDDED
  stkr_swift_event(Int32(i))
#endif
  await Task.yield()
  return home == nil ? i : i + 1
}

@inline(never) func asyncLevel3(_ i: Int) async -> Int {
  await Task.yield()
  let r = await asyncLeaf(i)
  await Task.yield()
  return r + 3
}

@inline(never) func asyncLevel2(_ i: Int) async -> Int {
  await Task.yield()
  let r = await asyncLevel3(i)
  await Task.yield()
  return r + 2
}

@inline(never) func asyncLevel1(_ i: Int) async -> Int {
  await Task.yield()
  let r = await asyncLevel2(i)
  await Task.yield()
  return r + 1
}

// A closure calling getenv("USER"): swiftc nests its DWARF subprogram in
// its parent's, and it had no file:line from DWARF (QA, session 27).
@inline(never) func viaClosure() -> Int {
  let f: () -> Int = { getenv("USER") == nil ? 0 : 1 }
  return f()
}

@main struct AsyncChain {
  static func main() async {
    var n = 200
    if CommandLine.arguments.count > 1, let v = Int(CommandLine.arguments[1]) {
      n = v
    }
    var sum = 0
    for i in 0..<n {
      sum &+= await asyncLevel1(i)
    }
    sum &+= viaClosure()
#if EMBEDDED
    stkr_swift_done()
#endif
    print("sum \(sum)")
  }
}
