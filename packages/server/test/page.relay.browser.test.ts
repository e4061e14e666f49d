/**
 * The chat page served by the real relay in front of the simulator, in a headless Chromium: a cut stream and its
 * replay leave the committed answer alone on the page, a switch of route is named, and Stop cancels the upstream
 * request. page.browser.test.ts has the steps the relay cannot be held at (the doomed text on screen, then removed).
 */
import { assert, describe, it } from "@effect/vitest"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Effect } from "effect"
import { relay } from "./support.js"
import {
  expectCutAndReplay,
  expectStopped,
  launch,
  runPageScenario,
  shownReplies,
  waitForAnyReply
} from "./support/page.js"

const TEXT = "One two three four five six."
const WORDS = Array.from({ length: 40 }, (_, i) => `w${i}`).join(" ")

const script: SimulatorScript.Script = {
  models: {
    "cut-after": { reply: { text: TEXT }, steps: [{ kind: "reset", afterTokens: 2 }], then: { kind: "stream" } },
    "slow": { reply: { text: WORDS }, then: { kind: "drip", everyMs: 50, events: 1 } }
  }
}

const browser = Effect.acquireRelease(Effect.promise(launch), ({ close }) => Effect.promise(close))

describe("the chat page, served by the relay", () => {
  it.scopedLive(
    "a cut after content and its replay: the page drops the cut text and shows the answer alone",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(script)
        const { browser: chromium } = yield* browser
        const run = yield* Effect.promise(() => runPageScenario(chromium, `${h.url}/`, { model: "cut-after" }))
        expectCutAndReplay(run, `${h.url}/`, { answer: TEXT, rollbacks: 1 })
        // "One two" streamed, then removed whole at the rollback
        assert.deepStrictEqual(shownReplies(run.changes), ["One two", TEXT])
        assert.match(run.notices[0]!, /^attempt 1 discarded: connection reset; retrying in \d+\.\d s$/)
        assert.strictEqual((yield* h.sim.requestsFor("cut-after")).length, 2)
      }),
    30_000
  )

  it.scopedLive(
    "a switch of route: the notices name the next route, the commit the serving one",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: {
            flaky: { reply: { text: TEXT }, then: { kind: "reset", afterTokens: 1 } },
            healthy: { reply: { text: TEXT }, then: { kind: "stream" } }
          }
        }, { plan: ["flaky", "healthy"] })
        const { browser: chromium } = yield* browser
        const run = yield* Effect.promise(() => runPageScenario(chromium, `${h.url}/`, { model: "flaky" }))
        expectCutAndReplay(run, `${h.url}/`, { answer: TEXT, rollbacks: 2 })
        assert.deepStrictEqual(shownReplies(run.changes), ["One", "One", TEXT])
        assert.match(run.notices[0]!, /^attempt 1 discarded: connection reset; retrying in \d+\.\d s$/)
        assert.match(
          run.notices[1]!,
          /^attempt 2 discarded: connection reset; retrying in \d+\.\d s on openai-chat healthy$/
        )
        assert.strictEqual(run.meta, "served by openai-chat healthy · model healthy · 3 attempts")
      }),
    30_000
  )

  it.scopedLive(
    "Stop aborts the request: the relay closes the upstream request and sends nothing again",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(script, { idleTimeoutMs: 1_000 })
        const { browser: chromium } = yield* browser
        const run = yield* Effect.promise(() =>
          runPageScenario(chromium, `${h.url}/`, {
            model: "slow",
            during: async (page) => {
              await waitForAnyReply(page)
              await page.locator("#stop").click()
            }
          })
        )
        expectStopped(run, `${h.url}/`)
        assert.deepStrictEqual(run.notices, ["stopped: the request was aborted and nothing was committed"])
        const [upstream] = yield* h.sim.requestsFor("slow")
        assert.strictEqual((yield* h.sim.awaitClose(upstream!.id)).by, "client")
        // an idle timeout would have replayed it by now
        yield* Effect.sleep("1500 millis")
        assert.strictEqual((yield* h.sim.requestsFor("slow")).length, 1)
      }),
    30_000
  )
})
