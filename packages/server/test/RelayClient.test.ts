import { assert, describe, it } from "@effect/vitest"
import * as RelayClient from "@reprise/server/RelayClient"
import { cutThenReplay, failed } from "./support/transcripts.js"

const transcript = cutThenReplay.frames.join("")

/** Every state a parser goes through on `chunks`, then the final one (after `end`). */
const run = (chunks: ReadonlyArray<string>) => {
  const seen: Array<RelayClient.State> = []
  const parser = RelayClient.make((state) => seen.push(state))
  for (const chunk of chunks) parser.feed(chunk)
  return { seen, final: parser.end() }
}

const bodyOf = (bytes: Uint8Array, cuts: ReadonlyArray<number>): ReadableStream<Uint8Array> => {
  const points = [0, ...cuts, bytes.length]
  let i = 0
  return new ReadableStream({
    pull: (controller) => {
      if (i + 1 < points.length) controller.enqueue(bytes.slice(points[i]!, points[++i]!))
      else controller.close()
    }
  })
}

describe("RelayClient", () => {
  it("commits the last attempt's text, after reprise.commit and [DONE]", () => {
    const { final, seen } = run([transcript])
    assert.isTrue(final.done)
    assert.strictEqual(final.committed, cutThenReplay.answer)
    assert.isUndefined(final.error)
    assert.deepStrictEqual(final.commit, {
      attempt: 3,
      attempts: 3,
      route: { index: 1, name: "fallback", model: "gpt-4.1-mini" },
      model: "gpt-4.1-mini-2025-04-14",
      usage: { input_tokens: 14, output_tokens: 12 }
    })
    assert.deepStrictEqual(final.rollbacks.map((r) => [r.attempt, r.reason, r.nextAttempt]), [
      [1, "HTTP 503", 2],
      [2, "connection reset", 3]
    ])
    assert.strictEqual(final.attempt?.attempt, 3)
    // committed only with the terminal, not at reprise.commit
    const atCommit = seen.find((s) => s.commit !== undefined)!
    assert.isUndefined(atCommit.committed)
    assert.strictEqual(atCommit.preview, cutThenReplay.answer)
    assert.strictEqual(seen.filter((s) => s.committed !== undefined).length, 1)
  })

  it("a rollback drops exactly the discarded attempt's text", () => {
    const { seen } = run([transcript])
    const rolled = seen.findIndex((s) => s.rollbacks.length === 2)
    // just before the rollback: attempt 2's text, all of it; at the rollback: nothing of it
    assert.strictEqual(seen[rolled - 1]!.preview, cutThenReplay.discarded)
    assert.strictEqual(seen[rolled]!.preview, "")
    assert.strictEqual(seen[rolled]!.rollbacks[1]!.discardedChars, cutThenReplay.discarded.length)
    // every preview is a prefix of its own attempt's text: never attempt 2's text followed by attempt 3's
    for (const state of seen) {
      const attempt = state.attempt?.attempt
      const own = attempt === 2 ? cutThenReplay.discarded : attempt === 3 ? cutThenReplay.answer : ""
      assert.isTrue(own.startsWith(state.preview), `attempt ${attempt} showed ${JSON.stringify(state.preview)}`)
    }
  })

  it("reads the same at every chunk boundary of the transcript", () => {
    const whole = run([transcript])
    for (let at = 0; at <= transcript.length; at++) {
      const { final, seen } = run([transcript.slice(0, at), transcript.slice(at)])
      assert.deepStrictEqual(final, whole.final, `cut at ${at}`)
      assert.deepStrictEqual(seen.map((s) => s.preview), whole.seen.map((s) => s.preview), `cut at ${at}`)
    }
    // and one character at a time, and with CRLF line ends cut between "\r" and "\n"
    assert.deepStrictEqual(run(Array.from(transcript)).final, whole.final)
    const crlf = transcript.replace(/\n/g, "\r\n")
    assert.deepStrictEqual(run(crlf.split(/(?<=\r)/)).final, whole.final)
    assert.deepStrictEqual(run([transcript.replace(/\n/g, "\r")]).final, whole.final)
  })

  it("decodes a body cut at every byte, inside UTF-8 sequences too", async () => {
    const bytes = new TextEncoder().encode(transcript)
    const whole = await RelayClient.read(bodyOf(bytes, []))
    assert.strictEqual(whole.committed, cutThenReplay.answer)
    for (let at = 0; at <= bytes.length; at++) {
      assert.deepStrictEqual(await RelayClient.read(bodyOf(bytes, [at])), whole, `cut at byte ${at}`)
    }
  })

  it("an {\"error\": …} chunk ends it as an error, with no answer", () => {
    const { final } = run([failed.frames.join("")])
    assert.isTrue(final.done)
    assert.isUndefined(final.committed)
    assert.strictEqual(final.preview, "")
    assert.deepStrictEqual(final.error, {
      kind: "relay",
      message: "upstream: HTTP 500 internal error",
      type: "api_error",
      code: "upstream_error"
    })
    // later input is ignored
    const parser = RelayClient.make()
    parser.feed(failed.frames.join(""))
    const ended = parser.state()
    assert.strictEqual(parser.feed(cutThenReplay.frames.join("")), ended)
  })

  it("[DONE] without reprise.commit is not a commit", () => {
    const withoutCommit = cutThenReplay.frames.filter((f) => !f.startsWith("event: reprise.commit")).join("")
    const { final } = run([withoutCommit])
    assert.isTrue(final.done)
    assert.isUndefined(final.committed)
    assert.strictEqual(final.error?.kind, "protocol")
    assert.strictEqual(final.preview, cutThenReplay.answer)
  })

  it("a body that ends before its terminal is truncated", async () => {
    const half = cutThenReplay.frames.slice(0, 10).join("")
    const final = await RelayClient.read(bodyOf(new TextEncoder().encode(half), []))
    assert.isTrue(final.done)
    assert.isUndefined(final.committed)
    assert.strictEqual(final.error?.kind, "truncated")
  })

  it("a data line that is not JSON, or a reprise event without an attempt, is a protocol error", () => {
    assert.strictEqual(run(["data: {nope\n\n"]).final.error?.kind, "protocol")
    assert.strictEqual(run(["event: reprise.rollback\ndata: {\"choices\":[]}\n\n"]).final.error?.kind, "protocol")
  })

  it("states yields each change and cancels the body when the caller leaves", async () => {
    let cancelled = false
    const bytes = new TextEncoder().encode(cutThenReplay.frames.slice(0, 7).join(""))
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => controller.enqueue(bytes),
      cancel: () => {
        cancelled = true
      }
    })
    for await (const state of RelayClient.states(body)) {
      if (state.preview === cutThenReplay.discarded) break
    }
    assert.isTrue(cancelled)
  })

  it("make is self-contained: its source alone builds a working parser", () => {
    const make = new Function(`return (${RelayClient.make.toString()})`)() as typeof RelayClient.make
    assert.deepStrictEqual(make().feed(transcript), run([transcript]).final)
  })
})
