/**
 * What the protocols share about a request's `toolChoice` and `responseFormat`: the checks made before any send (a
 * forced tool call the request cannot satisfy, a format name no OpenAI endpoint accepts), and the choice that is
 * actually encoded (none at all when the request has no tools and forces nothing).
 *
 * A failed check is a permanent `ProviderRejection{reason: "BadRequest"}` without a status: the server would answer
 * the same request with a 400, so it is not sent, and no Budget is debited for it.
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as Predicate from "effect/Predicate"
import { excerpt } from "./redaction.js"

/**
 * The name rule of OpenAI's `json_schema` formats (1 to 64 letters, digits, `_`, `-`), applied on every protocol.
 *
 * @internal
 */
export const formatNamePattern = /^[A-Za-z0-9_-]{1,64}$/

/** Scrubbed, then cut: a key among the names never survives in part. */
const quoteWith = (scrub: (text: string) => string) => (text: string): string =>
  JSON.stringify(excerpt(scrub, text, 80))

const badRequest = (protocol: string, detail: string, scrub: (text: string) => string) =>
  new ProviderRejection.ProviderRejection({ reason: "BadRequest", detail: scrub(`${protocol}: ${detail}`) })

/**
 * Why `request` cannot be sent, or `undefined`:
 *
 * - `toolChoice` is not one of `"auto"`, `"none"`, `"required"`, `{ tool }` (a caller without the types);
 * - `"required"` or `{ tool }` with no tools;
 * - `{ tool }` naming a tool that is not among the request's tools;
 * - a `responseFormat` that is not `type: "json"` with a schema object, or whose name breaks
 *   {@link formatNamePattern}.
 *
 * @internal
 */
export const check = (
  protocol: string,
  request: Generation.GenerationRequest,
  scrub: (text: string) => string
): ProviderRejection.ProviderRejection | undefined => {
  const quote = quoteWith(scrub)
  const listed = (names: ReadonlyArray<string>): string =>
    names.length <= 8
      ? names.map(quote).join(", ")
      : `${names.slice(0, 8).map(quote).join(", ")} and ${names.length - 8} more`
  const choice = request.toolChoice as unknown
  if (choice !== undefined) {
    const names = (request.tools ?? []).map((tool) => tool.name)
    if (choice === "required") {
      if (names.length === 0) {
        return badRequest(protocol, "toolChoice \"required\" asks for a tool call, but the request has no tools", scrub)
      }
    } else if (Predicate.hasProperty(choice, "tool") && Predicate.isString(choice.tool)) {
      const tool = choice.tool
      if (!names.includes(tool)) {
        return badRequest(
          protocol,
          names.length === 0
            ? `toolChoice names the tool ${quote(tool)}, but the request has no tools`
            : `toolChoice names the tool ${quote(tool)}, which is not among the request's tools (${listed(names)})`,
          scrub
        )
      }
    } else if (choice !== "auto" && choice !== "none") {
      return badRequest(
        protocol,
        `toolChoice must be "auto", "none", "required" or { tool }, not ${
          excerpt(scrub, JSON.stringify(choice) ?? "undefined", 80)
        }`,
        scrub
      )
    }
  }
  const format = request.responseFormat as Generation.ResponseFormat | undefined
  if (format !== undefined) {
    if (format.type !== "json" || typeof format.schema !== "object" || format.schema === null) {
      return badRequest(protocol, "responseFormat must be { type: \"json\", name, schema } with a schema object", scrub)
    }
    if (typeof format.name !== "string" || !formatNamePattern.test(format.name)) {
      return badRequest(
        protocol,
        `the responseFormat name ${quote(String(format.name))} must be 1 to 64 letters, digits, underscores or dashes`,
        scrub
      )
    }
  }
  return undefined
}

/**
 * The tool choice to encode: the request's, except that without tools `"auto"` and `"none"` are left out (they are
 * what every protocol does then, and OpenAI refuses a `tool_choice` without `tools`). A forced choice without tools
 * never gets here: {@link check} refused it.
 *
 * @internal
 */
export const toolChoice = (request: Generation.GenerationRequest): Generation.ToolChoice | undefined =>
  request.toolChoice === undefined || request.tools === undefined || request.tools.length === 0
    ? undefined
    : request.toolChoice
