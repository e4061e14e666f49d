/**
 * UTF-8 decoding of a body's reads, as one streaming `TextDecoder` decodes them (`decode(bytes, { stream: true })`
 * per read: a character cut between two reads is decoded whole, a leading BOM is stripped, invalid bytes become
 * U+FFFD), but faster on ASCII.
 *
 * Node's `TextDecoder` has a fast path for UTF-8 (simdutf) that it takes only when it is not streaming; with
 * `stream: true` it converts through ICU. On ASCII the fast path is about 6× faster, on text with other characters
 * about half as fast (Node 20). So a read that is all ASCII (`isAscii`, simdutf again), while no character is pending
 * from the reads before it, is decoded by a second decoder without `stream`: an ASCII read ends on a character boundary
 * and cannot hold a BOM, so the text is the same. Every other read goes to the streaming decoder, which then holds
 * whatever is pending, until a read ends on a boundary again. Both decoders ignore the BOM (`ignoreBOM: true`); the
 * body's first character is dropped here when it is one, which is what the streaming decoder does with the BOM at the
 * start of its stream.
 *
 * @internal
 */
import { isAscii } from "node:buffer"

/**
 * Whether the streaming decoder has nothing pending after `bytes` however it began: the last byte that does not
 * continue a character (`10xxxxxx`) starts a sequence that `bytes` completes. When that byte is further back than a
 * sequence can reach, or not in `bytes` at all, the answer is no, which only keeps the next read on the streaming
 * decoder: a sequence that is invalid at its end leaves nothing pending either.
 */
const endsOnBoundary = (bytes: Uint8Array): boolean => {
  const end = bytes.length
  for (let i = end - 1; i >= 0 && i >= end - 4; i--) {
    const byte = bytes[i]
    if ((byte & 0xc0) !== 0x80) return end - i >= sequenceLength(byte)
  }
  return false
}

/** The length of the sequence a byte that is no continuation byte starts (1 for ASCII and for any invalid byte). */
const sequenceLength = (lead: number): number => {
  if ((lead & 0xe0) === 0xc0) return 2
  if ((lead & 0xf0) === 0xe0) return 3
  if ((lead & 0xf8) === 0xf0) return 4
  return 1
}

const streaming = { stream: true } as const

/**
 * A decoder of one body's reads, in order: the text of each read, as a streaming `TextDecoder` would give it.
 *
 * @internal
 */
export const makeDecoder = (): (bytes: Uint8Array) => string => {
  const ascii = new TextDecoder("utf-8", { ignoreBOM: true })
  const stream = new TextDecoder("utf-8", { ignoreBOM: true })
  // the streaming decoder may hold the start of a character
  let carried = false
  // the body's first character has been decoded (a BOM there is dropped)
  let started = false
  return (bytes) => {
    let text: string
    if (!carried && isAscii(bytes)) {
      text = ascii.decode(bytes)
    } else {
      text = stream.decode(bytes, streaming)
      carried = !endsOnBoundary(bytes)
    }
    if (!started && text.length > 0) {
      started = true
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    }
    return text
  }
}
