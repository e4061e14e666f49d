/**
 * The chat page in a real headless Chromium, over real HTTP on loopback. The server here is a stand-in for the relay:
 * it serves the page at `/` and replays the scripted reset-mode transcripts of support/transcripts.ts for
 * `POST /v1/chat/completions`, so that each step of the page is observed (a gate holds a transcript until the test
 * saw the page show a doomed attempt's text). `runPageScenario` takes any base URL: the same scenarios run against
 * the real relay in front of the simulator.
 *
 * `REPRISE_UPDATE_SCREENSHOT=1` rewrites docs/relay-page.png from the cut-and-replay scenario.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import * as fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Page from "../src/internal/page.js"
import {
  expectCutAndReplay,
  expectStopped,
  launch,
  runPageScenario,
  shownReplies,
  waitForReply
} from "./support/page.js"
import { cutThenReplay, endless, failed } from "./support/transcripts.js"

interface Script {
  readonly frames: ReadonlyArray<string>
  /** Frame index → what must happen before it is written. */
  readonly gates?: ReadonlyMap<number, Promise<void>> | undefined
  /** Keep the response open after the last frame, until the client leaves. */
  readonly hold?: boolean | undefined
  /** Answer 401 to a request without `Authorization: Bearer <key>`. */
  readonly key?: string | undefined
}

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: any
  /** The client closed the connection before the response ended. */
  closedByClient: boolean
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A loopback server with the page at `/` and `script` at `POST /v1/chat/completions`, for every request. */
const scripted = (script: Script) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly seen: Array<Seen>; readonly server: Http.Server }>((resume) => {
      const seen: Array<Seen> = []
      const server = Http.createServer((req, res) => {
        let text = ""
        req.setEncoding("utf8")
        req.on("data", (chunk: string) => text += chunk)
        req.on("end", async () => {
          const entry: Seen = {
            method: req.method ?? "",
            url: req.url ?? "",
            headers: req.headers,
            body: text === "" ? undefined : JSON.parse(text),
            closedByClient: false
          }
          seen.push(entry)
          res.on("close", () => {
            if (!res.writableFinished) entry.closedByClient = true
          })
          if (req.method === "GET" && req.url === "/") {
            res.writeHead(200, Page.headers).end(Page.html)
            return
          }
          if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
            res.writeHead(404).end()
            return
          }
          if (script.key !== undefined && req.headers.authorization !== `Bearer ${script.key}`) {
            res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({
              error: {
                message: "a key is required",
                type: "authentication_error",
                param: null,
                code: "invalid_api_key"
              }
            }))
            return
          }
          res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
          for (let i = 0; i < script.frames.length; i++) {
            await script.gates?.get(i)
            // one frame per TCP write, apart, as a relay streams them
            await sleep(5)
            if (res.destroyed) return
            res.write(script.frames[i])
          }
          if (script.hold !== true) res.end()
        })
      })
      server.listen(
        0,
        "127.0.0.1",
        () =>
          resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, seen, server }))
      )
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

const browser = Effect.acquireRelease(Effect.promise(launch), ({ close }) => Effect.promise(close))

const screenshot = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../../docs/relay-page.png")

