/**
 * What each output mode shows of a plan of routes: a notice when a reply leaves a route, a `route_switched` event and
 * the `commit`'s `model`, `route` and `usage` with `--json`, and each route's last failure after an error that ended
 * them all.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Chat from "@reprise/core/Chat"
import * as Generation from "@reprise/core/Generation"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import { Notification } from "@reprise/core/RecoveryNotifications"
import { Duration, Effect, Option } from "effect"
import * as Output from "../src/Output.js"
import * as Render from "../src/Render.js"

const primary = { index: 1, name: "openai-chat gpt-4.1", model: "gpt-4.1" }
const second = { index: 2, name: "anthropic claude-sonnet-4", model: "claude-sonnet-4" }
const third = { index: 3, name: "openai-chat gpt-4.1-mini", model: "gpt-4.1-mini" }

const unavailable = ProviderFailure.fromHttpStatus({ status: 503 })

const reply = new Generation.Reply({
  text: "from the fallback",
  reasoning: "",
  toolCalls: [],
  finishReason: "stop",
  providerFinishReason: "end_turn",
  usage: Option.some({ inputTokens: 12, outputTokens: 4 }),
  attempts: 2,
  model: "claude-sonnet-4-20250514",
  route: second
})

/** The primary shows 7 chars and fails with a 503; the reply moves to route 2, which commits. */
const switched = [
  Notification.AttemptStarted({ attempt: 1, maxAttempts: 11 }),
  Notification.Preview({ attempt: 1, event: Generation.TextDelta({ text: "partial" }) }),
  Notification.AttemptDiscarded({ attempt: 1, discardedText: "partial", discardedToolCalls: [], error: unavailable }),
  Notification.RouteSwitched({
    from: primary,
    to: second,
    reason: "Transient",
    error: unavailable,
    nextAttempt: 2,
    remainingAttempts: 10,
    remainingTime: Duration.seconds(590)
  }),
  Notification.AttemptStarted({ attempt: 2, maxAttempts: 11 }),
  Notification.Preview({ attempt: 2, event: Generation.TextDelta({ text: "from the fallback" }) }),
  Notification.Committed({ reply })
]

const play = (mode: Render.Mode, isTTY: boolean, notifications = switched, model?: string) =>
  Effect.gen(function*() {
    const capture = Output.makeCapture(isTTY)
    yield* Effect.gen(function*() {
      const render = yield* Render.make(mode, undefined, model)
      for (const n of notifications) yield* render.notifications.notify(n)
      yield* render.commit(Chat.Commit.Reply({ reply, message: reply.message }))
    }).pipe(Effect.provide(capture.layer))
    return { stdout: capture.stdout(), stderr: capture.stderr() }
  })

const switchLine =
  "reprise: route 1 (openai-chat gpt-4.1) failed (HTTP 503); discarded 7 chars; switching to route 2 (anthropic " +
  "claude-sonnet-4)\n"

