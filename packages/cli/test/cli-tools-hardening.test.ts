/**
 * The real `reprise` binary running `append_file` on files that are not what they seem: a FIFO in the workspace
 * (opening it for writing would wait for a reader that never comes), a hard link to a file outside it, a device
 * reached through a symbolic link. Each call gets an error result that the model sees on the next request; the
 * turn goes on and commits, promptly, and nothing outside the workspace changes. And SIGINT while a tool runs ends
 * the process at once with 130, with nothing committed after the reply that asked for the tool.
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { chatArgs, run, setup, start } from "./support/cli.js"

const env = { OPENAI_API_KEY: "sk-test-tools-hardening" }
const here = path.dirname(fileURLToPath(import.meta.url))
/** Holds every open inside the directory given in REPRISE_TEST_STALL_OPEN (see support/stall-open.mjs). */
const stallOpen = `--import=${new URL(`file://${path.join(here, "support/stall-open.mjs")}`).href}`

/** A reply that calls `append_file` once per path, then the answer after the results. */
const appendTo = (...paths: ReadonlyArray<string>): SimulatorScript.RouteScript => ({
  steps: [
    {
      kind: "stream",
      reply: {
        toolCalls: paths.map((target, i) => ({
          id: `call_${i + 1}`,
          name: "append_file",
          arguments: { path: target, line: "written" }
        }))
      }
    },
    { kind: "stream", reply: { text: "Done." } }
  ]
})

const suite = layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(30) })

suite("reprise tools hardening", (it) => {
  it.effect("append_file on a FIFO, a hard link or a device gets an error result and the turn commits", () =>
    Effect.gen(function*() {
      const base = fs.mkdtempSync(path.join(os.tmpdir(), "reprise-tools-hardening-"))
      const workspace = path.join(base, "workspace")
      const outside = path.join(base, "outside.txt")
      fs.mkdirSync(workspace)
      fs.writeFileSync(outside, "keep\n")
      execFileSync("mkfifo", [path.join(workspace, "fifo")])
      fs.linkSync(outside, path.join(workspace, "hardlink"))
      fs.symlinkSync("/dev/null", path.join(workspace, "null"))
      const session = path.join(base, "s.jsonl")
      const { base: url, count, sim } = yield* setup(appendTo("fifo", "hardlink", "null", "fine.txt"))

      const running = yield* start(
        chatArgs(url, "--json", "--session", session, "--tools", "append_file", "--workspace", workspace, "go"),
        env
      )
      // Nobody ever opens the FIFO for reading: a blocking open would wait for ever (and SIGINT could not end the
      // process, whose exit waits for the worker thread stuck in open), so the test would time out.
      const result = yield* running.exit
      assert.strictEqual(result.code, 0, result.stderr)
      assert.strictEqual(yield* count, 2)

      const events = result.stdout.trim().split("\n").map((l) => JSON.parse(l))
      const results = events.filter((e) => e.type === "tool_result")
      assert.deepStrictEqual(results.map((e) => [e.id, e.isError, e.content]), [
        ["call_1", true, "append_file: not a regular file (FIFO): fifo"],
        ["call_2", true, "append_file: the file has 2 links (a hard link may lead outside the workspace): hardlink"],
        ["call_3", true, "append_file: path resolves outside the workspace: null"],
        ["call_4", false, "ok"]
      ])
      assert.strictEqual(events.at(-1).type, "commit")
      assert.strictEqual(events.at(-1).text, "Done.")

      // the model saw the error results on the next request, and the session holds them
      const second = (yield* sim.requestsTo("openai-chat"))[1]!.body as {
        messages: Array<{ role: string; content: string }>
      }
      assert.deepStrictEqual(
        second.messages.filter((m) => m.role === "tool").map((m) => m.content),
        results.map((e) => e.content)
      )
      const lines = fs.readFileSync(session, "utf8").trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(lines.map((m) => m.role), [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "tool",
        "assistant"
      ])
      assert.deepStrictEqual(lines.filter((m) => m.role === "tool").map((m) => m.isError), [true, true, true, false])

      // nothing outside the workspace changed; the FIFO is still a FIFO; the ordinary file was written
      assert.strictEqual(fs.readFileSync(outside, "utf8"), "keep\n")
      assert.isTrue(fs.lstatSync(path.join(workspace, "fifo")).isFIFO())
      assert.strictEqual(fs.readFileSync(path.join(workspace, "fine.txt"), "utf8"), "written\n")
    }).pipe(Effect.scoped))

  it.effect("SIGINT while a tool runs ends the process at once with 130; the next turn answers the call", () =>
    Effect.gen(function*() {
      const base = fs.mkdtempSync(path.join(os.tmpdir(), "reprise-tools-sigint-"))
      const workspace = path.join(base, "workspace")
      fs.mkdirSync(workspace)
      const session = path.join(base, "s.jsonl")
      const { base: url, count, sim } = yield* setup(appendTo("log.txt"))
      const args = chatArgs(url, "--json", "--session", session, "--tools", "append_file", "--workspace", workspace)

      const running = yield* start([...args, "go"], {
        ...env,
        NODE_OPTIONS: stallOpen,
        REPRISE_TEST_STALL_OPEN: workspace
      })
      // the reply with the tool call is committed and append_file is waiting for its file to open
      yield* running.awaitStderr(/reprise-test: open stalled/)
      const sent = Date.now()
      running.child.kill("SIGINT")
      const result = yield* running.exit
      assert.strictEqual(result.code, 130, result.stderr)
      assert.isBelow(Date.now() - sent, 1_000)
      assert.strictEqual(yield* count, 1, "no request after the interrupted tool")
      const events = result.stdout.trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(events.filter((e) => e.type.startsWith("tool")).map((e) => e.type), ["tool_call"])
      const lines = () => fs.readFileSync(session, "utf8").trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(lines().map((m) => m.role), ["user", "assistant"], "no tool result committed")
      assert.isFalse(fs.existsSync(path.join(workspace, "log.txt")))

      // the next turn answers the interrupted call with an error result, and does not run it again
      yield* sim.setScript({ routes: { "openai-chat": { steps: [{ kind: "stream", reply: { text: "Fine." } }] } } })
      const next = yield* run([...args, "again"], env)
      assert.strictEqual(next.code, 0, next.stderr)
      const request = (yield* sim.requestsTo("openai-chat"))[0]!.body as {
        messages: Array<{ role: string; content: string }>
      }
      assert.deepStrictEqual(request.messages.map((m) => m.role), ["user", "assistant", "tool", "user"])
      assert.match(request.messages[2]!.content, /^interrupted: /)
      assert.deepStrictEqual(lines().map((m) => m.role), ["user", "assistant", "tool", "user", "assistant"])
      assert.isFalse(fs.existsSync(path.join(workspace, "log.txt")), "the interrupted call was not run again")
    }).pipe(Effect.scoped))
})
