/**
 * Tools the model may call, and the {@link Toolkit} that runs them.
 *
 * A tool is a name, a description, its parameters as an `effect/Schema` schema (sent to the provider as JSON Schema)
 * and a handler. The {@link Toolkit} service holds the enabled tools: it lists their definitions for a request and
 * runs one committed tool call at a time. Running a call never fails: a tool that is not enabled, arguments that do
 * not decode, a handler's {@link ToolError} and even a defect become an error result (`isError: true`) that the
 * model sees on its next request. Interruption is not caught: it stays interruption.
 *
 * Tools run only outside recovery, from committed replies (see `Chat.step`); a tool's failure is never
 * provider-origin and is never replayed.
 *
 * Running a call is interruptible, whatever the handler does: when the running fiber is interrupted (Ctrl-C in the
 * CLI), the call ends at once with that interruption, and a handler still inside an uninterruptible region goes on
 * in the background until the region ends, its result dropped (`Effect.disconnect`). An interrupted call has no
 * result committed: the step stops there, and the next turn answers the call with `Chat.interruptedToolResults`,
 * an error result saying it may or may not have taken effect; it is never run again. A handler must still not start
 * an operating-system call that can block for ever (a synchronous `fs.*Sync`, or opening a FIFO for writing without
 * `O_NONBLOCK`, which waits for a reader): Node cannot exit while a worker thread is stuck in such a call, so the
 * process would not end although the fiber did.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as JSONSchema from "effect/JSONSchema"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import type * as Generation from "./Generation.js"
import type * as Message from "./Message.js"

/**
 * Why a tool call produced an error result.
 *
 * - `NotEnabled`: no enabled tool has that name.
 * - `InvalidArguments`: the arguments do not decode against the tool's parameters.
 * - `Refused`: the tool declined the request (for example a path outside the workspace).
 * - `Failed`: the tool tried and failed (for example an I/O error).
 * - `Defect`: the handler died unexpectedly.
 *
 * @since 0.1.0
 * @category models
 */
export const ToolErrorReason = Schema.Literal("NotEnabled", "InvalidArguments", "Refused", "Failed", "Defect")

/**
 * @since 0.1.0
 * @category models
 */
export type ToolErrorReason = typeof ToolErrorReason.Type

/**
 * The failure of one tool call. It is turned into an error result for the model, never into a failed turn, and it
 * is never replayed.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolError extends Schema.TaggedError<ToolError>("@reprise/core/ToolError")("ToolError", {
  /** The tool's name as the model called it. */
  tool: Schema.String,
  reason: ToolErrorReason,
  /** What the model should read: why the call did not succeed. Never contains a key or an absolute path. */
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `${this.tool}: ${this.detail}`
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isToolError = (u: unknown): u is ToolError => Predicate.isTagged(u, "ToolError")

/**
 * A tool: `parameters` decodes the call's JSON arguments into what `handler` takes; the handler returns the text of
 * the result.
 *
 * @since 0.1.0
 * @category models
 */
export interface Tool<A, I = A, R = never> {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Schema<A, I, never>
  readonly handler: (params: A) => Effect.Effect<string, ToolError, R>
}

/**
 * Any tool, whatever its parameters and requirements.
 *
 * @since 0.1.0
 * @category models
 */
export interface Any extends Tool<any, any, any> {}

/**
 * What a tool's handler requires.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements<T> = T extends Tool<infer _A, infer _I, infer R> ? R : never

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = <A, I, R = never>(name: string, options: {
  readonly description: string
  readonly parameters: Schema.Schema<A, I, never>
  readonly handler: (params: A) => Effect.Effect<string, ToolError, R>
}): Tool<A, I, R> => ({
  name,
  description: options.description,
  parameters: options.parameters,
  handler: options.handler
})

const emptyObjectSchema: Readonly<Record<string, unknown>> = {
  type: "object",
  properties: {},
  required: [],
  additionalProperties: false
}

const isEmptyStruct = (ast: SchemaAST.AST): boolean => {
  const type = SchemaAST.typeAST(ast)
  return SchemaAST.isTypeLiteral(type) && type.propertySignatures.length === 0 && type.indexSignatures.length === 0
}

/**
 * The definition sent to the provider: the parameters' JSON Schema (`JSONSchema.make`) without its `$schema`/`$id`
 * markers. A struct with no fields becomes an empty object schema, which every provider accepts.
 *
 * @since 0.1.0
 * @category utils
 */
export const definition = (tool: Any): Generation.ToolDefinition => {
  const parameters = isEmptyStruct(tool.parameters.ast)
    ? emptyObjectSchema
    : (() => {
      const { $id: _id, $schema: _schema, ...rest } = JSONSchema.make(tool.parameters) as unknown as Record<
        string,
        unknown
      >
      return rest
    })()
  return { name: tool.name, description: tool.description, parameters }
}

