import { Error as PlatformError, FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as Message from "../src/Message.js"
import * as Transcript from "../src/Transcript.js"

const session = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = yield* fs.makeTempDirectoryScoped({ prefix: "reprise-transcript-" })
  return { fs, file: path.join(dir, "session.jsonl") }
})

const messages: ReadonlyArray<Message.Message> = [
  Message.system("be brief"),
  Message.user("what time is it?"),
  Message.assistant("", [{ id: "call_1", name: "now", arguments: {} }]),
  Message.toolResult({ toolCallId: "call_1", name: "now", content: "2025-01-31T12:00:00.000Z" }),
  Message.assistant("It is noon.\nUTC, that is — \"exactly\"."),
  Message.toolResult({ toolCallId: "call_2", name: "rm", content: "not enabled", isError: true })
]

describe("Transcript", () => {
  it.scoped("a missing file is an empty transcript, and is not created by loading", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      assert.deepStrictEqual(yield* Transcript.load(file), [])
      assert.isFalse(yield* fs.exists(file))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("round-trips committed messages, one JSON line each", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      yield* Transcript.append(file, messages.slice(0, 2))
      yield* Transcript.append(file, messages.slice(2))
      assert.deepStrictEqual(yield* Transcript.load(file), messages)
      const lines = (yield* fs.readFileString(file)).split("\n")
      assert.strictEqual(lines.length, messages.length + 1)
      assert.strictEqual(lines[lines.length - 1], "")
      assert.deepStrictEqual(JSON.parse(lines[1]), { role: "user", text: "what time is it?" })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("appending never rewrites what is already there", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      yield* Transcript.append(file, [messages[0]])
      const before = yield* fs.readFile(file)
      const inode = (yield* fs.stat(file)).ino
      yield* Transcript.append(file, [messages[1], messages[2]])
      yield* Transcript.append(file, [])
      const after = yield* fs.readFile(file)
      assert.deepStrictEqual(after.subarray(0, before.length), before)
      assert.isTrue(after.length > before.length)
      assert.deepStrictEqual((yield* fs.stat(file)).ino, inode)
      assert.deepStrictEqual(yield* Transcript.load(file), messages.slice(0, 3))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a corrupt line fails with the path and its 1-based line number, and the file is untouched", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      const good = Transcript.encodeLine(messages[1])
      const content = `${good}\n\n{"role":"assistant","text":"cut off"\n${good}\n`
      yield* fs.writeFileString(file, content)
      const error = yield* Effect.flip(Transcript.load(file))
      assert.strictEqual(error._tag, "TranscriptError")
      assert.strictEqual(error.reason, "Corrupt")
      assert.strictEqual(error.path, file)
      assert.strictEqual(error.line, 3)
      assert.match(error.message, new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:3: not a transcript`))
      assert.strictEqual(yield* fs.readFileString(file), content)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a line that is JSON but not a message is corrupt too", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      yield* fs.writeFileString(file, `{"role":"tool","toolCallId":"a","name":"n","content":"c","isError":"no"}\n`)
      const error = yield* Effect.flip(Transcript.load(file))
      assert.strictEqual(error.line, 1)
      assert.include(error.detail, "isError")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a file without its final newline gets one before the next line", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      const first = Transcript.encodeLine(messages[0])
      yield* fs.writeFileString(file, first)
      yield* Transcript.append(file, [messages[1]])
      assert.strictEqual(yield* fs.readFileString(file), `${first}\n${Transcript.encodeLine(messages[1])}\n`)
      assert.deepStrictEqual(yield* Transcript.load(file), messages.slice(0, 2))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("an unreadable path is a Read error, an unwritable one a Write error", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped()
      const read = yield* Effect.flip(Transcript.load(dir))
      assert.strictEqual(read.reason, "Read")
      const write = yield* Effect.flip(Transcript.append(`${dir}/no/such/dir/s.jsonl`, [messages[0]]))
      assert.strictEqual(write.reason, "Write")
    }).pipe(Effect.provide(NodeContext.layer)))

  it("a last line without its newline is a message if it decodes, else a torn write; elsewhere it is corrupt", () => {
    const user = JSON.stringify({ role: "user", text: "hi" })
    const kept = Transcript.decodeContents("s", `${user}\n${user}`)
    assert.deepStrictEqual(kept, Either.right({ messages: [Message.user("hi"), Message.user("hi")], torn: undefined }))
    const torn = Transcript.decodeContents("s", `${user}\n{"role":"us`)
    assert.deepStrictEqual(torn, Either.right({ messages: [Message.user("hi")], torn: { line: 2, bytes: 11 } }))
    // JSON that is not a message is a hand edit, not a torn write, even as the last line
    const edited = Transcript.decodeContents("s", `${user}\n{"role":"user","txt":"typo"}`)
    assert.isTrue(Either.isLeft(edited) && edited.left.reason === "Corrupt" && edited.left.line === 2)
    const corrupt = Transcript.decodeContents("s", `{"role":"us\n${user}\n`)
    assert.isTrue(Either.isLeft(corrupt) && corrupt.left.reason === "Corrupt" && corrupt.left.line === 1)
  })

  it.effect("append removes a torn tail before it writes, and keeps a message that only lost its newline", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped()
      const file = `${dir}/s.jsonl`
      const user = JSON.stringify({ role: "user", text: "hi" })
      yield* fs.writeFileString(file, `${user}\n{"role":"assis`)
      yield* Transcript.append(file, [Message.user("next")])
      assert.strictEqual(yield* fs.readFileString(file), `${user}\n${JSON.stringify({ role: "user", text: "next" })}\n`)
      yield* fs.writeFileString(file, user)
      yield* Transcript.append(file, [Message.user("next")])
      assert.deepStrictEqual(yield* Transcript.load(file), [Message.user("hi"), Message.user("next")])
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))
})

describe("Transcript.read, line by line", () => {
  // Lines of multi-byte text well past the read's 256 KiB chunks: lines, CRLF endings and UTF-8 sequences are cut
  // by chunk boundaries everywhere. Reading in chunks must give exactly what decoding the whole text gives.
  const long = (i: number) => Message.assistant(`${i}: ${"é😀—ж".repeat(1 + (i * 7919) % 40_000)}`, [])
  const lines = Array.from({ length: 60 }, (_, i) => Transcript.encodeLine(i % 2 === 0 ? long(i) : messages[i % 6]))

  it.scoped("chunk boundaries inside lines, CRLF endings and UTF-8 sequences change nothing", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      const text = lines.map((line, i) => `${line}${i % 3 === 0 ? "\r\n" : "\n"}`).join("") + "\n"
      yield* fs.writeFileString(file, text)
      assert.isAbove(Number((yield* fs.stat(file)).size), 2 * 1024 * 1024)
      const read = yield* Transcript.read(file)
      assert.deepStrictEqual(read, Either.getOrThrow(Transcript.decodeContents(file, text)))
      assert.strictEqual(read.messages.length, 60)
      assert.isUndefined(read.torn)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a torn last line past a chunk boundary is found, and a bad line is named by its number", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      const whole = lines.join("\n") + "\n"
      const torn = lines[2].slice(0, Math.floor(lines[2].length / 2))
      yield* fs.writeFileString(file, whole + torn)
      const read = yield* Transcript.read(file)
      assert.strictEqual(read.messages.length, 60)
      assert.deepStrictEqual(read.torn, { line: 61, bytes: new TextEncoder().encode(torn).length })

      yield* fs.writeFileString(file, lines.slice(0, 40).join("\n") + "\n{\"role\":\"nobody\"}\n" + whole)
      const failure = yield* Effect.flip(Transcript.read(file))
      assert.strictEqual(failure.reason, "Corrupt")
      assert.strictEqual(failure.line, 41)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a directory, a FIFO or a device is refused before it is read", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      yield* fs.makeDirectory(file)
      assert.strictEqual((yield* Effect.flip(Transcript.read(file))).reason, "Read")
      assert.strictEqual((yield* Effect.flip(Transcript.read("/dev/zero"))).reason, "Read")
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("Transcript.append on a full disk", () => {
  // A unit: the disk is the real file system, except that an append writes half its bytes and then fails with
  // ENOSPC, as a full disk does.
  const fullDisk = Effect.gen(function*() {
    const real = yield* FileSystem.FileSystem
    const open: FileSystem.FileSystem["open"] = (path, options) =>
      Effect.map(
        real.open(path, options),
        (file) =>
          options?.flag !== "a" ? file : Object.assign(Object.create(file) as FileSystem.File, {
            writeAll: (buffer: Uint8Array) =>
              Effect.zipRight(
                file.writeAll(buffer.subarray(0, Math.floor(buffer.length / 2))),
                Effect.fail(
                  new PlatformError.SystemError({
                    module: "FileSystem",
                    method: "writeAll",
                    reason: "Unknown",
                    description: "ENOSPC: no space left on device"
                  })
                )
              )
          })
      )
    return Layer.succeed(FileSystem.FileSystem, { ...real, open })
  })

  it.scoped("a write that fails part way is cut back: the file is as it was, and the error says why", () =>
    Effect.gen(function*() {
      const { file, fs } = yield* session
      yield* Transcript.append(file, messages.slice(0, 2))
      const before = yield* fs.readFileString(file)
      const layer = yield* fullDisk
      const failure = yield* Effect.flip(Transcript.append(file, messages.slice(2, 5)).pipe(Effect.provide(layer)))
      assert.strictEqual(failure.reason, "Write")
      assert.include(failure.message, "no space left")
      assert.strictEqual(yield* fs.readFileString(file), before)
      assert.deepStrictEqual(yield* Transcript.load(file), messages.slice(0, 2))
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("Transcript lines a hand (or a hostile file) made", () => {
  it("a line nested past the bound is refused before it is parsed, not a stack overflow", () => {
    const deepArguments = `{"role":"assistant","text":"","toolCalls":[{"id":"c","name":"n","arguments":${
      "{\"a\":".repeat(20_000)
    }1${"}".repeat(20_000)}}]}`
    const deepText = `{"role":"user","text":${"[".repeat(20_000)}${"]".repeat(20_000)}}`
    for (const line of [deepArguments, deepText]) {
      const decoded = Transcript.decodeLine(line)
      assert.isTrue(Either.isLeft(decoded))
      assert.match(Either.getLeft(decoded).pipe((o) => o._tag === "Some" ? o.value : ""), /nested 2000\d levels deep/)
    }
    // brackets inside strings do not count
    const brackets = JSON.stringify(Message.user("[".repeat(5_000)))
    assert.deepStrictEqual(Transcript.decodeLine(brackets), Either.right(Message.user("[".repeat(5_000))))
  })

  it("a line that is not JSON is described without quoting it (no key, no escape sequence)", () => {
    const decoded = Transcript.decodeLine("\u001b]0;PWNED\u0007 sk-proj-secret")
    assert.deepStrictEqual(decoded, Either.left("not valid JSON"))
  })
})
