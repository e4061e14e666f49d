import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { chat, content, post, relay } from "./support.js"

describe("Relay smoke", () => {
  it.live("streams a whole answer", () =>
    Effect.gen(function*() {
      const h = yield* relay({ models: { m: { reply: { text: "Hello there friend." }, then: { kind: "stream" } } } })
      const r = yield* post(`${h.url}/v1/chat/completions`, chat("m", { stream: true }))
      console.log(r.status, r.text)
      assert.strictEqual(r.status, 200)
      assert.strictEqual(content(r.text), "Hello there friend.")
      const b = yield* post(`${h.url}/v1/chat/completions`, chat("m"))
      console.log(b.status, b.text, h.log)
    }).pipe(Effect.scoped), 20_000)
})
