/**
 * Server text is cut to a length before it goes into an error message (error bodies at 300 characters, event data
 * at 120, a parser's complaint at 300, a JSON body where a stream was expected at 200). A key of realistic length
 * (`sk-proj-` and 156 characters) echoed by a real loopback server at every offset around each cut must leave no
 * fragment in the error: the text is scrubbed of the key before it is cut, never after. A parser's own message,
 * which quotes the input cut at a length of its own, is never passed through.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Either, Redacted } from "effect"
import { inspect } from "node:util"
import { run, server } from "./support/harness.js"
import { subjects } from "./support/protocols.js"

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
// deterministic, so a failure is reproducible
const KEY = "sk-proj-" + Array.from({ length: 156 }, (_, i) => alphabet[(i * 37 + 11) % alphabet.length]).join("")

/** The first 8-character piece of the key's random part that occurs in `text`, if any. */
const fragmentIn = (text: string): string | undefined => {
  const secret = KEY.slice("sk-proj-".length)
  for (let i = 0; i + 8 <= secret.length; i++) {
    const piece = secret.slice(i, i + 8)
    if (text.includes(piece)) return piece
  }
  return undefined
}

const views = (error: unknown): Record<string, string> => ({
  message: String((error as any)?.message),
  json: JSON.stringify(error),
  inspect: inspect(error, { depth: 20 }),
  cause: Cause.pretty(Cause.fail(error))
})

/** Offsets at which the key straddles `cut` (and one either side), for a text that starts `lead` characters before. */
const around = (cut: number, lead = 0) => {
  const out: Array<number> = []
  for (let start = cut - KEY.length - 1; start <= cut + 1; start++) if (start - lead >= 0) out.push(start - lead)
  return out
}

interface Case {
  readonly name: string
  readonly pads: ReadonlyArray<number>
  readonly respond: (pad: string, subject: (typeof subjects)[number]) => { status: number; type: string; body: string }
}

const cases: ReadonlyArray<Case> = [
  {
    name: "a non-JSON error body, cut at 300",
    pads: around(300),
    respond: (pad) => ({ status: 400, type: "text/html", body: `${pad}${KEY}${"y".repeat(400)}` })
  },
  {
    name: "an event that is not JSON, its data cut at 120",
    pads: around(120),
    respond: (pad) => ({ status: 200, type: "text/event-stream", body: `data: ${pad}${KEY}${"y".repeat(200)}\n\n` })
  },
  {
    name: "an event that does not match its schema, the complaint cut at 300",
    // the complaint quotes the bad value after a prefix of its own: every 3rd offset up to 300 crosses the cut
    pads: Array.from({ length: 101 }, (_, i) => i * 3),
    respond: (pad, subject) => ({
      status: 200,
      type: "text/event-stream",
      body: subject.name === "anthropic"
        ? `event: message_start\ndata: ${JSON.stringify({ type: "message_start", message: pad + KEY })}\n\n`
        : subject.name === "openai-chat"
        ? `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: { pad: pad + KEY } } }] })}\n\n`
        : `event: response.created\ndata: ${JSON.stringify({ type: "response.created", response: pad + KEY })}\n\n`
    })
  },
  {
    name: "a JSON body where a stream was expected, cut at 200",
    pads: around(200, `{"result":"`.length),
    respond: (pad) => ({ status: 200, type: "application/json", body: JSON.stringify({ result: pad + KEY }) })
  }
]

for (const subject of subjects) {
  describe(`${subject.name}: no fragment of the key survives a cut`, () => {
    for (const c of cases) {
      it.live(c.name, () =>
        Effect.gen(function*() {
          let current = { status: 200, type: "text/plain", body: "" }
          const s = yield* server((_req, res) => {
            res.writeHead(current.status, { "content-type": current.type })
            res.end(current.body)
          })
          const provider = yield* subject.make({ apiKey: Redacted.make(KEY), baseUrl: subject.base(s.url) })
          let echoed = 0
          for (const pad of c.pads) {
            current = c.respond("x".repeat(pad), subject)
            const { result } = yield* run(provider)
            assert.isTrue(Either.isLeft(result), `pad ${pad} must fail`)
            const error = (result as Either.Left<unknown, void>).left
            for (const [view, text] of Object.entries(views(error))) {
              const fragment = fragmentIn(text)
              assert.isUndefined(fragment, `pad ${pad}: "${fragment}" of the key leaked through ${view}: ${text}`)
            }
            if (String((error as any).message).includes("<redacted>")) echoed++
          }
          // the key was in the part of the text that was shown at least some of the time: the case tests something
          assert.isAbove(echoed, 0, "the key never reached the message: the case does not exercise the cut")
        }).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici)), { timeout: 60_000 })
    }
  })
}
