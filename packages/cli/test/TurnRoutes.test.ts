/**
 * The layers of a turn with fallback routes: the plan `Recovery.generate` reads (each route's protocol, endpoint,
 * model, limit and window, in order), the primary as the `Provider`, and the circuits with the settings given; without
 * a fallback, no plan and the default circuits, as before routes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Circuit from "@reprise/core/Circuit"
import * as Provider from "@reprise/core/Provider"
import * as Routes from "@reprise/core/Routes"
import { Duration, Effect, Option, Redacted } from "effect"
import type * as Settings from "../src/Settings.js"
import * as Turn from "../src/Turn.js"

const base: Settings.Settings = {
  protocol: "openai-chat",
  baseUrl: "http://127.0.0.1:9/v1",
  apiKey: Redacted.make("sk-primary"),
  model: "gpt-4.1",
  maxAttempts: 11,
  deadline: Duration.seconds(600),
  backoffBase: Duration.seconds(1),
  backoffMax: Duration.seconds(60),
  idleTimeout: Duration.seconds(120),
  firstByteTimeout: Duration.seconds(60),
  firstTokenTimeout: Option.none(),
  fallbacks: [],
  routeAttempts: Option.none(),
  contextWindow: Option.none(),
  circuit: Circuit.defaultSettings,
  maxReplyBytes: 1024,
  streamUsage: true,
  recovery: true,
  json: false,
  session: Option.none(),
  waitSession: false,
  tools: [],
  workspace: ".",
  system: Option.none(),
  maxTokens: Option.none(),
  debug: false,
  background: false,
  prices: {}
}

const withFallbacks: Settings.Settings = {
  ...base,
  routeAttempts: Option.some(3),
  contextWindow: Option.some(128000),
  firstTokenTimeout: Option.some(Duration.millis(5000)),
  circuit: { failureThreshold: 5, coolDown: Duration.seconds(7) },
  fallbacks: [
    {
      protocol: "anthropic",
      model: "claude-sonnet-4",
      baseUrl: "http://127.0.0.1:9",
      apiKey: Redacted.make("sk-ant"),
      keyVariable: "ANTHROPIC_API_KEY",
      contextWindow: 200000
    },
    {
      protocol: "openai-responses",
      model: "o3",
      baseUrl: "http://127.0.0.1:9/v1",
      apiKey: Redacted.make("sk-other"),
      keyVariable: "OTHER_KEY",
      attempts: 1
    }
  ]
}

describe("Turn.providerLayer", () => {
  it.effect("with fallbacks: the plan, in order, the primary as the Provider, and the circuits' settings", () =>
    Effect.gen(function*() {
      const plan = Option.getOrThrow(yield* Effect.serviceOption(Routes.Routes))
      assert.deepStrictEqual(
        plan.routes.map((r) => [Routes.nameOf(r), r.model, r.attempts, r.contextWindow, Routes.key(r)]),
        [
          ["openai-chat gpt-4.1", "gpt-4.1", 3, 128000, "openai-chat http://127.0.0.1:9/v1 gpt-4.1"],
          [
            "anthropic claude-sonnet-4",
            "claude-sonnet-4",
            undefined,
            200000,
            "anthropic http://127.0.0.1:9 claude-sonnet-4"
          ],
          ["openai-responses o3", "o3", 1, undefined, "openai-responses http://127.0.0.1:9/v1 o3"]
        ]
      )
      assert.strictEqual(yield* Provider.Provider, plan.routes[0].provider)
      assert.deepStrictEqual(yield* Circuit.CircuitSettings, { failureThreshold: 5, coolDown: Duration.seconds(7) })
      // the process's circuits, with that threshold: 5 failures open one
      const circuit = yield* Circuit.Circuit
      for (let i = 0; i < 4; i++) assert.strictEqual(yield* circuit.failed("k"), "closed")
      assert.strictEqual(yield* circuit.failed("k"), "open")
    }).pipe(Effect.provide(Turn.providerLayer(withFallbacks))))

  it.effect("without a fallback: no plan, the one provider, and the default circuits", () =>
    Effect.gen(function*() {
      assert.isTrue(Option.isNone(yield* Effect.serviceOption(Routes.Routes)))
      assert.strictEqual((yield* Provider.Provider).protocol, "openai-chat")
      assert.deepStrictEqual(yield* Circuit.CircuitSettings, Circuit.defaultSettings)
    }).pipe(Effect.provide(Turn.providerLayer(base))))
})
