/**
 * Ctrl-C on `reprise chat --background` while its response streams cancels the response on the server: against a
 * server that accepts the cancel and never answers, the real binary still exits 130 within the cancel's bound (2 s),
 * saying on stderr that the cancel failed. The server is a raw `node:http` server on 127.0.0.1: the send streams the
 * response's first events and then nothing, the cancel is read and never answered.
 */
import { assert, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as http from "node:http"
import { start } from "./support/cli.js"

// shorter than 4 characters, so not scrubbed: the renderer holds back none of a preview, and the delta is printed
const env = { OPENAI_API_KEY: "QZ1" }

const frame = (data: Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`

const silentServer = Effect.acquireRelease(
  Effect.async<{ readonly base: string; readonly cancels: () => number; readonly server: http.Server }>((resume) => {
    let cancels = 0
    const server = http.createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        if (req.method === "POST" && req.url === "/v1/responses") {
          res.writeHead(200, { "content-type": "text/event-stream" })
          res.write(
            frame({
              type: "response.created",
              sequence_number: 0,
              response: { id: "resp_silent", status: "queued", background: true }
            }) +
              frame({
                type: "response.output_text.delta",
                sequence_number: 1,
                item_id: "msg_1",
                output_index: 0,
                content_index: 0,
                delta: "Half an "
              })
          )
          return // and then nothing
        }
        if (req.method === "POST" && req.url === "/v1/responses/resp_silent/cancel") {
          cancels++
          return // accepted, never answered
        }
        res.writeHead(404).end()
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { readonly port: number }
      resume(Effect.succeed({ base: `http://127.0.0.1:${port}/v1`, cancels: () => cancels, server }))
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
)

it.live(
  "Ctrl-C with a cancel that is never answered: exit 130 within the cancel's bound",
  () =>
    Effect.gen(function*() {
      const { base, cancels } = yield* silentServer
      const child = yield* start(
        ["chat", "--provider", "openai-responses", "--background", "--json", "--base-url", base, "--model", "m", "go"],
        env
      )
      // a delta on stdout: the stream has named its response, and stalls
      yield* child.awaitStdout(/"type":"delta"/)
      const interrupted = Date.now()
      child.child.kill("SIGINT")
      const result = yield* child.exit.pipe(Effect.timeout("8 seconds"), Effect.option)
      const held = Date.now() - interrupted
      assert.isTrue(Option.isSome(result), `still running ${held} ms after SIGINT`)
      if (Option.isNone(result)) return
      assert.strictEqual(result.value.code, 130, result.value.stderr)
      assert.strictEqual(cancels(), 1)
      assert.match(result.value.stderr, /^reprise: could not cancel background response resp_silent: .+\n$/)
      // the cancel's bound (2 s) and the process's start-up of its exit, on a loaded machine
      assert.isBelow(held, 4_500)
      const events = result.value.stdout.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
      assert.deepStrictEqual(events.at(-1), { type: "cancel", responseId: "resp_silent", ok: false })
    }).pipe(Effect.scoped),
  15_000
)
