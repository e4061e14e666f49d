/**
 * What the real `reprise` binary writes, against a hostile server (the loopback simulator): no part of the key in
 * stdout, stderr, `--json` events or the session file, whatever the model sends back (the key as a tool name, in
 * tool arguments and ids, in text split over deltas); server text in notices and errors with its control
 * characters escaped.
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { bin, chatArgs, run, setup, start } from "./support/cli.js"

const KEY = "sk-proj-" +
  Array.from({ length: 156 }, (_, i) => "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"[(i * 13 + 5) % 57])
    .join("")
const env = { OPENAI_API_KEY: KEY }
const grams = new Set(Array.from({ length: KEY.length - 15 }, (_, i) => KEY.slice(i + 8, i + 16)))
const leak = (text: string) =>
  Array.from({ length: Math.max(0, text.length - 7) }, (_, i) => text.slice(i, i + 8)).find((g) => grams.has(g))

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(30) })("reprise hardening", (it) => {
  it.effect("a key sent back by the model reaches no event, notice or session line", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({
        steps: [
          {
            kind: "stream",
            reply: {
              text: `calling with ${KEY}`,
              deltaSize: 7,
              toolCalls: [
                { id: `call_${KEY}`, name: "append_file", arguments: { path: "k.txt", line: `x ${KEY}` } },
                { id: "call_2", name: KEY, arguments: { value: KEY } }
              ]
            }
          },
          // the reply after the tool results is cut once: its discarded preview held the key too
          { kind: "eof", afterEvents: 30, reply: { text: `the key is ${KEY}, the end`, deltaSize: 5 } },
          { kind: "stream", reply: { text: `the key is ${KEY}, the end`, deltaSize: 5 } }
        ]
      })
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "reprise-hardening-"))
      const session = path.join(dir, "s.jsonl")
      const json = yield* run(
        chatArgs(base, "--json", "--session", session, "--tools", "append_file", "--workspace", dir, "go"),
        env
      )
      assert.strictEqual(json.code, 0, json.stderr)
      assert.strictEqual(yield* count, 3)
      const events = json.stdout.trim().split("\n").map((l) => JSON.parse(l))
      assert.includeMembers(events.map((e) => e.type), ["tool_call", "tool_result", "discard", "commit", "delta"])
      const written = { stdout: json.stdout, stderr: json.stderr, session: fs.readFileSync(session, "utf8") }
      for (const [where, text] of Object.entries(written)) {
        assert.isUndefined(leak(text), `a piece of the key reached ${where}`)
      }
      assert.include(written.session, "<redacted>")
      assert.strictEqual(events.at(-1).text, "the key is <redacted>, the end")
      // the deltas of the committed attempt still add up to its text
      const last = events.filter((e) => e.type === "delta" && e.attempt === events.at(-1).attempts)
      assert.strictEqual(last.map((e) => e.text).join(""), "the key is <redacted>, the end")

      // a key with characters JSON escapes (`"`, `\\`) is scrubbed before the event is serialised
      const quoted = `sk-q"uo\\ted-${KEY.slice(20, 60)}`
      yield* setup({ steps: [{ kind: "stream", reply: { text: `echo ${quoted}`, deltaSize: 4 } }] })
      const escaped = yield* run(chatArgs(base, "--json", "go"), { OPENAI_API_KEY: quoted })
      assert.strictEqual(escaped.code, 0, escaped.stderr)
      assert.isUndefined(leak(escaped.stdout), "a key with a quote leaked through --json")
      assert.strictEqual(JSON.parse(escaped.stdout.trim().split("\n").at(-1)!).text, "echo <redacted>")

      // plain output: only the answer, scrubbed
      yield* setup({ steps: [{ kind: "stream", reply: { text: `plain ${KEY}`, deltaSize: 3 } }] })
      const plain = yield* run(chatArgs(base, "go"), env)
      assert.strictEqual(plain.code, 0)
      assert.strictEqual(plain.stdout, "plain <redacted>\n")
    }))

  it.effect("control characters in server text are escaped in notices and errors", () =>
    Effect.gen(function*() {
      const hostile = "busy\u001b]0;pwned\u0007\nreprise: error [Forged]: all good\u009b2J"
      const steps: ReadonlyArray<SimulatorScript.Step> = [
        { kind: "status", status: 503, error: { type: "server_error", message: hostile } },
        { kind: "status", status: 400, error: { type: "invalid_request_error", message: hostile } }
      ]
      for (const extra of [[], ["--json"]]) {
        const { base } = yield* setup({ steps })
        const result = yield* run(chatArgs(base, ...extra, "go"), env)
        assert.strictEqual(result.code, 1, result.stderr)
        for (const c of ["\u001b", "\u0007", "\u009b"]) assert.notInclude(result.stderr + result.stdout, c)
        const lines = result.stderr.trim().split("\n")
        assert.strictEqual(lines.length, 2, JSON.stringify(result.stderr))
        assert.match(lines[0]!, /^reprise: attempt 1\/11 failed \(HTTP 503\); discarded 0 chars; retrying in/)
        assert.match(
          lines[1]!,
          /^reprise: error \[ProviderRejection\.\w+\]: .*busy\\x1b\]0;pwned\\x07\\nreprise: error/
        )
      }
    }))

  it.effect("a torn last line in the session is left out once, with a notice, and removed by the next append", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const { base } = yield* setup({ steps: [{ kind: "stream", reply: { text: "second answer" } }] })
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "reprise-torn-"))
      const session = path.join(dir, "s.jsonl")
      const committed = [
        JSON.stringify({ role: "user", text: "first question" }),
        JSON.stringify({ role: "assistant", text: "first answer", toolCalls: [] })
      ]
      // a full disk or kill -9 in the middle of an append
      fs.writeFileSync(session, committed.join("\n") + "\n" + `{"role":"user","text":"a prompt whose tu`)
      const first = yield* run(chatArgs(base, "--session", session, "again"), env)
      assert.strictEqual(first.code, 0, first.stderr)
      assert.strictEqual(first.stdout, "second answer\n")
      assert.match(first.stderr, /s\.jsonl:3: left out a torn last line \(40 bytes/)
      const [request] = yield* sim.requestsTo("openai-chat")
      assert.deepStrictEqual(
        (request!.body as any).messages.map((m: any) => m.content),
        ["first question", "first answer", "again"]
      )
      const lines = fs.readFileSync(session, "utf8").split("\n")
      assert.strictEqual(lines.at(-1), "", "the file ends with a newline")
      assert.deepStrictEqual(lines.slice(0, -1).map((l) => JSON.parse(l).text), [
        "first question",
        "first answer",
        "again",
        "second answer"
      ])
      // nothing torn any more: no notice
      yield* setup({ steps: [{ kind: "stream", reply: { text: "third" } }] })
      const second = yield* run(chatArgs(base, "--session", session, "once more"), env)
      assert.strictEqual(second.code, 0)
      assert.strictEqual(second.stderr, "")
    }))

  it.effect("a session that cannot be written is refused before anything is sent", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "never" } }] })
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "reprise-unwritable-"))
      const fifo = path.join(dir, "fifo")
      const made = spawnSync("mkfifo", [fifo])
      assert.strictEqual(made.status, 0)
      const cases: ReadonlyArray<readonly [string, RegExp]> = [
        [path.join(dir, "missing/dir/s.jsonl"), /missing\/dir\/s\.jsonl: cannot append to the transcript \(NotFound\)/],
        [dir, /cannot read the transcript \(not a regular file \(Directory\)\)/],
        [fifo, /fifo: cannot read the transcript \(not a regular file \(FIFO\)\)/],
        ["/dev/zero", /\/dev\/zero: cannot read the transcript \(not a regular file \(CharacterDevice\)\)/]
      ]
      for (const [session, pattern] of cases) {
        const result = yield* run(chatArgs(base, "--session", session, "go"), env)
        assert.strictEqual(result.code, 2, `${session}: ${result.stderr}`)
        assert.match(result.stderr, pattern)
      }
      assert.strictEqual(yield* count, 0)
    }))

  it.effect("a reader that goes away (| head) stops the binary quietly with 141, chat and simulate alike", () =>
    Effect.gen(function*() {
      const { base } = yield* setup({ steps: [{ kind: "stream", reply: { text: "word ".repeat(20_000) } }] })
      const closedEarly = (argv: ReadonlyArray<string>, afterFirstLine: (line: string) => Promise<unknown> | void) =>
        Effect.promise(() =>
          new Promise<{ code: number | null; stderr: string }>((resolve) => {
            const child = spawn(process.execPath, [bin, ...argv], { env: { ...process.env, ...env } })
            let stderr = ""
            child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
            let seen = false
            child.stdout.on("data", (d: Buffer) => {
              if (seen) return
              seen = true
              child.stdout.destroy()
              void afterFirstLine(d.toString("utf8").split("\n")[0]!)
            })
            const timer = setTimeout(() => child.kill("SIGKILL"), 20_000)
            child.on("close", (code) => {
              clearTimeout(timer)
              resolve({ code, stderr })
            })
          })
        )
      // chat: the reader closes after the first chunk of a long answer (--json streams it as events)
      const chat = yield* closedEarly(chatArgs(base, "--json", "go"), () => undefined)
      assert.strictEqual(chat.code, 141, chat.stderr)
      assert.strictEqual(chat.stderr, "")
      // simulate: the reader closes after the first line; the next request's log line finds no reader
      const simulate = yield* closedEarly(["simulate"], async (line) => {
        const url = line.replace("reprise simulator listening on ", "")
        await fetch(`${url}/v1/chat/completions`, { method: "POST", body: "{}" }).then((r) => r.text()).catch(() => "")
      })
      assert.strictEqual(simulate.code, 141, simulate.stderr)
      assert.strictEqual(simulate.stderr, "")
    }))

  it.effect("an error before the turn (a key pasted into --base-url or --session) is printed without it", () =>
    Effect.gen(function*() {
      const badUrl = yield* run(chatArgs(`ftp://example.test/?key=${KEY}`, "--json", "hi"), env)
      assert.strictEqual(badUrl.code, 2)
      assert.include(badUrl.stderr, "http(s) URL")
      assert.isUndefined(leak(badUrl.stderr + badUrl.stdout), badUrl.stderr)
      const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "never" } }] })
      // the key read from another variable, named with --api-key-env
      const badSession = yield* run(
        chatArgs(base, "--api-key-env", "MY_KEY", "--session", `/nonexistent/${KEY}/s.jsonl`, "hi"),
        { MY_KEY: KEY }
      )
      assert.strictEqual(badSession.code, 2)
      assert.include(badSession.stderr, "/nonexistent/<redacted>/s.jsonl")
      assert.isUndefined(leak(badSession.stderr + badSession.stdout), badSession.stderr)
      assert.strictEqual(yield* count, 0)
    }))

  it.scoped("SIGINT once the answer is printed ends as committed: exit 0, never killed by the signal", () =>
    Effect.gen(function*() {
      const { base } = yield* setup({ reply: { text: "the committed answer" } })
      for (let i = 0; i < 3; i++) {
        const running = yield* start(chatArgs(base, "hi"), env)
        yield* running.awaitStdout(/the committed answer\n/)
        running.child.kill("SIGINT")
        const result = yield* running.exit
        assert.deepStrictEqual([result.code, result.signal], [0, null], result.stderr)
      }
    }))

  it.scoped("a second SIGINT while the interrupted command shuts down still ends it with 130, not killed by it", () =>
    Effect.gen(function*() {
      const { base, sim } = yield* setup({
        steps: [{ kind: "stall", afterEvents: 3, keepaliveMs: 100, reply: { text: "a long answer that never ends" } }]
      })
      // An OTLP collector that takes the connection and never answers: the command's final export holds its shutdown
      // for its bound (1 s), the time for a second Ctrl-C.
      const sockets: Array<net.Socket> = []
      const collector = yield* Effect.acquireRelease(
        Effect.async<net.Server>((resume) => {
          const server = net.createServer((socket) => void sockets.push(socket))
          server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
        }),
        (server) => Effect.sync(() => (sockets.forEach((s) => s.destroy()), server.close()))
      )
      const { port } = collector.address() as net.AddressInfo
      const running = yield* start(chatArgs(base, "go"), {
        ...env,
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`
      })
      yield* sim.awaitRequest("openai-chat", 1)
      running.child.kill("SIGINT")
      yield* Effect.sleep(Duration.millis(300))
      running.child.kill("SIGINT")
      const result = yield* running.exit
      assert.deepStrictEqual([result.code, result.signal], [130, null], result.stderr)
      assert.notMatch(result.stderr, /internal error|\n\s+at /)
      assert.strictEqual(result.stdout, "")
    }))

  it.effect("stdout that cannot be written (a full disk) is one error line and exit 74, the commit kept", () =>
    Effect.gen(function*() {
      const { base } = yield* setup({ reply: { text: "an answer for a full disk" } })
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "reprise-full-"))
      const session = path.join(dir, "s.jsonl")
      const full = fs.openSync("/dev/full", "w")
      const child = yield* Effect.promise(() =>
        new Promise<{ code: number | null; stderr: string }>((resolve) => {
          const p = spawn(process.execPath, [bin, ...chatArgs(base, "--session", session, "hi")], {
            env: { ...process.env, ...env },
            stdio: ["ignore", full, "pipe"]
          })
          let stderr = ""
          p.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d))
          p.on("close", (code) => resolve({ code, stderr }))
        })
      )
      fs.closeSync(full)
      assert.strictEqual(child.code, 74, child.stderr)
      assert.strictEqual(child.stderr, "reprise: error: cannot write the output (ENOSPC)\n")
      assert.strictEqual(fs.readFileSync(session, "utf8").trim().split("\n").length, 2)
    }))

  it.effect("simulate --script refuses a FIFO or a device at once (exit 2), instead of blocking or growing", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "reprise-script-"))
      const fifo = path.join(dir, "script.fifo")
      assert.strictEqual(spawnSync("mkfifo", [fifo]).status, 0)
      for (const file of [fifo, "/dev/zero"]) {
        const result = yield* run(["simulate", "--script", file])
        assert.strictEqual(result.code, 2, result.stderr)
        assert.include(result.stderr, "not a regular file")
      }
    }))

  it.effect("simulate --script with a bad script prints its issues a line each, not one line with \\n in it", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "reprise-script-"))
      const file = path.join(dir, "bad.json")
      fs.writeFileSync(
        file,
        JSON.stringify({
          routes: {
            "openai-chat": { steps: [{ kind: "rest" }] },
            anthropic: { steps: [{ kind: "reset", afterbytes: 10 }], comment: 1 }
          }
        })
      )
      const result = yield* run(["simulate", "--script", file])
      assert.strictEqual(result.code, 2, result.stderr)
      const lines = result.stderr.split("\n")
      assert.strictEqual(lines.at(-1), "", "the message ends with a line end")
      assert.strictEqual(lines[0], `reprise: error [ScriptError]: invalid simulator script (${file}):`)
      assert.isAtLeast(lines.length - 2, 3, result.stderr)
      for (const issue of lines.slice(1, -1)) assert.match(issue, /^ {2}- routes[.[]/)
      assert.notInclude(result.stderr, "\\n")
    }))
})
