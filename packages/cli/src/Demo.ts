/**
 * `reprise demo` (and `npm start`): a guided run against the embedded simulator, with no network and no key. Each
 * step scripts the simulator, runs a real turn through the real HTTP client, and checks what happened against what
 * should have: request counts seen by the server, the committed text, the file a tool wrote.
 *
 * 1. a clean reply;
 * 2. a stream cut before its terminal event, discarded and replayed;
 * 3. a 429 with `Retry-After`, honoured;
 * 4. a tool call run exactly once, although the reply after it is cut and replayed;
 * 5. a permanent error (401), not replayed.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Budget from "@reprise/core/Budget"
import * as Circuit from "@reprise/core/Circuit"
import type * as Message from "@reprise/core/Message"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as BuiltinTools from "./BuiltinTools.js"
import * as ExitCode from "./ExitCode.js"
import * as Output from "./Output.js"
import type * as Settings from "./Settings.js"
import * as Turn from "./Turn.js"

const route: SimulatorScript.Route = "openai-chat"

interface DemoStep {
  readonly title: string
  readonly explain: string
  readonly script: SimulatorScript.RouteScript
  readonly prompt: string
  readonly tools?: ReadonlyArray<string>
  /** What must hold afterwards; returns a failure description or undefined. */
  readonly check: (facts: Facts) => string | undefined
}

interface Facts {
  readonly requests: number
  readonly exitCode: number
  readonly text: string | undefined
  readonly fileLines: ReadonlyArray<string>
}

const steps: ReadonlyArray<DemoStep> = [
  {
    title: "A clean reply",
    explain: "The server streams a whole answer; it is committed after one request.",
    prompt: "Say hello.",
    script: { steps: [{ kind: "stream", reply: { text: "Hello! Every token arrived, terminal event included." } }] },
    check: (f) => f.requests === 1 && f.exitCode === 0 ? undefined : `expected 1 request and exit 0`
  },
  {
    title: "A stream cut before its terminal event",
    explain: "The first stream ends after a few events without `finish_reason`. Its preview is discarded, the " +
      "request is replayed after a backoff, and only the second attempt's text is committed.",
    prompt: "Tell me about recovery.",
    script: {
      steps: [
        { kind: "eof", afterEvents: 4, reply: { text: "Recovery replays only what was never committed, and" } },
        { kind: "stream", reply: { text: "Recovery replays only what was never committed, never half an answer." } }
      ]
    },
    check: (f) =>
      f.requests === 2 && f.text === "Recovery replays only what was never committed, never half an answer."
        ? undefined
        : `expected 2 requests and the second attempt's text`
  },
  {
    title: "A 429 with Retry-After",
    explain: "The server says `429 Too Many Requests` with `Retry-After: 2`. reprise waits the 2 s the server " +
      "asked for (longer than its own backoff), then retries.",
    prompt: "Are you busy?",
    script: {
      steps: [
        {
          kind: "status",
          status: 429,
          headers: { "retry-after": "2" },
          error: { type: "requests", code: "rate_limit_exceeded", message: "Rate limit reached" }
        },
        { kind: "stream", reply: { text: "Not any more: the rate limit has passed." } }
      ]
    },
    check: (f) => f.requests === 2 && f.exitCode === 0 ? undefined : `expected 2 requests and exit 0`
  },
  {
    title: "A tool call, run exactly once",
    explain: "The model asks for `append_file`. The tool runs once, from the committed reply. The next reply is " +
      "cut mid-stream and replayed: the tool result survives, and the tool does not run again.",
    prompt: "Write a line to demo.txt.",
    tools: ["append_file"],
    script: {
      steps: [
        {
          kind: "stream",
          reply: {
            toolCalls: [{ id: "call_demo", name: "append_file", arguments: { path: "demo.txt", line: "hello" } }]
          }
        },
        { kind: "reset", afterEvents: 3, reply: { text: "I wrote the line to demo.txt; it is there once." } },
        { kind: "stream", reply: { text: "I wrote the line to demo.txt; it is there once." } }
      ]
    },
    check: (f) =>
      f.requests === 3 && f.fileLines.length === 1 && f.fileLines[0] === "hello"
        ? undefined
        : `expected 3 requests and exactly one line in demo.txt, got ${f.fileLines.length}`
  },
  {
    title: "A permanent error",
    explain: "The server answers `401 Unauthorized`. That is not transient: no replay, one request, exit code 76.",
    prompt: "Hello?",
    script: {
      steps: [{
        kind: "status",
        status: 401,
        error: { type: "invalid_request_error", code: "invalid_api_key", message: "Incorrect API key" }
      }],
      afterLast: "repeat-last"
    },
    check: (f) =>
      f.requests === 1 && f.exitCode === ExitCode.ExitCode.Auth ? undefined : `expected 1 request and exit 76`
  }
]

