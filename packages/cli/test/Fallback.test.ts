/**
 * The specs of `--fallback` and `REPRISE_FALLBACKS`: what each part means, every malformed spec's message, and the
 * routes' keys and endpoints read from the environment (a missing key names its variable, never a key).
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Exit, Redacted } from "effect"
import * as Fallback from "../src/Fallback.js"

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("Fallback.parse", () => {
  it("PROVIDER:MODEL, with a base URL and options", () => {
    assert.deepStrictEqual(
      Fallback.parse("anthropic:claude-sonnet-4"),
      Either.right({
        protocol: "anthropic" as const,
        model: "claude-sonnet-4",
        baseUrl: undefined
      })
    )
    assert.deepStrictEqual(
      Fallback.parse(
        "openai-chat:gpt-4.1-mini@http://127.0.0.1:8080/v1?api-version=1,attempts=3,context=128000,key-env=B_KEY"
      ),
      Either.right({
        protocol: "openai-chat" as const,
        model: "gpt-4.1-mini",
        baseUrl: "http://127.0.0.1:8080/v1?api-version=1",
        attempts: 3,
        contextWindow: 128000,
        keyEnv: "B_KEY"
      })
    )
  })

  it("a model may hold a ':' or an '@' that starts no URL", () => {
    const parsed = Fallback.parse("openai-responses:ft:gpt-4o:org:abc,attempts=1")
    assert.deepStrictEqual(Either.map(parsed, (s) => [s.model, s.attempts]), Either.right(["ft:gpt-4o:org:abc", 1]))
    const vertex = Fallback.parse("anthropic:claude-3-5-sonnet-v2@20241022@https://proxy.example/anthropic")
    assert.deepStrictEqual(
      Either.map(vertex, (s) => [s.model, s.baseUrl]),
      Either.right(["claude-3-5-sonnet-v2@20241022", "https://proxy.example/anthropic"])
    )
  })

  it("every malformed spec has its own message", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["", "expected PROVIDER:MODEL[@BASE_URL][,OPTION=VALUE...]"],
      ["gpt-4.1", "expected PROVIDER:MODEL[@BASE_URL][,OPTION=VALUE...]"],
      [
        "openai:gpt-4.1",
        `unknown provider "openai": expected one of openai-chat, openai-responses, anthropic, subscription`
      ],
      ["anthropic:", "the model is empty (PROVIDER:MODEL[@BASE_URL][,OPTION=VALUE...])"],
      ["anthropic: ,attempts=2", "the model is empty (PROVIDER:MODEL[@BASE_URL][,OPTION=VALUE...])"],
      ["anthropic:@https://a.example", "the model is empty (PROVIDER:MODEL[@BASE_URL][,OPTION=VALUE...])"],
      ["anthropic:claude@ftp://a.example", `the base URL must be an http(s) URL, got "ftp://a.example"`],
      [
        "anthropic:claude@https://a.example/#x",
        `the base URL must not have a fragment (#…): a fragment is never sent to the server, got "https://a.example/#x"`
      ],
      ["anthropic:claude@localhost:8080", `the base URL must start with http:// or https://, got "localhost:8080"`],
      ["anthropic:claude,", "an option is empty (a trailing or doubled comma)"],
      ["anthropic:claude,,attempts=1", "an option is empty (a trailing or doubled comma)"],
      ["anthropic:claude,attempts", `option "attempts" needs a value (attempts=N, context=TOKENS, key-env=VAR)`],
      ["anthropic:claude,retries=2", `unknown option "retries" (attempts=N, context=TOKENS, key-env=VAR)`],
      ["anthropic:claude,attempts=0", `attempts must be a whole number, at least 1, got "0"`],
      ["anthropic:claude,attempts=1.5", `attempts must be a whole number, at least 1, got "1.5"`],
      ["anthropic:claude,attempts=", `attempts must be a whole number, at least 1, got ""`],
      ["anthropic:claude,context=1e5", `context must be a whole number, at least 1, got "1e5"`],
      ["anthropic:claude,context=-3", `context must be a whole number, at least 1, got "-3"`],
      ["anthropic:claude,attempts=1,attempts=2", "option attempts is given twice"],
      ["anthropic:claude,key-env=", `key-env must name an environment variable, got ""`],
      ["anthropic:claude,key-env=MY-KEY", `key-env must name an environment variable, got "MY-KEY"`]
    ]
    for (const [spec, message] of cases) assert.deepStrictEqual(Fallback.parse(spec), Either.left(message), spec)
  })

  it("REPRISE_FALLBACKS: specs separated by whitespace or ';'", () => {
    assert.deepStrictEqual(Fallback.split(" anthropic:a ;openai-chat:b\n\tsubscription:c;; "), [
      "anthropic:a",
      "openai-chat:b",
      "subscription:c"
    ])
    assert.deepStrictEqual(Fallback.split(""), [])
  })
})

describe("Fallback.resolve", () => {
  it.effect("each route's key from the protocol's variable or key-env, its base URL from the spec or the variable", () =>
    Effect.gen(function*() {
      const routes = yield* Fallback.resolve([
        "anthropic:claude-sonnet-4,attempts=1",
        "openai-chat:gpt-4.1-mini@http://127.0.0.1:9/v1,key-env=SECOND_KEY,context=1000000"
      ]).pipe(withEnv({ ANTHROPIC_API_KEY: "sk-ant-one", SECOND_KEY: "sk-two", ANTHROPIC_BASE_URL: "http://a.test" }))
      assert.deepStrictEqual(
        routes.map((r) => [r.protocol, r.model, r.baseUrl, r.keyVariable, Redacted.value(r.apiKey), r.attempts]),
        [
          ["anthropic", "claude-sonnet-4", "http://a.test", "ANTHROPIC_API_KEY", "sk-ant-one", 1],
          ["openai-chat", "gpt-4.1-mini", "http://127.0.0.1:9/v1", "SECOND_KEY", "sk-two", undefined]
        ]
      )
      assert.strictEqual(routes[1]!.contextWindow, 1000000)
      // without its variable, a protocol's public endpoint
      const [openai] = yield* Fallback.resolve(["openai-responses:o3"]).pipe(withEnv({ OPENAI_API_KEY: "sk-x" }))
      assert.strictEqual(openai!.baseUrl, "https://api.openai.com/v1")
    }))

  it.effect("REPRISE_FALLBACKS only when no --fallback is given", () =>
    Effect.gen(function*() {
      const env = withEnv({ OPENAI_API_KEY: "sk-x", REPRISE_FALLBACKS: "openai-chat:from-env; openai-chat:second" })
      assert.deepStrictEqual((yield* Fallback.resolve([]).pipe(env)).map((r) => r.model), ["from-env", "second"])
      assert.deepStrictEqual((yield* Fallback.resolve(["openai-chat:flag"]).pipe(env)).map((r) => r.model), ["flag"])
      assert.deepStrictEqual(yield* Fallback.resolve([]).pipe(withEnv({})), [])
    }))

  it.effect("every problem is one message naming where the spec came from, or the route and its variable", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, Record<string, string>, string]> = [
        [["anthropic"], {}, `--fallback "anthropic": expected PROVIDER:MODEL[@BASE_URL][,OPTION=VALUE...]`],
        [
          [],
          { REPRISE_FALLBACKS: "anthropic:a nope:b", ANTHROPIC_API_KEY: "k-123" },
          `REPRISE_FALLBACKS "nope:b": unknown provider "nope": expected one of openai-chat, openai-responses, ` +
          `anthropic, subscription`
        ],
        [
          ["anthropic:claude"],
          {},
          "route 2 (anthropic claude): missing API key: set ANTHROPIC_API_KEY (or name another variable with " +
          "key-env=VAR)"
        ],
        [
          ["openai-chat:a", "openai-chat:b,key-env=B_KEY"],
          { OPENAI_API_KEY: "sk-1" },
          "route 3 (openai-chat b): missing API key: set B_KEY"
        ],
        [
          ["anthropic:claude"],
          { ANTHROPIC_API_KEY: "  " },
          "route 2 (anthropic claude): missing API key: ANTHROPIC_API_KEY is empty"
        ],
        [
          ["anthropic:claude"],
          { ANTHROPIC_API_KEY: "sk-ant-secret\r" },
          "route 2 (anthropic claude): ANTHROPIC_API_KEY holds a character that cannot be sent in an HTTP header (a " +
          "control character such as a trailing \\r from a CRLF .env file, a space, or a non-ASCII character)"
        ],
        [
          ["anthropic:claude"],
          { ANTHROPIC_API_KEY: "k-123", ANTHROPIC_BASE_URL: "api.anthropic.com" },
          `route 2 (anthropic claude): (Invalid data at ANTHROPIC_BASE_URL: "must be an http(s) URL")`
        ]
      ]
      for (const [flags, env, message] of cases) {
        const exit = yield* Effect.exit(Fallback.resolve(flags).pipe(withEnv(env)))
        assert.deepStrictEqual(exit, Exit.fail(message), `${flags.join(" ")} ${JSON.stringify(env)}`)
        assert.notInclude(message, "secret")
      }
    }))

  it.effect("the key variables of the routes, for scrubbing: flags' and the variable's", () =>
    Effect.gen(function*() {
      const names = yield* Fallback.keyVariables(["anthropic:a", "openai-chat:b,key-env=B_KEY", "broken"]).pipe(
        withEnv({ REPRISE_FALLBACKS: "openai-chat:c anthropic:d,key-env=D_KEY" })
      )
      assert.deepStrictEqual(names, ["ANTHROPIC_API_KEY", "B_KEY", "OPENAI_API_KEY", "D_KEY"])
    }))
})
