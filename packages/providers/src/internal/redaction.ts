/**
 * Keeping the key out of everything a failure may show: `makeScrub` (every occurrence of the key in a text),
 * `excerpt` (server text scrubbed, then cut), and `redactHeaders` (the view of a response's headers an error keeps).
 *
 * The headers are redacted by name with `@effect/platform`'s `Headers.redact` (the names of
 * `Headers.currentRedactedNames`, which the platform itself hides when it logs headers, plus core's
 * `ProviderFailure.sensitiveHeaders`), and the key is also scrubbed from every other value: a server may echo it in any
 * header.
 *
 * @internal
 */
import type * as Headers from "@effect/platform/Headers"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as Redacted from "effect/Redacted"

/**
 * What a secret is replaced with, in a text and in a header.
 *
 * @internal
 */
export const marker = "<redacted>"

/**
 * The shortest piece of the key that is scrubbed on its own, when the server echoes part of it (`Incorrect API key
 * provided: sk-proj-abcd…wxyz`).
 *
 * @internal
 */
export const minFragment = 8

/**
 * Every occurrence of the key in a text, and every run of at least {@link minFragment} characters that is a piece of
 * it (a server echoing the key's start or end, a key cut by the server itself), becomes {@link marker}.
 *
 * @internal
 */
export const makeScrub = (apiKey: Redacted.Redacted<string>) => {
  const secret = Redacted.value(apiKey)
  // A key too short to be a secret is not scrubbed: replacing one letter everywhere would only garble messages.
  if (secret.length < 4) return (text: string) => text
  const whole = (text: string) => text.includes(secret) ? text.split(secret).join(marker) : text
  if (secret.length <= minFragment) return whole
  const grams = new Set<string>()
  for (let i = 0; i + minFragment <= secret.length; i++) grams.add(secret.slice(i, i + minFragment))
  return (text: string) => {
    const out = whole(text)
    let result = ""
    let from = 0
    for (let i = 0; i + minFragment <= out.length; i++) {
      if (!grams.has(out.slice(i, i + minFragment))) continue
      // the longest piece of the key that starts here
      let end = i + minFragment
      while (end < out.length && secret.includes(out.slice(i, end + 1))) end++
      result += out.slice(from, i) + marker
      from = end
      i = end - 1
    }
    return from === 0 ? out : result + out.slice(from)
  }
}

/**
 * At most `max` characters of server text for a message, with `…` when it was cut. The text is scrubbed of the key
 * **before** it is cut: cutting first could split the key, leaving a fragment the scrub no longer recognises.
 *
 * @internal
 */
export const excerpt = (scrub: (text: string) => string, text: string, max: number): string => {
  const clean = revealed(scrub, text) ?? scrub(text)
  return clean.length > max ? `${clean.slice(0, max)}…` : clean
}

/**
 * A JSON text can spell the key with escapes (`\u0073k-…`) that a scrub of the raw text does not see. When the text
 * is JSON and its decoded strings hold the key, the text is shown re-serialised (no escapes left in ASCII), scrubbed;
 * otherwise `undefined` (the raw text is shown as it came, scrubbed).
 */
const revealed = (scrub: (text: string) => string, text: string): string | undefined => {
  if (!text.includes("\\")) return undefined
  let canonical: string
  try {
    canonical = JSON.stringify(JSON.parse(text))
  } catch {
    return undefined
  }
  const clean = scrub(canonical)
  return clean === canonical ? undefined : clean
}

/**
 * The view of a response's headers an error keeps, as a plain record of strings (what `ProviderFailure` holds, prints
 * and serializes): core's `ProviderFailure.redactHeaders` (the one list of sensitive names, plus `names`, through
 * `Headers.redact`), with every other value scrubbed of the key.
 *
 * @internal
 */
export const redactHeaders = (
  headers: Headers.Headers,
  names: ReadonlyArray<string | RegExp>,
  scrub: (text: string) => string
): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(ProviderFailure.redactHeaders(headers, names))) out[name] = scrub(value)
  return out
}
