import { FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Ref, Schema, Stream, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as Chat from "../src/Chat.js"
import * as Generation from "../src/Generation.js"
import * as Message from "../src/Message.js"
import * as Policy from "../src/Policy.js"
import * as Provider from "../src/Provider.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as RecoveryNotifications from "../src/RecoveryNotifications.js"
import * as Tool from "../src/Tool.js"
import * as Transcript from "../src/Transcript.js"
import * as TransportError from "../src/TransportError.js"

type Attempt = Stream.Stream<Generation.GenerationEvent, ProviderFailure.ProviderFailure>

const text = (t: string) => Generation.TextDelta({ text: t })
const toolCall = (id: string, name: string, args: unknown) =>
  Generation.ToolCallComplete({ call: { id, name, arguments: args } })
const finish = (reason: Generation.FinishReason) => Generation.Finish({ reason, providerReason: reason })
const reset = Stream.fail(new TransportError.TransportError({ reason: "Reset" }))
const attempt = (...events: Array<Generation.GenerationEvent>): Attempt => Stream.make(...events)
const failing = (events: ReadonlyArray<Generation.GenerationEvent>, error: Attempt = reset): Attempt =>
  Stream.concat(Stream.fromIterable(events), error)

/**
 * A provider that answers each physical send with the next scripted stream, debiting the Budget first like a real
 * one, and records every request it was sent.
 */
const scriptedProvider = (script: ReadonlyArray<Attempt>) =>
  Effect.gen(function*() {
    const requests = yield* Ref.make<ReadonlyArray<Generation.GenerationRequest>>([])
    const service: Provider.Service = Provider.makeFromStream({
      protocol: "scripted",
      stream: (request) =>
        Stream.unwrap(Effect.gen(function*() {
          yield* Budget.reserve
          const n = yield* Ref.modify(requests, (sent) => [sent.length, [...sent, request]] as const)
          return n < script.length ? script[n] : Stream.dieMessage(`unscripted send ${n + 1}`)
        }))
    })
    return { layer: Layer.succeed(Provider.Provider, service), requests }
  })

/** A tool that records each value it is run with. */
const recorder = Effect.gen(function*() {
  const runs = yield* Ref.make<ReadonlyArray<string>>([])
  const tool = Tool.make("record", {
    description: "Records a value.",
    parameters: Schema.Struct({ value: Schema.String }),
    handler: ({ value }) => Effect.as(Ref.update(runs, (values) => [...values, value]), `recorded ${value}`)
  })
  return { runs, tool }
})

/** Runs an effect that waits for backoffs: fork, let the clock run past every wait, join. */
const withWaits = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(effect)
    yield* TestClock.adjust(Duration.minutes(10))
    return yield* Fiber.join(fiber)
  })

const prompt = [Message.user("go")]
const policy = Policy.layer({ jitter: false })

