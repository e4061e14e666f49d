import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Ref, Schema, Stream } from "effect"
import * as Chat from "../src/Chat.js"
import * as Generation from "../src/Generation.js"
import * as Message from "../src/Message.js"
import * as Provider from "../src/Provider.js"
import * as Tool from "../src/Tool.js"

class Greeting extends Context.Tag("test/Greeting")<Greeting, string>() {}

const Params = Schema.Struct({
  name: Schema.String.annotations({ description: "who to greet" }),
  times: Schema.optional(Schema.Number)
})

const greet = Tool.make("greet", {
  description: "Greets someone.",
  parameters: Params,
  handler: ({ name, times }) => Effect.map(Greeting, (hello) => `${hello} ${name}`.repeat(times ?? 1))
})

const call = (name: string, args: unknown, id = "call_1") => ({ id, name, arguments: args })

describe("Tool", () => {
  it("definition carries the parameters' JSON Schema without $schema", () => {
    const definition = Tool.definition(greet)
    assert.strictEqual(definition.name, "greet")
    assert.strictEqual(definition.description, "Greets someone.")
    assert.deepStrictEqual(definition.parameters, {
      type: "object",
      required: ["name"],
      properties: {
        name: { type: "string", description: "who to greet" },
        times: { type: "number" }
      },
      additionalProperties: false
    })
  })

  it("a tool without parameters is described as an empty object", () => {
    const none = Tool.make("none", {
      description: "d",
      parameters: Schema.Struct({}),
      handler: () => Effect.succeed("x")
    })
    assert.deepStrictEqual(Tool.definition(none).parameters, {
      type: "object",
      properties: {},
      required: [],
      additionalProperties: false
    })
  })

  it.effect("runs a call with decoded arguments and the handler's context", () =>
    Effect.gen(function*() {
      const toolkit = yield* Tool.toolkit([greet]).pipe(Effect.provideService(Greeting, "hi"))
      assert.deepStrictEqual(toolkit.definitions.map((d) => d.name), ["greet"])
      const result = yield* toolkit.run(call("greet", { name: "Ada", times: 2 }))
      assert.deepStrictEqual(result, {
        role: "tool",
        toolCallId: "call_1",
        name: "greet",
        content: "hi Adahi Ada",
        isError: false
      })
    }))

  it.effect("a tool that is not enabled gets an error result naming the enabled tools", () =>
    Effect.gen(function*() {
      const toolkit = yield* Tool.toolkit([greet]).pipe(Effect.provideService(Greeting, "hi"))
      const result = yield* toolkit.run(call("rm", { path: "/" }))
      assert.isTrue(result.isError)
      assert.strictEqual(result.name, "rm")
      assert.strictEqual(result.toolCallId, "call_1")
      assert.include(result.content, "not enabled")
      assert.include(result.content, "greet")
    }))

  it.effect("the empty toolkit has no definitions and refuses every call", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(Tool.emptyToolkit.definitions, [])
      const result = yield* Tool.emptyToolkit.run(call("now", {}))
      assert.isTrue(result.isError)
      assert.include(result.content, "no tools are enabled")
    }))

  it.effect("arguments that do not decode give an error result and the handler does not run", () =>
    Effect.gen(function*() {
      const runs = yield* Ref.make(0)
      const counted = Tool.make("greet", {
        description: "d",
        parameters: Params,
        handler: ({ name }) => Effect.as(Ref.update(runs, (n) => n + 1), name)
      })
      const toolkit = yield* Tool.toolkit([counted])
      for (const args of [{ name: 42 }, {}, "not json", [1], { name: "x", times: "2" }]) {
        const result = yield* toolkit.run(call("greet", args))
        assert.isTrue(result.isError, JSON.stringify(args))
        assert.include(result.content, "invalid arguments")
      }
      assert.strictEqual(yield* Ref.get(runs), 0)
    }))

  it.effect("missing arguments count as {} for a tool without parameters", () =>
    Effect.gen(function*() {
      const ping = Tool.make("ping", {
        description: "d",
        parameters: Schema.Struct({}),
        handler: () => Effect.succeed("pong")
      })
      const toolkit = yield* Tool.toolkit([ping])
      for (const args of [undefined, null, "", {}]) {
        const result = yield* toolkit.run(call("ping", args))
        assert.deepStrictEqual([result.isError, result.content], [false, "pong"])
      }
    }))

  it.effect("a ToolError and a defect become error results", () =>
    Effect.gen(function*() {
      const failing = Tool.make("failing", {
        description: "d",
        parameters: Schema.Struct({}),
        handler: () => new Tool.ToolError({ tool: "failing", reason: "Refused", detail: "not today" })
      })
      const dying = Tool.make("dying", {
        description: "d",
        parameters: Schema.Struct({}),
        handler: () => Effect.die(new Error("boom"))
      })
      const throwing = Tool.make("throwing", {
        description: "d",
        parameters: Schema.Struct({}),
        handler: () => {
          throw new Error("thrown")
        }
      })
      const toolkit = yield* Tool.toolkit([failing, dying, throwing])
      const refused = yield* toolkit.run(call("failing", {}))
      assert.deepStrictEqual([refused.isError, refused.content], [true, "failing: not today"])
      const died = yield* toolkit.run(call("dying", {}))
      assert.deepStrictEqual([died.isError, died.content], [true, "dying: failed unexpectedly: boom"])
      const thrown = yield* toolkit.run(call("throwing", {}))
      assert.deepStrictEqual([thrown.isError, thrown.content], [true, "throwing: failed unexpectedly: thrown"])
    }))

  it.effect("interruption is not turned into a result", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const blocking = Tool.make("blocking", {
        description: "d",
        parameters: Schema.Struct({}),
        handler: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
      })
      const selfInterrupting = Tool.make("self", {
        description: "d",
        parameters: Schema.Struct({}),
        handler: () => Effect.interrupt
      })
      const toolkit = yield* Tool.toolkit([blocking, selfInterrupting])
      const fiber = yield* Effect.fork(toolkit.run(call("blocking", {})))
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isInterrupted(exit))
      const own = yield* Effect.exit(toolkit.run(call("self", {})))
      assert.isTrue(Exit.isInterrupted(own))
    }))

  it.effect(
    "a handler inside an uninterruptible region does not hold up the interruption of its call",
    () =>
      Effect.gen(function*() {
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const finished = yield* Deferred.make<void>()
        // e.g. a handler that opens a file with @effect/platform's `open`, which acquires uninterruptibly
        const stuck = Tool.make("stuck", {
          description: "d",
          parameters: Schema.Struct({}),
          handler: () =>
            Effect.uninterruptible(
              Deferred.succeed(started, undefined).pipe(
                Effect.zipRight(Deferred.await(release)),
                Effect.zipRight(Deferred.succeed(finished, undefined)),
                Effect.as("late")
              )
            )
        })
        const toolkit = yield* Tool.toolkit([stuck])
        const fiber = yield* Effect.fork(toolkit.run(call("stuck", {})))
        yield* Deferred.await(started)
        const exit = yield* Fiber.interrupt(fiber)
        assert.isTrue(Exit.isInterrupted(exit))
        assert.isFalse(yield* Deferred.isDone(finished))
        // the handler goes on in the background until its region ends; its result goes nowhere
        yield* Deferred.succeed(release, undefined)
        yield* Deferred.await(finished)
      }),
    { timeout: 5_000 }
  )

  it.effect(
    "interrupting a step while its tool runs ends it at once, with nothing committed after the reply",
    () =>
      Effect.gen(function*() {
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const finished = yield* Deferred.make<void>()
        const stuck = Tool.make("stuck", {
          description: "d",
          parameters: Schema.Struct({}),
          handler: () =>
            Effect.uninterruptible(
              Deferred.succeed(started, undefined).pipe(
                Effect.zipRight(Deferred.await(release)),
                Effect.zipRight(Deferred.succeed(finished, undefined)),
                Effect.as("late")
              )
            )
        })
        const replies: ReadonlyArray<ReadonlyArray<Generation.GenerationEvent>> = [
          [
            Generation.ToolCallComplete({ call: { id: "c1", name: "stuck", arguments: {} } }),
            Generation.Finish({ reason: "tool_calls", providerReason: "tool_calls" })
          ],
          [Generation.TextDelta({ text: "never" }), Generation.Finish({ reason: "stop", providerReason: "stop" })]
        ]
        const sends = yield* Ref.make(0)
        const provider: Provider.Service = Provider.makeFromStream({
          protocol: "scripted",
          stream: () =>
            Stream.unwrap(
              Effect.map(Ref.getAndUpdate(sends, (n) => n + 1), (n) => Stream.fromIterable(replies[Math.min(n, 1)]))
            )
        })
        const commits = yield* Ref.make<ReadonlyArray<Chat.Commit>>([])
        const fiber = yield* Chat.step([Message.user("go")], {
          model: "m",
          onCommit: (commit) => Ref.update(commits, (all) => [...all, commit])
        }).pipe(
          Effect.provide(Layer.mergeAll(Layer.succeed(Provider.Provider, provider), Tool.layer([stuck]))),
          Effect.fork
        )
        yield* Deferred.await(started)
        const exit = yield* Fiber.interrupt(fiber)
        assert.isTrue(Exit.isInterrupted(exit))
        assert.deepStrictEqual((yield* Ref.get(commits)).map((c) => c._tag), ["Reply"])
        yield* Deferred.succeed(release, undefined)
        yield* Deferred.await(finished)
        // the tool's late result is not committed and no further reply is requested
        const committed = yield* Ref.get(commits)
        assert.deepStrictEqual(committed.map((c) => c._tag), ["Reply"])
        assert.strictEqual(yield* Ref.get(sends), 1)
        // the next turn answers the call with an error result, without running it again
        const next = Chat.interruptedToolResults([Message.user("go"), ...committed.map((c) => c.message)])
        assert.deepStrictEqual(next.map((r) => [r.toolCallId, r.isError, r.content]), [
          ["c1", true, Chat.interruptedToolCall]
        ])
      }),
    { timeout: 5_000 }
  )

  it.effect("two tools with the same name are a defect", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Tool.toolkit([greet, greet]).pipe(Effect.provideService(Greeting, "hi")))
      assert.isTrue(Exit.isFailure(exit) && !Exit.isInterrupted(exit))
    }))

  it.effect("Tool.run uses the Toolkit service", () =>
    Effect.gen(function*() {
      const result = yield* Tool.run(call("greet", { name: "Bo" })).pipe(
        Effect.provide(Tool.layer([greet])),
        Effect.provideService(Greeting, "hey")
      )
      assert.strictEqual(result.content, "hey Bo")
    }))
})
