// AsyncSpin.swift: a resumed async function that spins for good, so that
// a snapshot of the process finds a thread inside its async frame
// (tests/test-swift-async.sh, part c: `stackrec snapshot` ends the walk
// there, never "truncated"). No Foundation: the toolchain's stdlib only.
@inline(never) func spinInner(_ n: Int) async -> Int {
  await Task.yield()
  var x = 0
  while true {
    x &+= n
    if x == -1 { break }
  }
  return x
}

@inline(never) func spinOuter(_ n: Int) async -> Int {
  await Task.yield()
  return await spinInner(n)
}

@main struct AsyncSpin {
  static func main() async {
    print(await spinOuter(3))
  }
}