describe("Chat.step", () => {
  it.effect("runs a committed reply's tool call exactly once, after the commit, and replies again", () =>
    Effect.gen(function*() {
      const { runs, tool } = yield* recorder
      const { layer, requests } = yield* scriptedProvider([
        attempt(text("Recording."), toolCall("c1", "record", { value: "v1" }), finish("tool_calls")),
        attempt(text("Done."), finish("stop"))
      ])
      const commits: Array<string> = []
      const result = yield* Chat.step(prompt, {
        model: "m",
        system: "sys",
        onCommit: (commit) =>
          Effect.map(Ref.get(runs), (ran) => {
            commits.push(`${commit._tag}:${ran.length}`)
          })
      }).pipe(Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy)))

      assert.deepStrictEqual(yield* Ref.get(runs), ["v1"])
      // The reply is committed before its tool runs; the result is committed after.
      assert.deepStrictEqual(commits, ["Reply:0", "ToolResult:1", "Reply:1"])
      assert.deepStrictEqual(result.messages, [
        Message.assistant("Recording.", [{ id: "c1", name: "record", arguments: { value: "v1" } }]),
        Message.toolResult({ toolCallId: "c1", name: "record", content: "recorded v1" }),
        Message.assistant("Done.")
      ])
      assert.strictEqual(result.reply.text, "Done.")
      assert.strictEqual(result.replies, 2)

      const sent = yield* Ref.get(requests)
      assert.strictEqual(sent.length, 2)
      assert.deepStrictEqual(sent[0].messages, prompt)
      assert.deepStrictEqual(sent[0].tools?.map((t) => t.name), ["record"])
      assert.strictEqual(sent[0].system, "sys")
      assert.deepStrictEqual(sent[1].messages, [...prompt, ...result.messages.slice(0, 2)])
    }))

  it.effect("a reply cut after a complete tool call is replayed and only the replay's call runs", () =>
    Effect.gen(function*() {
      const { runs, tool } = yield* recorder
      const { layer, requests } = yield* scriptedProvider([
        // A complete tool call, then the stream ends without its terminal event.
        attempt(toolCall("c1", "record", { value: "attempt-1" })),
        attempt(toolCall("c2", "record", { value: "attempt-2" }), finish("tool_calls")),
        attempt(text("ok"), finish("stop"))
      ])
      const discarded: Array<ReadonlyArray<Message.ToolCall>> = []
      const notifications = RecoveryNotifications.layerCallback((n) =>
        Effect.sync(() => {
          if (n._tag === "AttemptDiscarded") discarded.push(n.discardedToolCalls)
        })
      )
      const result = yield* withWaits(
        Chat.step(prompt, { model: "m" }).pipe(
          Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy, notifications))
        )
      )

      assert.deepStrictEqual(yield* Ref.get(runs), ["attempt-2"])
      assert.deepStrictEqual(discarded.map((calls) => calls.map((c) => c.id)), [["c1"]])
      assert.strictEqual((yield* Ref.get(requests)).length, 3)
      const [reply, toolResult] = result.messages
      assert.deepStrictEqual(
        reply,
        Message.assistant("", [{ id: "c2", name: "record", arguments: { value: "attempt-2" } }])
      )
      assert.deepStrictEqual(
        toolResult,
        Message.toolResult({ toolCallId: "c2", name: "record", content: "recorded attempt-2" })
      )
      assert.strictEqual(result.replies, 2)
    }))

  it.effect("failed and truncated attempts never run a tool, even when recovery gives up", () =>
    Effect.gen(function*() {
      const { runs, tool } = yield* recorder
      const { layer, requests } = yield* scriptedProvider([
        failing(
          [Generation.ToolCallDelta({ index: 0, id: "c1", name: "record", argumentsDelta: "{\"value\":\"tr" })],
          Stream.fail(new TransportError.TransportError({ reason: "TruncatedToolArguments" }))
        ),
        failing([toolCall("c2", "record", { value: "reset" })]),
        failing(
          [toolCall("c3", "record", { value: "503" })],
          Stream.fail(ProviderFailure.fromHttpStatus({ status: 503 }))
        )
      ])
      const commits = yield* Ref.make(0)
      const error = yield* withWaits(
        Chat.step(prompt, { model: "m", onCommit: () => Ref.update(commits, (n) => n + 1) }).pipe(
          Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy, Budget.layer({ maxAttempts: 3 }))),
          Effect.flip
        )
      )
      assert.strictEqual(error._tag, "RecoveryExhausted")
      assert.strictEqual((yield* Ref.get(requests)).length, 3)
      assert.deepStrictEqual(yield* Ref.get(runs), [])
      assert.strictEqual(yield* Ref.get(commits), 0)
    }))

  it.effect("a permanent failure after a complete tool call surfaces and runs nothing", () =>
    Effect.gen(function*() {
      const { runs, tool } = yield* recorder
      const { layer, requests } = yield* scriptedProvider([
        failing(
          [toolCall("c1", "record", { value: "v" })],
          Stream.fail(ProviderFailure.fromHttpStatus({ status: 400 }))
        )
      ])
      const error = yield* Chat.step(prompt, { model: "m" }).pipe(
        Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy)),
        Effect.flip
      )
      assert.isTrue(ProviderFailure.isProviderFailure(error))
      assert.strictEqual((yield* Ref.get(requests)).length, 1)
      assert.deepStrictEqual(yield* Ref.get(runs), [])
    }))

  it.effect("tool results committed before a later fault are in every replayed request", () =>
    Effect.gen(function*() {
      const { runs, tool } = yield* recorder
      const { layer, requests } = yield* scriptedProvider([
        attempt(toolCall("c1", "record", { value: "v1" }), finish("tool_calls")),
        failing([text("partial answer")]),
        failing([text("partial again")], Stream.fail(ProviderFailure.fromHttpStatus({ status: 529 }))),
        attempt(text("final answer"), finish("stop"))
      ])
      const result = yield* withWaits(
        Chat.step(prompt, { model: "m" }).pipe(Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy)))
      )

      assert.deepStrictEqual(yield* Ref.get(runs), ["v1"])
      const sent = yield* Ref.get(requests)
      assert.strictEqual(sent.length, 4)
      const expected = [
        ...prompt,
        Message.assistant("", [{ id: "c1", name: "record", arguments: { value: "v1" } }]),
        Message.toolResult({ toolCallId: "c1", name: "record", content: "recorded v1" })
      ]
      // The second reply's three attempts all carry the committed call and its result, and no discarded preview.
      for (const request of sent.slice(1)) assert.deepStrictEqual(request.messages, expected)
      assert.deepStrictEqual(result.messages, [...expected.slice(1), Message.assistant("final answer")])
      assert.strictEqual(result.reply.attempts, 3)
    }))

  it.effect("early break: only the first tool call is committed and run; a failed drain runs nothing", () =>
    Effect.gen(function*() {
      const { runs, tool } = yield* recorder
      const { layer, requests } = yield* scriptedProvider([
        // The first call is complete, but the drain to the terminal event fails: the attempt failed.
        failing([toolCall("c1", "record", { value: "drain-failed" }), text("more")]),
        attempt(
          toolCall("c2", "record", { value: "first" }),
          toolCall("c3", "record", { value: "second" }),
          Generation.UsageEvent({ usage: { inputTokens: 3, outputTokens: 4 } }),
          finish("tool_calls")
        ),
        attempt(text("ok"), finish("stop"))
      ])
      const result = yield* withWaits(
        Chat.step(prompt, { model: "m", earlyBreakOnToolCall: true }).pipe(
          Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy))
        )
      )
      assert.deepStrictEqual(yield* Ref.get(runs), ["first"])
      assert.strictEqual((yield* Ref.get(requests)).length, 3)
      const [reply] = result.messages
      assert.deepStrictEqual(reply.role === "assistant" && reply.toolCalls.map((c) => c.id), ["c2"])
    }))

  it.scoped("messages committed before a failed reply are persisted, the error surfaces, no preview is written", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const file = path.join(yield* fs.makeTempDirectoryScoped(), "session.jsonl")
      const { runs, tool } = yield* recorder
      const { layer } = yield* scriptedProvider([
        attempt(text("calling"), toolCall("c1", "record", { value: "v1" }), finish("tool_calls")),
        failing(
          [text("a preview that is never committed")],
          Stream.fail(ProviderFailure.fromHttpStatus({ status: 401 }))
        )
      ])
      const error = yield* Chat.step(prompt, { model: "m", persist: Chat.persistTo(file) }).pipe(
        Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy)),
        Effect.flip
      )
      assert.isTrue(ProviderFailure.isProviderFailure(error))
      assert.deepStrictEqual(yield* Ref.get(runs), ["v1"])
      assert.deepStrictEqual(yield* Transcript.load(file), [
        Message.assistant("calling", [{ id: "c1", name: "record", arguments: { value: "v1" } }]),
        Message.toolResult({ toolCallId: "c1", name: "record", content: "recorded v1" })
      ])
      assert.notInclude(yield* fs.readFileString(file), "preview")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("stops with a ChatError after maxSteps replies that all asked for tools", () =>
    Effect.gen(function*() {
      const { runs, tool } = yield* recorder
      const { layer, requests } = yield* scriptedProvider([
        attempt(toolCall("c1", "record", { value: "1" }), finish("tool_calls")),
        attempt(toolCall("c2", "record", { value: "2" }), finish("tool_calls"))
      ])
      const committed: Array<Message.Message> = []
      const error = yield* Chat.step(prompt, {
        model: "m",
        maxSteps: 2,
        onCommit: (commit) => Effect.sync(() => committed.push(commit.message))
      }).pipe(Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy)), Effect.flip)
      assert.strictEqual(error._tag, "ChatError")
      assert.strictEqual((yield* Ref.get(requests)).length, 2)
      assert.deepStrictEqual(yield* Ref.get(runs), ["1", "2"])
      // The last reply's results are committed, so the transcript stays valid for the next request.
      assert.deepStrictEqual(committed.map((m) => m.role), ["assistant", "tool", "assistant", "tool"])
    }))

  it.effect("without tools the request carries none and a stray call gets an error result", () =>
    Effect.gen(function*() {
      const { layer, requests } = yield* scriptedProvider([
        attempt(toolCall("c1", "now", {}), finish("tool_calls")),
        attempt(text("fine"), finish("stop"))
      ])
      const result = yield* Chat.step(prompt, { model: "m" }).pipe(
        Effect.provide(Layer.mergeAll(layer, Tool.layerEmpty, policy))
      )
      const sent = yield* Ref.get(requests)
      assert.isUndefined(sent[0].tools)
      const toolResult = result.messages[1]
      assert.isTrue(toolResult.role === "tool" && toolResult.isError)
      assert.strictEqual(result.reply.text, "fine")
    }))
})

