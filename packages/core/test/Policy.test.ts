import { assert, describe, it } from "@effect/vitest"
import { ConfigError, ConfigProvider, Duration, Effect, Layer, Option, Random } from "effect"
import * as Policy from "../src/Policy.js"

const waits = (settings: Policy.Settings, n: number) =>
  Effect.gen(function*() {
    const planner = yield* Policy.planner(Policy.backoff(settings))
    const out: Array<number> = []
    for (let i = 0; i < n; i++) out.push(Duration.toMillis(Option.getOrThrow(yield* planner.next)))
    return out
  })

describe("Policy", () => {
  it.effect("default waits without jitter: 1, 2, 4, 8, 16, 32, 60, 60, 60, 60 s", () =>
    Effect.gen(function*() {
      const out = yield* waits({ ...Policy.defaultSettings, jitter: false }, 10)
      assert.deepStrictEqual(out, [1, 2, 4, 8, 16, 32, 60, 60, 60, 60].map((s) => s * 1000))
    }))

  it.effect("jitter only shortens, to within [0.75·w, w], and repeats for the same seed", () =>
    Effect.gen(function*() {
      const nominal = [1, 2, 4, 8, 16, 32, 60, 60, 60, 60].map((s) => s * 1000)
      const a = yield* Effect.withRandom(waits(Policy.defaultSettings, 10), Random.make("seed-1"))
      const b = yield* Effect.withRandom(waits(Policy.defaultSettings, 10), Random.make("seed-1"))
      const c = yield* Effect.withRandom(waits(Policy.defaultSettings, 10), Random.make("seed-2"))
      assert.deepStrictEqual(a, b)
      assert.notDeepEqual(a, c)
      a.forEach((w, i) => {
        assert.isAtLeast(w, 0.75 * nominal[i])
        assert.isAtMost(w, nominal[i])
      })
      assert.isTrue(a.some((w, i) => w < nominal[i]), "jitter changes something")
    }))

  it.effect("custom base and cap", () =>
    Effect.gen(function*() {
      const out = yield* waits({
        ...Policy.defaultSettings,
        backoffBase: Duration.millis(100),
        backoffMax: Duration.millis(500),
        jitter: false
      }, 5)
      assert.deepStrictEqual(out, [100, 200, 400, 500, 500])
    }))

  describe("lengthen", () => {
    it("a longer Retry-After wins and is not capped", () => {
      assert.deepStrictEqual(Policy.lengthen(Duration.seconds(1), Option.some(Duration.seconds(90))), {
        delay: Duration.seconds(90),
        source: "retry-after"
      })
    })
    it("a shorter Retry-After never shortens the backoff", () => {
      assert.deepStrictEqual(Policy.lengthen(Duration.seconds(8), Option.some(Duration.seconds(2))), {
        delay: Duration.seconds(8),
        source: "backoff"
      })
    })
    it("a fractional Retry-After is rounded up to whole milliseconds", () => {
      const wait = Policy.lengthen(Duration.millis(1), Option.some(Duration.micros(1_500n)))
      assert.strictEqual(Duration.toMillis(wait.delay), 2)
      assert.strictEqual(wait.source, "retry-after")
    })
    it("no Retry-After keeps the backoff", () => {
      assert.deepStrictEqual(Policy.lengthen(Duration.seconds(4), Option.none()), {
        delay: Duration.seconds(4),
        source: "backoff"
      })
    })
  })

  describe("config", () => {
    const provide = (env: Record<string, string>) =>
      Effect.provide(
        Policy.layerConfig.pipe(
          Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
        )
      )
    it.effect("reads REPRISE_BACKOFF_BASE and REPRISE_BACKOFF_MAX in ms", () =>
      Effect.gen(function*() {
        const settings = yield* Policy.PolicySettings
        assert.deepStrictEqual(settings.backoffBase, Duration.millis(250))
        assert.deepStrictEqual(settings.backoffMax, Duration.millis(4000))
        assert.isTrue(settings.jitter)
      }).pipe(provide({ REPRISE_BACKOFF_BASE: "250", REPRISE_BACKOFF_MAX: "4000" })))
    it.effect("rejects a max below the base and non-numbers", () =>
      Effect.gen(function*() {
        const inverted = yield* Effect.flip(
          Policy.PolicySettings.pipe(provide({ REPRISE_BACKOFF_BASE: "5000", REPRISE_BACKOFF_MAX: "10" }))
        )
        assert.include(String(inverted), "REPRISE_BACKOFF_MAX")
        const nan = yield* Effect.flip(Policy.PolicySettings.pipe(provide({ REPRISE_BACKOFF_BASE: "fast" })))
        assert.include(String(nan), "REPRISE_BACKOFF_BASE")
      }))
  })
})

describe("Policy settings, declared once", () => {
  const read = <A>(config: Effect.Effect<A, ConfigError.ConfigError>, env: Record<string, string>) =>
    Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map(Object.entries(env))))

  for (
    const [name, config, variable, fallback] of [
      ["backoffBaseConfig", Policy.backoffBaseConfig, Policy.backoffBaseVariable, Policy.defaultSettings.backoffBase],
      ["backoffMaxConfig", Policy.backoffMaxConfig, Policy.backoffMaxVariable, Policy.defaultSettings.backoffMax]
    ] as const
  ) {
    it.effect(`${name}: ${variable} in whole ms, its default, at least 0`, () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* read(config, { [variable]: "250" }), Duration.millis(250))
        assert.deepStrictEqual(yield* read(config, { [variable]: "0" }), Duration.zero)
        assert.deepStrictEqual(yield* read(config, {}), fallback)
        const error = yield* Effect.flip(read(config, { [variable]: "-1" }))
        assert.strictEqual(String(error), `(Invalid data at ${variable}: "must be >= 0 ms")`)
      }))
  }

  it("the variables and defaults are the documented ones", () => {
    assert.strictEqual(Policy.backoffBaseVariable, "REPRISE_BACKOFF_BASE")
    assert.strictEqual(Policy.backoffMaxVariable, "REPRISE_BACKOFF_MAX")
    assert.deepStrictEqual(Policy.defaultSettings.backoffBase, Duration.millis(1000))
    assert.deepStrictEqual(Policy.defaultSettings.backoffMax, Duration.millis(60_000))
  })

  it.effect("config binds the two: the max is not smaller than the base, in one message naming both", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(read(Policy.config, { REPRISE_BACKOFF_BASE: "20", REPRISE_BACKOFF_MAX: "10" }))
      assert.isTrue(ConfigError.isConfigError(error))
      assert.include(String(error), "REPRISE_BACKOFF_MAX must not be smaller than REPRISE_BACKOFF_BASE")
      const equal = yield* read(Policy.config, { REPRISE_BACKOFF_BASE: "20", REPRISE_BACKOFF_MAX: "20" })
      assert.deepStrictEqual(equal, {
        ...Policy.defaultSettings,
        backoffBase: Duration.millis(20),
        backoffMax: Duration.millis(20)
      })
    }))
})
