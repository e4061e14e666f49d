/**
 * Routes as properties: for any faults over any number of routes, the sends of all routes stay within the budget, no
 * attempt, wait or switch crosses the deadline, a reply never goes back to a route it left, the committed text is the
 * text of one send on one route (the route the reply names), and a tool runs at most once, only from a committed
 * reply.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, FastCheck as fc, Fiber, Layer, Option, Ref, Schema, Stream, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as Chat from "../src/Chat.js"
import * as Circuit from "../src/Circuit.js"
import * as Generation from "../src/Generation.js"
import * as Message from "../src/Message.js"
import * as Policy from "../src/Policy.js"
import * as Provider from "../src/Provider.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as RecoveryNotifications from "../src/RecoveryNotifications.js"
import * as Routes from "../src/Routes.js"
import * as Tool from "../src/Tool.js"
import * as TransportError from "../src/TransportError.js"

type Fault =
  | "text"
  | "tool"
  | "tool then reset"
  | "reset"
  | "eof"
  | "503"
  | "429"
  | "401"
  | "timeout"
  | "malformed"
  | "overflow"
  | "content filter"

const fault: fc.Arbitrary<Fault> = fc.constantFrom(
  "text",
  "tool",
  "tool then reset",
  "reset",
  "eof",
  "503",
  "429",
  "401",
  "timeout",
  "malformed",
  "overflow",
  "content filter"
)

const routeArb = fc.record({
  faults: fc.array(fault, { minLength: 1, maxLength: 8 }),
  attempts: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
  contextWindow: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
  takesMs: fc.integer({ min: 0, max: 5_000 })
})

const eventsOf = (
  kind: Fault,
  id: string
): Stream.Stream<Generation.GenerationEvent, ProviderFailure.ProviderFailure> => {
  const text = Generation.TextDelta({ text: id })
  const call = Generation.ToolCallComplete({ call: { id, name: "record", arguments: { value: id } } })
  const fail = (error: ProviderFailure.ProviderFailure) => Stream.concat(Stream.make(text), Stream.fail(error))
  switch (kind) {
    case "text":
      return Stream.make(text, Generation.Finish({ reason: "stop", providerReason: "stop", model: id }))
    case "tool":
      return Stream.make(text, call, Generation.Finish({ reason: "tool_calls", providerReason: "tool_calls" }))
    case "tool then reset":
      return Stream.concat(Stream.make(text, call), Stream.fail(new TransportError.TransportError({ reason: "Reset" })))
    case "reset":
      return fail(new TransportError.TransportError({ reason: "Reset" }))
    case "eof":
      return Stream.make(text)
    case "timeout":
      return fail(new TransportError.TransportError({ reason: "Timeout" }))
    case "malformed":
      return fail(new TransportError.TransportError({ reason: "MalformedChunk" }))
    case "503":
      return fail(ProviderFailure.fromHttpStatus({ status: 503 }))
    case "429":
      return fail(ProviderFailure.fromHttpStatus({ status: 429, retryAfter: Duration.seconds(7) }))
    case "401":
      return fail(ProviderFailure.fromHttpStatus({ status: 401 }))
    case "overflow":
      return fail(ProviderFailure.fromHttpStatus({ status: 400, code: "context_length_exceeded" }))
    case "content filter":
      return fail(ProviderFailure.fromHttpStatus({ status: 400, code: "content_policy_violation" }))
  }
}

describe("Routes properties", () => {
  it.effect.prop(
    "sends within the budget, nothing past the deadline, one route's one send committed, tools once from commits",
    {
      routes: fc.array(routeArb, { minLength: 1, maxLength: 4 }),
      maxAttempts: fc.integer({ min: 1, max: 12 }),
      deadlineSeconds: fc.integer({ min: 1, max: 120 }),
      threshold: fc.integer({ min: 1, max: 4 }),
      coolDownSeconds: fc.integer({ min: 0, max: 60 })
    },
    ({ coolDownSeconds, deadlineSeconds, maxAttempts, routes, threshold }) =>
      Effect.gen(function*() {
        const sends: Array<{ readonly route: number; readonly id: string; readonly kind: Fault }> = []
        const counts = routes.map(() => 0)
        const plan = Routes.make(...routes.map((spec, r): Routes.Route => ({
          model: `model-${r + 1}`,
          attempts: spec.attempts,
          contextWindow: spec.contextWindow,
          provider: Provider.makeFromStream({
            protocol: "property",
            endpoint: `route-${r + 1}`,
            stream: () =>
              Stream.unwrap(Effect.gen(function*() {
                yield* Budget.reserve
                const n = counts[r]!++
                const kind = spec.faults[n % spec.faults.length]!
                const id = `r${r + 1}-s${n}`
                sends.push({ route: r + 1, id, kind })
                return Stream.concat(
                  Stream.fromEffect(Effect.sleep(Duration.millis(spec.takesMs))).pipe(Stream.drain),
                  eventsOf(kind, id)
                )
              }))
          })
        })) as [Routes.Route, ...Array<Routes.Route>])
        const runs = yield* Ref.make<ReadonlyArray<string>>([])
        const committed: Array<Generation.Reply> = []
        const log: Array<readonly [number, RecoveryNotifications.Notification]> = []
        const tool = Tool.make("record", {
          description: "Records the call it was run for.",
          parameters: Schema.Struct({ value: Schema.String }),
          handler: ({ value }) => Effect.as(Ref.update(runs, (all) => [...all, value]), "ok")
        })
        const start = yield* Clock.currentTimeMillis
        const deadlineAt = start + deadlineSeconds * 1000
        // the step's replies share one budget
        const fiber = yield* Effect.fork(
          Budget.scoped(Chat.step([Message.user("go")], {
            model: "ignored",
            maxSteps: 20,
            onCommit: (commit) =>
              Effect.sync(() => {
                if (commit._tag === "Reply") committed.push(commit.reply)
              })
          })).pipe(
            Effect.provide(Layer.mergeAll(
              Routes.layer(plan),
              Tool.layer([tool]),
              Budget.layer({ maxAttempts, deadline: Duration.seconds(deadlineSeconds) }),
              Policy.layer({ jitter: false }),
              Circuit.layerMemory({ failureThreshold: threshold, coolDown: Duration.seconds(coolDownSeconds) }),
              RecoveryNotifications.layerCallback((n) =>
                Effect.map(Clock.currentTimeMillis, (now) => void log.push([now, n] as const))
              )
            ))
          )
        )
        for (let i = 0; i < 100 && Option.isNone(yield* fiber.poll); i++) yield* TestClock.adjust(Duration.seconds(30))
        yield* Fiber.await(fiber)

        // One budget for the whole plan (nested replies of a step share it).
        assert.isAtMost(sends.length, maxAttempts)
        // Nothing is started, waited for or switched to past the deadline.
        for (const [at, n] of log) {
          if (n._tag === "AttemptStarted" || n._tag === "RouteSwitched") assert.isBelow(at, deadlineAt)
          if (n._tag === "RetryScheduled") assert.isBelow(at + Duration.toMillis(n.delay), deadlineAt)
        }
        // Within a reply the routes only move forward.
        let last = 0
        for (const [, n] of log) {
          if (n._tag === "Committed") last = 0
          if (n._tag === "AttemptStarted") {
            assert.isAtLeast(n.route!.index, last)
            last = n.route!.index
          }
        }
        // A committed reply is one send of one route: its text, its route, its kind.
        for (const reply of committed) {
          const send = sends.find((s) => s.id === reply.text)
          assert.isDefined(send, `committed text ${reply.text} is no send's`)
          assert.strictEqual(reply.route?.index, send!.route)
          assert.include(["text", "tool"], send!.kind)
        }
        // Tools: at most once each, only from committed replies, in order.
        const ran = yield* Ref.get(runs)
        assert.strictEqual(new Set(ran).size, ran.length)
        assert.deepStrictEqual(ran, committed.flatMap((reply) => reply.toolCalls.map((call) => call.id)))
      }),
    // 100 runs take about 4 s alone; the bound leaves room for a loaded machine
    { fastCheck: { numRuns: 100 }, timeout: 120_000 }
  )
})
