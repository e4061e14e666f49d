// Preloaded into a spawned `reprise` (NODE_OPTIONS=--import=…) to hold a tool at a known point: every `fs.open` of a
// path inside REPRISE_TEST_STALL_OPEN never calls back, as if the file system stopped answering (without holding a
// worker thread), and the first one writes "reprise-test: open stalled" to stderr so the test can act on it.
import fs from "node:fs"
import { syncBuiltinESMExports } from "node:module"
import * as path from "node:path"

const dir = process.env.REPRISE_TEST_STALL_OPEN
if (dir !== undefined && dir !== "") {
  const inside = (file) => typeof file === "string" && !path.relative(dir, file).startsWith("..")
  const open = fs.open
  let told = false
  fs.open = function(file, ...rest) {
    if (!inside(file)) return open.call(this, file, ...rest)
    if (!told) {
      told = true
      process.stderr.write("reprise-test: open stalled\n")
    }
  }
  syncBuiltinESMExports()
}
