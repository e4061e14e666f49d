/**
 * Reading an API key from its variable, with the CLI's checks: present, not blank, and sendable in an HTTP header.
 * The messages name the variable, never the key.
 *
 * @internal
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

/** Visible ASCII only: what an API key is made of, and what a header value can carry unchanged. */
const headerSafe = /^[\x21-\x7e]+$/

/**
 * The key in `variable`, or the problem with it; `hint` follows the message of a missing key (how to name another
 * variable).
 *
 * @internal
 */
export const read = (variable: string, hint: string): Effect.Effect<Redacted.Redacted<string>, string> =>
  Effect.gen(function*() {
    const apiKey = yield* Config.redacted(variable).pipe(
      Effect.mapError(() => `missing API key: set ${variable}${hint}`)
    )
    if (Redacted.value(apiKey).trim() === "") return yield* Effect.fail(`missing API key: ${variable} is empty`)
    // A key is sent in an HTTP header: a character that cannot go there (a trailing \r from a CRLF .env file, a
    // newline, a non-ASCII letter) would fail every send as a "connection reset". Name the variable, never the key.
    if (!headerSafe.test(Redacted.value(apiKey))) {
      return yield* Effect.fail(
        `${variable} holds a character that cannot be sent in an HTTP header (a control character such as a ` +
          `trailing \\r from a CRLF .env file, a space, or a non-ASCII character)`
      )
    }
    return apiKey
  })

/**
 * What an environment variable's name may be.
 *
 * @internal
 */
export const variableName = /^[A-Za-z_][A-Za-z0-9_]*$/
