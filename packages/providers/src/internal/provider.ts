/**
 * What the four protocol modules share: the `Provider.Service` plumbing (check the request, send, then decode the
 * body through the protocol's state machine) and tool-call argument parsing at a complete JSON boundary, within the
 * nesting bound.
 *
 * @internal
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Generation from "@reprise/core/Generation"
import * as Provider from "@reprise/core/Provider"
import type * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as TransportError from "@reprise/core/TransportError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ProviderOptions from "../ProviderOptions.js"
import * as Attempt from "./attempt.js"
import * as Body from "./body.js"
import * as Deadlines from "./deadlines.js"
import * as Json from "./json.js"
import { excerpt } from "./redaction.js"
import * as RequestChecks from "./requestChecks.js"
import * as Send from "./send.js"
import * as Settings from "./settings.js"
import * as SseInternal from "./sse.js"

/**
 * How one protocol reads a body: the event decoder (returning `None` for keepalives such as `ping`) and a fresh state
 * machine for one stream run.
 *
 * @internal
 */
export interface Decoder<Ev> {
  readonly decode: SseInternal.Decode<Ev>
  readonly machine: SseInternal.Machine<Ev>
}

/**
 * Builds a provider service. Each run of `open(request)` makes one send (two with a capability fallback), each
 * debited from the Budget, and decodes the body. A request that fails `RequestChecks.check` (its `toolChoice` or
 * `responseFormat` cannot be satisfied) fails with that `ProviderRejection` and is not sent.
 *
 * @internal
 */
export const makeService = <Ev>(options: {
  readonly protocol: string
  readonly client: HttpClient.HttpClient
  readonly settings: Settings.Settings
  readonly request: (request: Generation.GenerationRequest) => Send.RequestSpec
  readonly decoder: (context: { readonly requestId: string | undefined }) => Decoder<Ev>
}): Provider.Service => {
  // the first-byte deadlines of this service's sends, and the idle deadlines of its streams, each timed by one fiber
  // for all of them; an attempt enters both queues once, from its send to its scope's end (`Attempt.within`)
  const deadlines = Deadlines.make(options.settings.firstByteTimeout)
  const idle = Deadlines.make(options.settings.idleTimeout)
  // and the first-token deadlines of its attempts, from the send to the first content event, when it has that timeout
  const tokens = options.settings.firstTokenTimeout === undefined
    ? undefined
    : Deadlines.make(options.settings.firstTokenTimeout)
  return Provider.make({
    protocol: options.protocol,
    endpoint: Settings.publicBase(options.settings.baseUrl, options.settings.scrub),
    open: (request) => {
      // The request checked, mapped and encoded by its first attempt and sent again as it is by every replay.
      let prepared: Send.Prepared | undefined
      const send = (attempt: Attempt.Attempt) =>
        Effect.suspend(() => {
          if (prepared !== undefined) return Send.open(options.client, prepared, options.settings, attempt)
          // a request the server would refuse (a forced call to a tool it does not offer, a bad format name) is
          // not sent: no Budget debit, one permanent failure
          const refused = RequestChecks.check(options.protocol, request, options.settings.scrub)
          if (refused !== undefined) return Effect.fail(refused)
          prepared = Send.prepare(options.request(request), options.settings)
          return Send.open(options.client, prepared, options.settings, attempt)
        })
      return (
        Attempt.within(deadlines, idle, tokens, (attempt) =>
          Effect.flatMap(send(attempt), (response) => {
            const requestId = Option.getOrUndefined(Send.responseRequestId(response, options.settings.scrub))
            const decoder = options.decoder({ requestId })
            // the body read in the attempt's scope, closed by an idle timeout (`Attempt`); a client whose body's wait
            // cannot be abandoned is read as `SseInternal.pull` reads any body
            const body = Body.pullIn(response, attempt.scope, attempt.clock, attempt.idle)
            if (body === undefined) {
              return SseInternal.pull({
                body: Body.pull(response),
                settings: options.settings,
                decode: decoder.decode,
                machine: decoder.machine,
                requestId,
                idle,
                held: attempt
              })
            }
            return Effect.map(body, (pull) => {
              attempt.body = pull
              return SseInternal.reader({
                body: pull,
                settings: options.settings,
                decode: decoder.decode,
                machine: decoder.machine,
                requestId,
                clock: attempt.clock,
                close: attempt.close,
                idle,
                held: attempt
              })
            })
          }))
      )
    }
  })
}

