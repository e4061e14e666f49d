/**
 * The headers a failure keeps (`internal/redaction.ts`): secret headers are redacted by name with `Headers.redact`
 * (the platform's `Headers.currentRedactedNames` and core's `ProviderFailure.sensitiveHeaders`), the key is scrubbed from every
 * other value, and the result is a plain record of strings, as `ProviderFailure` prints and serializes it.
 */
import { Headers } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import { Effect, Either, FiberRef, Redacted } from "effect"
import { inspect } from "node:util"
import { makeScrub, redactHeaders } from "../src/internal/redaction.js"
import { KEY, run, server } from "./support/harness.js"

const secrets = {
  authorization: `Bearer ${KEY}`,
  "proxy-authorization": "Basic abc",
  "x-api-key": KEY,
  "api-key": KEY,
  cookie: "a=b",
  "set-cookie": "session=s3cr3t",
  "openai-organization": "org-123",
  "openai-project": "proj_123"
}

describe("redactHeaders", () => {
  it("redacts secret names, scrubs the key from every other value, and returns plain strings", () => {
    const headers = Headers.fromInput({
      ...secrets,
      "content-type": "application/json",
      "x-echo": `the key ${KEY} came back`,
      "x-request-id": "req_1"
    })
    const out = redactHeaders(headers, [], makeScrub(Redacted.make(KEY)))
    assert.deepStrictEqual(out, {
      ...Object.fromEntries(Object.keys(secrets).map((name) => [name, "<redacted>"])),
      "content-type": "application/json",
      "x-echo": "the key <redacted> came back",
      "x-request-id": "req_1"
    })
    for (const value of Object.values(out)) assert.strictEqual(typeof value, "string")
    assert.deepStrictEqual(JSON.parse(JSON.stringify(out)), out)
  })

  it("redacts by pattern as Headers.redact does", () => {
    const out = redactHeaders(Headers.fromInput({ "x-secret-a": "1", "x-other": "2" }), [/^x-secret-/], (s) => s)
    assert.deepStrictEqual(out, { "x-secret-a": "<redacted>", "x-other": "2" })
  })
})

describe("a failure's headers", () => {
  it.effect("are plain strings with secrets redacted and the key scrubbed, in the error and its JSON", () =>
    Effect.gen(function*() {
      const s = yield* server((_req, res) => {
        res.writeHead(429, {
          "content-type": "application/json",
          "retry-after": "1",
          "set-cookie": `session=${KEY}`,
          "openai-organization": "org-123",
          "x-echo": `echo ${KEY}`,
          "x-secret-extra": "only when named"
        })
        res.end(JSON.stringify({ error: { message: "slow down", type: "rate_limit_error" } }))
      })
      const provider = yield* OpenAiChat.make({ apiKey: Redacted.make(KEY), baseUrl: `${s.url}/v1` })
      const failureOf = Effect.map(run(provider), ({ result }) => {
        if (Either.isRight(result)) return assert.fail("a 429 must fail")
        return result.left as { readonly headers?: Record<string, string> }
      })

      const error = yield* failureOf
      const headers = error.headers!
      assert.strictEqual(headers["set-cookie"], "<redacted>")
      assert.strictEqual(headers["openai-organization"], "<redacted>")
      assert.strictEqual(headers["x-echo"], "echo <redacted>")
      assert.strictEqual(headers["content-type"], "application/json")
      assert.strictEqual(headers["x-secret-extra"], "only when named")
      for (const value of Object.values(headers)) assert.strictEqual(typeof value, "string")
      const json = JSON.parse(JSON.stringify(error))
      assert.strictEqual(json.headers["x-echo"], "echo <redacted>")
      assert.notInclude(inspect(error, { depth: 10 }), KEY)

      // a name added to the platform's redacted names is redacted in errors too
      const named = yield* failureOf.pipe(
        Effect.locally(Headers.currentRedactedNames, ["x-secret-extra"])
      )
      assert.strictEqual(named.headers!["x-secret-extra"], "<redacted>")
      assert.strictEqual(named.headers!["set-cookie"], "<redacted>")
      const defaults = yield* FiberRef.get(Headers.currentRedactedNames)
      assert.includeMembers([...defaults], ["authorization", "cookie", "set-cookie", "x-api-key"])
    }).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici)))

  it.effect("a key sent back as the content-encoding (2xx and 4xx) is scrubbed, whatever its case", () =>
    Effect.gen(function*() {
      for (const status of [200, 400]) {
        const s = yield* server((_req, res) => {
          res.writeHead(status, { "content-encoding": KEY, "content-type": "text/event-stream" })
          res.end("abcd")
        })
        const provider = yield* OpenAiChat.make({ apiKey: Redacted.make(KEY), baseUrl: `${s.url}/v1` })
        const { result } = yield* run(provider)
        if (Either.isRight(result)) return assert.fail("an encoded body must fail")
        const seen = `${String(result.left)} ${JSON.stringify(result.left)} ${inspect(result.left, { depth: 10 })}`
        assert.notInclude(seen.toLowerCase(), KEY.slice(8).toLowerCase(), seen)
        assert.include(seen, "<redacted>")
      }
    }).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici)))
})
