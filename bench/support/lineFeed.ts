/**
 * The line-by-line feeding of `@effect/experimental/Sse` that reprise's body pipeline used before it moved to
 * `eventsource-parser` (see docs/performance.md): each line decoded from its own bytes, then fed to the parser. The
 * floors of figures 1 and 2 keep it, so that they still measure what that parser allows.
 */
import type * as Sse from "@effect/experimental/Sse"

const streaming = { stream: true } as const

export const feedLines = (
  parser: Sse.Parser,
  decoder: InstanceType<typeof TextDecoder>,
  reads: Iterable<Uint8Array>
): boolean => {
  for (const bytes of reads) {
    let start = 0
    while (start < bytes.length) {
      const newline = bytes.indexOf(10, start)
      const end = newline < 0 ? bytes.length : newline + 1
      const text = decoder.decode(start === 0 && end === bytes.length ? bytes : bytes.subarray(start, end), streaming)
      if (text.length > 0 && parser.feed(text) !== undefined) return true
      start = end
    }
  }
  return false
}
