/**
 * A reply along a plan of routes: a route is left only for failures the next route may not share, at once and
 * announced (`AttemptDiscarded`, then `RouteSwitched`), never joined to another route's output; one budget covers the
 * plan; the reply names its route and served model; a reply that fails on every route fails with the primary's
 * failure and each route's last one. Every wait on the TestClock, every send counted per route.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber, Layer, Option, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as Circuit from "../src/Circuit.js"
import * as FleetLimits from "../src/FleetLimits.js"
import type * as Generation from "../src/Generation.js"
import * as Policy from "../src/Policy.js"
import * as Provider from "../src/Provider.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as ProviderRejection from "../src/ProviderRejection.js"
import * as Recovery from "../src/Recovery.js"
import * as RecoveryExhausted from "../src/RecoveryExhausted.js"
import * as Routes from "../src/Routes.js"
import * as TransportError from "../src/TransportError.js"
import { recorder } from "./utils/notifications.js"
import { request, route } from "./utils/routes.js"

const backoff = Policy.layer({ backoffBase: Duration.seconds(1), jitter: false })
const ok = (text: string) => ({ text: [text], end: "finish" as const })
const status = (code: number, providerCode?: string) =>
  ProviderFailure.fromHttpStatus({ status: code, ...(providerCode === undefined ? {} : { code: providerCode }) })
const timeout = new TransportError.TransportError({ reason: "Timeout", detail: "no first byte" })
const malformed = new TransportError.TransportError({ reason: "MalformedChunk", detail: "not JSON" })
const status429 = (seconds: number) =>
  ProviderFailure.fromHttpStatus({ status: 429, retryAfter: Duration.seconds(seconds) })

/** Runs one reply along `routes` with its own circuits, stepping the TestClock until it ends. */
const along = (
  routes: ReadonlyArray<Routes.Route>,
  layers: Layer.Layer<never> = Layer.empty
) =>
  Effect.gen(function*() {
    const notes = yield* recorder
    const fiber = yield* Recovery.generate(request).pipe(
      Effect.provide(Layer.mergeAll(
        Routes.layer(Routes.make(...(routes as [Routes.Route, ...Array<Routes.Route>]))),
        notes.layer,
        backoff,
        layers
      )),
      Effect.exit,
      Effect.fork
    )
    for (let i = 0; i < 200 && Option.isNone(yield* fiber.poll); i++) yield* TestClock.adjust(Duration.millis(100))
    return { exit: yield* Fiber.join(fiber), notes: yield* notes.all }
  })

const switches = (notes: ReadonlyArray<{ readonly _tag: string }>) =>
  notes.filter((n) => n._tag === "RouteSwitched") as unknown as ReadonlyArray<{
    readonly from: Generation.RouteRef
    readonly to: Generation.RouteRef
    readonly reason: Routes.SwitchReason
  }>

