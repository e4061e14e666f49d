/**
 * `generateObject`'s response format and `toolChoice` from `@effect/ai` to the wire, for every protocol, through
 * `RecoveringLanguageModel.layer`, the real undici provider and the loopback simulator: OpenAI's protocols get the
 * native format (`response_format` / `text.format`), Anthropic an instruction in its system text; `"required"`,
 * `{ tool }` and `{ mode: "required", oneOf }` reach the wire as each protocol's `tool_choice`; a cut attempt is
 * replayed with the same fields and the committed attempt alone is decoded or runs its tool. Waits run on the
 * TestClock.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Tool from "@effect/ai/Tool"
import { assert, describe, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect, Exit, Fiber, Schema } from "effect"
import {
  cut,
  exactBackoff,
  failureOf,
  fresh,
  model,
  passBackoffUntil,
  protocols,
  script,
  simulator,
  Tools,
  tools
} from "./support.js"

type Json = any

const Person = Schema.Struct({ name: Schema.String, age: Schema.Number }).annotations({
  description: "A person and their age"
})

const personSchema = Tool.getJsonSchemaFromSchemaAst(Person.ast)

const instruction =
  "Answer with one JSON value named \"person\" (A person and their age) and nothing else (no prose, " +
  `no code fence). It must match this JSON Schema: ${JSON.stringify(personSchema)}`

/** What each protocol sends for `{ tool: "record" }` and `"required"`. */
const wireChoice = (protocol: string, choice: "required" | "none" | { readonly tool: string }): unknown => {
  if (protocol === "anthropic") {
    return typeof choice === "string" ? { type: choice === "required" ? "any" : choice } : {
      type: "tool",
      name: choice.tool
    }
  }
  if (typeof choice === "string") return choice
  return protocol === "openai-chat"
    ? { type: "function", function: { name: choice.tool } }
    : { type: "function", name: choice.tool }
}

const recordCall = { toolCalls: [{ id: "call_1", name: "record", arguments: { line: "x" } }] }

layer(simulator, { excludeTestServices: true })("structured output and tool choice over recovery", (it) => {
  for (const protocol of protocols) {
    describe(protocol, () => {
      it.effect("generateObject: the native format (Anthropic: the instruction), replayed; the committed object", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, {
            steps: [
              { kind: "eof", reply: { text: "{\"name\": \"Bob\", " } },
              { kind: "stream", reply: { text: "{\"name\": \"Ada\", \"age\": 36}" } }
            ]
          })
          const fiber = yield* Effect.fork(
            LanguageModel.generateObject({ prompt: "who?", schema: Person, objectName: "person" })
          )
          yield* passBackoffUntil(1000)
          const response = yield* Fiber.join(fiber)
          assert.deepStrictEqual(response.value, { name: "Ada", age: 36 })
          const requests = yield* sim.requestsTo(protocol)
          assert.strictEqual(requests.length, 2)
          const [first, second] = requests.map((r) => r.body as Json)
          assert.deepStrictEqual(second, first)
          const native = {
            type: "json_schema",
            name: "person",
            description: "A person and their age",
            schema: personSchema,
            strict: false
          }
          switch (protocol) {
            case "openai-chat": {
              const { type, ...jsonSchema } = native
              assert.deepStrictEqual(second.response_format, { type, json_schema: jsonSchema })
              // nothing asked in words: the only message is the user's
              assert.deepStrictEqual(second.messages, [{ role: "user", content: "who?" }])
              assert.notProperty(second, "text")
              break
            }
            case "openai-responses":
            case "subscription":
              assert.deepStrictEqual(second.text, { format: native })
              assert.notProperty(second, "instructions")
              assert.notProperty(second, "response_format")
              break
            case "anthropic":
              assert.strictEqual(second.system, instruction)
              for (const field of ["response_format", "text", "output_config"]) assert.notProperty(second, field)
              break
          }
          for (const field of ["tool_choice", "tools"]) assert.notProperty(second, field)
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      for (const toolChoice of ["required", { tool: "record" }] as const) {
        it.effect(`toolChoice ${JSON.stringify(toolChoice)}: on the wire; a cut attempt is replayed, the tool runs once`, () =>
          Effect.gen(function*() {
            const sim = yield* Simulator.Simulator
            yield* script(protocol, { steps: [cut, { kind: "stream", reply: recordCall }] })
            const handlers = yield* tools
            const fiber = yield* Effect.fork(
              LanguageModel.generateText({ prompt: "record x", toolkit: Tools, toolChoice }).pipe(
                Effect.provide(handlers.layer)
              )
            )
            yield* passBackoffUntil(1000)
            const response = yield* Fiber.join(fiber)
            assert.deepStrictEqual(response.toolResults.map((r) => r.result), ["recorded x"])
            assert.deepStrictEqual(yield* handlers.runs, ["x"])
            const requests = yield* sim.requestsTo(protocol)
            assert.strictEqual(requests.length, 2)
            for (const request of requests) {
              const body = request.body as Json
              assert.deepStrictEqual(body.tool_choice, wireChoice(protocol, toolChoice))
              assert.strictEqual(body.tools.length, 1)
            }
          }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))
      }

      it.effect("toolChoice { mode: required, oneOf } is required over the narrowed tools; none keeps the tools", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, { steps: [{ kind: "stream", reply: recordCall }, { kind: "stream" }] })
          const handlers = yield* tools
          yield* LanguageModel.generateText({
            prompt: "record x",
            toolkit: Tools,
            toolChoice: { mode: "required", oneOf: ["record"] }
          }).pipe(Effect.provide(handlers.layer))
          yield* LanguageModel.generateText({ prompt: "just talk", toolkit: Tools, toolChoice: "none" }).pipe(
            Effect.provide(handlers.layer)
          )
          const [required, none] = (yield* sim.requestsTo(protocol)).map((r) => r.body as Json)
          assert.deepStrictEqual(required.tool_choice, wireChoice(protocol, "required"))
          assert.deepStrictEqual(none.tool_choice, wireChoice(protocol, "none"))
          assert.strictEqual(none.tools.length, 1)
          assert.deepStrictEqual(yield* handlers.runs, ["x"])
        }).pipe(Effect.provide(model(protocol)), fresh))

      it.effect("toolChoice naming a tool that is not offered: MalformedInput, nothing sent", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, { steps: [] })
          const handlers = yield* tools
          const exit = yield* LanguageModel.generateText({
            prompt: "record x",
            toolkit: Tools,
            toolChoice: { tool: "missing" } as any
          }).pipe(Effect.provide(handlers.layer), Effect.exit)
          assert.isTrue(Exit.isFailure(exit))
          const error = failureOf(exit) as Json
          assert.strictEqual(error._tag, "MalformedInput")
          assert.include(error.description, "missing")
          assert.strictEqual(yield* sim.count(protocol), 0)
        }).pipe(Effect.provide(model(protocol)), fresh))
    })
  }
})
