/**
 * Where a request goes for a base URL: the protocol's path is appended to the base's path (trailing slashes
 * ignored) and the base's query is kept (`?api-version=…`, as Azure OpenAI needs), checked against a loopback server
 * that records the request target. A base URL with a fragment is refused.
 */
import { HttpClient } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import { Cause, ConfigError, ConfigProvider, Effect, Either, Exit, Option, Redacted } from "effect"
import { fakeClient, KEY, run, server } from "./support/harness.js"
import { subjects } from "./support/protocols.js"

const query = "?api-version=2024-10-21&x=a%2Fb%20c"

for (const subject of subjects) {
  describe(`${subject.name}: the request target`, () => {
    const cases: ReadonlyArray<readonly [string, (base: string) => string, string]> = [
      ["a base with a query keeps it", (base) => `${base}/openai/deployments/gpt${query}`, `/openai/deployments/gpt`],
      ["trailing slashes before the query are ignored", (base) => `${base}/deploy//${query}`, `/deploy`],
      ["a plain base is unchanged", (base) => base, ""]
    ]
    for (const [name, baseUrl, extra] of cases) {
      it.effect(name, () =>
        Effect.scoped(Effect.gen(function*() {
          const s = yield* server((_req, res) => {
            res.writeHead(200, { "content-type": "text/event-stream" })
            res.end(subject.success)
          })
          const base = subject.base(s.url)
          const provider = yield* subject.make({ apiKey: Redacted.make(KEY), baseUrl: baseUrl(base) })
          const { result } = yield* run(provider)
          assert.isTrue(Either.isRight(result), String(Either.isLeft(result) && result.left))
          assert.strictEqual(s.received.length, 1)
          const basePath = new URL(base).pathname.replace(/\/+$/, "")
          const expected = `${basePath}${extra}${subject.endpoint}${baseUrl(base).includes("?") ? query : ""}`
          assert.strictEqual(s.received[0].url, expected)
        })).pipe(Effect.provide(NodeHttpClient.layerUndici)))
    }

    it.effect("a base URL with a fragment, or that is not http(s), is refused at make with a RangeError", () =>
      Effect.gen(function*() {
        for (
          const bad of [
            "http://127.0.0.1:9/v1#frag",
            `http://127.0.0.1:9/v1${query}#`,
            "ftp://127.0.0.1/v1",
            "127.0.0.1:9/v1",
            "not a url"
          ]
        ) {
          const exit = yield* Effect.exit(
            Effect.provideService(
              subject.make({ apiKey: Redacted.make(KEY), baseUrl: bad }),
              HttpClient.HttpClient,
              fakeClient("")
            )
          )
          assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause), bad)
          const defect = Exit.isFailure(exit) ? Option.getOrThrow(Cause.dieOption(exit.cause)) : undefined
          assert.instanceOf(defect, RangeError, bad)
          assert.include(String(defect), "baseUrl")
          if (bad.includes("#")) assert.include(String(defect), "fragment")
        }
      }))
  })
}

describe("ProviderOptions.baseUrlProblem", () => {
  it("says what is wrong with a base URL, or nothing", () => {
    assert.isUndefined(ProviderOptions.baseUrlProblem("https://api.openai.com/v1"))
    assert.isUndefined(ProviderOptions.baseUrlProblem(`https://x.openai.azure.com/openai/deployments/d${query}`))
    assert.isUndefined(ProviderOptions.baseUrlProblem("http://127.0.0.1:8080/"))
    assert.match(ProviderOptions.baseUrlProblem("https://api.openai.com/v1#x") ?? "", /fragment/)
    assert.match(ProviderOptions.baseUrlProblem("https://api.openai.com/v1#") ?? "", /fragment/)
    assert.match(ProviderOptions.baseUrlProblem("file:///v1") ?? "", /http\(s\)/)
    assert.match(ProviderOptions.baseUrlProblem("") ?? "", /http\(s\)/)
  })

  it.effect("baseUrlConfig accepts a query and refuses a fragment, naming the variable", () =>
    Effect.gen(function*() {
      const load = (value: string) =>
        Effect.withConfigProvider(
          ProviderOptions.baseUrlConfig("openai-chat"),
          ConfigProvider.fromMap(new Map([["OPENAI_BASE_URL", value]]))
        )
      assert.strictEqual(yield* load(`https://x.example/v1${query}`), `https://x.example/v1${query}`)
      const error = yield* Effect.flip(load("https://x.example/v1#top"))
      assert.isTrue(ConfigError.isConfigError(error))
      assert.include(String(error), "OPENAI_BASE_URL")
      assert.include(String(error), "fragment")
    }))
})
