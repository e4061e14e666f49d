/**
 * The chat page driven in a real headless Chromium (Debian's `chromium`, or `REPRISE_CHROMIUM`), through
 * puppeteer-core. The scenarios take the base URL of anything that serves the page at `/` and the relay's
 * `POST /v1/chat/completions`: the page test's scripted server, or the real relay in front of the simulator.
 *
 * Against the real relay: the simulator with fixtures/scripts/cut-then-ok.json behind the relay's openai-chat route,
 * `runPageScenario(browser, relayUrl, { model })`, then `expectCutAndReplay(run, relayUrl, { answer: "This reply
 * arrives after one cut attempt.", rollbacks: 1 })`. For Stop, a `drip` step, `during` waits with `waitForAnyReply`
 * and clicks `#stop`, then `expectStopped(run, relayUrl)`, and the simulator's one request is `closed.by: "client"`.
 */
import { assert } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import puppeteer, { type Browser, type Page } from "puppeteer-core"

/** Where Chromium is: `REPRISE_CHROMIUM`, else the first `chromium` on the `PATH`, else Debian's package's path. */
export const chromium = process.env.REPRISE_CHROMIUM ??
  (process.env.PATH ?? "").split(path.delimiter).map((dir) => path.join(dir, "chromium")).find((file) =>
    fs.existsSync(file)
  ) ??
  "/usr/bin/chromium"

/** A headless Chromium with a fresh profile, removed with the browser by `close`. */
export const launch = async (): Promise<{ readonly browser: Browser; readonly close: () => Promise<void> }> => {
  if (!fs.existsSync(chromium)) {
    throw new Error(`no Chromium at ${chromium} (apt-get install chromium, or set REPRISE_CHROMIUM)`)
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "reprise-chromium-"))
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      `--user-data-dir=${profile}`
    ]
  })
  return {
    browser,
    close: async () => {
      await browser.close().catch(() => undefined)
      fs.rmSync(profile, { recursive: true, force: true })
    }
  }
}

/** One change the page made to the reply of its last turn: text appended, or text removed. */
export type Change =
  | { readonly _tag: "added"; readonly text: string }
  | { readonly _tag: "removed"; readonly text: string }
  | { readonly _tag: "notice"; readonly text: string }

/** What a scenario saw. */
export interface PageRun {
  /** The last turn's reply as the page shows it at the end. */
  readonly answer: string
  /** The last turn's state: `committed`, `failed` or `stopped`. */
  readonly state: string
  readonly notices: ReadonlyArray<string>
  /** The line under a committed reply: route, model, attempts. */
  readonly meta: string
  /** Every change to the reply and its notices, in order, as the DOM went through them. */
  readonly changes: ReadonlyArray<Change>
  /** `METHOD url` of every request the page made, and of the ones that failed with why. */
  readonly requests: ReadonlyArray<string>
  readonly failed: ReadonlyArray<string>
  readonly consoleErrors: ReadonlyArray<string>
}

/** What to ask. `during` runs once the request is sent, while the reply streams (the Stop scenario clicks in it). */
export interface Scenario {
  readonly model: string
  readonly prompt?: string | undefined
  readonly key?: string | undefined
  readonly during?: ((page: Page) => Promise<void>) | undefined
  /** Called with the page at the end, before it closes (a screenshot). */
  readonly after?: ((page: Page) => Promise<void>) | undefined
}

// Records, in the page, every change of the replies and notices: a MutationObserver's records come in the order the
// DOM changed, even when one task made several changes.
const recorder = `
window.__changes = [];
new MutationObserver((records) => {
  for (const record of records) {
    const target = record.target;
    if (!(target instanceof Element)) continue;
    if (target.classList.contains("answer")) {
      const removed = Array.from(record.removedNodes, (n) => n.textContent).join("");
      if (removed !== "") window.__changes.push({ _tag: "removed", text: removed });
      const added = Array.from(record.addedNodes, (n) => n.textContent).join("");
      if (added !== "") window.__changes.push({ _tag: "added", text: added });
    } else if (target.classList.contains("notices")) {
      for (const n of record.addedNodes) window.__changes.push({ _tag: "notice", text: n.textContent });
    }
  }
}).observe(document, { childList: true, subtree: true });
`

const lastTurn = `document.querySelector("#turns .turn:last-child")`

/**
 * Opens the page at `baseUrl`, asks `scenario.prompt` of `scenario.model` and waits until the turn ended (committed,
 * failed or stopped).
 */
