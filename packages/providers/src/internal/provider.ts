/**
 * What the four protocol modules share: the `Provider.Service` plumbing (send, then decode the body through the
 * protocol's state machine) and tool-call argument parsing at a complete JSON boundary.
 *
 * @internal
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Generation from "@reprise/core/Generation"
import type * as Provider from "@reprise/core/Provider"
import * as TransportError from "@reprise/core/TransportError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Http from "./http.js"
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
 * Builds a provider service. Each run of `stream(request)` makes one send (two with a capability fallback), each
 * debited from the Budget, and decodes the body.
 *
 * @internal
 */
export const makeService = <Ev>(options: {
  readonly protocol: string
  readonly client: HttpClient.HttpClient
  readonly settings: Http.Settings
  readonly request: (request: Generation.GenerationRequest) => Http.RequestSpec
  readonly decoder: (context: { readonly requestId: string | undefined }) => Decoder<Ev>
}): Provider.Service => ({
  protocol: options.protocol,
  stream: (request) =>
    Stream.unwrap(
      Effect.map(
        Effect.suspend(() => Http.open(options.client, options.request(request), options.settings)),
        (response) => {
          const requestId = Option.getOrUndefined(Http.responseRequestId(response, options.settings.scrub))
          const decoder = options.decoder({ requestId })
          return SseInternal.run({
            body: response.stream,
            settings: options.settings,
            decode: decoder.decode,
            machine: decoder.machine,
            requestId
          })
        }
      )
    )
})

/**
 * Parses tool-call arguments at a complete JSON boundary. Empty (or blank) arguments are `{}`, as sent by servers for
 * tools without parameters; anything that is not one complete JSON value is `None`.
 *
 * @internal
 */
export const parseArguments = (raw: string): Option.Option<unknown> => {
  if (raw.trim().length === 0) return Option.some({})
  try {
    return Option.some(JSON.parse(raw) as unknown)
  } catch {
    return Option.none()
  }
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
        JSON.stringify(name ?? "(unnamed)")
      } are not complete JSON (${raw.length} characters received)`
    )
  })

/**
 * The three events a terminal may end with: usage when known, then `Finish`.
 *
 * @internal
 */
export const finishEvents = (
  usage: Generation.Usage | undefined,
  reason: Generation.FinishReason,
  providerReason: string
): Array<Generation.GenerationEvent> => {
  const out: Array<Generation.GenerationEvent> = []
  if (usage !== undefined) out.push(Generation.UsageEvent({ usage }))
  out.push(Generation.Finish({ reason, providerReason }))
  return out
}
