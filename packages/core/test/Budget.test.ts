import { assert, describe, it } from "@effect/vitest"
import { ConfigError, ConfigProvider, Duration, Effect, Layer, TestClock } from "effect"
import * as Budget from "../src/Budget.js"

const withEnv = (env: Record<string, string>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("Budget", () => {
  it.effect("reserves exactly maxAttempts sends, numbered from 1", () =>
    Effect.gen(function*() {
      const budget = yield* Budget.make({ maxAttempts: 3, deadline: Duration.seconds(10) })
      assert.strictEqual(yield* budget.reserve, 1)
      assert.strictEqual(yield* budget.reserve, 2)
      assert.strictEqual(yield* budget.reserve, 3)
      const error = yield* Effect.flip(budget.reserve)
      assert.strictEqual(error.reason, "Attempts")
      assert.strictEqual(error.attempts, 3)
      assert.strictEqual(yield* budget.used, 3)
      assert.strictEqual(yield* budget.remainingAttempts, 0)
    }))

  it.effect("admits no send at or after the deadline, read from the Clock", () =>
    Effect.gen(function*() {
      const budget = yield* Budget.make({ maxAttempts: 5, deadline: Duration.seconds(10) })
      yield* TestClock.adjust(Duration.millis(9_999))
      assert.strictEqual(yield* budget.reserve, 1)
      assert.strictEqual(Duration.toMillis(yield* budget.remainingTime), 1)
      yield* TestClock.adjust(Duration.millis(1))
      const error = yield* Effect.flip(budget.reserve)
      assert.strictEqual(error.reason, "Deadline")
      assert.strictEqual(Duration.toMillis(error.elapsed), 10_000)
      assert.strictEqual(yield* budget.used, 1, "a refused reservation debits nothing")
    }))

  it.effect("a nested scope reuses the enclosing allowance: neither attempts nor deadline reset", () =>
    Effect.gen(function*() {
      const outer = yield* Budget.scoped(Effect.gen(function*() {
        const outer = yield* Budget.Budget
        yield* Budget.reserve
        yield* TestClock.adjust(Duration.seconds(4))
        const inner = yield* Budget.scoped(Effect.gen(function*() {
          yield* Budget.reserve
          return yield* Budget.Budget
        }))
        assert.strictEqual(inner, outer)
        assert.strictEqual(yield* outer.used, 2)
        assert.strictEqual(Duration.toMillis(yield* inner.elapsed), 4_000)
        return outer
      })).pipe(Effect.provide(Budget.layer({ maxAttempts: 2, deadline: Duration.seconds(30) })))
      assert.strictEqual(outer.settings.maxAttempts, 2)
      // A new top-level scope starts afresh.
      const fresh = yield* Budget.scoped(Budget.Budget)
      assert.strictEqual(yield* fresh.used, 0)
      assert.strictEqual(fresh.settings.maxAttempts, 11)
    }))

  it.effect("enclosingOrNew is the enclosing scope's allowance, or a new one from the settings outside any", () =>
    Effect.gen(function*() {
      const [outer, inner] = yield* Budget.scoped(
        Effect.zip(Budget.Budget, Budget.enclosingOrNew)
      ).pipe(Effect.provide(Budget.layer({ maxAttempts: 3, deadline: Duration.seconds(30) })))
      assert.strictEqual(inner, outer)
      const first = yield* Budget.enclosingOrNew
      const second = yield* Budget.enclosingOrNew
      assert.notStrictEqual(first, second)
      assert.strictEqual(first.settings.maxAttempts, 11)
      assert.strictEqual(yield* first.reserve, 1)
      assert.strictEqual(yield* second.used, 0)
    }))

  it.effect("defaults are 11 attempts and 600 s", () =>
    Effect.gen(function*() {
      const budget = yield* Budget.scoped(Budget.Budget)
      assert.strictEqual(budget.settings.maxAttempts, 11)
      assert.deepStrictEqual(budget.settings.deadline, Duration.seconds(600))
    }))

  describe("config", () => {
    it.effect("reads REPRISE_MAX_ATTEMPTS and REPRISE_DEADLINE", () =>
      Effect.gen(function*() {
        const settings = yield* Budget.BudgetSettings
        assert.strictEqual(settings.maxAttempts, 4)
        assert.deepStrictEqual(settings.deadline, Duration.millis(2_500))
      }).pipe(
        Effect.provide(Budget.layerConfig.pipe(
          Layer.provide(withEnv({ REPRISE_MAX_ATTEMPTS: "4", REPRISE_DEADLINE: "2.5" }))
        ))
      ))

    it.effect("falls back to the defaults when unset", () =>
      Effect.gen(function*() {
        const settings = yield* Budget.BudgetSettings
        assert.strictEqual(settings.maxAttempts, 11)
        assert.deepStrictEqual(settings.deadline, Duration.seconds(600))
      }).pipe(Effect.provide(Budget.layerConfig.pipe(Layer.provide(withEnv({}))))))

    for (
      const [env, name] of [
        [{ REPRISE_MAX_ATTEMPTS: "0" }, "REPRISE_MAX_ATTEMPTS"],
        [{ REPRISE_MAX_ATTEMPTS: "2.5" }, "REPRISE_MAX_ATTEMPTS"],
        [{ REPRISE_MAX_ATTEMPTS: "many" }, "REPRISE_MAX_ATTEMPTS"],
        [{ REPRISE_DEADLINE: "-1" }, "REPRISE_DEADLINE"],
        [{ REPRISE_DEADLINE: "soon" }, "REPRISE_DEADLINE"],
        [{ REPRISE_DEADLINE: "1e300" }, "REPRISE_DEADLINE"],
        [{ REPRISE_MAX_ATTEMPTS: "0x10" }, "REPRISE_MAX_ATTEMPTS"]
      ] as const
    ) {
      it.effect(`rejects ${JSON.stringify(env)} with a ConfigError naming ${name}`, () =>
        Effect.gen(function*() {
          const error = yield* Effect.flip(
            Effect.provide(Budget.BudgetSettings, Budget.layerConfig.pipe(Layer.provide(withEnv(env))))
          )
          assert.isTrue(ConfigError.isConfigError(error))
          assert.include(String(error), name)
        }))
    }
  })

  it("layer rejects impossible settings", () => {
    assert.throws(() => Budget.layer({ maxAttempts: 0 }), /maxAttempts/)
    assert.throws(() => Budget.layer({ deadline: Duration.zero }), /deadline/)
  })
})

describe("Budget settings, declared once", () => {
  const read = <A>(config: Effect.Effect<A, ConfigError.ConfigError>, env: Record<string, string>) =>
    Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map(Object.entries(env))))

  it.effect("maxAttemptsConfig: REPRISE_MAX_ATTEMPTS, default 11, at least 1", () =>
    Effect.gen(function*() {
      assert.strictEqual(Budget.maxAttemptsVariable, "REPRISE_MAX_ATTEMPTS")
      assert.strictEqual(yield* read(Budget.maxAttemptsConfig, { REPRISE_MAX_ATTEMPTS: "3" }), 3)
      assert.strictEqual(yield* read(Budget.maxAttemptsConfig, {}), Budget.defaultSettings.maxAttempts)
      assert.strictEqual(yield* read(Budget.maxAttemptsConfig, { REPRISE_MAX_ATTEMPTS: "1" }), 1)
      const error = yield* Effect.flip(read(Budget.maxAttemptsConfig, { REPRISE_MAX_ATTEMPTS: "0" }))
      assert.strictEqual(String(error), `(Invalid data at REPRISE_MAX_ATTEMPTS: "must be at least 1")`)
    }))

  it.effect("deadlineConfig: REPRISE_DEADLINE in seconds, default 600, kept in whole milliseconds, at least 1 ms", () =>
    Effect.gen(function*() {
      assert.strictEqual(Budget.deadlineVariable, "REPRISE_DEADLINE")
      assert.deepStrictEqual(yield* read(Budget.deadlineConfig, {}), Budget.defaultSettings.deadline)
      assert.deepStrictEqual(yield* read(Budget.deadlineConfig, { REPRISE_DEADLINE: "2.0004" }), Duration.millis(2000))
      assert.deepStrictEqual(yield* read(Budget.deadlineConfig, { REPRISE_DEADLINE: "0.0005" }), Duration.millis(1))
      assert.deepStrictEqual(
        yield* read(Budget.deadlineConfig, { REPRISE_DEADLINE: "2147483.647" }),
        Duration.millis(2 ** 31 - 1)
      )
      for (
        const [value, message] of [
          ["0", "must be a positive number of seconds"],
          ["-5", "must be a positive number of seconds"],
          ["0.0001", "must be at least 0.001 seconds (1 ms)"],
          // decimal notation only: no exponent, no hex, no Infinity, nothing blank
          ["1e300", `Expected a number in decimal notation but received "1e300"`],
          ["1e3", `Expected a number in decimal notation but received "1e3"`],
          ["0x10", `Expected a number in decimal notation but received "0x10"`],
          ["Infinity", `Expected a number in decimal notation but received "Infinity"`],
          ["", `Expected a number in decimal notation but received ""`],
          // at most 2^31 - 1 ms, the longest wait Effect's clock times, and representable in nanoseconds
          ["2147483.648", "must be at most 2147483.647 seconds (about 24.8 days)"],
          ["1" + "0".repeat(300), "must be at most 2147483.647 seconds (about 24.8 days)"],
          ["1" + "0".repeat(320), "must be at most 2147483.647 seconds (about 24.8 days)"]
        ]
      ) {
        const error = yield* Effect.flip(read(Budget.deadlineConfig, { REPRISE_DEADLINE: value }))
        assert.strictEqual(String(error), `(Invalid data at REPRISE_DEADLINE: "${message}")`, value)
      }
    }))

  it.effect("config is the two fields, and reports both bad values", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* read(Budget.config, { REPRISE_MAX_ATTEMPTS: "4", REPRISE_DEADLINE: "30" }), {
        maxAttempts: 4,
        deadline: Duration.seconds(30)
      })
      const error = String(
        yield* Effect.flip(read(Budget.config, { REPRISE_MAX_ATTEMPTS: "0", REPRISE_DEADLINE: "0" }))
      )
      assert.include(error, "REPRISE_MAX_ATTEMPTS")
      assert.include(error, "REPRISE_DEADLINE")
    }))

  it("settings in code are checked with the same ranges, and the same messages, as RangeErrors", () => {
    assert.throws(
      () => Budget.validateSettings({ ...Budget.defaultSettings, maxAttempts: 0 }),
      RangeError,
      /^maxAttempts must be at least 1, got 0$/
    )
    assert.throws(() => Budget.layer({ maxAttempts: 2.5 }), RangeError, /maxAttempts must be a whole number, got 2\.5/)
    assert.throws(
      () => Budget.layer({ deadline: Duration.infinity }),
      RangeError,
      /deadline must be a positive number of seconds, got Infinity/
    )
    assert.throws(
      () => Budget.layer({ deadline: Duration.seconds(1e300) }),
      RangeError,
      /deadline must be at most 2147483\.647 seconds \(about 24\.8 days\)/
    )
    // a value in code keeps its resolution: only text is rounded to whole milliseconds
    const fine = Budget.validateSettings({ maxAttempts: 1, deadline: Duration.micros(100n) })
    assert.deepStrictEqual(fine.deadline, Duration.micros(100n))
  })
})
