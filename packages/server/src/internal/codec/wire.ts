/**
 * What the Responses and Anthropic codecs share: an SSE frame, and the checks of a client's JSON body that refuse it
 * with an `Invalid` naming the field at fault.
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
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
