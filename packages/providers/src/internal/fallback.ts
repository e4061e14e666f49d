/**
 * The capability fallback: when a model rejects an optional parameter as unsupported (a 400 or 422 naming it), the
 * request is sent once more without it. Each protocol lists its optional parameters and how to resend without each
 * (`Fallbacks`); this module recognises the rejection (`unsupportedParameter`), and `send.ts` makes the one resend.
 *
 * `without` (a body less one parameter) is shared by the protocols' `Fallbacks`.
 *
 * @internal
 */
import type { FailedResponse } from "./failure.js"

/**
 * A protocol's optional body parameters and how to resend without each one.
 *
 * @internal
 */
export type Fallbacks = Readonly<
  Record<string, (body: Readonly<Record<string, unknown>>) => Record<string, unknown>>
>

/**
 * The body without the parameter `name`.
 *
 * @internal
 */
export const without = (name: string) => (body: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const { [name]: _, ...rest } = body
  return rest
}

const unsupportedPatterns: ReadonlyArray<RegExp> = [
  /unsupported parameter:?\s*['"`]?([A-Za-z_][\w.]*)/i,
  /['"`]([A-Za-z_][\w.]*)['"`] is not supported/i,
  /unrecognized request arguments? supplied:\s*['"`]?([A-Za-z_][\w.]*)/i,
  /([A-Za-z_][\w.]*) is not supported (?:with|by|for|on) this model/i
]

/**
 * The optional parameter a 400/422 response rejected as unsupported, if it is one of `candidates` (the optional
 * parameters actually sent). Narrow on purpose: the status must be 400 or 422, and the parameter must be named by
 * `error.param` together with an "unsupported" code or message, or by one of the known "unsupported parameter"
 * message forms. Anything else is an ordinary bad request.
 *
 * @internal
 */
export const unsupportedParameter = (
  failure: FailedResponse,
  candidates: ReadonlyArray<string>
): string | undefined => {
  if (failure.status !== 400 && failure.status !== 422) return undefined
  const { code, message, param } = failure.error
  const saysUnsupported = (code !== undefined && /unsupported|unknown_parameter/i.test(code)) ||
    (message !== undefined && /unsupported|not supported|unrecognized/i.test(message))
  const named: Array<string> = []
  if (param !== undefined && saysUnsupported) named.push(param)
  if (message !== undefined) {
    for (const pattern of unsupportedPatterns) {
      const match = pattern.exec(message)
      if (match !== null) named.push(match[1])
    }
  }
  return named.find((name) => candidates.includes(name))
}