export const runPageScenario = async (
  browser: Browser,
  baseUrl: string,
  scenario: Scenario
): Promise<PageRun> => {
  const page = await browser.newPage()
  const requests: Array<string> = []
  const failed: Array<string> = []
  const consoleErrors: Array<string> = []
  const pending = new Set<unknown>()
  page.on("request", (request) => {
    pending.add(request)
    requests.push(`${request.method()} ${request.url()}`)
  })
  page.on("requestfinished", (request) => pending.delete(request))
  page.on("requestfailed", (request) => {
    pending.delete(request)
    failed.push(`${request.method()} ${request.url()} ${request.failure()?.errorText ?? ""}`)
  })
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text())
  })
  page.on("pageerror", (error) => consoleErrors.push(String(error)))
  try {
    await page.setViewport({ width: 760, height: 600 })
    await page.evaluateOnNewDocument(recorder)
    const response = await page.goto(baseUrl, { waitUntil: "load" })
    if (response === null || !response.ok()) throw new Error(`GET ${baseUrl}: ${response?.status()}`)
    await page.locator("#model").fill(scenario.model)
    if (scenario.key !== undefined) {
      await page.evaluate(`document.getElementById("key-row").hidden = false`)
      await page.locator("#key").fill(scenario.key)
    }
    await page.locator("#prompt").fill(scenario.prompt ?? "What is the capital of France?")
    await page.locator("#send").click()
    await page.waitForFunction(`${lastTurn} !== null`)
    if (scenario.during !== undefined) await scenario.during(page)
    await page.waitForFunction(`${lastTurn}.dataset.state !== "streaming"`, { timeout: 20_000 })
    const seen = await page.evaluate(`({
      answer: ${lastTurn}.querySelector(".answer").textContent,
      state: ${lastTurn}.dataset.state,
      notices: Array.from(${lastTurn}.querySelectorAll(".notice"), (n) => n.textContent),
      meta: ${lastTurn}.querySelector(".meta").textContent,
      changes: window.__changes
    })`) as Pick<PageRun, "answer" | "state" | "notices" | "meta" | "changes">
    // the browser reports a request's end (an abort too) a little after the page saw it
    for (let i = 0; pending.size > 0 && i < 100; i++) await new Promise((resolve) => setTimeout(resolve, 50))
    if (scenario.after !== undefined) await scenario.after(page)
    return { ...seen, requests, failed, consoleErrors }
  } finally {
    await page.close()
  }
}

/** Waits until the last turn's reply shows some text. */
export const waitForAnyReply = (page: Page) =>
  page.waitForFunction(`${lastTurn}?.querySelector(".answer").textContent !== ""`, { timeout: 10_000 })

/** Waits until the last turn's reply shows `text` exactly. */
export const waitForReply = (page: Page, text: string) =>
  page.waitForFunction(`${lastTurn}?.querySelector(".answer").textContent === ${JSON.stringify(text)}`, {
    timeout: 10_000
  })

/**
 * The replies the page showed, one per attempt that showed any text: the text each had when removed, then the last
 * one's. A page that glued an attempt's text to the next one's shows it here.
 */
export const shownReplies = (changes: ReadonlyArray<Change>): ReadonlyArray<string> => {
  const replies: Array<string> = []
  let current = ""
  for (const change of changes) {
    if (change._tag === "added") current += change.text
    if (change._tag === "removed") {
      if (change.text !== current) throw new Error(`removed ${JSON.stringify(change.text)} of ${current}`)
      replies.push(current)
      current = ""
    }
  }
  if (current !== "") replies.push(current)
  return replies
}

/**
 * What the page must have done with a reply whose attempts were rolled back `rollbacks` times before `answer`
 * committed, whatever the texts: the answer alone at the end; each rolled-back attempt's text, if it showed any,
 * removed whole before the next streamed; one notice per rollback; only its own origin asked.
 */
export const expectCutAndReplay = (
  run: PageRun,
  baseUrl: string,
  expected: { readonly answer: string; readonly rollbacks: number }
): void => {
  assert.strictEqual(run.state, "committed")
  assert.strictEqual(run.answer, expected.answer)
  const replies = shownReplies(run.changes)
  assert.strictEqual(replies.at(-1), expected.answer)
  assert.isAtMost(replies.length, expected.rollbacks + 1)
  assert.strictEqual(run.notices.length, expected.rollbacks)
  for (const notice of run.notices) assert.match(notice, /^attempt \d+ discarded: \S.*$/)
  assert.match(run.meta, new RegExp(`(^| · )${expected.rollbacks + 1} attempts$`))
  expectOwnOrigin(run, baseUrl)
  assert.deepStrictEqual(run.consoleErrors, [])
}

/** What a Stop must have done: the turn stopped, its one request aborted by the browser, no request after it. */
export const expectStopped = (run: PageRun, baseUrl: string): void => {
  const origin = new URL(baseUrl).origin
  assert.strictEqual(run.state, "stopped")
  assert.deepStrictEqual(run.failed, [`POST ${origin}/v1/chat/completions net::ERR_ABORTED`])
  expectOwnOrigin(run, baseUrl)
}

/** The page loaded itself and asked `POST /v1/chat/completions` of its own origin once, and nothing else. */
const expectOwnOrigin = (run: PageRun, baseUrl: string): void => {
  const origin = new URL(baseUrl).origin
  assert.deepStrictEqual(run.requests, [`GET ${baseUrl}`, `POST ${origin}/v1/chat/completions`])
}
