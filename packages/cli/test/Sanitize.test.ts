import { assert, describe, it } from "@effect/vitest"
import { Redacted } from "effect"
import * as Sanitize from "../src/Sanitize.js"

const KEY = "sk-proj-" + "Abc123xyz_".repeat(15) + "QRSTUV"
const sanitizer = Sanitize.make(Redacted.make(KEY))
const grams = new Set(Array.from({ length: KEY.length - 15 }, (_, i) => KEY.slice(i + 8, i + 16)))
/** Whether `text` holds 8 characters in a row of the key's random part. */
const leaks = (text: string) =>
  Array.from({ length: Math.max(0, text.length - 7) }, (_, i) => text.slice(i, i + 8))
    .some((gram) => grams.has(gram))

describe("Sanitize", () => {
  it("a preview split anywhere never lets a piece of the key through, and loses no other text", () => {
    const text = `before ${KEY} middle ${KEY}${KEY} after`
    const expected = sanitizer.scrub(text)
    for (let a = 1; a < text.length; a += 3) {
      for (const b of [a + 1, a + 7, a + KEY.length, a + KEY.length + 5]) {
        if (b >= text.length) continue
        const stream = sanitizer.stream()
        const pieces = [text.slice(0, a), text.slice(a, b), text.slice(b)].map((p) => stream.push(p))
        pieces.push(stream.flush())
        for (const piece of pieces) assert.isFalse(leaks(piece), `split ${a}/${b}: ${piece}`)
        assert.strictEqual(pieces.join(""), expected, `split ${a}/${b}`)
      }
    }
  })

  it("held-back text is dropped on reset (a discarded attempt)", () => {
    const stream = sanitizer.stream()
    const shown = stream.push("short")
    assert.strictEqual(shown, "")
    stream.reset()
    assert.strictEqual(stream.flush(), "")
  })

  it("messages for the session file: text, tool names, ids, arguments and results", () => {
    const assistant = sanitizer.message({
      role: "assistant",
      text: `a ${KEY}`,
      toolCalls: [{ id: `call_${KEY}`, name: KEY, arguments: { line: [`x${KEY}`, { [KEY]: KEY }] } }]
    })
    assert.notInclude(JSON.stringify(assistant), KEY)
    assert.include(JSON.stringify(assistant), Sanitize.marker)
    const tool = sanitizer.message({ role: "tool", toolCallId: KEY, name: KEY, content: KEY, isError: false })
    assert.notInclude(JSON.stringify(tool), KEY)
  })

  it("control characters become visible escapes", () => {
    assert.strictEqual(
      Sanitize.escapeControls("a\u001b]0;pwned\u0007\nreprise: error\r\u009b2J\u007f"),
      "a\\x1b]0;pwned\\x07\\nreprise: error\\r\\x9b2J\\x7f"
    )
    assert.strictEqual(Sanitize.escapeControls("plain text, ünïcödé"), "plain text, ünïcödé")
  })

  it("a key shorter than 4 characters is left alone", () => {
    assert.strictEqual(Sanitize.make(Redacted.make("abc")).scrub("abcabc"), "abcabc")
  })

  it("several keys (a plan's routes): each is scrubbed, in a preview split anywhere too", () => {
    const other = "sk-ant-" + "Zyx987wvu-".repeat(6)
    const both = Sanitize.make([Redacted.make(KEY), Redacted.make(other), Redacted.make("abc")])
    const text = `one ${other} two ${KEY} three abc`
    assert.strictEqual(both.scrub(text), `one ${Sanitize.marker} two ${Sanitize.marker} three abc`)
    for (let a = 1; a < text.length; a += 5) {
      const stream = both.stream()
      const out = stream.push(text.slice(0, a)) + stream.push(text.slice(a)) + stream.flush()
      assert.strictEqual(out, both.scrub(text), `split at ${a}`)
    }
  })
})