describe("Chat.interruptedToolResults", () => {
  const call = (id: string) => ({ id, name: "append_file", arguments: { path: "notes.txt", line: id } })
  const reply = (...ids: Array<string>): Message.Message => ({ role: "assistant", text: "", toolCalls: ids.map(call) })
  const result = (id: string): Message.Message =>
    Message.toolResult({ toolCallId: id, name: "append_file", content: "ok" })

  it("answers the last reply's calls that have no result, in call order, as errors that say they did not run", () => {
    const results = Chat.interruptedToolResults([Message.user("go"), reply("a", "b", "c"), result("b")])
    assert.deepStrictEqual(results.map((r) => r.toolCallId), ["a", "c"])
    for (const r of results) {
      assert.isTrue(r.isError)
      assert.strictEqual(r.name, "append_file")
      assert.strictEqual(r.content, Chat.interruptedToolCall)
    }
  })

  it("is empty when the last reply is answered, asked for no tool, or there is no reply to answer", () => {
    assert.deepStrictEqual(Chat.interruptedToolResults([Message.user("go"), reply("a"), result("a")]), [])
    assert.deepStrictEqual(Chat.interruptedToolResults([Message.user("go"), reply()]), [])
    assert.deepStrictEqual(Chat.interruptedToolResults([Message.user("go")]), [])
    assert.deepStrictEqual(Chat.interruptedToolResults([]), [])
    // only the last reply counts: an earlier one is answered or was already repaired
    assert.deepStrictEqual(Chat.interruptedToolResults([reply("a"), result("a"), Message.user("next")]), [])
  })
})