describe("the chat page", () => {
  it.scopedLive("a cut stream and its replay: the page shows the doomed text, removes it, and keeps the answer", () =>
    Effect.gen(function*() {
      const cut = yield* Deferred.make<void>()
      const server = yield* scripted({
        frames: cutThenReplay.frames,
        gates: new Map([[cutThenReplay.cutAt, Effect.runPromise(Deferred.await(cut))]])
      })
      const { browser: chromium } = yield* browser
      let png: Uint8Array | undefined
      const run = yield* Effect.promise(() =>
        runPageScenario(chromium, server.url, {
          model: "gpt-4o-mini",
          during: async (page) => {
            // attempt 2's text is on the page, and only it
            await waitForReply(page, cutThenReplay.discarded)
            await Effect.runPromise(Deferred.succeed(cut, undefined))
          },
          after: async (page) => {
            png = await page.screenshot({ type: "png" })
          }
        })
      )

      expectCutAndReplay(run, server.url, { answer: cutThenReplay.answer, rollbacks: 2 })
      // what this transcript adds: the doomed text shown, then removed whole; the notices and the commit's line
      assert.deepStrictEqual(shownReplies(run.changes), [cutThenReplay.discarded, cutThenReplay.answer])
      assert.deepStrictEqual(run.notices, [...cutThenReplay.notices])
      assert.strictEqual(run.meta, cutThenReplay.meta)
      const removed = run.changes.findIndex((c) => c._tag === "removed")
      assert.deepStrictEqual(run.changes.slice(removed - 1, removed + 1), [
        { _tag: "notice", text: cutThenReplay.notices[1] },
        { _tag: "removed", text: cutThenReplay.discarded }
      ])

      // the reset mode, and the conversation
      const post = server.seen.find((s) => s.method === "POST")!
      assert.strictEqual(post.headers["x-reprise-preview"], "reset")
      assert.deepStrictEqual(post.body, {
        model: "gpt-4o-mini",
        stream: true,
        messages: [{ role: "user", content: "What is the capital of France?" }]
      })

      assert.deepStrictEqual(Array.from(png!.subarray(0, 8)), [137, 80, 78, 71, 13, 10, 26, 10])
      if (process.env.REPRISE_UPDATE_SCREENSHOT === "1") fs.writeFileSync(screenshot, png!)
    }))

  it.scopedLive("Stop aborts the request: the server sees the client leave, and no request follows", () =>
    Effect.gen(function*() {
      const server = yield* scripted({ frames: endless.frames, hold: true })
      const { browser: chromium } = yield* browser
      const run = yield* Effect.promise(() =>
        runPageScenario(chromium, server.url, {
          model: "gpt-4o-mini",
          during: async (page) => {
            await waitForReply(page, endless.shown)
            await page.locator("#stop").click()
          },
          after: () => sleep(500)
        })
      )
      expectStopped(run, server.url)
      assert.deepStrictEqual(run.notices, ["stopped: the request was aborted and nothing was committed"])
      const posts = server.seen.filter((s) => s.method === "POST")
      assert.strictEqual(posts.length, 1)
      assert.isTrue(posts[0]!.closedByClient)
    }))

  it.scopedLive("an error ends the turn without an answer", () =>
    Effect.gen(function*() {
      const server = yield* scripted({ frames: failed.frames })
      const { browser: chromium } = yield* browser
      const run = yield* Effect.promise(() => runPageScenario(chromium, server.url, { model: "gpt-4o-mini" }))
      assert.strictEqual(run.state, "failed")
      assert.strictEqual(run.answer, "")
      assert.deepStrictEqual(run.notices, ["attempt 1 discarded: HTTP 500", "upstream: HTTP 500 internal error"])
      assert.strictEqual(run.meta, "")
    }))

  it.scopedLive("a relay that requires a key: a 401 shows the key field; the key is sent and kept nowhere", () =>
    Effect.gen(function*() {
      const key = "sk-relay-0123456789"
      const server = yield* scripted({ frames: cutThenReplay.frames, key })
      const { browser: chromium } = yield* browser
      const page = yield* Effect.acquireRelease(
        Effect.promise(() => chromium.newPage()),
        (p) => Effect.promise(() => p.close())
      )
      const result = yield* Effect.promise(async () => {
        await page.goto(server.url)
        const hidden = await page.evaluate(`document.getElementById("key-row").hidden`)
        await page.locator("#model").fill("gpt-4o-mini")
        await page.locator("#prompt").fill("Hi")
        await page.locator("#send").click()
        await page.waitForFunction(`document.querySelector(".turn")?.dataset.state === "failed"`)
        const refused = await page.evaluate(`({
          notice: document.querySelector(".notice").textContent,
          shown: !document.getElementById("key-row").hidden,
          focused: document.activeElement.id
        })`)
        await page.locator("#key").fill(key)
        await page.locator("#prompt").fill("Hi")
        await page.locator("#send").click()
        await page.waitForFunction(`document.querySelector(".turn:last-child").dataset.state === "committed"`)
        const stored = await page.evaluate(
          `JSON.stringify([Object.keys(localStorage), Object.keys(sessionStorage), document.cookie])`
        )
        return { hidden, refused, stored }
      })
      assert.isTrue(result.hidden)
      assert.deepStrictEqual(result.refused, {
        notice: "HTTP 401: a key is required (this relay requires a key: enter it and send again)",
        shown: true,
        focused: "key"
      })
      assert.strictEqual(result.stored, JSON.stringify([[], [], ""]))
      const posts = server.seen.filter((s) => s.method === "POST")
      assert.deepStrictEqual(posts.map((p) => p.headers.authorization), [undefined, `Bearer ${key}`])
      // the refused turn is not part of the conversation
      assert.deepStrictEqual(posts[1]!.body.messages, [{ role: "user", content: "Hi" }])
    }))
})
