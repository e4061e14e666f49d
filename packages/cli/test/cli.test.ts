/**
 * The real `reprise` binary, spawned as a child process against the loopback simulator: exit codes, stdout, stderr,
 * `--json` events, request counts seen by the server, sessions and the file written by `append_file`.
 */
import { assert, describe, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { chatArgs, run, setup, start } from "./support/cli.js"

const KEY = "sk-test-secret-never-printed"
const env = { OPENAI_API_KEY: KEY }

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "reprise-cli-"))

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(30) })("reprise chat", (it) => {
  it.effect("exit 0: stdout is exactly the committed text and one newline", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "The answer is 42." } }] })
      const result = yield* run(chatArgs(base, "What is the answer?"), env)
      assert.strictEqual(result.code, 0)
      assert.strictEqual(result.stdout, "The answer is 42.\n")
      assert.strictEqual(result.stderr, "")
      assert.strictEqual(yield* count, 1)
    }))

  it.effect("a cut stream is replayed: a retry notice on stderr, only the committed text on stdout", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({
        steps: [
          { kind: "eof", afterEvents: 3, reply: { text: "first attempt, cut short before its end" } },
          { kind: "stream", reply: { text: "second attempt, whole" } }
        ]
      })
      const result = yield* run(chatArgs(base, "go"), env)
      assert.strictEqual(result.code, 0)
      assert.strictEqual(result.stdout, "second attempt, whole\n")
      const [retry, cost, end] = result.stderr.split("\n")
      assert.match(
        retry!,
        /^reprise: attempt 1\/11 failed \(stream ended early\); discarded \d+ chars; retrying in 0\.0s$/
      )
      // then what the cut attempt cost: the prompt ("go") and the characters it had sent, by chars/4
      const discarded = Number(/discarded (\d+) chars/.exec(retry!)![1])
      assert.strictEqual(
        cost,
        `reprise: 1 attempt discarded ~1 input and ~${Math.ceil(discarded / 4)} output tokens (estimated)`
      )
      assert.strictEqual(end, "")
      assert.strictEqual(yield* count, 2)
    }))

  it.effect("--json: one event per line, in order", () =>
    Effect.gen(function*() {
      const { base } = yield* setup({
        steps: [
          { kind: "status", status: 503 },
          { kind: "stream", reply: { text: "ok then", deltaSize: 3 } }
        ]
      })
      const result = yield* run(chatArgs(base, "--json", "go"), env)
      assert.strictEqual(result.code, 0)
      const events = result.stdout.trim().split("\n").map((l) => JSON.parse(l))
      // a preview shorter than the key is held back whole (it might be the start of the key), so its three
      // deltas arrive as one event when the attempt commits (docs/cli.md, Secrets)
      assert.deepStrictEqual(events.map((e) => e.type), [
        "attempt",
        "discard",
        "retry",
        "attempt",
        "delta",
        "commit"
      ])
      // a 503 before any stream: its ledger entry says the provider did not bill it
      assert.deepStrictEqual(events[1], {
        type: "discard",
        attempt: 1,
        discardedChars: 0,
        entry: {
          attempt: 1,
          model: "test-model",
          phase: "headers",
          outcome: "discarded",
          verdict: "not-billed",
          tokens: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
          input: "none",
          output: "none"
        }
      })
      assert.strictEqual(events[2].source, "backoff")
      assert.isNumber(events[2].delay)
      const { ledger, usage, ...commit } = events.at(-1)
      assert.deepStrictEqual(ledger.entries.map((e: any) => [e.attempt, e.outcome, e.verdict]), [
        [1, "discarded", "not-billed"],
        [2, "committed", "exact"]
      ])
      assert.deepStrictEqual(commit, {
        type: "commit",
        text: "ok then",
        finishReason: "stop",
        attempts: 2,
        toolCalls: 0,
        // no plan of routes: no route, and the model asked for (the simulator answers as the request's model)
        model: "test-model",
        route: null
      })
      assert.isTrue(usage === null || (Number.isInteger(usage.input_tokens) && Number.isInteger(usage.output_tokens)))
      assert.strictEqual(events.filter((e) => e.type === "delta").map((e) => e.text).join(""), "ok then")
    }))

  it.effect("exit 1: a bad request is not replayed", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({
        steps: [{ kind: "status", status: 400, error: { type: "invalid_request_error", message: "bad field" } }]
      })
      const result = yield* run(chatArgs(base, "go"), env)
      assert.strictEqual(result.code, 1)
      assert.strictEqual(result.stdout, "")
      assert.match(
        result.stderr,
        /^reprise: error \[ProviderRejection\.BadRequest\]: bad request \(HTTP 400.*bad field/
      )
      assert.strictEqual(yield* count, 1)
    }))

  it.effect("exit 1: a redirect is refused after one request", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({
        steps: [{ kind: "status", status: 307, headers: { location: "http://127.0.0.1:9/elsewhere" } }]
      })
      const result = yield* run(chatArgs(base, "go"), env)
      assert.strictEqual(result.code, 1)
      assert.include(result.stderr, "RedirectRefused")
      assert.strictEqual(yield* count, 1)
    }))

  it.effect("exit 75: attempts exhausted, with every request counted", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({ steps: [{ kind: "status", status: 503 }], afterLast: "repeat-last" })
      const result = yield* run(chatArgs(base, "--max-attempts", "3", "go"), env)
      assert.strictEqual(result.code, 75)
      assert.strictEqual(yield* count, 3)
      assert.strictEqual(result.stderr.split("\n").filter((l) => l.includes("retrying in")).length, 2)
      assert.match(result.stderr, /reprise: error \[RecoveryExhausted\.Attempts\]: gave up after 3 of 3 attempts/)
    }))

  it.effect("exit 75: a Retry-After past the deadline stops at once", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({
        steps: [{ kind: "status", status: 429, headers: { "retry-after": "120" } }],
        afterLast: "repeat-last"
      })
      const result = yield* run(chatArgs(base, "--deadline", "30", "go"), env)
      assert.strictEqual(result.code, 75)
      assert.include(result.stderr, "RecoveryExhausted.RetryAfterBeyondDeadline")
      assert.strictEqual(yield* count, 1)
    }))

  for (
    const [status, code, klass] of [[401, 76, "Authentication"], [403, 76, "Permission"], [
      404,
      77,
      "NotFound"
    ]] as const
  ) {
    it.effect(`exit ${code}: HTTP ${status} is ${klass}, not replayed`, () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({ steps: [{ kind: "status", status }], afterLast: "repeat-last" })
        const result = yield* run(chatArgs(base, "go"), env)
        assert.strictEqual(result.code, code)
        assert.include(result.stderr, `ProviderRejection.${klass}`)
        assert.notInclude(result.stderr + result.stdout, KEY)
        assert.strictEqual(yield* count, 1)
      }))
  }

  it.effect("exit 2: usage and configuration errors, with no request made", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "never" } }] })
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, Record<string, string>, RegExp]> = [
        [chatArgs(base, "go", "--frobnicate"), env, /frobnicate/],
        [chatArgs(base, "--max-attempts", "0", "go"), env, /--max-attempts must be at least 1/],
        [
          chatArgs(base, "--max-attempts", "many", "go"),
          env,
          /--max-attempts takes a whole number in decimal digits, got 'many'/
        ],
        // numbers in decimal notation only, on the command line and in the environment
        [
          chatArgs(base, "--max-attempts", "1.5", "go"),
          env,
          /--max-attempts takes a whole number in decimal digits, got '1\.5'/
        ],
        [chatArgs(base, "--max-attempts", "0x10", "go"), env, /--max-attempts takes a whole number in decimal digits/],
        [chatArgs(base, "--backoff-base", "1e3", "go"), env, /--backoff-base takes a whole number in decimal digits/],
        [
          chatArgs(base, "--deadline", "1e300", "go"),
          env,
          /--deadline takes a number in decimal notation \(such as 2\.5\), got '1e300'/
        ],
        [
          chatArgs(base, "go"),
          { ...env, REPRISE_DEADLINE: "1e300" },
          /REPRISE_DEADLINE: "Expected a number in decimal notation/
        ],
        // a deadline the clock can time, and that fits in nanoseconds
        [
          chatArgs(base, "--deadline", "3000000", "go"),
          env,
          /--deadline must be at most 2147483\.647 seconds \(about 24\.8 days\), got 3000000/
        ],
        [
          chatArgs(base, "--deadline", "1" + "0".repeat(300), "go"),
          env,
          /--deadline must be at most 2147483\.647 seconds/
        ],
        [
          chatArgs(base, "go"),
          { ...env, REPRISE_DEADLINE: "3000000" },
          /REPRISE_DEADLINE: "must be at most 2147483\.647 seconds/
        ],
        // @effect/cli's own complaints, with reprise's prefix like every usage error
        [
          chatArgs(base, "go", "and", "more"),
          env,
          /^reprise: error \[UsageError\]: Received unknown argument: 'and'\n$/
        ],
        [chatArgs(base, "--deadline", "-5", "go"), env, /--deadline must be a positive/],
        [chatArgs(base, "go"), { ...env, REPRISE_MAX_ATTEMPTS: "lots" }, /REPRISE_MAX_ATTEMPTS/],
        [chatArgs(base, "go"), {}, /missing API key: set OPENAI_API_KEY/],
        [["chat", "--base-url", base, "go"], env, /a model is required/],
        [chatArgs(base, "--provider", "gemini", "go"), env, /Expected one of the following cases: openai-chat/],
        [chatArgs("not a url", "go"), env, /http\(s\) URL/],
        [chatArgs(base, "--tools", "rm_rf", "go"), env, /unknown tool "rm_rf"/],
        [chatArgs(base, "--deadline", "0.0001", "go"), env, /--deadline must be at least 0\.001 seconds/],
        // a CRLF .env file, a pasted newline, a non-ASCII letter: not sendable in a header, so not a network error
        [chatArgs(base, "go"), { OPENAI_API_KEY: `${KEY}\r` }, /OPENAI_API_KEY holds a character that cannot be sent/],
        [chatArgs(base, "go"), { OPENAI_API_KEY: `${KEY}\nx` }, /OPENAI_API_KEY holds a character/],
        [chatArgs(base, "go"), { OPENAI_API_KEY: `${KEY}é` }, /OPENAI_API_KEY holds a character/]
      ]
      for (const [args, caseEnv, pattern] of cases) {
        const result = yield* run(args, caseEnv)
        assert.strictEqual(result.code, 2, `${args.join(" ")} → ${result.stderr}`)
        assert.match(result.stderr, pattern)
        // one line, in reprise's form, whoever found the problem
        assert.match(result.stderr, /^reprise: error \[[A-Za-z.]+\]: [^\n]+\n$/, args.join(" "))
        assert.notInclude(result.stderr, KEY)
        assert.strictEqual(result.stdout, "")
      }
      assert.strictEqual(yield* count, 0)
    }), { timeout: 60_000 })

  it.effect("--json: a command line @effect/cli refuses is an error event with its complaint, and the same line on stderr", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "never" } }] })
      for (
        const [args, complaint] of [
          [chatArgs(base, "--json", "go", "and", "more"), "Received unknown argument: 'and'"],
          [chatArgs(base, "--json", "--provider", "gemini", "go"), "Expected one of the following cases: openai-chat"]
        ] as const
      ) {
        const result = yield* run(args, env)
        assert.strictEqual(result.code, 2, result.stderr)
        const event = JSON.parse(result.stdout)
        assert.deepInclude(event, { type: "error", class: "UsageError", exitCode: 2 })
        assert.include(event.message, complaint)
        assert.strictEqual(result.stderr, `reprise: error [UsageError]: ${event.message}\n`)
      }
      assert.strictEqual(yield* count, 0)
    }))

  it.effect("exit 75: an unreachable host is a transient failure", () =>
    Effect.gen(function*() {
      const result = yield* run(chatArgs("http://127.0.0.1:9/v1", "--max-attempts", "2", "go"), env)
      assert.strictEqual(result.code, 75)
      assert.include(result.stderr, "connection failed")
    }))

  it.effect("exit 130: SIGINT during a stream ends promptly, closes the socket and commits nothing", () =>
    Effect.gen(function*() {
      const { sim, base } = yield* setup({
        steps: [{ kind: "stall", afterEvents: 3, keepaliveMs: 100, reply: { text: "a long answer that never ends" } }]
      })
      const dir = tempDir()
      const session = path.join(dir, "s.jsonl")
      const running = yield* start(chatArgs(base, "--session", session, "go"), env)
      // The request is on the wire and its stream stalls after three events: the CLI is mid-stream.
      const request = yield* sim.awaitRequest("openai-chat", 1)
      const sent = Date.now()
      running.child.kill("SIGINT")
      const result = yield* running.exit
      const took = Date.now() - sent
      assert.strictEqual(result.code, 130)
      assert.isBelow(took, 1_000)
      const closure = yield* sim.awaitClose(request.id)
      assert.strictEqual(closure.by, "client")
      assert.isFalse(fs.existsSync(session) && fs.readFileSync(session, "utf8").length > 0, "nothing committed")
    }).pipe(Effect.scoped))

  it.effect("exit 130: SIGINT during a backoff ends promptly with no further request", () =>
    Effect.gen(function*() {
      const { count, base } = yield* setup({
        steps: [{ kind: "status", status: 429, headers: { "retry-after": "20" } }, { kind: "stream" }]
      })
      const running = yield* start(chatArgs(base, "go"), env)
      yield* running.awaitStderr(/retrying in 20\.0s/)
      const sent = Date.now()
      running.child.kill("SIGINT")
      const result = yield* running.exit
      assert.strictEqual(result.code, 130)
      assert.isBelow(Date.now() - sent, 1_000)
      assert.strictEqual(yield* count, 1)
    }).pipe(Effect.scoped))

  it.effect("append_file runs exactly once although the reply after it is replayed", () =>
    Effect.gen(function*() {
      const workspace = tempDir()
      const { base, count, sim } = yield* setup({
        steps: [
          {
            kind: "stream",
            reply: { toolCalls: [{ id: "call_1", name: "append_file", arguments: { path: "log.txt", line: "once" } }] }
          },
          { kind: "reset", afterEvents: 2, reply: { text: "Written." } },
          { kind: "stream", reply: { text: "Written." } }
        ]
      })
      const result = yield* run(
        chatArgs(base, "--tools", "append_file", "--workspace", workspace, "--json", "write it"),
        env
      )
      assert.strictEqual(result.code, 0)
      assert.strictEqual(fs.readFileSync(path.join(workspace, "log.txt"), "utf8"), "once\n")
      assert.strictEqual(yield* count, 3)
      const types = result.stdout.trim().split("\n").map((l) => JSON.parse(l).type)
      assert.strictEqual(types.filter((t) => t === "tool_call").length, 1)
      assert.strictEqual(types.filter((t) => t === "tool_result").length, 1)
      // The replayed request still carries the committed tool result.
      const third = (yield* sim.requestsTo("openai-chat"))[2].body as { messages: Array<{ role: string }> }
      assert.deepStrictEqual(third.messages.map((m) => m.role), ["user", "assistant", "tool"])
    }))

  it.effect("--session appends committed messages and resumes from them; a corrupt file is refused untouched", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const session = path.join(dir, "chat.jsonl")
      const { base, sim } = yield* setup({
        steps: [{ kind: "stream", reply: { text: "Paris." } }, { kind: "stream", reply: { text: "About 2 million." } }]
      })
      assert.strictEqual((yield* run(chatArgs(base, "--session", session, "Capital of France?"), env)).code, 0)
      const second = yield* run(chatArgs(base, "--session", session, "Population?"), env)
      assert.strictEqual(second.stdout, "About 2 million.\n")
      const lines = fs.readFileSync(session, "utf8").trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(lines.map((m) => [m.role, m.text]), [
        ["user", "Capital of France?"],
        ["assistant", "Paris."],
        ["user", "Population?"],
        ["assistant", "About 2 million."]
      ])
      const resumed = (yield* sim.requestsTo("openai-chat"))[1].body as { messages: Array<{ content: string }> }
      assert.deepStrictEqual(resumed.messages.map((m) => m.content), ["Capital of France?", "Paris.", "Population?"])

      const corrupt = path.join(dir, "corrupt.jsonl")
      const content = `${JSON.stringify({ role: "user", text: "hi" })}\n{not json\n`
      fs.writeFileSync(corrupt, content)
      const refused = yield* run(chatArgs(base, "--session", corrupt, "again"), env)
      assert.strictEqual(refused.code, 2)
      assert.match(refused.stderr, /corrupt\.jsonl:2/)
      assert.strictEqual(fs.readFileSync(corrupt, "utf8"), content)
    }))

  it.effect("a session left with unanswered tool calls resumes with error results for them; no tool runs again", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const session = path.join(dir, "interrupted.jsonl")
      const target = path.join(dir, "notes.txt")
      // what an interrupted turn leaves: the committed reply with its tool call, and no result for it
      const before = [
        { role: "user", text: "Note it down" },
        {
          role: "assistant",
          text: "",
          toolCalls: [{ id: "call_1", name: "append_file", arguments: { path: "notes.txt", line: "once" } }]
        }
      ]
      fs.writeFileSync(session, before.map((m) => `${JSON.stringify(m)}\n`).join(""))
      const { base, sim } = yield* setup({ steps: [{ kind: "stream", reply: { text: "Done." } }] })
      const result = yield* run(
        chatArgs(base, "--tools", "append_file", "--workspace", dir, "--session", session, "Go on"),
        env
      )
      assert.strictEqual(result.code, 0, result.stderr)
      assert.strictEqual(result.stdout, "Done.\n")
      assert.isFalse(fs.existsSync(target), "the interrupted tool call was not run again")
      const sent = (yield* sim.requestsTo("openai-chat"))[0].body as {
        messages: Array<{ role: string; tool_call_id?: string; content: string }>
      }
      assert.deepStrictEqual(sent.messages.map((m) => m.role), ["user", "assistant", "tool", "user"])
      assert.strictEqual(sent.messages[2].tool_call_id, "call_1")
      assert.match(sent.messages[2].content, /interrupted/)
      const lines = fs.readFileSync(session, "utf8").trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(lines.map((m) => m.role), ["user", "assistant", "tool", "user", "assistant"])
      assert.strictEqual(lines[2].toolCallId, "call_1")
      assert.isTrue(lines[2].isError)
      // resumed again: the file is consistent now, so nothing more is added before the next prompt
      yield* setup({ steps: [{ kind: "stream", reply: { text: "Still here." } }] })
      assert.strictEqual((yield* run(chatArgs(base, "--session", session, "And now?"), env)).code, 0)
      const again = fs.readFileSync(session, "utf8").trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(again.map((m) => m.role), [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "user",
        "assistant"
      ])
    }))
})

describe("reprise demo", () => {
  layer(Simulator.layer(), { excludeTestServices: true })((it) => {
    it.effect(
      "runs the guided tour against its embedded simulator and every step behaves",
      () =>
        Effect.gen(function*() {
          const result = yield* run(["demo"])
          assert.strictEqual(result.code, 0, result.stdout + result.stderr)
          assert.include(result.stdout, "Every step behaved as described.")
          assert.strictEqual(result.stdout.match(/ ok: /g)?.length, 5)
        }),
      { timeout: 60_000 }
    )
  })
})
