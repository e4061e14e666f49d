import { FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Chat from "@reprise/core/Chat"
import * as Generation from "@reprise/core/Generation"
import * as Message from "@reprise/core/Message"
import * as Policy from "@reprise/core/Policy"
import * as Provider from "@reprise/core/Provider"
import type * as ProviderFailure from "@reprise/core/ProviderFailure"
import { Duration, Effect, Either, Exit, Layer, Ref, Stream, TestClock } from "effect"
import { execFileSync } from "node:child_process"
import * as NFS from "node:fs"
import * as Net from "node:net"
import * as BuiltinTools from "../src/BuiltinTools.js"

const call = (name: string, args: unknown, id = "call_1") => ({ id, name, arguments: args })

/** A workspace and a sibling directory outside it, both in a scoped temp directory. */
const setup = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const base = yield* fs.makeTempDirectoryScoped({ prefix: "reprise-tools-" })
  const workspace = path.join(base, "workspace")
  const outside = path.join(base, "outside")
  yield* fs.makeDirectory(workspace)
  yield* fs.makeDirectory(outside)
  const toolkit = yield* BuiltinTools.toolkit(["append_file"], { workspace })
  return { fs, path, base, workspace, outside, toolkit }
})

const expectRefused = (result: Message.ToolResultMessage, why: string) => {
  assert.isTrue(result.isError, result.content)
  assert.strictEqual(result.name, "append_file")
  assert.include(result.content, `append_file: ${why}`)
}

