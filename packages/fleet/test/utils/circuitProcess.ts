/**
 * A process of a fleet, for the suite that runs two of them:
 * `node --import tsx circuitProcess.ts URL NAME THRESHOLD COOLDOWN_MS` joins the fleet with `RedisFleet.makeCircuit`, then reads one operation a line on stdin (`admit KEY`,
 * `failed KEY`, `succeeded KEY`, `state KEY`; the key is the rest of the line) and writes one JSON line a result on
 * stdout (`{"op":"admit","tag":"Open","retryIn":123}`, `{"op":"failed","state":"open"}`, …). It exits when stdin ends.
 */
import { Duration, Effect, Exit, Scope } from "effect"
import * as Readline from "node:readline"
import * as RedisFleet from "../../src/RedisFleet.js"

const [url, name, threshold, coolDown] = process.argv.slice(2)

const program = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const circuit = yield* Scope.extend(
    RedisFleet.makeCircuit({
      url: url!,
      name: name!,
      circuit: { failureThreshold: Number(threshold), coolDown: Duration.millis(Number(coolDown)) }
    }),
    scope
  )
  const answer = (line: string): Effect.Effect<unknown> => {
    const space = line.indexOf(" ")
    const op = line.slice(0, space)
    const key = line.slice(space + 1)
    switch (op) {
      case "admit":
        return Effect.map(
          circuit.admit(key),
          (a) => a._tag === "Open" ? { op, tag: a._tag, retryIn: Duration.toMillis(a.retryIn) } : { op, tag: a._tag }
        )
      case "failed":
        return Effect.map(circuit.failed(key), (state) => ({ op, state }))
      case "succeeded":
        return Effect.as(circuit.succeeded(key), { op })
      case "state":
        return Effect.map(circuit.state(key), (state) => ({ op, state }))
      default:
        return Effect.succeed({ op, error: "unknown operation" })
    }
  }
  process.stdout.write(JSON.stringify({ op: "ready" }) + "\n")
  const lines = Readline.createInterface({ input: process.stdin })
  // one operation at a time, in order
  let queue = Promise.resolve()
  lines.on("line", (line) => {
    queue = queue.then(() =>
      Effect.runPromise(answer(line)).then((result) => {
        process.stdout.write(JSON.stringify(result) + "\n")
      })
    )
  })
  lines.on("close", () => {
    queue.then(() => Effect.runPromise(Scope.close(scope, Exit.void))).then(() => process.exit(0))
  })
})

Effect.runPromise(program)
