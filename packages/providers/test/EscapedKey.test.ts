/**
 * A hostile server can spell the key with JSON escapes (`\u0073k-…`), which a scrub of the raw text does not see:
 * in an error body, a 2xx JSON body where a stream was expected, and the data of a malformed event, over loopback.
 * Nothing reprise shows of them may hold the key.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import { Effect, Either, Redacted } from "effect"
import { inspect } from "node:util"
import { KEY, run, server } from "./support/harness.js"

const escaped = `\\u00${KEY.charCodeAt(0).toString(16)}${KEY.slice(1)}`

const cases: ReadonlyArray<readonly [string, number, string, string]> = [
  ["an error body", 400, "application/json", JSON.stringify({ detail: "x" }).replace("x", escaped)],
  ["a JSON body instead of a stream", 200, "application/json", `{"foo":"${escaped}"}`],
  ["a malformed event", 200, "text/event-stream", `data: {"choices":[{"index":"${escaped}"}]}\n\n`]
]

describe("a JSON-escaped key", () => {
  for (const [name, status, type, body] of cases) {
    it.effect(`in ${name} is scrubbed`, () =>
      Effect.gen(function*() {
        const s = yield* server((_req, res) => {
          res.writeHead(status, { "content-type": type })
          res.end(body)
        })
        const provider = yield* OpenAiChat.make({ apiKey: Redacted.make(KEY), baseUrl: `${s.url}/v1` })
        const { result } = yield* run(provider)
        if (Either.isRight(result)) return assert.fail("must fail")
        const seen = `${String(result.left)} ${JSON.stringify(result.left)} ${inspect(result.left, { depth: 10 })}`
        assert.notInclude(seen, KEY.slice(1, 12), seen)
        assert.include(seen, "<redacted>", seen)
      }).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici)))
  }
})

describe("a piece of the key", () => {
  it.effect("echoed by a 401 (its first 40 characters, its last 12) leaves no 8 characters of it", () =>
    Effect.gen(function*() {
      const message = `Incorrect API key provided: ${KEY.slice(0, 40)}...${KEY.slice(-12)}. See the docs.`
      const s = yield* server((_req, res) => {
        res.writeHead(401, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message, type: "invalid_request_error", code: "invalid_api_key" } }))
      })
      const provider = yield* OpenAiChat.make({ apiKey: Redacted.make(KEY), baseUrl: `${s.url}/v1` })
      const { result } = yield* run(provider)
      if (Either.isRight(result)) return assert.fail("must fail")
      const seen = `${String(result.left)} ${JSON.stringify(result.left)}`
      for (let i = 0; i + 8 <= KEY.length; i++) assert.notInclude(seen, KEY.slice(i, i + 8), seen)
      assert.include(seen, "Incorrect API key provided: <redacted>...<redacted>. See the docs.")
    }).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici)))
})