describe("Routes", () => {
  it.effect("a transient failure past the route's limit switches at once; the reply names route 2 and its model", () =>
    Effect.gen(function*() {
      const primary = route("a", "model-a", [{ text: ["half an ans"], end: status(503) }])
      const fallback = route("b", "model-b", [ok("whole answer")])
      const { exit, notes } = yield* along([primary.route, fallback.route], Circuit.layerMemory())
      assert.isTrue(Exit.isSuccess(exit))
      const reply = Exit.isSuccess(exit) ? exit.value : undefined!
      assert.strictEqual(reply.text, "whole answer")
      assert.strictEqual(reply.model, "model-b@served")
      assert.deepStrictEqual(reply.route, { index: 2, name: "test model-b", model: "model-b" })
      assert.strictEqual(reply.attempts, 3)
      // two sends on the primary (its limit), one backoff between them; the switch does not wait
      assert.deepStrictEqual(primary.sent, [{ model: "model-a", at: 0 }, { model: "model-a", at: 1000 }])
      assert.deepStrictEqual(fallback.sent, [{ model: "model-b", at: 1000 }])
      const tags = notes.map((n) => n._tag)
      assert.deepStrictEqual(tags, [
        "AttemptStarted",
        "Preview",
        "AttemptDiscarded",
        "RetryScheduled",
        "AttemptStarted",
        "Preview",
        "AttemptDiscarded",
        "RouteSwitched",
        "AttemptStarted",
        "Preview",
        "Preview",
        "Committed"
      ])
      const [switched] = switches(notes)
      assert.strictEqual(switched!.reason, "Transient")
      assert.deepStrictEqual(switched!.from, { index: 1, name: "test model-a", model: "model-a" })
      assert.deepStrictEqual(switched!.to, { index: 2, name: "test model-b", model: "model-b" })
    }))

  it.effect("the route's own limit: attempts 3 makes three sends before the switch", () =>
    Effect.gen(function*() {
      const primary = route("a", "m", [{ end: status(500) }], { attempts: 3 })
      const fallback = route("b", "m", [ok("x")])
      const { exit } = yield* along([primary.route, fallback.route], Circuit.layerMemory({ failureThreshold: 10 }))
      assert.isTrue(Exit.isSuccess(exit))
      assert.deepStrictEqual(primary.sent.map((s) => s.at), [0, 1000, 3000])
      assert.strictEqual(fallback.sends(), 1)
    }))

  it.effect("a timeout leaves the route at once", () =>
    Effect.gen(function*() {
      const primary = route("a", "m", [{ end: timeout }])
      const fallback = route("b", "m", [ok("x")])
      const { exit, notes } = yield* along([primary.route, fallback.route], Circuit.layerMemory())
      assert.isTrue(Exit.isSuccess(exit))
      assert.strictEqual(primary.sends(), 1)
      assert.strictEqual(switches(notes)[0]!.reason, "Timeout")
    }))

  it.effect("401, 403, 404 and a quota refusal switch after one send", () =>
    Effect.gen(function*() {
      for (const failure of [status(401), status(403), status(404), status(429, "insufficient_quota"), status(402)]) {
        const primary = route("a", "m", [{ end: failure }])
        const fallback = route("b", "m", [ok("x")])
        const { exit, notes } = yield* along([primary.route, fallback.route], Circuit.layerMemory())
        assert.isTrue(Exit.isSuccess(exit), failure.message)
        assert.strictEqual(primary.sends(), 1)
        assert.strictEqual(switches(notes)[0]!.reason, "Rejected")
      }
    }))

  it.effect("a content-policy refusal or a bad request does not switch: it surfaces after one send", () =>
    Effect.gen(function*() {
      for (const failure of [status(400, "content_policy_violation"), status(400), status(422)]) {
        const primary = route("a", "m", [{ end: failure }])
        const fallback = route("b", "m", [ok("x")])
        const { exit } = yield* along([primary.route, fallback.route], Circuit.layerMemory())
        assert.isTrue(Exit.isFailure(exit))
        assert.strictEqual(primary.sends(), 1)
        assert.strictEqual(fallback.sends(), 0)
        const error = yield* Effect.flip(exit)
        assert.isTrue(ProviderRejection.isProviderRejection(error))
      }
    }))

  it.effect("an overflow goes to the next route that declares a larger window, past a smaller one", () =>
    Effect.gen(function*() {
      const primary = route("a", "small", [{ end: status(400, "context_length_exceeded") }], { contextWindow: 8000 })
      const same = route("b", "same", [ok("never")], { contextWindow: 8000 })
      const large = route("c", "large", [ok("fits")], { contextWindow: 200000 })
      const { exit, notes } = yield* along([primary.route, same.route, large.route], Circuit.layerMemory())
      assert.isTrue(Exit.isSuccess(exit))
      assert.strictEqual(Exit.isSuccess(exit) ? exit.value.text : "", "fits")
      assert.deepStrictEqual([primary.sends(), same.sends(), large.sends()], [1, 0, 1])
      const [switched] = switches(notes)
      assert.strictEqual(switched!.reason, "ContextOverflow")
      assert.strictEqual(switched!.to.index, 3)
    }))

  it.effect("an overflow with no larger route declared surfaces after one send", () =>
    Effect.gen(function*() {
      const primary = route("a", "m", [{ end: status(400, "context_length_exceeded") }])
      const fallback = route("b", "m", [ok("x")])
      const { exit } = yield* along([primary.route, fallback.route], Circuit.layerMemory())
      const error = yield* Effect.flip(exit)
      assert.isTrue(ProviderRejection.isProviderRejection(error) && error.reason === "ContextOverflow")
      assert.deepStrictEqual([primary.sends(), fallback.sends()], [1, 0])
    }))

  it.effect("a chunk that is not JSON is replayed once on the same route, then the route is left", () =>
    Effect.gen(function*() {
      const primary = route("a", "m", [{ text: ["par"], end: malformed }])
      const fallback = route("b", "m", [ok("x")])
      const { exit, notes } = yield* along(
        [primary.route, fallback.route],
        Circuit.layerMemory({ failureThreshold: 10 })
      )
      assert.isTrue(Exit.isSuccess(exit))
      assert.strictEqual(primary.sends(), 2)
      assert.strictEqual(switches(notes)[0]!.reason, "MalformedChunk")
    }))

  it.effect("without a plan, a chunk that is not JSON is replayed once, then surfaces", () =>
    Effect.gen(function*() {
      const only = route("a", "m", [{ end: malformed }])
      const fiber = yield* Recovery.generate(request).pipe(
        Effect.provideService(Provider.Provider, only.route.provider),
        Effect.provide(backoff),
        Effect.exit,
        Effect.fork
      )
      yield* TestClock.adjust(Duration.seconds(10))
      const error = yield* Effect.flip(yield* Fiber.join(fiber))
      assert.isTrue(TransportError.isTransportError(error) && error.reason === "MalformedChunk")
      assert.isUndefined((error as TransportError.TransportError).routeFailures)
      assert.strictEqual(only.sends(), 2)
    }))

  it.effect("every route failing: the primary's failure, with each route's last failure attached", () =>
    Effect.gen(function*() {
      const primary = route("a", "model-a", [{ end: status(503) }])
      const fallback = route("b", "model-b", [{ end: status(401) }])
      const { exit } = yield* along([primary.route, fallback.route], Circuit.layerMemory())
      const error = yield* Effect.flip(exit)
      assert.isTrue(TransportError.isTransportError(error))
      assert.strictEqual((error as TransportError.TransportError).status, 503)
      const failures = (error as TransportError.TransportError).routeFailures!
      assert.deepStrictEqual(failures.map((f) => [f.route, f.name, f.model]), [
        [1, "test model-a", "model-a"],
        [2, "test model-b", "model-b"]
      ])
      assert.match(failures[1]!.message, /authentication failed \(HTTP 401\)/)
      assert.deepStrictEqual([primary.sends(), fallback.sends()], [2, 1])
    }))

  it.effect("the last route is kept until the budget ends: the budget covers every send of the plan", () =>
    Effect.gen(function*() {
      const primary = route("a", "m", [{ end: status(503) }])
      const fallback = route("b", "m", [{ end: status(503) }])
      const { exit } = yield* along(
        [primary.route, fallback.route],
        Layer.merge(Budget.layer({ maxAttempts: 5 }), Circuit.layerMemory({ failureThreshold: 100 }))
      )
      const error = yield* Effect.flip(exit)
      assert.isTrue(RecoveryExhausted.isRecoveryExhausted(error))
      const exhausted = error as RecoveryExhausted.RecoveryExhausted
      assert.strictEqual(exhausted.reason, "Attempts")
      assert.strictEqual(exhausted.attempts, 5)
      assert.deepStrictEqual([primary.sends(), fallback.sends()], [2, 3])
      assert.deepStrictEqual(exhausted.routeFailures!.map((f) => f.route), [1, 2])
    }))

  it.effect("a switch is never begun past the deadline", () =>
    Effect.gen(function*() {
      const primary = route("a", "m", [{ end: status(503), takes: 4000 }])
      const fallback = route("b", "m", [ok("x")])
      const { exit } = yield* along(
        [primary.route, fallback.route],
        Layer.merge(Budget.layer({ deadline: Duration.seconds(5) }), Circuit.layerMemory())
      )
      const error = yield* Effect.flip(exit)
      assert.isTrue(RecoveryExhausted.isRecoveryExhausted(error))
      assert.strictEqual(fallback.sends(), 0)
    }))
})

