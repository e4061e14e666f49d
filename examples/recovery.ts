/**
 * One reply with recovery, composed exactly as the README shows: the provider from the environment
 * (`OPENAI_API_KEY`, `OPENAI_BASE_URL`), the budget and the waits from the environment, and a notification
 * callback that says when an attempt was discarded.
 *
 *   npx reprise simulate --script fixtures/scripts/cut-then-ok.json   # prints the base URL of each route
 *   OPENAI_API_KEY=test OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 node examples/recovery.js
 */
import { NodeHttpClient, NodeRuntime } from "@effect/platform-node"
import { Budget, Policy, Recovery, RecoveryNotifications } from "@reprise/core"
import { HttpProvider } from "@reprise/providers"
import { Effect, Layer } from "effect"

const program = Effect.gen(function*() {
  const reply = yield* Recovery.generate({ model: "gpt-4.1-mini", messages: [{ role: "user", text: "Hi" }] })
  yield* Effect.log(`${reply.text} (${reply.attempts} attempts, finish ${reply.finishReason})`)
})

const AppLayer = Layer.mergeAll(
  // OPENAI_API_KEY (Redacted), OPENAI_BASE_URL, timeouts; the undici client, which never follows redirects
  HttpProvider.layerConfig("openai-chat").pipe(Layer.provide(NodeHttpClient.layerUndici)),
  Budget.layerConfig, // REPRISE_MAX_ATTEMPTS, REPRISE_DEADLINE
  Policy.layerConfig, // REPRISE_BACKOFF_BASE, REPRISE_BACKOFF_MAX
  RecoveryNotifications.layerCallback((n) =>
    n._tag === "AttemptDiscarded" ? Effect.log(`attempt ${n.attempt} discarded`) : Effect.void
  )
)

program.pipe(Effect.provide(AppLayer), NodeRuntime.runMain)
