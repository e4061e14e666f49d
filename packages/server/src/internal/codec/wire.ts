/**
 * What the Responses and Anthropic codecs share: an SSE frame, and the checks of a client's JSON body that refuse it
 * with an `Invalid` naming the field at fault.
 *
 * @internal
 */
import * as Generation from "@reprise/core/Generation"
import * as Either from "effect/Either"
import type * as Downstream from "../downstream.js"

/** One SSE frame: its `event:` line, its `data:` line (one line of JSON) and the blank line. @internal */
export const frame = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/**
 * A refusal thrown inside a decoder and turned into its `Left` at the decoder's edge ({@link decodeWith}): a body is
 * checked field by field, and the first fault ends the check.
 *
 * @internal
 */
export class Refusal {
  constructor(readonly invalid: Downstream.Invalid) {}
}

/** @internal */
export const refuse = (param: string | undefined, message: string): never => {
  throw new Refusal(param === undefined ? { message } : { message, param })
}

/** @internal */
export const decodeWith = <A>(decode: () => A): Either.Either<A, Downstream.Invalid> => {
  try {
    return Either.right(decode())
  } catch (error) {
    if (error instanceof Refusal) return Either.left(error.invalid)
    throw error
  }
}

/** @internal */
export type Json = Record<string, unknown>

/** @internal */
export const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** @internal */
export const object = (u: unknown, param: string): Json =>
  isObject(u) ? u : refuse(param, `'${param}' must be an object`)

/** @internal */
export const array = (u: unknown, param: string): ReadonlyArray<unknown> =>
  Array.isArray(u) ? u : refuse(param, `'${param}' must be an array`)

/** @internal */
export const string = (u: unknown, param: string): string =>
  typeof u === "string" ? u : refuse(param, `'${param}' must be a string`)

/** A string when present: absent and `null` are `undefined`. @internal */
export const optionalString = (u: unknown, param: string): string | undefined =>
  u === undefined || u === null ? undefined : string(u, param)

/** @internal */
export const positiveInteger = (u: unknown, param: string): number =>
  typeof u === "number" && Number.isInteger(u) && u >= 1 ? u : refuse(param, `'${param}' must be an integer >= 1`)

/** @internal */
export const optionalBoolean = (u: unknown, param: string): boolean | undefined =>
  u === undefined || u === null ? undefined : typeof u === "boolean" ? u : refuse(param, `'${param}' must be a boolean`)

/** A JSON Schema object, when present. @internal */
export const schemaObject = (u: unknown, param: string): Readonly<Record<string, unknown>> | undefined =>
  u === undefined || u === null ? undefined : object(u, param)

/** A tool's JSON Schema when it gives none: an object of any properties. @internal */
export const anyObject: Readonly<Record<string, unknown>> = { type: "object", properties: {} }

/** A tool choice that forces a call needs tools, and one that names a tool needs that tool. @internal */
export const checkToolChoice = (choice: Generation.ToolChoice, tools: ReadonlyArray<Generation.ToolDefinition>) => {
  if (choice === "required" && tools.length === 0) {
    refuse("tool_choice", "'tool_choice' requires a tool call but 'tools' is empty")
  }
  if (typeof choice !== "string" && !tools.some((tool) => tool.name === choice.tool)) {
    refuse("tool_choice", `'tool_choice' names the tool ${JSON.stringify(choice.tool)}, which 'tools' does not hold`)
  }
}

/** The suffix of a reply id after its prefix (`resp_`, `msg_`), for the ids of its items. @internal */
export const suffixOf = (id: string): string => {
  const at = id.indexOf("_")
  return at >= 0 ? id.slice(at + 1) : id
}

/**
 * The fragments of tool calls that wait for their name: the APIs open a call (a `function_call` item, a `tool_use`
 * block) with its name, so a call is announced on its first fragment that names it, with what came before.
 *
 * @internal
 */
export class Unnamed {
  private readonly held = new Map<number, { id: string | undefined; args: string }>()

  /**
   * The fragment to write for a call that was not announced yet: `undefined` while its name is unknown (it is held),
   * else the fragment with the id and arguments held before it.
   */
  take(
    event: Extract<Generation.GenerationEvent, { _tag: "ToolCallDelta" }>
  ): Extract<Generation.GenerationEvent, { _tag: "ToolCallDelta" }> | undefined {
    const held = this.held.get(event.index)
    if (event.name === undefined) {
      this.held.set(event.index, { id: held?.id ?? event.id, args: (held?.args ?? "") + event.argumentsDelta })
      return undefined
    }
    if (held === undefined) return event
    this.held.delete(event.index)
    return Generation.ToolCallDelta({
      index: event.index,
      id: held.id ?? event.id,
      name: event.name,
      argumentsDelta: held.args + event.argumentsDelta
    })
  }

  /** A call completed before its name came: what was held of it is dropped (its complete call is written). */
  complete(id: string): void {
    for (const [index, held] of this.held) {
      if (held.id === id) {
        this.held.delete(index)
        return
      }
    }
    const first = [...this.held.keys()].sort((a, b) => a - b)[0]
    if (first !== undefined) this.held.delete(first)
  }

  clear(): void {
    this.held.clear()
  }
}