/**
 * Runs the tour and returns its exit code: 0 when every step behaved as described.
 *
 * @since 0.1.0
 * @category demo
 */
export const run = Effect.scoped(Effect.gen(function*() {
  const output = yield* Output.Output
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "reprise-demo-" })
  const simulator = yield* Simulator.make({})
  const say = (text: string) => output.stdout(text)
  yield* say(`reprise demo: a loopback simulator on ${simulator.url}, the real HTTP client, no network, no key.\n`)

  let failures = 0
  for (const [i, step] of steps.entries()) {
    yield* say(`\n${i + 1}. ${step.title}\n   ${step.explain}\n   > ${step.prompt}\n`)
    yield* simulator.setScript({ routes: { [route]: step.script } })
    const settings: Settings.Settings = {
      protocol: "openai-chat",
      baseUrl: simulator.baseUrl(route),
      apiKey: Redacted.make("demo-key-not-secret"),
      model: "demo-model",
      maxAttempts: Budget.defaultSettings.maxAttempts,
      deadline: Duration.seconds(60),
      backoffBase: Duration.millis(500),
      backoffMax: Duration.seconds(5),
      idleTimeout: Duration.seconds(10),
      firstByteTimeout: Duration.seconds(10),
      firstTokenTimeout: Option.none(),
      fallbacks: [],
      routeAttempts: Option.none(),
      contextWindow: Option.none(),
      circuit: Circuit.defaultSettings,
      maxReplyBytes: ProviderOptions.defaultMaxReplyBytes,
      streamUsage: ProviderOptions.defaultStreamUsage,
      waitSession: false,
      recovery: true,
      json: false,
      session: Option.none(),
      tools: step.tools ?? [],
      workspace,
      system: Option.none(),
      maxTokens: Option.none(),
      debug: false,
      background: false,
      prices: {}
    }
    const history: ReadonlyArray<Message.Message> = []
    // The tour is one narrative: the turn's notices are shown inline, under the step, instead of on stderr.
    const inline: Output.Service = { ...output, stderr: (text) => output.stdout(`   ${text}`) }
    const turn = yield* Turn.run(settings, history, step.prompt).pipe(
      Effect.provide(Layer.mergeAll(
        BuiltinTools.layer(settings.tools, { workspace }),
        Turn.providerLayer(settings),
        Layer.succeed(Output.Output, inline)
      ))
    )
    const exitCode = turn.result._tag === "Right" ? 0 : yield* turn.render.error(turn.result.left, false)
    const file = path.join(workspace, "demo.txt")
    const fileLines = (yield* fs.exists(file))
      ? (yield* fs.readFileString(file)).split("\n").filter((line) => line.length > 0)
      : []
    const facts: Facts = {
      requests: yield* simulator.count(route),
      exitCode,
      text: turn.result._tag === "Right" ? turn.result.right.text : undefined,
      fileLines
    }
    const problem = step.check(facts)
    if (problem !== undefined) failures++
    yield* say(
      `   ${problem === undefined ? "ok" : "UNEXPECTED"}: ${facts.requests} request${
        facts.requests === 1 ? "" : "s"
      } ` +
        `to the server, exit code ${exitCode}` +
        (step.tools !== undefined
          ? `, demo.txt has ${fileLines.length} line${fileLines.length === 1 ? "" : "s"}`
          : "") +
        (problem === undefined ? "" : ` (${problem})`) + "\n"
    )
  }
  yield* say(
    failures === 0 ? "\nEvery step behaved as described.\n" : `\n${failures} step(s) did not behave as described.\n`
  )
  return failures === 0 ? 0 : 1
}))
