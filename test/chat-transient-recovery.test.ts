/**
 * chat-transient-recovery: the conversation step (`Chat.step`) with tools under transport faults, on every protocol,
 * over real loopback HTTP (the simulator and the undici client). A tool runs exactly once and only from a committed
 * reply; a failed attempt's tool call — truncated, or complete but followed by a failed drain — never runs; a tool
 * result committed before a later fault is in every later request, in the protocol's own shape; and permanent
 * rejections inside the step are not replayed. Counts come from the simulator and from the tools themselves.
 */
import { NodeFileSystem, NodePath } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as BuiltinTools from "@reprise/cli/BuiltinTools"
import * as Chat from "@reprise/core/Chat"
import type * as Message from "@reprise/core/Message"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Effect, Either, Layer } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { conversation, countingTool, errorClass, fastPolicy, provider, recorder, toolResults } from "./support/chat.js"

const protocols: ReadonlyArray<SimulatorScript.Route> = ["openai-chat", "openai-responses", "anthropic", "subscription"]

const transcript: ReadonlyArray<Message.Message> = [{ role: "user", text: "Please record a line." }]
const options = { model: "chat-model" }

const recordReply = (line: string): SimulatorScript.Reply => ({
  text: "Recording it now.",
  toolCalls: [{ name: "record", arguments: { line } }]
})
const finalReply: SimulatorScript.Reply = { text: "Done: the line is recorded." }

/** Runs one step with the counting tool, recording commits and notifications. */
const runStep = (
  sim: Simulator.Service,
  route: SimulatorScript.Route,
  extra: { readonly earlyBreakOnToolCall?: boolean } = {}
) =>
  Effect.gen(function*() {
    const counting = countingTool()
    const notes = recorder()
    const commits: Array<Chat.Commit> = []
    const result = yield* Chat.step(transcript, {
      ...options,
      ...extra,
      onCommit: (commit) => Effect.sync(() => void commits.push(commit))
    }).pipe(
      Effect.either,
      Effect.provide(Layer.mergeAll(provider(sim, route), fastPolicy, notes.layer, counting.layer))
    )
    return { result, calls: counting.calls, commits, notes }
  })

const script = (route: SimulatorScript.Route, steps: ReadonlyArray<SimulatorScript.Step>) =>
  Effect.flatMap(Simulator.Simulator, (sim) => sim.setScript({ routes: { [route]: { steps } } }))

const suffix: Record<SimulatorScript.Route, string> = {
  "openai-chat": "/chat/completions",
  "openai-responses": "/responses",
  anthropic: "/v1/messages",
  subscription: "/responses"
}

/**
 * How many SSE events of `reply`'s full stream come up to and including the one that completes its tool call on
 * the wire, the terminal still to come: the last `tool_calls` arguments chunk (Chat Completions; the `finish_reason`
 * chunk follows), the tool_use block's `content_block_stop` (Anthropic; `message_delta` and `message_stop` follow),
 * the function call's `response.output_item.done` (Responses; `response.completed` follows). Read from the
 * simulator itself.
 */
const eventsThroughToolCall = (sim: Simulator.Service, route: SimulatorScript.Route, reply: SimulatorScript.Reply) =>
  Effect.gen(function*() {
    yield* sim.setScript({ routes: { [route]: { steps: [{ kind: "stream", reply }] } } })
    const body = yield* Effect.promise(() =>
      fetch(sim.baseUrl(route) + suffix[route], {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: options.model, stream: true })
      }).then((response) => response.text())
    )
    const events = body.split("\n\n").filter((block) => block.trim().length > 0).map((block) => {
      const data = block.split("\n").find((line) => line.startsWith("data: "))?.slice(6) ?? ""
      try {
        return JSON.parse(data) as Record<string, any>
      } catch {
        return {}
      }
    })
    const toolBlock = events.find((e) => e.type === "content_block_start" && e.content_block?.type === "tool_use")
      ?.index
    const completes = (e: Record<string, any>): boolean =>
      route === "openai-chat"
        ? e.choices?.[0]?.delta?.tool_calls !== undefined
        : route === "anthropic"
        ? e.type === "content_block_stop" && e.index === toolBlock
        : e.type === "response.output_item.done" && e.item?.type === "function_call"
    const index = events.length - 1 - [...events].reverse().findIndex(completes)
    assert.isAbove(index, 0)
    assert.isBelow(index, events.length - 1, "the terminal must come after the tool call")
    return index + 1
  })