describe("Routes and circuits", () => {
  it.effect("an open circuit skips its route without a send; after the cool-down one probe closes it again", () =>
    Effect.gen(function*() {
      const circuits = Circuit.layerMemory({ failureThreshold: 2, coolDown: Duration.seconds(30) })
      const primary = route("a", "m", [{ end: status(503) }])
      const recovered = route("a", "m", [ok("primary again")])
      const fallback = route("b", "m", [ok("fallback")])
      const plan = (first: typeof primary) => [first.route, fallback.route]
      yield* Effect.gen(function*() {
        // reply 1: two failures open the primary's circuit, the fallback answers
        const one = yield* along(plan(primary))
        assert.isTrue(Exit.isSuccess(one.exit))
        assert.strictEqual(primary.sends(), 2)
        // reply 2: skipped without a send
        const two = yield* along(plan(primary))
        assert.isTrue(Exit.isSuccess(two.exit))
        assert.strictEqual(primary.sends(), 2)
        assert.strictEqual(switches(two.notes)[0]!.reason, "CircuitOpen")
        assert.isFalse(two.notes.some((n) => n._tag === "AttemptDiscarded"))
        // past the cool-down, counted from the second failure at t = 1 s: one probe, and it succeeds
        yield* TestClock.setTime(31_000)
        const three = yield* along(plan(recovered))
        assert.strictEqual(Exit.isSuccess(three.exit) ? three.exit.value.text : "", "primary again")
        assert.strictEqual(recovered.sends(), 1)
        const four = yield* along(plan(recovered))
        assert.strictEqual(Exit.isSuccess(four.exit) ? four.exit.value.route?.index : 0, 1)
      }).pipe(Effect.provide(circuits))
    }))

  it.effect("a route skipped past the deadline is not switched from: the reply ends with the deadline", () =>
    Effect.gen(function*() {
      const circuit = Circuit.makeMemory({ failureThreshold: 1, coolDown: Duration.seconds(30) })
      const a = route("a", "m", [ok("x")])
      const b = route("b", "m", [ok("x")])
      yield* circuit.failed(Routes.key(a.route))
      const notes = yield* recorder
      // one budget for the scope: its deadline has passed when the reply starts
      const fiber = yield* Budget.scoped(Effect.zipRight(
        Effect.sleep(Duration.seconds(2)),
        Recovery.generate(request).pipe(
          Effect.provide(Layer.mergeAll(
            Routes.layer(Routes.make(a.route, b.route)),
            Layer.succeed(Circuit.Circuit, circuit),
            notes.layer
          ))
        )
      )).pipe(Effect.provide(Budget.layer({ deadline: Duration.seconds(1) })), Effect.exit, Effect.fork)
      yield* TestClock.adjust(Duration.seconds(3))
      const error = yield* Effect.flip(yield* Fiber.join(fiber))
      assert.isTrue(RecoveryExhausted.isRecoveryExhausted(error) && error.reason === "Deadline")
      assert.deepStrictEqual([a.sends(), b.sends()], [0, 0])
      assert.isFalse((yield* notes.all).some((n) => n._tag === "RouteSwitched"))
    }))

  it.effect("a probing reply interrupted before its outcome gives the lease back: the next reply probes at once", () =>
    Effect.gen(function*() {
      const circuit = Circuit.makeMemory({ failureThreshold: 1, coolDown: Duration.seconds(30) })
      const a = route("a", "m", [{ text: ["x"], end: "never" }, ok("back")])
      const b = route("b", "m", [ok("fallback")])
      const key = Routes.key(a.route)
      yield* circuit.failed(key)
      yield* TestClock.adjust(Duration.seconds(30))
      const reply = Recovery.generate(request).pipe(
        Effect.provide(Layer.mergeAll(
          Routes.layer(Routes.make(a.route, b.route)),
          Layer.succeed(Circuit.Circuit, circuit)
        ))
      )
      // the probe hangs on route a; the caller gives up on it
      const probing = yield* Effect.fork(reply)
      yield* TestClock.adjust(Duration.seconds(1))
      assert.strictEqual(a.sends(), 1)
      assert.strictEqual(yield* circuit.state(key), "open")
      yield* Fiber.interrupt(probing)
      assert.strictEqual(yield* circuit.state(key), "half-open")
      // the next reply probes route a now, not after the lease's 30 s, and closes the circuit
      const next = yield* reply
      assert.strictEqual(next.text, "back")
      assert.deepStrictEqual([a.sends(), b.sends()], [2, 0])
      assert.strictEqual(yield* circuit.state(key), "closed")
    }))

  it.effect("every route's circuit open: RecoveryExhausted{CircuitOpen}, nothing sent", () =>
    Effect.gen(function*() {
      const circuit = Circuit.makeMemory({ failureThreshold: 1, coolDown: Duration.seconds(30) })
      const a = route("a", "m", [ok("x")])
      const b = route("b", "m", [ok("x")])
      yield* circuit.failed(Routes.key(a.route))
      yield* circuit.failed(Routes.key(b.route))
      const { exit, notes } = yield* along([a.route, b.route], Layer.succeed(Circuit.Circuit, circuit))
      const error = yield* Effect.flip(exit)
      assert.isTrue(RecoveryExhausted.isRecoveryExhausted(error) && error.reason === "CircuitOpen")
      assert.deepStrictEqual([a.sends(), b.sends()], [0, 0])
      assert.strictEqual(switches(notes).length, 1)
      assert.deepStrictEqual(
        (error as RecoveryExhausted.RecoveryExhausted).routeFailures!.map((f) => f.message),
        ["circuit open (probe in 30s)", "circuit open (probe in 30s)"]
      )
    }))
})