describe("Chat.turn", () => {
  const policy = Layer.merge(Budget.layer({}), Policy.layer({ backoffBase: Duration.millis(10) }))
  const batches = Effect.map(Ref.make<ReadonlyArray<ReadonlyArray<Message.Message>>>([]), (ref) => ({
    ref,
    persist: (messages: ReadonlyArray<Message.Message>) => Ref.update(ref, (all) => [...all, messages])
  }))

  it.effect("the prompt is persisted with the first committed reply, in one batch; then each commit", () =>
    Effect.gen(function*() {
      const { runs, tool } = yield* recorder
      const { layer, requests } = yield* scriptedProvider([
        failing([text("a discarded preview")]),
        attempt(toolCall("c1", "record", { value: "v1" }), finish("tool_calls")),
        attempt(text("done"), finish("stop"))
      ])
      const sink = yield* batches
      const result = yield* withWaits(
        Chat.turn([], "go", { model: "m", persist: sink.persist }).pipe(
          Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy))
        )
      )
      const call = Message.assistant("", [{ id: "c1", name: "record", arguments: { value: "v1" } }])
      const toolResult = Message.toolResult({ toolCallId: "c1", name: "record", content: "recorded v1" })
      assert.deepStrictEqual(yield* Ref.get(sink.ref), [
        [Message.user("go"), call],
        [toolResult],
        [Message.assistant("done", [])]
      ])
      assert.deepStrictEqual(result.opening, [Message.user("go")])
      assert.deepStrictEqual(result.messages, [call, toolResult, Message.assistant("done", [])])
      assert.deepStrictEqual(yield* Ref.get(runs), ["v1"])
      // every request carried the prompt
      for (const request of yield* Ref.get(requests)) assert.deepStrictEqual(request.messages[0], Message.user("go"))
    }))

  it.effect("a turn that commits nothing persists nothing, not even its prompt", () =>
    Effect.gen(function*() {
      const { layer } = yield* scriptedProvider([Stream.fail(ProviderFailure.fromHttpStatus({ status: 401 }))])
      const sink = yield* batches
      const error = yield* Chat.turn([Message.user("earlier"), Message.assistant("ok", [])], "go", {
        model: "m",
        persist: sink.persist
      }).pipe(Effect.provide(Layer.mergeAll(layer, Tool.layer([]), policy)), Effect.flip)
      assert.isTrue(ProviderFailure.isProviderFailure(error))
      assert.deepStrictEqual(yield* Ref.get(sink.ref), [])
    }))

  it.effect("unanswered tool calls of the history are answered first, committed with the prompt, never run", () =>
    Effect.gen(function*() {
      const { runs, tool } = yield* recorder
      const { layer, requests } = yield* scriptedProvider([attempt(text("resumed"), finish("stop"))])
      const sink = yield* batches
      const history = [
        Message.user("first"),
        Message.assistant("", [{ id: "c9", name: "record", arguments: { value: "never" } }])
      ]
      yield* Chat.turn(history, "go on", { model: "m", persist: sink.persist }).pipe(
        Effect.provide(Layer.mergeAll(layer, Tool.layer([tool]), policy))
      )
      const [interrupted] = Chat.interruptedToolResults(history)
      assert.deepStrictEqual(yield* Ref.get(sink.ref), [[
        interrupted,
        Message.user("go on"),
        Message.assistant("resumed", [])
      ]])
      assert.deepStrictEqual(yield* Ref.get(runs), [])
      assert.deepStrictEqual((yield* Ref.get(requests))[0].messages, [...history, interrupted, Message.user("go on")])
    }))
})