/**
 * Tool-call arguments nested deeper than `ProviderOptions.maxNestingDepth`: a permanent `MalformedStream` (the same
 * reply would come back), naming the call (server text, scrubbed of the key) and the depth.
 *
 * @internal
 */
export const argumentsTooDeep = (
  protocol: string,
  name: string | undefined,
  depth: number,
  scrub: (text: string) => string
): ProviderRejection.ProviderRejection =>
  new ProviderRejection.ProviderRejection({
    reason: "MalformedStream",
    detail: scrub(
      `${protocol}: the arguments of tool call ${
        JSON.stringify(excerpt(scrub, name ?? "(unnamed)", 200))
      } are nested ${depth} levels deep, more than the ${ProviderOptions.maxNestingDepth} allowed`
    )
  })

/**
 * Parses tool-call arguments at a complete JSON boundary. Empty (or blank) arguments are `{}`, as sent by servers for
 * tools without parameters; anything that is not one complete JSON value is `TruncatedToolArguments`; a value nested
 * deeper than `ProviderOptions.maxNestingDepth` is `argumentsTooDeep` (measured on the text, without recursion, once
 * it is known to be JSON).
 *
 * @internal
 */
export const toolArguments = (
  protocol: string,
  name: string | undefined,
  raw: string,
  scrub: (text: string) => string
): Either.Either<unknown, ProviderFailure.ProviderFailure> => {
  if (raw.trim().length === 0) return Either.right({})
  let value: unknown
  try {
    value = JSON.parse(raw)
  } catch {
    return Either.left(truncatedArguments(protocol, name, raw, scrub))
  }
  const depth = Json.textDepth(raw)
  return depth > ProviderOptions.maxNestingDepth
    ? Either.left(argumentsTooDeep(protocol, name, depth, scrub))
    : Either.right(value)
}

/**
 * Tool-call arguments given as a decoded value (Anthropic's `input`), within the same nesting bound.
 *
 * @internal
 */
export const givenArguments = (
  protocol: string,
  name: string | undefined,
  value: unknown,
  scrub: (text: string) => string
): Either.Either<unknown, ProviderRejection.ProviderRejection> => {
  const depth = Json.valueDepth(value)
  return depth > ProviderOptions.maxNestingDepth
    ? Either.left(argumentsTooDeep(protocol, name, depth, scrub))
    : Either.right(value)
}

/**
 * A tool call whose arguments were still incomplete when the stream ended: never surfaced as runnable.
 *
 * @internal
 */
export const truncatedArguments = (
  protocol: string,
  name: string | undefined,
  raw: string,
  scrub: (text: string) => string
): TransportError.TransportError =>
  new TransportError.TransportError({
    reason: "TruncatedToolArguments",
    // the name is server text: scrubbed of the key like every other
    detail: scrub(
      `${protocol}: the arguments of tool call ${
        JSON.stringify(scrub(name ?? "(unnamed)"))
      } are not complete JSON (${raw.length} characters received)`
    )
  })

/**
 * The events a terminal ends with: usage when known, then `Finish`, naming the `model` the response named.
 *
 * @internal
 */
export const finishEvents = (
  usage: Generation.Usage | undefined,
  reason: Generation.FinishReason,
  providerReason: string,
  model: string | undefined
): Array<Generation.GenerationEvent> => {
  const out: Array<Generation.GenerationEvent> = []
  if (usage !== undefined) out.push(Generation.UsageEvent({ usage }))
  out.push(finish(reason, providerReason, model))
  return out
}

/**
 * A `Finish`, with `model` only when the response named one.
 *
 * @internal
 */
export const finish = (
  reason: Generation.FinishReason,
  providerReason: string,
  model: string | undefined
): Generation.GenerationEvent =>
  Generation.Finish(model === undefined ? { reason, providerReason } : { reason, providerReason, model })

/**
 * The model a response names, when it names one: a non-empty string (anything else is not read).
 *
 * @internal
 */
export const modelOf = (value: unknown): string | undefined =>
  typeof value === "string" && value.length > 0 ? value : undefined
