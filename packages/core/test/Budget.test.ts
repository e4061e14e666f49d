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
        [{ REPRISE_DEADLINE: "soon" }, "REPRISE_DEADLINE"]
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
