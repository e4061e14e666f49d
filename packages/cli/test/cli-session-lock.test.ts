/**
 * One writer per session: real `reprise` processes on one `--session` file. A second process fails at once (exit 2,
 * naming the holder, before anything is sent), or waits with `--wait-session`; ten concurrent turns with tool calls
 * leave ten whole turns, one after the other, each tool result right after its call.
 */
import { assert, describe, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { chatArgs, holder, run, setup, start, tempSession } from "./support/cli.js"

const env = { OPENAI_API_KEY: "sk-test-lock-key" }
layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(60) })(
  "one writer per session",
  (it) => {
    it.scoped("a second process exits 2 at once, naming the holder, and sends nothing", () =>
      Effect.gen(function*() {
        const session = tempSession()
        const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "hello" } }] })
        const held = yield* holder(session)
        const result = yield* run(chatArgs(base, "--session", session, "hi"), env)
        assert.strictEqual(result.code, 2, result.stderr)
        assert.include(result.stderr, `${session}: the session is in use by pid ${held.pid} (test holder)`)
        assert.include(result.stderr, "--wait-session")
        assert.strictEqual(result.stdout, "")
        assert.strictEqual(yield* count, 0)
        assert.strictEqual(fs.readFileSync(session, "utf8"), "")
        // another spelling of the same file, a symlink to it and a hard link to it are the same lock
        const dir = path.dirname(session)
        const other = path.join(dir, ".", "..", path.basename(dir), "session.jsonl")
        fs.symlinkSync(session, path.join(dir, "link.jsonl"))
        fs.linkSync(session, path.join(dir, "hard.jsonl"))
        for (const name of [other, path.join(dir, "link.jsonl"), path.join(dir, "hard.jsonl")]) {
          const again = yield* run(chatArgs(base, "--session", name, "hi"), env)
          assert.strictEqual(again.code, 2, `${name}: ${again.stderr}`)
          assert.include(again.stderr, `pid ${held.pid}`)
        }
        assert.strictEqual(yield* count, 0)
      }))

    it.scoped("--wait-session waits for the holder, is told why, then runs its turn", () =>
      Effect.gen(function*() {
        const session = tempSession()
        const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "after the wait" } }] })
        const held = yield* holder(session)
        const waiting = yield* start(chatArgs(base, "--session", session, "--wait-session", "hi"), env)
        yield* waiting.awaitStderr(new RegExp(`waiting for pid ${held.pid} \\(test holder\\)`))
        assert.strictEqual(yield* count, 0)
        yield* held.release
        yield* waiting.end
        const result = yield* waiting.exit
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "after the wait\n")
        assert.strictEqual(fs.readFileSync(session, "utf8").trim().split("\n").length, 2)
      }))

    it.scoped("a holder killed with SIGKILL leaves nothing behind: the next process takes the session", () =>
      Effect.gen(function*() {
        const session = tempSession()
        const { base } = yield* setup({ steps: [{ kind: "stream", reply: { text: "taken over" } }] })
        const held = yield* holder(session)
        process.kill(held.pid, "SIGKILL")
        yield* held.release
        const result = yield* run(chatArgs(base, "--session", session, "hi"), env)
        assert.strictEqual(result.code, 0, result.stderr)
      }))

    it.scoped("ten concurrent turns with tool calls: ten whole turns, each tool result right after its call", () =>
      Effect.gen(function*() {
        const session = tempSession()
        const n = 10
        // the server's replies alternate: a tool call, then the answer. Interleaved turns would get each other's.
        const steps: Array<SimulatorScript.Step> = []
        for (let i = 0; i < n; i++) {
          steps.push({ kind: "stream", reply: { toolCalls: [{ id: `call_${i}`, name: "now", arguments: {} }] } })
          steps.push({ kind: "stream", reply: { text: `answer ${i}` } })
        }
        const { count } = yield* setup({ steps })
        const base = (yield* Simulator.Simulator).baseUrl("openai-chat")
        const results = yield* Effect.forEach(
          Array.from({ length: n }, (_, i) => i),
          (i) => run(chatArgs(base, "--session", session, "--wait-session", "--tools", "now", `turn ${i}`), env),
          { concurrency: "unbounded" }
        )
        for (const result of results) assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(yield* count, 2 * n)
        const lines = fs.readFileSync(session, "utf8").trim().split("\n").map((l) => JSON.parse(l))
        assert.strictEqual(lines.length, 4 * n)
        const prompts = new Set<string>()
        for (let t = 0; t < n; t++) {
          const [user, call, result, answer] = lines.slice(4 * t, 4 * t + 4)
          assert.strictEqual(user.role, "user")
          prompts.add(user.text)
          assert.strictEqual(call.role, "assistant")
          assert.strictEqual(call.toolCalls[0].id, `call_${t}`)
          assert.strictEqual(result.role, "tool")
          assert.strictEqual(result.toolCallId, `call_${t}`)
          assert.notInclude(result.content, "interrupted")
          assert.strictEqual(answer.text, `answer ${t}`)
        }
        assert.strictEqual(prompts.size, n)
      }))
  }
)
