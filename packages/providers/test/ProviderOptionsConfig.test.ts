/**
 * The provider settings read from outside, each declared once in `ProviderOptions`: its variable, its default and its
 * range. The environment's bad value is a `ConfigError` naming the variable; the same range checks options given in
 * code (`make`), as a `RangeError` with the same message.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import { Cause, ConfigError, ConfigProvider, Duration, Effect, Exit, Option, Redacted } from "effect"
import { fakeClient, KEY } from "./support/harness.js"
import { subjects } from "./support/protocols.js"

const read = <A>(config: Effect.Effect<A, ConfigError.ConfigError>, env: Record<string, string>) =>
  Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map(Object.entries(env))))

/** The defect `make` dies with for `options`. */
const defectOf = (options: Partial<ProviderOptions.Options>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(
      Effect.provideService(
        subjects[0].make({ apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:9/v1", ...options }),
        HttpClient.HttpClient,
        fakeClient("")
      )
    )
    assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
    return Exit.isFailure(exit) ? Option.getOrThrow(Cause.dieOption(exit.cause)) : undefined
  })

describe("ProviderOptions settings, declared once", () => {
  const timeouts = [
    [
      "firstByteTimeoutConfig",
      ProviderOptions.firstByteTimeoutConfig,
      ProviderOptions.firstByteTimeoutVariable,
      "REPRISE_FIRST_BYTE_TIMEOUT",
      Duration.millis(60_000)
    ],
    [
      "idleTimeoutConfig",
      ProviderOptions.idleTimeoutConfig,
      ProviderOptions.idleTimeoutVariable,
      "REPRISE_IDLE_TIMEOUT",
      Duration.millis(120_000)
    ]
  ] as const
  for (const [name, config, variable, expected, fallback] of timeouts) {
    it.effect(`${name}: ${expected} in whole ms, default ${Duration.format(fallback)}, more than 0`, () =>
      Effect.gen(function*() {
        assert.strictEqual(variable, expected)
        assert.deepStrictEqual(yield* read(config, { [variable]: "1500" }), Duration.millis(1500))
        assert.deepStrictEqual(yield* read(config, {}), fallback)
        for (const bad of ["0", "-5"]) {
          const error = yield* Effect.flip(read(config, { [variable]: bad }))
          assert.strictEqual(String(error), `(Invalid data at ${variable}: "must be > 0 ms")`, bad)
        }
        const notInteger = yield* Effect.flip(read(config, { [variable]: "1.5" }))
        assert.include(String(notInteger), variable)
      }))
  }

  it.effect("firstTokenTimeoutConfig: REPRISE_FIRST_TOKEN_TIMEOUT in whole ms, unset by default, more than 0", () =>
    Effect.gen(function*() {
      const config = ProviderOptions.firstTokenTimeoutConfig
      const variable = ProviderOptions.firstTokenTimeoutVariable
      assert.strictEqual(variable, "REPRISE_FIRST_TOKEN_TIMEOUT")
      assert.deepStrictEqual(yield* read(config, { [variable]: "1500" }), Option.some(Duration.millis(1500)))
      assert.deepStrictEqual(yield* read(config, {}), Option.none())
      for (const bad of ["0", "-5"]) {
        const error = yield* Effect.flip(read(config, { [variable]: bad }))
        assert.strictEqual(String(error), `(Invalid data at ${variable}: "must be > 0 ms")`, bad)
      }
      const notInteger = yield* Effect.flip(read(config, { [variable]: "1.5" }))
      assert.include(String(notInteger), variable)
    }))

  it.effect("maxReplyBytesConfig: REPRISE_MAX_REPLY_BYTES, default 64 MiB, at least 1", () =>
    Effect.gen(function*() {
      assert.strictEqual(ProviderOptions.maxReplyBytesVariable, "REPRISE_MAX_REPLY_BYTES")
      assert.strictEqual(yield* read(ProviderOptions.maxReplyBytesConfig, { REPRISE_MAX_REPLY_BYTES: "1" }), 1)
      assert.strictEqual(yield* read(ProviderOptions.maxReplyBytesConfig, {}), 64 * 1024 * 1024)
      const error = yield* Effect.flip(read(ProviderOptions.maxReplyBytesConfig, { REPRISE_MAX_REPLY_BYTES: "0" }))
      assert.strictEqual(String(error), `(Invalid data at REPRISE_MAX_REPLY_BYTES: "must be at least 1")`)
    }))

  it.effect("streamUsageConfig: REPRISE_STREAM_USAGE, true or false, default true", () =>
    Effect.gen(function*() {
      const config = ProviderOptions.streamUsageConfig
      assert.strictEqual(ProviderOptions.streamUsageVariable, "REPRISE_STREAM_USAGE")
      assert.isTrue(yield* read(config, {}))
      assert.isTrue(yield* read(config, { REPRISE_STREAM_USAGE: "true" }))
      assert.isFalse(yield* read(config, { REPRISE_STREAM_USAGE: "false" }))
      for (const bad of ["yes", "0", "TRUE", ""]) {
        const error = yield* Effect.flip(read(config, { REPRISE_STREAM_USAGE: bad }))
        assert.isTrue(ConfigError.isConfigError(error))
        assert.strictEqual(
          String(error),
          `(Invalid data at REPRISE_STREAM_USAGE: "must be true or false, got ${JSON.stringify(bad)}")`
        )
      }
    }))

  it.effect("config reads REPRISE_STREAM_USAGE for openai-chat only", () =>
    Effect.gen(function*() {
      const chat = yield* read(ProviderOptions.config("openai-chat"), { OPENAI_API_KEY: "sk-test" })
      assert.isTrue(chat.streamUsage)
      const off = yield* read(ProviderOptions.config("openai-chat"), {
        OPENAI_API_KEY: "sk-test",
        REPRISE_STREAM_USAGE: "false"
      })
      assert.isFalse(off.streamUsage)
      const bad = yield* Effect.flip(
        read(ProviderOptions.config("openai-chat"), { OPENAI_API_KEY: "sk-test", REPRISE_STREAM_USAGE: "no" })
      )
      assert.include(String(bad), "REPRISE_STREAM_USAGE")
      // the other protocols do not read it: a bad value there is not their error
      for (const protocol of ["openai-responses", "anthropic", "subscription"] as const) {
        const options = yield* read(ProviderOptions.config(protocol), {
          OPENAI_API_KEY: "sk-test",
          ANTHROPIC_API_KEY: "sk-test",
          REPRISE_STREAM_USAGE: "no"
        })
        assert.isUndefined(options.streamUsage)
      }
    }))

  it.effect("config is built from the fields", () =>
    Effect.gen(function*() {
      const options = yield* read(ProviderOptions.config("anthropic"), {
        ANTHROPIC_API_KEY: "sk-test",
        REPRISE_FIRST_BYTE_TIMEOUT: "5",
        REPRISE_IDLE_TIMEOUT: "6",
        REPRISE_MAX_REPLY_BYTES: "7",
        REPRISE_FIRST_TOKEN_TIMEOUT: "8"
      })
      assert.deepStrictEqual(options.firstByteTimeout, Duration.millis(5))
      assert.deepStrictEqual(options.firstTokenTimeout, Duration.millis(8))
      const unset = yield* read(ProviderOptions.config("anthropic"), { ANTHROPIC_API_KEY: "sk-test" })
      assert.isUndefined(unset.firstTokenTimeout)
      assert.deepStrictEqual(options.idleTimeout, Duration.millis(6))
      assert.strictEqual(options.maxReplyBytes, 7)
      assert.strictEqual(options.baseUrl, ProviderOptions.defaultAnthropicBaseUrl)
    }))

  it.effect("options in code are checked with the same ranges, and the same messages, as RangeErrors", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [Partial<ProviderOptions.Options>, string]> = [
        [{ idleTimeout: Duration.zero }, "idleTimeout must be > 0 ms, got 0"],
        [{ firstByteTimeout: 0 }, "firstByteTimeout must be > 0 ms, got 0"],
        [{ firstTokenTimeout: 0 }, "firstTokenTimeout must be > 0 ms, got 0"],
        [{ firstTokenTimeout: Duration.infinity }, "firstTokenTimeout must be finite, got Infinity"],
        [{ idleTimeout: Duration.infinity }, "idleTimeout must be finite, got Infinity"],
        [{ maxReplyBytes: 0 }, "maxReplyBytes must be at least 1, got 0"],
        [{ maxReplyBytes: 1.5 }, "maxReplyBytes must be a whole number, got 1.5"],
        [{ maxEventSize: 0 }, "maxEventSize must be at least 1, got 0"]
      ]
      for (const [options, message] of cases) {
        const defect = yield* defectOf(options)
        assert.instanceOf(defect, RangeError)
        assert.strictEqual((defect as RangeError).message, message)
      }
    }))
})
