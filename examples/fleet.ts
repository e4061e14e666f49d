/**
 * One reply with recovery, in a fleet of processes that share one retry budget and one Retry-After pause over Redis
 * (docs/fleet.md): the provider, budget and waits from the environment as in recovery.ts, and the fleet from
 * `REPRISE_FLEET_URL` with a name derived from the endpoint and a hash of the key (`REPRISE_FLEET_NAME` overrides it).
 *
 *   redis-server --port 6379 &
 *   npx reprise simulate --script fixtures/scripts/cut-then-ok.json   # prints the base URL of each route
 *   OPENAI_API_KEY=test OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 REPRISE_FLEET_URL=redis://127.0.0.1:6379/0 \
 *     node examples/fleet.js
 */
import { NodeHttpClient, NodeRuntime } from "@effect/platform-node"
import { Budget, Policy, Recovery, RecoveryNotifications } from "@reprise/core"
import { FleetAddress, RedisFleet } from "@reprise/fleet"
import { HttpProvider } from "@reprise/providers"
import { Config, Effect, Layer } from "effect"

const program = Effect.gen(function*() {
  const reply = yield* Recovery.generate({ model: "gpt-4.1-mini", messages: [{ role: "user", text: "Hi" }] })
  yield* Effect.log(`${reply.text} (${reply.attempts} attempts, finish ${reply.finishReason})`)
})

// The fleet's default name: every worker on the same endpoint with the same key joins the same fleet.
const FleetLayer = Layer.unwrapEffect(Effect.gen(function*() {
  const apiKey = yield* Config.redacted("OPENAI_API_KEY")
  const baseUrl = yield* Config.string("OPENAI_BASE_URL").pipe(Config.withDefault("https://api.openai.com/v1"))
  // REPRISE_FLEET_URL, REPRISE_FLEET_NAME, REPRISE_FLEET_RATIO, REPRISE_FLEET_FLOOR, REPRISE_FLEET_WINDOW
  return RedisFleet.layerConfig(FleetAddress.defaultName(baseUrl, apiKey))
}))

const AppLayer = Layer.mergeAll(
  HttpProvider.layerConfig("openai-chat").pipe(Layer.provide(NodeHttpClient.layerUndici)),
  Budget.layerConfig,
  Policy.layerConfig,
  FleetLayer,
  RecoveryNotifications.layerCallback((n) =>
    n._tag === "FleetPaused"
      ? Effect.log(`waiting ${n.delay}: the fleet is paused`)
      : n._tag === "FleetUnavailable"
      ? Effect.log(`no fleet (${n.detail}): this process's own limits only`)
      : Effect.void
  )
)

program.pipe(Effect.provide(AppLayer), NodeRuntime.runMain)