describe("Routes and the fleet", () => {
  /** A fleet that records pushbacks and is paused until the latest one ends. */
  const fleet = () => {
    const pushbacks: Array<number> = []
    let pausedUntil = 0
    const service: FleetLimits.Service = {
      deposit: Effect.map(Clock.currentTimeMillis, (now) => FleetLimits.pause(Duration.millis(pausedUntil - now))),
      withdraw: Effect.succeed({ allowed: true, replays: 0, allowance: Infinity }),
      paused: Effect.map(Clock.currentTimeMillis, (now) => FleetLimits.pause(Duration.millis(pausedUntil - now))),
      pushback: ({ delay }) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          pushbacks.push(Duration.toMillis(delay))
          pausedUntil = Math.max(pausedUntil, now + Duration.toMillis(delay))
        })
    }
    return { layer: Layer.succeed(FleetLimits.FleetLimits, service), pushbacks }
  }

  it.effect("the primary's Retry-After pauses the fleet, and the switch to another route does not wait for it", () =>
    Effect.gen(function*() {
      const f = fleet()
      const primary = route("a", "m", [{ end: status429(30) }], { attempts: 1 })
      const fallback = route("b", "m", [ok("x")])
      const { exit, notes } = yield* along([primary.route, fallback.route], Layer.merge(f.layer, Circuit.layerMemory()))
      assert.isTrue(Exit.isSuccess(exit))
      assert.deepStrictEqual(f.pushbacks, [30_000])
      assert.deepStrictEqual(fallback.sent.map((s) => s.at), [0])
      assert.isFalse(notes.some((n) => n._tag === "FleetPaused"))
    }))

  it.effect("another route's Retry-After is its reply's own wait: it does not pause the fleet", () =>
    Effect.gen(function*() {
      const f = fleet()
      const primary = route("a", "m", [{ end: status(503) }], { attempts: 1 })
      const fallback = route("b", "m", [{ end: status429(5) }, ok("x")])
      const { exit, notes } = yield* along([primary.route, fallback.route], Layer.merge(f.layer, Circuit.layerMemory()))
      assert.isTrue(Exit.isSuccess(exit))
      assert.deepStrictEqual(f.pushbacks, [])
      assert.deepStrictEqual(fallback.sent.map((s) => s.at), [0, 5000])
      assert.isFalse(notes.some((n) => n._tag === "FleetPaused"))
    }))

  it.effect("a replay on the primary waits out the fleet's pause, as without a plan", () =>
    Effect.gen(function*() {
      const f = fleet()
      const primary = route("a", "m", [{ end: status429(3) }, ok("x")])
      const fallback = route("b", "m", [ok("never")])
      const { exit } = yield* along([primary.route, fallback.route], Layer.merge(f.layer, Circuit.layerMemory()))
      assert.isTrue(Exit.isSuccess(exit))
      assert.deepStrictEqual(f.pushbacks, [3000])
      assert.deepStrictEqual(primary.sent.map((s) => s.at), [0, 3000])
      assert.strictEqual(fallback.sends(), 0)
    }))
})
