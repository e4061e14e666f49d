/**
 * The options of an HTTP provider after defaults and validation (`Settings`), and the URL of a protocol's endpoint.
 *
 * Every protocol module builds its `Settings` here once, in `make`.
 *
 * @internal
 */
import * as Range from "@reprise/core/Range"
import * as Duration from "effect/Duration"
import type * as Redacted from "effect/Redacted"
import * as ProviderOptions from "../ProviderOptions.js"
import { makeScrub } from "./redaction.js"

/**
 * Options after defaults and validation.
 *
 * @internal
 */
export interface Settings {
  /** An http(s) URL without a fragment (`endpoint` appends a protocol's path to it). */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string>
  readonly firstByteTimeout: Duration.Duration
  /** Absent: no first-token timeout. */
  readonly firstTokenTimeout: Duration.Duration | undefined
  readonly idleTimeout: Duration.Duration
  readonly maxEventSize: number
  readonly maxReplyBytes: number
  /** Replaces every occurrence of the key in a text that may end up in an error. */
  readonly scrub: (text: string) => string
}

// The ranges are ProviderOptions' (internal/ranges.ts), the ones its Configs validate the environment with; a value
// given in code is also checked for what the environment's parser guarantees (a whole number, a finite duration).
const timeout = (name: string, input: Duration.DurationInput | undefined, fallback: Duration.Duration) => {
  const duration = input === undefined ? fallback : Duration.decode(input)
  return Range.check(name, duration, Duration.format(duration), [Range.finiteDuration, Range.positiveTimeout])
}

const count = (name: string, input: number | undefined, fallback: number) => {
  const value = input ?? fallback
  return Range.check(name, value, String(value), [Range.wholeNumber, Range.atLeastOne])
}

/** @internal */
export const settings = (protocol: ProviderOptions.Protocol, options: ProviderOptions.Options): Settings => {
  const scrub = makeScrub(options.apiKey)
  const baseUrl = options.baseUrl ?? ProviderOptions.defaultBaseUrl(protocol)
  const problem = ProviderOptions.baseUrlProblem(baseUrl)
  if (problem !== undefined) throw new RangeError(`baseUrl ${problem}, got ${JSON.stringify(scrub(baseUrl))}`)
  return {
    baseUrl,
    apiKey: options.apiKey,
    firstByteTimeout: timeout("firstByteTimeout", options.firstByteTimeout, ProviderOptions.defaultFirstByteTimeout),
    firstTokenTimeout: options.firstTokenTimeout === undefined
      ? undefined
      : timeout("firstTokenTimeout", options.firstTokenTimeout, Duration.zero),
    idleTimeout: timeout("idleTimeout", options.idleTimeout, ProviderOptions.defaultIdleTimeout),
    maxEventSize: count("maxEventSize", options.maxEventSize, ProviderOptions.defaultMaxEventSize),
    maxReplyBytes: count("maxReplyBytes", options.maxReplyBytes, ProviderOptions.defaultMaxReplyBytes),
    scrub
  }
}

/**
 * The base URL as the provider names it (`Provider.Service.endpoint`, which names a route's circuit): its origin and
 * path, trailing slashes ignored, without userinfo, query or fragment, scrubbed of the key.
 *
 * @internal
 */
export const publicBase = (baseUrl: string, scrub: (text: string) => string): string => {
  const url = new URL(baseUrl)
  return scrub(`${url.origin}${url.pathname.replace(/\/+$/, "")}`)
}

/**
 * The URL of a protocol's endpoint: `path` appended to the base URL's path, trailing slashes ignored, and the base
 * URL's query kept (`https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21` with `/chat/completions`
 * is `…/openai/deployments/d/chat/completions?api-version=2024-10-21`). The base has no fragment (`settings`).
 *
 * @internal
 */
export const endpoint = (baseUrl: string, path: string): string => {
  const url = new URL(baseUrl)
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${path}`
  return url.href
}
