/**
 * What the CLI writes is sanitized: no part of the API key reaches stdout, stderr, a `--json` event or the session
 * file, and text that came from the server is shown in notices and errors with its control characters escaped, so a
 * server can neither retitle the terminal nor forge a `reprise:` line.
 *
 * The providers already scrub the key from their errors; this is the CLI's own rule for everything else it writes
 * (a key the model sends back as text, a tool name or tool arguments). Previews are written as they arrive, and a
 * key may arrive split over two deltas: {@link Sanitizer.stream} holds back the last `key length − 1` characters of
 * a preview until the next delta shows whether they begin the key.
 *
 * @since 0.1.0
 */
import type * as Message from "@reprise/core/Message"
import * as Redacted from "effect/Redacted"

/**
 * What replaces the key.
 *
 * @since 0.1.0
 * @category constants
 */
export const marker = "<redacted>"

/**
 * A preview writer that never lets a key through in pieces.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamScrub {
  /** Takes the next piece of a preview; returns what may be written now (possibly empty). */
  readonly push: (text: string) => string
  /** Returns what was held back, scrubbed, and starts over. */
  readonly flush: () => string
  /** Forgets what was held back (the attempt was discarded). */
  readonly reset: () => void
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Sanitizer {
  /** Replaces every occurrence of the key. */
  readonly scrub: (text: string) => string
  /** {@link scrub} on every string inside a JSON value (tool arguments). */
  readonly scrubJson: (value: unknown) => unknown
  /** A message as it may be written to a session file. */
  readonly message: (message: Message.Message) => Message.Message
  readonly stream: () => StreamScrub
}

const identity: Sanitizer = {
  scrub: (text) => text,
  scrubJson: (value) => value,
  message: (message) => message,
  stream: () => {
    return { push: (text) => text, flush: () => "", reset: () => undefined }
  }
}

/**
 * A sanitizer that changes nothing, for output that cannot hold a key (the demo's fixed one aside).
 *
 * @since 0.1.0
 * @category constructors
 */
export const none: Sanitizer = identity

/**
 * The sanitizer for `apiKey`, or for every key of a list (the keys of a plan's routes). Like the providers, it leaves
 * keys shorter than 4 characters alone: replacing one letter everywhere would only garble the output.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (apiKey: Redacted.Redacted<string> | ReadonlyArray<Redacted.Redacted<string>>): Sanitizer => {
  // the longest first, so that a key that holds another is replaced whole
  const keys = [...new Set((Redacted.isRedacted(apiKey) ? [apiKey] : apiKey).map((key) => Redacted.value(key)))]
    .filter((key) => key.length >= 4)
    .sort((a, b) => b.length - a.length)
  if (keys.length === 0) return identity
  const longest = keys[0]!.length
  const scrub = (text: string) =>
    keys.reduce((acc, key) => (acc.includes(key) ? acc.split(key).join(marker) : acc), text)
  const scrubJson = (value: unknown): unknown => {
    if (typeof value === "string") return scrub(value)
    if (Array.isArray(value)) return value.map(scrubJson)
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [scrub(k), scrubJson(v)]))
    }
    return value
  }
  const message = (m: Message.Message): Message.Message => {
    switch (m.role) {
      case "system":
      case "user":
        return { ...m, text: scrub(m.text) }
      case "assistant":
        return {
          ...m,
          text: scrub(m.text),
          toolCalls: m.toolCalls.map((call) => ({
            ...call,
            id: scrub(call.id),
            name: scrub(call.name),
            arguments: scrubJson(call.arguments)
          }))
        }
      case "tool":
        return { ...m, toolCallId: scrub(m.toolCallId), name: scrub(m.name), content: scrub(m.content) }
    }
  }
  const stream = (): StreamScrub => {
    let held = ""
    return {
      push: (text) => {
        held += text
        // Everything but the last (longest key's length − 1) characters may go, unless a whole key straddles that
        // point.
        let cut = held.length - (longest - 1)
        if (cut <= 0) return ""
        for (const key of keys) {
          for (let at = held.indexOf(key); at !== -1 && at < cut; at = held.indexOf(key, at + key.length)) {
            if (at + key.length > cut) cut = at + key.length
          }
        }
        const out = held.slice(0, cut)
        held = held.slice(cut)
        return scrub(out)
      },
      flush: () => {
        const out = scrub(held)
        held = ""
        return out
      },
      reset: () => {
        held = ""
      }
    }
  }
  return { scrub, scrubJson, message, stream }
}

const control = /[\u0000-\u001f\u007f-\u009f]/g

/**
 * Server text as it may be shown on one line of a terminal: every C0 and C1 control character (ESC, BEL, CR, LF,
 * CSI…) and DEL written as a visible escape (`\x1b`, `\n`), so the text cannot move the cursor, change the
 * terminal's title or start a line of its own.
 *
 * @since 0.1.0
 * @category formatting
 */
export const escapeControls = (text: string): string =>
  text.replace(control, (c) => {
    switch (c) {
      case "\n":
        return "\\n"
      case "\r":
        return "\\r"
      case "\t":
        return "\\t"
      default:
        return `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`
    }
  })
