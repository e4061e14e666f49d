// Holds the lock of the session file named by argv[2] (the CLI's own SessionLock, from the build) until stdin
// ends, printing "held <pid>" once it holds it. A stand-in for another reprise in a long turn.
import { Effect } from "effect"
import * as SessionLock from "../../dist/SessionLock.js"

const program = Effect.scoped(Effect.gen(function*() {
  yield* SessionLock.acquire(process.argv[2], { wait: false, command: "test holder" })
  process.stdout.write(`held ${process.pid}\n`)
  yield* Effect.async((resume) => {
    process.stdin.resume()
    process.stdin.on("end", () => resume(Effect.void))
  })
}))

Effect.runPromise(program).then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error}\n`)
    process.exit(1)
  }
)
