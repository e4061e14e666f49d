/**
 * The scrub every provider applies to what may show a key: each occurrence of the key, and each run of 8 characters
 * or more that is a piece of it (a server echoing the key's start, a key cut by the server), replaced by `<redacted>`.
 * Keys shorter than 4 characters are left alone. Exported for what an app writes or exports itself, as the `reprise`
 * CLI scrubs its OTLP export with it.
 *
 * @since 0.1.0
 */
import type * as Redacted from "effect/Redacted"
import * as Internal from "./internal/redaction.js"

/**
 * What a key, or a piece of it, is replaced with.
 *
 * @since 0.1.0
 * @category constants
 */
export const marker: string = Internal.marker

/**
 * The shortest piece of a key that is scrubbed on its own.
 *
 * @since 0.1.0
 * @category constants
 */
export const minFragment: number = Internal.minFragment

/**
 * The scrub of `apiKey`: a text with the key and every piece of it of at least {@link minFragment} characters
 * replaced by {@link marker}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scrubber = (apiKey: Redacted.Redacted<string>): (text: string) => string => Internal.makeScrub(apiKey)