/**
 * The enabled tools.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly tools: ReadonlyArray<Any>
  /** The tools' definitions, in order, for a `GenerationRequest`. */
  readonly definitions: ReadonlyArray<Generation.ToolDefinition>
  /**
   * Runs one committed tool call and returns its result. Never fails: every failure (not enabled, arguments that
   * do not decode, a {@link ToolError}, a defect) is an error result. Interruption is not caught, and it takes
   * effect at once, without waiting for the handler (see the module's documentation).
   */
  readonly run: (call: Message.ToolCall) => Effect.Effect<Message.ToolResultMessage>
}

/**
 * The tools enabled for a conversation.
 *
 * @since 0.1.0
 * @category tags
 */
export class Toolkit extends Context.Tag("@reprise/core/Toolkit")<Toolkit, Service>() {}

const result = (call: Message.ToolCall, content: string, isError: boolean): Message.ToolResultMessage => ({
  role: "tool",
  toolCallId: call.id,
  name: call.name,
  content,
  isError
})

const describeDefect = (defect: unknown): string =>
  defect instanceof Error ? defect.message : Predicate.isString(defect) ? defect : String(defect)

const fromCause = (name: string, cause: Cause.Cause<ToolError>): ToolError =>
  Option.match(Cause.failureOption(cause), {
    onSome: (error) => error,
    onNone: () => {
      const defect = Cause.squash(cause)
      return new ToolError({
        tool: name,
        reason: "Defect",
        detail: `failed unexpectedly: ${describeDefect(defect)}`,
        cause: defect
      })
    }
  })

/**
 * Runs one call against the given tools, with `context` provided to the handlers.
 */
const runCall = <R>(
  byName: ReadonlyMap<string, Any>,
  context: Context.Context<R>,
  call: Message.ToolCall
): Effect.Effect<Message.ToolResultMessage> => {
  const tool = byName.get(call.name)
  if (tool === undefined) {
    const enabled = byName.size === 0 ? "no tools are enabled" : `enabled tools: ${[...byName.keys()].join(", ")}`
    const error = new ToolError({ tool: call.name, reason: "NotEnabled", detail: `tool is not enabled (${enabled})` })
    return Effect.succeed(result(call, error.message, true))
  }
  // A call without arguments is the same as `{}` (providers send nothing, `null` or `""` for tools without
  // parameters); anything else must decode as it is.
  const args = call.arguments === undefined || call.arguments === null || call.arguments === "" ? {} : call.arguments
  return Schema.decodeUnknown(tool.parameters)(args).pipe(
    Effect.mapError((error) =>
      new ToolError({
        tool: call.name,
        reason: "InvalidArguments",
        detail: `invalid arguments: ${ParseResult.TreeFormatter.formatErrorSync(error)}`
      })
    ),
    // disconnected: an interruption ends the call at once, even while the handler is in an uninterruptible region
    Effect.flatMap((params) =>
      Effect.disconnect(Effect.suspend(() => tool.handler(params) as Effect.Effect<string, ToolError>))
    ),
    Effect.map((content) => result(call, content, false)),
    Effect.catchAllCause((cause) =>
      Cause.isInterrupted(cause)
        ? Effect.failCause(Cause.stripFailures(cause))
        : Effect.succeed(result(call, fromCause(call.name, cause).message, true))
    ),
    Effect.provide(context)
  )
}

/**
 * Builds a toolkit from tools, capturing what their handlers require. Two tools with the same name are a defect.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolkit = <const Tools extends ReadonlyArray<Any>>(
  tools: Tools
): Effect.Effect<Service, never, Requirements<Tools[number]>> =>
  Effect.gen(function*() {
    const byName = new Map<string, Any>()
    for (const tool of tools) {
      if (byName.has(tool.name)) return yield* Effect.dieMessage(`two tools are named "${tool.name}"`)
      byName.set(tool.name, tool)
    }
    const context = yield* Effect.context<Requirements<Tools[number]>>()
    return {
      tools: [...tools],
      definitions: tools.map(definition),
      run: (call: Message.ToolCall) => runCall(byName, context, call)
    }
  })

/**
 * A toolkit with no tools: requests carry no tool definitions and every call gets a `NotEnabled` error result.
 *
 * @since 0.1.0
 * @category constructors
 */
export const emptyToolkit: Service = {
  tools: [],
  definitions: [],
  run: (call) => runCall(new Map(), Context.empty(), call)
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = <const Tools extends ReadonlyArray<Any>>(
  tools: Tools
): Layer.Layer<Toolkit, never, Requirements<Tools[number]>> => Layer.effect(Toolkit, toolkit(tools))

/**
 * @since 0.1.0
 * @category layers
 */
export const layerEmpty: Layer.Layer<Toolkit> = Layer.succeed(Toolkit, emptyToolkit)

/**
 * Runs one committed tool call with the current {@link Toolkit}.
 *
 * @since 0.1.0
 * @category accessors
 */
export const run = (call: Message.ToolCall): Effect.Effect<Message.ToolResultMessage, never, Toolkit> =>
  Effect.flatMap(Toolkit, (toolkit) => toolkit.run(call))