describe("Render with routes", () => {
  it.effect("plain: stdout is the fallback's text only; stderr names the switch", () =>
    Effect.gen(function*() {
      const { stderr, stdout } = yield* play("plain", false)
      assert.strictEqual(stdout, "from the fallback\n")
      assert.strictEqual(stderr, switchLine)
    }))

  it.effect("tty: the switch is announced like a replay; the primary's preview is not the answer", () =>
    Effect.gen(function*() {
      const { stderr, stdout } = yield* play("tty", true)
      assert.strictEqual(stdout, "partial\nfrom the fallback\n")
      assert.strictEqual(
        stderr,
        switchLine + "reprise: attempt 2 committed; text shown by earlier attempts is not part of the answer\n"
      )
    }))

  it.effect("json: a route_switched event; the commit names the model, the route and the usage", () =>
    Effect.gen(function*() {
      const { stderr, stdout } = yield* play("json", false)
      const events = stdout.trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(events.map((e) => e.type), [
        "attempt",
        "delta",
        "discard",
        "route_switched",
        "attempt",
        "delta",
        "commit"
      ])
      assert.deepStrictEqual(events[3], {
        type: "route_switched",
        attempt: 2,
        from: primary,
        to: second,
        reason: "Transient",
        failure: "HTTP 503"
      })
      assert.deepStrictEqual(events.at(-1), {
        type: "commit",
        text: "from the fallback",
        finishReason: "stop",
        attempts: 2,
        toolCalls: 0,
        model: "claude-sonnet-4-20250514",
        route: second,
        usage: { input_tokens: 12, output_tokens: 4 },
        ledger: null
      })
      assert.strictEqual(stderr, switchLine)
    }))

  it.effect("json: without a model from the provider, the commit names the route's, else the one asked for", () =>
    Effect.gen(function*() {
      const capture = Output.makeCapture(false)
      yield* Effect.gen(function*() {
        const render = yield* Render.make("json", undefined, "asked-for")
        const unnamed = new Generation.Reply({ ...reply, model: undefined })
        yield* render.commit(Chat.Commit.Reply({ reply: unnamed, message: unnamed.message }))
        const planless = new Generation.Reply({ ...reply, model: undefined, route: undefined, usage: Option.none() })
        yield* render.commit(Chat.Commit.Reply({ reply: planless, message: planless.message }))
      }).pipe(Effect.provide(capture.layer))
      const [first, last] = capture.stdout().trim().split("\n").map((l) => JSON.parse(l))
      assert.strictEqual(first.model, "claude-sonnet-4")
      assert.deepStrictEqual([last.model, last.route, last.usage], ["asked-for", null, null])
    }))

  it.effect("a route skipped for its open circuit: no failure, nothing discarded", () =>
    Effect.gen(function*() {
      const skipped = [
        ...switched.slice(0, 4),
        Notification.RouteSwitched({
          from: second,
          to: third,
          reason: "CircuitOpen",
          nextAttempt: 2,
          remainingAttempts: 10,
          remainingTime: Duration.seconds(590)
        })
      ]
      for (const mode of ["plain", "json"] as const) {
        const { stderr } = yield* play(mode, false, skipped)
        assert.strictEqual(
          stderr,
          switchLine +
            "reprise: route 2 (anthropic claude-sonnet-4) skipped: circuit open; switching to route 3 (openai-chat " +
            "gpt-4.1-mini)\n",
          mode
        )
      }
    }))

  it.effect("every route failed: a line per route after the error, and routeFailures in the json error", () =>
    Effect.gen(function*() {
      const error = new RecoveryExhausted.RecoveryExhausted({
        reason: "Attempts",
        attempts: 4,
        maxAttempts: 4,
        elapsed: Duration.seconds(3),
        lastError: unavailable,
        errors: [unavailable],
        routeFailures: [
          { route: 1, name: primary.name, model: primary.model, message: "HTTP 503", error: unavailable },
          { route: 2, name: second.name, model: second.model, message: "circuit open" }
        ]
      })
      for (const mode of ["plain", "tty", "json"] as const) {
        const capture = Output.makeCapture(mode === "tty")
        const code = yield* Effect.flatMap(Render.make(mode), (render) => render.error(error, false)).pipe(
          Effect.provide(capture.layer)
        )
        assert.strictEqual(code, 75)
        const lines = capture.stderr().split("\n")
        assert.match(lines[0]!, /^reprise: error \[RecoveryExhausted\.Attempts\]: /)
        assert.deepStrictEqual(lines.slice(1), [
          "reprise:   route 1 (openai-chat gpt-4.1): HTTP 503",
          "reprise:   route 2 (anthropic claude-sonnet-4): circuit open",
          ""
        ])
        if (mode === "json") {
          assert.deepStrictEqual(JSON.parse(capture.stdout()).routeFailures, [
            { route: 1, name: primary.name, model: primary.model, message: "HTTP 503" },
            { route: 2, name: second.name, model: second.model, message: "circuit open" }
          ])
        }
      }
    }))
})
