/**
 * The circuit of a route, in memory on the TestClock: closed until `failureThreshold` consecutive transient failures,
 * open for exactly `coolDown`, then one probe whose outcome closes or re-opens it; a probe that never reports holds
 * the circuit for one cool-down.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either, TestClock } from "effect"
import * as Circuit from "../src/Circuit.js"

const tag = (admission: Circuit.Admission) =>
  admission._tag === "Open" ? `Open ${Duration.toMillis(admission.retryIn)}` : admission._tag

describe("Circuit.makeMemory", () => {
  it.effect("opens at the threshold, refuses for exactly the cool-down, then hands out one probe", () =>
    Effect.gen(function*() {
      const circuit = Circuit.makeMemory({ failureThreshold: 3, coolDown: Duration.seconds(30) })
      assert.strictEqual(tag(yield* circuit.admit("r")), "Closed")
      assert.strictEqual(yield* circuit.failed("r"), "closed")
      assert.strictEqual(yield* circuit.failed("r"), "closed")
      yield* TestClock.adjust(Duration.seconds(5))
      assert.strictEqual(yield* circuit.failed("r"), "open")
      assert.strictEqual(tag(yield* circuit.admit("r")), "Open 30000")
      yield* TestClock.adjust(Duration.millis(29_999))
      assert.strictEqual(tag(yield* circuit.admit("r")), "Open 1")
      assert.strictEqual(yield* circuit.state("r"), "open")
      yield* TestClock.adjust(Duration.millis(1))
      assert.strictEqual(yield* circuit.state("r"), "half-open")
      assert.strictEqual(tag(yield* circuit.admit("r")), "Probe")
      // one probe per cool-down: the others are refused while it runs
      assert.strictEqual(tag(yield* circuit.admit("r")), "Open 30000")
      assert.strictEqual(yield* circuit.state("r"), "open")
      // other routes are not concerned
      assert.strictEqual(tag(yield* circuit.admit("other")), "Closed")
    }))

  it.effect("a failed probe opens the circuit for a fresh cool-down; a successful one closes it", () =>
    Effect.gen(function*() {
      const circuit = Circuit.makeMemory({ failureThreshold: 1, coolDown: Duration.seconds(10) })
      assert.strictEqual(yield* circuit.failed("r"), "open")
      yield* TestClock.adjust(Duration.seconds(10))
      assert.strictEqual(tag(yield* circuit.admit("r")), "Probe")
      yield* TestClock.adjust(Duration.seconds(2))
      assert.strictEqual(yield* circuit.failed("r"), "open")
      assert.strictEqual(tag(yield* circuit.admit("r")), "Open 10000")
      yield* TestClock.adjust(Duration.seconds(10))
      assert.strictEqual(tag(yield* circuit.admit("r")), "Probe")
      yield* circuit.succeeded("r")
      assert.strictEqual(yield* circuit.state("r"), "closed")
      assert.strictEqual(tag(yield* circuit.admit("r")), "Closed")
    }))

  it.effect("a success resets the count: failures must be consecutive", () =>
    Effect.gen(function*() {
      const circuit = Circuit.makeMemory({ failureThreshold: 3, coolDown: Duration.seconds(10) })
      yield* circuit.failed("r")
      yield* circuit.failed("r")
      yield* circuit.succeeded("r")
      yield* circuit.failed("r")
      assert.strictEqual(yield* circuit.failed("r"), "closed")
      assert.strictEqual(yield* circuit.failed("r"), "open")
    }))

  it.effect("a probe that never reports holds the circuit for one cool-down, then another probe goes", () =>
    Effect.gen(function*() {
      const circuit = Circuit.makeMemory({ failureThreshold: 1, coolDown: Duration.seconds(10) })
      yield* circuit.failed("r")
      yield* TestClock.adjust(Duration.seconds(10))
      assert.strictEqual(tag(yield* circuit.admit("r")), "Probe")
      yield* TestClock.adjust(Duration.millis(9_999))
      assert.strictEqual(tag(yield* circuit.admit("r")), "Open 1")
      yield* TestClock.adjust(Duration.millis(1))
      assert.strictEqual(tag(yield* circuit.admit("r")), "Probe")
    }))

  it.effect("a probe given back (released) leaves the circuit half-open at once; a stale lease changes nothing", () =>
    Effect.gen(function*() {
      const circuit = Circuit.makeMemory({ failureThreshold: 1, coolDown: Duration.seconds(10) })
      yield* circuit.failed("r")
      yield* TestClock.adjust(Duration.seconds(10))
      const first = yield* circuit.admit("r")
      assert.deepStrictEqual(first, Circuit.Admission.Probe({ lease: 20_000 }))
      assert.strictEqual(tag(yield* circuit.admit("r")), "Open 10000")
      yield* circuit.released!("r", first._tag === "Probe" ? first.lease : undefined)
      assert.strictEqual(yield* circuit.state("r"), "half-open")
      const second = yield* circuit.admit("r")
      assert.strictEqual(tag(second), "Probe")
      // a lease that is not the one out changes nothing
      yield* circuit.released!("r", first._tag === "Probe" ? first.lease! - 1 : undefined)
      assert.strictEqual(tag(yield* circuit.admit("r")), "Open 10000")
    }))

  it("refuses settings that cannot work", () => {
    assert.throws(() => Circuit.makeMemory({ failureThreshold: 0, coolDown: Duration.seconds(1) }), RangeError)
    assert.throws(() => Circuit.makeMemory({ failureThreshold: 1.5, coolDown: Duration.seconds(1) }), RangeError)
    assert.throws(() => Circuit.makeMemory({ failureThreshold: 1, coolDown: Duration.infinity }), RangeError)
  })

  it.effect("reads its settings from REPRISE_CIRCUIT_THRESHOLD and REPRISE_CIRCUIT_COOLDOWN, naming a bad one", () =>
    Effect.gen(function*() {
      const read = (env: Record<string, string>) =>
        Effect.either(Effect.withConfigProvider(Circuit.config, ConfigProvider.fromMap(new Map(Object.entries(env)))))
      const defaults = yield* read({})
      assert.deepStrictEqual(Either.getOrThrow(defaults), Circuit.defaultSettings)
      const set = Either.getOrThrow(yield* read({ REPRISE_CIRCUIT_THRESHOLD: "5", REPRISE_CIRCUIT_COOLDOWN: "1500" }))
      assert.strictEqual(set.failureThreshold, 5)
      assert.strictEqual(Duration.toMillis(set.coolDown), 1500)
      for (const [name, value] of [["REPRISE_CIRCUIT_THRESHOLD", "0"], ["REPRISE_CIRCUIT_COOLDOWN", "-1"]]) {
        const bad = yield* read({ [name!]: value! })
        assert.isTrue(Either.isLeft(bad))
        assert.include(String(Either.isLeft(bad) ? bad.left : ""), name!)
      }
    }))
})
