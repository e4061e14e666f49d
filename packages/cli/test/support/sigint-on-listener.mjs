// Preloaded into a spawned `reprise` (NODE_OPTIONS=--import=…) to send it a SIGINT at a known point of its start,
// not after a guessed delay. REPRISE_TEST_SIGINT_AT:
// - "load": while the bundle's first chunk is being loaded (a module loader hook sends it), before any of
//   reprise's own modules ran: only bin/reprise.js's start-up handler can answer it;
// - "runtime": right after the Effect runtime installed its own SIGINT listener, before the command's first await.
import { register } from "node:module"

const at = process.env.REPRISE_TEST_SIGINT_AT
if (at === "load") {
  register("./sigint-on-load-hooks.mjs", import.meta.url)
} else if (at === "runtime") {
  process.on("newListener", (event, listener) => {
    if (event === "SIGINT" && listener !== globalThis[Symbol.for("@reprise/cli/startupSigint")]) {
      setImmediate(() => process.kill(process.pid, "SIGINT"))
    }
  })
}
