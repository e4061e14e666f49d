/**
 * The rules of a script that no one field says: fields that exclude each other, parts that must fit in their whole,
 * what a resume step and a route may name. Each is a `Schema.filter` predicate whose message names the fields to
 * change.
 *
 * @internal
 */
import type * as Schema from "effect/Schema"

/**
 * The cached input tokens are parts of the input tokens.
 *
 * @internal
 */
export const cacheWithinInput = (usage: {
  readonly inputTokens: number
  readonly cacheReadTokens?: number | undefined
  readonly cacheWriteTokens?: number | undefined
}): string | undefined =>
  (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0) <= usage.inputTokens
    ? undefined
    : "cacheReadTokens and cacheWriteTokens are parts of inputTokens: together at most inputTokens"

/**
 * A reply comes from a fixture (with its `format`) or is generated (its fields `generated`), not both.
 *
 * @internal
 */
export const oneSource = (generated: ReadonlyArray<string>) =>
(reply: {
  readonly fixture?: string | undefined
  readonly format?: string | undefined
}): string | undefined => {
  if (reply.fixture === undefined) return reply.format === undefined ? undefined : "format needs a fixture"
  const given = generated.filter((key) => (reply as Record<string, unknown>)[key] !== undefined)
  return given.length === 0
    ? undefined
    : `a reply comes from a fixture or is generated, not both: remove ${given.join(", ")} or fixture`
}

/**
 * A pace counts bytes or events, not both.
 *
 * @internal
 */
export const bytesOrEvents = (pace: {
  readonly bytes?: number | undefined
  readonly events?: number | undefined
}): string | undefined =>
  pace.bytes !== undefined && pace.events !== undefined ? "give either bytes or events, not both" : undefined

/**
 * A step is cut at one point: after bytes, events or content tokens.
 *
 * @internal
 */
export const oneCut = (step: {
  readonly afterBytes?: number | undefined
  readonly afterEvents?: number | undefined
  readonly afterTokens?: number | undefined
}): string | undefined => {
  const given = (["afterBytes", "afterEvents", "afterTokens"] as const).filter((key) => step[key] !== undefined)
  return given.length === 2
    ? `give either ${given[0]} or ${given[1]}, not both`
    : given.length > 2
    ? "give one of afterBytes, afterEvents or afterTokens"
    : undefined
}

/**
 * A status is answered with the body given or with the protocol's error body, not both.
 *
 * @internal
 */
export const bodyOrError = (step: { readonly body?: unknown; readonly error?: unknown }): string | undefined =>
  step.body !== undefined && step.error !== undefined ? "give either body or error, not both" : undefined

/**
 * One line: a line break would end an SSE `data:` field.
 *
 * @internal
 */
export const oneLine = (data: string): true | string => !/[\r\n]/.test(data) || "Expected one line"

/**
 * A resume serves the stored response: its steps name no reply.
 *
 * @internal
 */
export const resumeNamesNoReply = (resume: {
  readonly steps?: ReadonlyArray<object> | undefined
}): Schema.FilterIssue | undefined => {
  const named = (resume.steps ?? []).findIndex((step) => "reply" in step && step.reply !== undefined)
  return named === -1
    ? undefined
    : { path: ["steps", named, "reply"], message: "a resume serves the stored response: a resume step names no reply" }
}

type RouteFields = { readonly resume?: unknown; readonly background?: unknown } | undefined

/**
 * Background responses are a Responses API feature: only the `openai-responses` route has `resume` and `background`
 * (the ChatGPT backend, `subscription`, has none).
 *
 * @internal
 */
export const backgroundOnlyOnResponses = (routes: {
  readonly "openai-chat"?: RouteFields
  readonly anthropic?: RouteFields
  readonly subscription?: RouteFields
}): Schema.FilterIssue | undefined => {
  for (const route of ["openai-chat", "anthropic", "subscription"] as const) {
    const script = routes[route]
    for (const field of ["resume", "background"] as const) {
      if (script?.[field] !== undefined) {
        return { path: [route, field], message: `only the openai-responses route has background responses` }
      }
    }
  }
  return undefined
}