describe("BuiltinTools", () => {
  describe("now", () => {
    it.effect("returns the Clock's time in ISO 8601", () =>
      Effect.gen(function*() {
        const toolkit = yield* BuiltinTools.toolkit(["now"])
        yield* TestClock.setTime(Date.UTC(2025, 0, 31, 12, 0, 0))
        const first = yield* toolkit.run(call("now", {}))
        assert.deepStrictEqual([first.isError, first.content], [false, "2025-01-31T12:00:00.000Z"])
        yield* TestClock.adjust(Duration.seconds(90))
        const second = yield* toolkit.run(call("now", {}))
        assert.strictEqual(second.content, "2025-01-31T12:01:30.000Z")
      }).pipe(Effect.provide(NodeContext.layer)))
  })

  describe("append_file", () => {
    it.scoped("appends the line and a newline, relative to the workspace, and returns ok", () =>
      Effect.gen(function*() {
        const { fs, path, toolkit, workspace } = yield* setup
        yield* fs.makeDirectory(path.join(workspace, "notes"))
        const first = yield* toolkit.run(call("append_file", { path: "notes/log.txt", line: "one" }))
        const second = yield* toolkit.run(call("append_file", { path: "./notes/../notes/log.txt", line: "two" }))
        assert.deepStrictEqual([first.isError, first.content], [false, "ok"])
        assert.deepStrictEqual([second.isError, second.content], [false, "ok"])
        assert.strictEqual(yield* fs.readFileString(path.join(workspace, "notes/log.txt")), "one\ntwo\n")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("refuses absolute paths and paths that leave the workspace", () =>
      Effect.gen(function*() {
        const { fs, outside, path, toolkit } = yield* setup
        const escaping = [
          [path.join(outside, "abs.txt"), "absolute paths are refused"],
          ["../outside/dotdot.txt", "path resolves outside the workspace"],
          ["sub/../../outside/nested.txt", "path resolves outside the workspace"],
          [".", "path resolves outside the workspace"],
          ["", "path is empty"]
        ]
        for (const [target, why] of escaping) {
          const result = yield* toolkit.run(call("append_file", { path: target, line: "x" }))
          expectRefused(result, why)
        }
        assert.deepStrictEqual(yield* fs.readDirectory(outside), [])
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("refuses symbolic links that lead outside the workspace", () =>
      Effect.gen(function*() {
        const { fs, outside, path, toolkit, workspace } = yield* setup
        yield* fs.writeFileString(path.join(outside, "existing.txt"), "keep\n")
        yield* fs.symlink(outside, path.join(workspace, "dir-link"))
        yield* fs.symlink(path.join(outside, "existing.txt"), path.join(workspace, "file-link"))
        yield* fs.symlink(path.join(outside, "missing.txt"), path.join(workspace, "dangling-link"))
        const escaping = [
          ["dir-link/new.txt", "path resolves outside the workspace"],
          ["file-link", "path resolves outside the workspace"],
          ["dangling-link", "path is a symbolic link to a missing file"]
        ]
        for (const [target, why] of escaping) {
          const result = yield* toolkit.run(call("append_file", { path: target, line: "x" }))
          expectRefused(result, why)
        }
        assert.deepStrictEqual((yield* fs.readDirectory(outside)).sort(), ["existing.txt"])
        assert.strictEqual(yield* fs.readFileString(path.join(outside, "existing.txt")), "keep\n")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("follows symbolic links that stay inside the workspace", () =>
      Effect.gen(function*() {
        const { fs, path, toolkit, workspace } = yield* setup
        yield* fs.makeDirectory(path.join(workspace, "real"))
        yield* fs.symlink(path.join(workspace, "real"), path.join(workspace, "alias"))
        const result = yield* toolkit.run(call("append_file", { path: "alias/f.txt", line: "in" }))
        assert.deepStrictEqual([result.isError, result.content], [false, "ok"])
        assert.strictEqual(yield* fs.readFileString(path.join(workspace, "real/f.txt")), "in\n")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped(
      "refuses a FIFO without opening it for a blocking write, with or without a reader",
      () =>
        Effect.gen(function*() {
          const { fs, path, toolkit, workspace } = yield* setup
          const fifo = path.join(workspace, "fifo")
          execFileSync("mkfifo", [fifo])
          yield* fs.makeDirectory(path.join(workspace, "sub"))
          yield* fs.symlink(fifo, path.join(workspace, "sub/to-fifo"))
          // Without a reader, opening the FIFO for writing would wait for one for ever.
          expectRefused(
            yield* toolkit.run(call("append_file", { path: "fifo", line: "x" })),
            "not a regular file (FIFO): fifo"
          )
          expectRefused(
            yield* toolkit.run(call("append_file", { path: "sub/to-fifo", line: "x" })),
            "not a regular file (FIFO): sub/to-fifo"
          )
          // With a reader, nothing reaches it.
          const reader = NFS.openSync(fifo, NFS.constants.O_RDONLY | NFS.constants.O_NONBLOCK)
          yield* Effect.addFinalizer(() => Effect.sync(() => NFS.closeSync(reader)))
          expectRefused(
            yield* toolkit.run(call("append_file", { path: "fifo", line: "x" })),
            "not a regular file (FIFO): fifo"
          )
          const read = Effect.try(() => NFS.readSync(reader, Buffer.alloc(16)))
          const got = yield* Effect.either(read)
          assert.isTrue(
            Either.isLeft(got) ? (got.left.error as NodeJS.ErrnoException).code === "EAGAIN" : got.right === 0,
            "nothing was written to the FIFO"
          )
          assert.isTrue(NFS.lstatSync(fifo).isFIFO())
        }).pipe(Effect.provide(NodeContext.layer)),
      { timeout: 5_000 }
    )

    it.scoped("refuses a hard link, which may be the name of a file outside the workspace", () =>
      Effect.gen(function*() {
        const { fs, outside, path, toolkit, workspace } = yield* setup
        const secret = path.join(outside, "secret.txt")
        yield* fs.writeFileString(secret, "keep\n")
        NFS.linkSync(secret, path.join(workspace, "hard"))
        yield* fs.makeDirectory(path.join(workspace, "sub"))
        NFS.linkSync(secret, path.join(workspace, "sub/hard2"))
        expectRefused(
          yield* toolkit.run(call("append_file", { path: "hard", line: "x" })),
          "the file has 3 links (a hard link may lead outside the workspace): hard"
        )
        expectRefused(
          yield* toolkit.run(call("append_file", { path: "./sub/hard2", line: "x" })),
          "the file has 3 links (a hard link may lead outside the workspace): ./sub/hard2"
        )
        assert.strictEqual(yield* fs.readFileString(secret), "keep\n")
        // two names inside the workspace are refused too: the count is all a tool can see
        yield* fs.writeFileString(path.join(workspace, "twice.txt"), "")
        NFS.linkSync(path.join(workspace, "twice.txt"), path.join(workspace, "twice-again.txt"))
        expectRefused(
          yield* toolkit.run(call("append_file", { path: "twice.txt", line: "x" })),
          "the file has 2 links"
        )
        assert.strictEqual(yield* fs.readFileString(path.join(workspace, "twice.txt")), "")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("refuses a directory, a socket and a device, and a symbolic link to a file outside", () =>
      Effect.gen(function*() {
        const { fs, outside, path, toolkit, workspace } = yield* setup
        yield* fs.makeDirectory(path.join(workspace, "dir"))
        yield* fs.symlink(path.join(workspace, "dir"), path.join(workspace, "dir-alias"))
        const socket = path.join(workspace, "sock")
        const server = Net.createServer()
        yield* Effect.acquireRelease(
          Effect.async<void>((resume) => void server.listen(socket, () => resume(Effect.void))),
          () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
        )
        yield* fs.writeFileString(path.join(outside, "existing.txt"), "keep\n")
        yield* fs.symlink(path.join(outside, "existing.txt"), path.join(workspace, "escape"))
        yield* fs.symlink("/dev/null", path.join(workspace, "null"))
        const refused = [
          ["dir", "not a regular file (Directory): dir"],
          ["dir/", "not a regular file (Directory): dir/"],
          ["dir-alias", "not a regular file (Directory): dir-alias"],
          ["sock", "not a regular file (Socket): sock"],
          ["escape", "path resolves outside the workspace: escape"],
          ["null", "path resolves outside the workspace: null"]
        ]
        for (const [target, why] of refused) {
          expectRefused(yield* toolkit.run(call("append_file", { path: target, line: "x" })), why)
        }
        assert.strictEqual(yield* fs.readFileString(path.join(outside, "existing.txt")), "keep\n")
        assert.deepStrictEqual(yield* fs.readDirectory(path.join(workspace, "dir")), [])
        assert.isTrue(NFS.lstatSync(socket).isSocket())
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("a missing directory or bad arguments give error results", () =>
      Effect.gen(function*() {
        const { fs, toolkit, workspace } = yield* setup
        const missing = yield* toolkit.run(call("append_file", { path: "no/such/dir.txt", line: "x" }))
        assert.isTrue(missing.isError)
        assert.include(missing.content, "does not exist")
        assert.notInclude(missing.content, workspace)
        const bad = yield* toolkit.run(call("append_file", { path: "f.txt" }))
        assert.isTrue(bad.isError)
        assert.include(bad.content, "invalid arguments")
        assert.deepStrictEqual(yield* fs.readDirectory(workspace), [])
      }).pipe(Effect.provide(NodeContext.layer)))
  })

  describe("toolkit", () => {
    it.scoped("builds the named tools in order, with their definitions", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const workspace = yield* fs.makeTempDirectoryScoped()
        const toolkit = yield* BuiltinTools.toolkit(["append_file", "now", "now"], { workspace })
        assert.deepStrictEqual(toolkit.definitions.map((d) => d.name), ["append_file", "now"])
        const appendFile = toolkit.definitions[0]
        assert.deepStrictEqual(appendFile.parameters.required, ["path", "line"])
        assert.deepStrictEqual(toolkit.definitions[1].parameters, {
          type: "object",
          properties: {},
          required: [],
          additionalProperties: false
        })
      }).pipe(Effect.provide(NodeContext.layer)))

    it.effect("an unknown name is a ToolSelectionError", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(BuiltinTools.toolkit(["now", "rm"]))
        assert.strictEqual(error._tag, "ToolSelectionError")
        assert.strictEqual(error.reason, "UnknownTool")
        assert.strictEqual(error.tool, "rm")
        assert.strictEqual(error.message, `unknown tool "rm" (available: now, append_file)`)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.effect("append_file needs an existing workspace directory", () =>
      Effect.gen(function*() {
        const missing = yield* Effect.flip(BuiltinTools.toolkit(["append_file"]))
        assert.strictEqual(missing.reason, "MissingWorkspace")
        const invalid = yield* Effect.flip(
          BuiltinTools.toolkit(["append_file"], { workspace: "/definitely/not/a/dir" })
        )
        assert.strictEqual(invalid.reason, "InvalidWorkspace")
        const layered = yield* Effect.exit(
          Effect.provide(Effect.void, BuiltinTools.layer(["nope"]))
        )
        assert.isTrue(Exit.isFailure(layered))
      }).pipe(Effect.provide(NodeContext.layer)))
  })
})

type Attempt = Stream.Stream<Generation.GenerationEvent, ProviderFailure.ProviderFailure>

const text = (t: string) => Generation.TextDelta({ text: t })
const toolCall = (id: string, name: string, args: unknown) =>
  Generation.ToolCallComplete({ call: { id, name, arguments: args } })
const finish = (reason: Generation.FinishReason) => Generation.Finish({ reason, providerReason: reason })
const attempt = (...events: Array<Generation.GenerationEvent>): Attempt => Stream.make(...events)

/**
 * A provider that answers each physical send with the next scripted stream, debiting the Budget first like a real
 * one, and records every request it was sent.
 */
const scriptedProvider = (script: ReadonlyArray<Attempt>) =>
  Effect.gen(function*() {
    const requests = yield* Ref.make<ReadonlyArray<Generation.GenerationRequest>>([])
    const service: Provider.Service = Provider.makeFromStream({
      protocol: "scripted",
      stream: (request) =>
        Stream.unwrap(Effect.gen(function*() {
          yield* Budget.reserve
          const n = yield* Ref.modify(requests, (sent) => [sent.length, [...sent, request]] as const)
          return n < script.length ? script[n] : Stream.dieMessage(`unscripted send ${n + 1}`)
        }))
    })
    return { layer: Layer.succeed(Provider.Provider, service), requests }
  })

const prompt = [Message.user("go")]
const policy = Policy.layer({ jitter: false })

describe("Chat.step with the built-in tools", () => {
  it.scoped("unknown tools, bad arguments and refused paths are error results and the step goes on", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const base = yield* fs.makeTempDirectoryScoped()
      const workspace = path.join(base, "ws")
      yield* fs.makeDirectory(workspace)
      const { layer, requests } = yield* scriptedProvider([
        attempt(
          toolCall("c1", "rm", { path: "/" }),
          toolCall("c2", "append_file", { path: 1, line: "x" }),
          toolCall("c3", "append_file", { path: "../escape.txt", line: "x" }),
          toolCall("c4", "append_file", { path: "ok.txt", line: "hello" }),
          finish("tool_calls")
        ),
        attempt(text("done"), finish("stop"))
      ])
      const result = yield* Chat.step(prompt, { model: "m" }).pipe(
        Effect.provide(Layer.mergeAll(layer, BuiltinTools.layer(["append_file"], { workspace }), policy))
      )

      const results = (yield* Ref.get(requests))[1].messages.filter((m) => m.role === "tool")
      assert.deepStrictEqual(results.map((m) => [m.toolCallId, m.isError]), [
        ["c1", true],
        ["c2", true],
        ["c3", true],
        ["c4", false]
      ])
      assert.include(results[0].content, "not enabled")
      assert.include(results[1].content, "invalid arguments")
      assert.include(results[2].content, "outside the workspace")
      assert.strictEqual(results[3].content, "ok")
      assert.strictEqual(result.reply.text, "done")
      assert.strictEqual(yield* fs.readFileString(path.join(workspace, "ok.txt")), "hello\n")
      assert.deepStrictEqual((yield* fs.readDirectory(base)).sort(), ["ws"])
    }).pipe(Effect.provide(NodeContext.layer)))
})