for (const route of protocols) {
  describe(`chat-transient-recovery (${route})`, () => {
    it.live("a tool runs exactly once, from the committed reply, seen in the workspace", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        const workspace = yield* Effect.acquireRelease(
          Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "reprise-chat-"))),
          (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
        )
        const append = (line: string): SimulatorScript.Reply => ({
          text: "Appending.",
          toolCalls: [{ name: "append_file", arguments: { path: "log.txt", line } }]
        })
        yield* script(route, [
          { kind: "eof", reply: append("from the discarded attempt") },
          { kind: "stream", reply: append("from the committed reply") },
          { kind: "status", status: 503 },
          { kind: "stream", reply: finalReply }
        ])
        const notes = recorder()
        const result = yield* Chat.step(transcript, options).pipe(
          Effect.provide(Layer.mergeAll(
            provider(sim, route),
            fastPolicy,
            notes.layer,
            BuiltinTools.layer(["append_file"], { workspace }).pipe(
              Layer.provide(Layer.merge(NodeFileSystem.layer, NodePath.layer))
            )
          ))
        )
        assert.strictEqual(result.reply.text, finalReply.text)
        assert.strictEqual(result.replies, 2)
        assert.strictEqual(Fs.readFileSync(Path.join(workspace, "log.txt"), "utf8"), "from the committed reply\n")
        assert.strictEqual(yield* sim.count(route), 4)
        assert.deepStrictEqual(notes.of("AttemptDiscarded").map((n) => errorClass(n.error)), [
          "TransportError.PrematureEof",
          "TransportError.HttpStatus"
        ])
        assert.deepStrictEqual(result.messages.map((m) => m.role), ["assistant", "tool", "assistant"])
        assert.deepStrictEqual(result.messages[1], {
          role: "tool",
          toolCallId: result.messages[0].role === "assistant" ? result.messages[0].toolCalls[0].id : "",
          name: "append_file",
          content: "ok",
          isError: false
        })
      }).pipe(Effect.scoped, Effect.provide(Simulator.layer())))

    it.live("truncated tool-call JSON never executes the tool; the same request is replayed", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(route, [
          { kind: "truncated-tool-call", reply: recordReply("from the truncated attempt") },
          { kind: "stream", reply: recordReply("from the committed reply") },
          { kind: "stream", reply: finalReply }
        ])
        const { calls, commits, notes, result } = yield* runStep(sim, route)
        assert.isTrue(Either.isRight(result))
        assert.deepStrictEqual(calls, ["from the committed reply"])
        const [discarded] = notes.of("AttemptDiscarded")
        assert.strictEqual(errorClass(discarded.error), "TransportError.PrematureEof")
        assert.deepStrictEqual(discarded.discardedToolCalls, [])
        assert.strictEqual(notes.of("AttemptDiscarded").length, 1)
        assert.strictEqual(yield* sim.count(route), 3)
        const [first, replay] = yield* sim.requestsTo(route)
        assert.deepStrictEqual(replay.body, first.body)
        assert.deepStrictEqual(commits.map((c) => c._tag), ["Reply", "ToolResult", "Reply"])
      }).pipe(Effect.provide(Simulator.layer())))

    it.live("eof after a complete tool call, before the terminal: that tool call never runs", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(route, [
          { kind: "eof", reply: recordReply("from the attempt without a terminal") },
          { kind: "stream", reply: recordReply("from the committed reply") },
          { kind: "stream", reply: finalReply }
        ])
        const { calls, notes, result } = yield* runStep(sim, route)
        assert.isTrue(Either.isRight(result))
        assert.deepStrictEqual(calls, ["from the committed reply"])
        assert.deepStrictEqual(notes.of("AttemptDiscarded").map((n) => errorClass(n.error)), [
          "TransportError.PrematureEof"
        ])
        assert.strictEqual(yield* sim.count(route), 3)
      }).pipe(Effect.provide(Simulator.layer())))

    it.live("early break: a failed drain after a complete tool call never runs that tool", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        const doomed = recordReply("from the attempt whose drain failed")
        const cut = yield* eventsThroughToolCall(sim, route, doomed)
        yield* script(route, [
          { kind: "reset", afterEvents: cut, reply: doomed },
          { kind: "stream", reply: recordReply("from the committed reply") },
          { kind: "stream", reply: finalReply }
        ])
        const { calls, notes, result } = yield* runStep(sim, route, { earlyBreakOnToolCall: true })
        assert.isTrue(Either.isRight(result))
        assert.deepStrictEqual(calls, ["from the committed reply"])
        const discarded = notes.of("AttemptDiscarded")
        assert.deepStrictEqual(discarded.map((n) => errorClass(n.error)), ["TransportError.Reset"])
        // Anthropic surfaces the call as complete at its block's end, before the drain; Chat Completions and
        // Responses complete calls at their terminal. Either way the call was whole on the wire and it did not run.
        assert.deepStrictEqual(
          discarded[0].discardedToolCalls.map((c) => c.arguments),
          route === "anthropic" ? [{ line: "from the attempt whose drain failed" }] : []
        )
        assert.strictEqual(yield* sim.count(route), 3)
      }).pipe(Effect.provide(Simulator.layer())))

    it.live("a tool result committed before a later fault is in the replayed request", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(route, [
          { kind: "stream", reply: recordReply("kept") },
          { kind: "reset", afterEvents: 2, reply: finalReply },
          { kind: "stream", reply: finalReply }
        ])
        const { calls, commits, notes, result } = yield* runStep(sim, route)
        assert.isTrue(Either.isRight(result))
        assert.deepStrictEqual(calls, ["kept"])
        assert.deepStrictEqual(notes.of("AttemptDiscarded").map((n) => errorClass(n.error)), ["TransportError.Reset"])
        assert.strictEqual(yield* sim.count(route), 3)
        const [reply] = commits
        const callId = reply._tag === "Reply" ? reply.reply.toolCalls[0].id : ""
        const [first, failed, replayed] = yield* sim.requestsTo(route)
        assert.deepStrictEqual(toolResults(route, first.body), [])
        assert.deepStrictEqual(toolResults(route, failed.body), [{ id: callId, content: "recorded kept" }])
        assert.deepStrictEqual(replayed.body, failed.body)
        // The result is in the protocol's own shape.
        const entries = conversation(route, replayed.body)
        switch (route) {
          case "openai-chat":
            assert.deepStrictEqual(entries.at(-1), { role: "tool", tool_call_id: callId, content: "recorded kept" })
            break
          case "anthropic":
            assert.deepStrictEqual(entries.at(-1), {
              role: "user",
              content: [{ type: "tool_result", tool_use_id: callId, content: "recorded kept", is_error: false }]
            })
            break
          default:
            assert.deepStrictEqual(entries.at(-1), {
              type: "function_call_output",
              call_id: callId,
              output: "recorded kept"
            })
        }
      }).pipe(Effect.provide(Simulator.layer())))

    for (
      const [status, expected] of [[401, "ProviderRejection.Authentication"], [
        400,
        "ProviderRejection.BadRequest"
      ]] as const
    ) {
      it.live(`a ${status} inside the step is not replayed; what was committed before it stays committed`, () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(route, [
            { kind: "stream", reply: recordReply("before the rejection") },
            { kind: "status", status },
            { kind: "stream", reply: finalReply }
          ])
          const { calls, commits, notes, result } = yield* runStep(sim, route)
          assert.isTrue(Either.isLeft(result))
          assert.strictEqual(errorClass(Either.isLeft(result) ? result.left : undefined), expected)
          assert.strictEqual(yield* sim.count(route), 2)
          assert.deepStrictEqual(calls, ["before the rejection"])
          assert.deepStrictEqual(commits.map((c) => c._tag), ["Reply", "ToolResult"])
          assert.deepStrictEqual(notes.of("RetryScheduled"), [])
          assert.strictEqual(notes.of("Failed").length, 1)
        }).pipe(Effect.provide(Simulator.layer())))
    }
  })
}
