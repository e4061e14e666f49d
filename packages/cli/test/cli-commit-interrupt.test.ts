/**
 * SIGINT while the final commit is being written: the commit (its append to the session and its rendering) is one
 * uninterruptible step, and once it is done the turn has committed, so `reprise chat` ends as committed (exit 0),
 * not as interrupted. `Cli.program` in process (composed as `bin` composes it), against the loopback simulator over the real undici client, with an
 * Output whose stdout write of the answer blocks until the test lets it go: the interruption arrives mid-commit.
 */
import { NodeContext } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { ConfigProvider, Deferred, Duration, Effect, Fiber, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Cli from "../src/Cli.js"
import * as Output from "../src/Output.js"

/** stdout blocks on the answer until `release`; `writing` is done when it has started. */
const blockingOutput = Effect.gen(function*() {
  const writing = yield* Deferred.make<void>()
  const release = yield* Deferred.make<void>()
  const out: Array<string> = []
  const service: Output.Service = {
    stdout: (text) =>
      text.includes("the answer")
        ? Effect.zipRight(
          Deferred.succeed(writing, undefined),
          Effect.zipRight(Deferred.await(release), Effect.sync(() => void out.push(text)))
        )
        : Effect.sync(() => void out.push(text)),
    stderr: () => Effect.void,
    isTTY: false
  }
  return { writing, release, out, layer: Layer.succeed(Output.Output, service) }
})

const interruptDuringCommit = () =>
  Effect.gen(function*() {
    const sim = yield* Simulator.Simulator
    yield* sim.setScript({
      routes: {
        "openai-chat": {
          steps: [{ kind: "stream", reply: { text: "the answer" } }]
        }
      }
    })
    const session = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "reprise-commit-")), "s.jsonl")
    const output = yield* blockingOutput
    const argv = ["node", "reprise", "chat", "--base-url", sim.baseUrl("openai-chat"), "--model", "m"]
    // composed as bin.ts composes it: Cli.program's main with its layers, its exit code from Cli.program
    const program = Cli.program([...argv, "--session", session, "what is it?"])
    const fiber = yield* program.main.pipe(
      Effect.provide(Layer.mergeAll(output.layer, NodeContext.layer)),
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["OPENAI_API_KEY", "sk-test-commit"]]))),
      Effect.fork
    )
    yield* Deferred.await(output.writing)
    // SIGINT: the runtime interrupts the command's fiber; let the interruption be delivered while it is blocked
    yield* Fiber.interruptFork(fiber)
    for (let i = 0; i < 5; i++) yield* Effect.yieldNow()
    yield* Deferred.succeed(output.release, undefined)
    const exit = yield* Fiber.await(fiber)
    return { code: program.exitCode(exit), output, session }
  })

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(30) })(
  "SIGINT during the commit",
  (it) => {
    it.effect("the final commit completes (session and stdout), and the command succeeds: exit 0, not 130", () =>
      Effect.gen(function*() {
        const { code, output, session } = yield* interruptDuringCommit()
        assert.strictEqual(code, 0)
        assert.strictEqual(output.out.join(""), "the answer\n")
        const lines = fs.readFileSync(session, "utf8").trim().split("\n").map((l) => JSON.parse(l))
        assert.deepStrictEqual(lines.map((m) => m.role), ["user", "assistant"])
      }))

    it.effect("an interruption before the commit is exit 130 with nothing committed", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* sim.setScript({
          routes: { "openai-chat": { steps: [{ kind: "stall", afterEvents: 2, durationMs: 20_000 }] } }
        })
        const session = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "reprise-commit-")), "s.jsonl")
        const output = yield* blockingOutput
        const argv = ["node", "reprise", "chat", "--base-url", sim.baseUrl("openai-chat"), "--model", "m"]
        const program = Cli.program([...argv, "--session", session, "what is it?"])
        const fiber = yield* program.main.pipe(
          Effect.provide(Layer.mergeAll(output.layer, NodeContext.layer)),
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["OPENAI_API_KEY", "sk-test-commit"]]))),
          Effect.fork
        )
        // the stream has started and stalls: wait for the server to have seen the request
        const requests = sim.count("openai-chat")
        while ((yield* requests) === 0) yield* Effect.sleep("5 millis")
        const exit = yield* Fiber.interrupt(fiber)
        assert.strictEqual(program.exitCode(exit), 130)
        assert.strictEqual(fs.readFileSync(session, "utf8"), "")
        assert.deepStrictEqual(output.out, [])
      }))
  }
)
