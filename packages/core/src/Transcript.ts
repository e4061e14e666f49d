/**
 * Transcripts (sessions) as JSONL files: one committed {@link Message.Message} per line, Schema-encoded, in the order
 * the messages were committed.
 *
 * The file is append-only. {@link load} only reads it: a missing file is an empty transcript, and a line that is not
 * a message fails with a {@link TranscriptError} naming the file and the 1-based line, leaving the file untouched.
 * {@link append} only appends whole lines (one write per call, opened with `O_APPEND`, flushed with `fsync`); the
 * one thing it removes is a torn last line, a write that never completed (see {@link Contents}). Only committed messages are written (`Chat.step` reports them; see `Chat.persistTo`), so a
 * partial preview never reaches the file.
 *
 * Plain functions over `@effect/platform`'s `FileSystem` rather than a service: a transcript is a file, and the
 * caller decides which file.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Describe from "./internal/describe.js"
import * as Message from "./Message.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TranscriptErrorTypeId: unique symbol = Symbol.for("@reprise/core/TranscriptError")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TranscriptErrorTypeId = typeof TranscriptErrorTypeId

/**
 * A transcript file that cannot be used.
 *
 * - `Corrupt`: a line is not a message (bad JSON or not a valid message); `line` is its 1-based number.
 * - `Read`/`Write`: the file could not be read or appended to.
 * - `Busy`: another process is writing to it (a caller's lock, such as the CLI's, says so; `detail` names the
 *   holder).
 *
 * @since 0.1.0
 * @category errors
 */
export class TranscriptError extends Schema.TaggedError<TranscriptError>("@reprise/core/TranscriptError")(
  "TranscriptError",
  {
    reason: Schema.Literal("Corrupt", "Read", "Write", "Busy"),
    path: Schema.String,
    /** The 1-based line number, for `Corrupt`. */
    line: Schema.optional(Schema.Number),
    detail: Schema.String,
    cause: Schema.optional(Schema.Defect)
  }
) {
  /**
   * @since 0.1.0
   */
  readonly [TranscriptErrorTypeId]: TranscriptErrorTypeId = TranscriptErrorTypeId

  /**
   * @since 0.1.0
   */
  override get message(): string {
    switch (this.reason) {
      case "Corrupt":
        return `${this.path}:${this.line}: not a transcript message (${this.detail}); the file was left unchanged`
      case "Read":
        return `${this.path}: cannot read the transcript (${this.detail})`
      case "Write":
        return `${this.path}: cannot append to the transcript (${this.detail})`
      case "Busy":
        return `${this.path}: the session is in use ${this.detail}`
    }
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isTranscriptError = (u: unknown): u is TranscriptError => Predicate.hasProperty(u, TranscriptErrorTypeId)

const encodeMessage = Schema.encodeSync(Schema.parseJson(Message.Message))
const decodeMessage = Schema.decodeUnknownEither(Message.Message)

/**
 * The deepest a line may nest (objects and arrays): far beyond any message, and far below what would overflow the
 * stack of whatever walks the value later (the Schema, the encoder of the next request).
 *
 * @since 0.1.0
 * @category constants
 */
export const maxNestingDepth = 128

/** The nesting depth of a JSON text, counted without recursion; brackets inside strings do not count. */
const depthOf = (text: string): number => {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) deepest = Math.max(deepest, ++depth)
    else if (c === 0x7d || c === 0x5d) depth--
  }
  return deepest
}

/**
 * One message as one JSONL line (without its newline).
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeLine = (message: Message.Message): string => encodeMessage(message)

/**
 * Decodes one line; the error explains, in one line, why it is not a message. It never quotes the line (a parser's
 * own message would: the line may hold anything, a key or escape sequences), and a line nested deeper than
 * {@link maxNestingDepth} is refused before it is parsed.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decodeLine = (line: string): Either.Either<Message.Message, string> => {
  const depth = depthOf(line)
  if (depth > maxNestingDepth) {
    return Either.left(`nested ${depth} levels deep, more than the ${maxNestingDepth} allowed`)
  }
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch {
    return Either.left("not valid JSON")
  }
  return Either.mapLeft(
    decodeMessage(json),
    (error) =>
      ParseResult.ArrayFormatter.formatErrorSync(error)
        .map((issue) => issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`)
        .join("; ")
  )
}

const isJson = (text: string): boolean => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/**
 * What was read from a transcript file.
 *
 * @since 0.1.0
 * @category models
 */
export interface Contents {
  readonly messages: ReadonlyArray<Message.Message>
  /**
   * A last line without its newline that is not even JSON: a write torn by a full disk or a killed process. It was
   * never acknowledged as committed, so it is not part of the transcript; the next {@link append} removes it.
   */
  readonly torn: { readonly line: number; readonly bytes: number } | undefined
}

/**
 * Decodes a transcript line by line as its text arrives, in chunks of any size: a file is never held as one
 * string (a 600 MB session is read, not refused), only the line being read and the messages.
 */
class LineDecoder {
  readonly messages: Array<Message.Message> = []
  private pending = ""
  private line = 0
  constructor(readonly path: string) {}

  /** Decodes every complete line of `chunk` (with what was pending); a bad one fails. */
  push(chunk: string): TranscriptError | undefined {
    // only the new chunk is searched: a long line grows `pending` without being scanned again
    let newline = chunk.indexOf("\n")
    if (newline === -1) {
      this.pending += chunk
      return undefined
    }
    let failure = this.decode(this.pending + chunk.slice(0, newline))
    let from = newline + 1
    while (failure === undefined && (newline = chunk.indexOf("\n", from)) !== -1) {
      failure = this.decode(chunk.slice(from, newline))
      from = newline + 1
    }
    this.pending = chunk.slice(from)
    return failure
  }

  /**
   * The end of the file: the last line, if it lacks its newline, is a message if it decodes as one (a hand edit
   * that lost the final newline), a torn write if it is not JSON at all, and `Corrupt` if it is JSON but not a
   * message.
   */
  end(): Either.Either<Contents, TranscriptError> {
    const last = this.pending
    this.pending = ""
    const line = last.endsWith("\r") ? last.slice(0, -1) : last
    if (line.trim().length > 0) {
      const decoded = decodeLine(line)
      if (Either.isLeft(decoded)) {
        // A write in progress leaves a line that is not JSON (an object cut short never parses). A whole JSON value
        // that is not a message is a hand edit: Corrupt.
        if (!isJson(line)) {
          return Either.right({
            messages: this.messages,
            torn: { line: this.line + 1, bytes: new TextEncoder().encode(last).length }
          })
        }
        return Either.left(this.corrupt(this.line + 1, decoded.left))
      }
      this.messages.push(decoded.right)
    }
    return Either.right({ messages: this.messages, torn: undefined })
  }

  private decode(raw: string): TranscriptError | undefined {
    this.line++
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw
    if (line.trim().length === 0) return undefined
    const decoded = decodeLine(line)
    if (Either.isLeft(decoded)) return this.corrupt(this.line, decoded.left)
    this.messages.push(decoded.right)
    return undefined
  }

  private corrupt(line: number, detail: string) {
    return new TranscriptError({ reason: "Corrupt", path: this.path, line, detail })
  }
}

/**
 * Decodes the text of a transcript file. Empty (or blank) lines are skipped. A last line without its newline is a
 * message if it decodes as one (a hand edit that lost the final newline), a torn write ({@link Contents.torn}) if it
 * is not JSON at all, and `Corrupt` like a bad line anywhere else if it is JSON but not a message.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decodeContents = (path: string, text: string): Either.Either<Contents, TranscriptError> => {
  const decoder = new LineDecoder(path)
  const failure = decoder.push(text)
  return failure === undefined ? decoder.end() : Either.left(failure)
}

/**
 * {@link decodeContents} without the torn tail.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decode = (
  path: string,
  text: string
): Either.Either<ReadonlyArray<Message.Message>, TranscriptError> =>
  Either.map(decodeContents(path, text), (contents) => contents.messages)

const notRegular = (path: string, type: string) =>
  new TranscriptError({ reason: "Read", path, detail: `not a regular file (${type})` })

/**
 * Reads a transcript to resume it, with what {@link decodeContents} says of its last line. A missing file is an
 * empty transcript; a file that is not a regular file (a device, a FIFO, a directory) is refused before it is read;
 * a corrupt line fails with its line number. The file is only read, in chunks, line by line: a large session is
 * never held as one string.
 *
 * @since 0.1.0
 * @category files
 */
export const read = (path: string): Effect.Effect<Contents, TranscriptError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const readError = (cause: unknown) =>
      new TranscriptError({ reason: "Read", path, detail: Describe.describeCause(cause), cause })
    const info = yield* fs.stat(path).pipe(
      Effect.map(Option.some),
      Effect.catchIf(
        (error) => error._tag === "SystemError" && error.reason === "NotFound",
        () => Effect.succeed(Option.none())
      ),
      Effect.mapError(readError)
    )
    if (Option.isNone(info)) return { messages: [], torn: undefined }
    if (info.value.type !== "File") return yield* notRegular(path, info.value.type)
    const decoder = new LineDecoder(path)
    const text = new TextDecoder()
    yield* fs.stream(path, { chunkSize: FileSystem.KiB(256) }).pipe(
      Stream.mapError(readError),
      Stream.runForEach((bytes) => {
        const failure = decoder.push(text.decode(bytes, { stream: true }))
        return failure === undefined ? Effect.void : Effect.fail(failure)
      })
    )
    const rest = decoder.push(text.decode())
    if (rest !== undefined) return yield* rest
    return yield* decoder.end()
  })

/**
 * Reads a transcript to resume it: {@link read}'s messages (a torn last line is left out).
 *
 * @since 0.1.0
 * @category files
 */
export const load = (
  path: string
): Effect.Effect<ReadonlyArray<Message.Message>, TranscriptError, FileSystem.FileSystem> =>
  Effect.map(read(path), (contents) => contents.messages)

/**
 * Checks, before anything is paid for, that messages could be appended to `path`: it is a regular file or does not
 * exist yet, and it can be opened for appending (the directory exists, the permissions allow it). Creates the file
 * when it is missing, empty, as the first append would.
 *
 * @since 0.1.0
 * @category files
 */
export const checkWritable = (path: string): Effect.Effect<void, TranscriptError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(path).pipe(Effect.option)
    if (info._tag === "Some" && info.value.type !== "File") {
      return yield* new TranscriptError({ reason: "Write", path, detail: `not a regular file (${info.value.type})` })
    }
    yield* Effect.scoped(fs.open(path, { flag: "a" })).pipe(
      Effect.mapError((cause) =>
        new TranscriptError({ reason: "Write", path, detail: Describe.describeCause(cause), cause })
      )
    )
  })

/**
 * The file's last line, with the byte offset where it starts, when the file does not end with a newline; else
 * undefined. Only the last byte is read when it is a newline (every append but the first after a torn write).
 */
const unfinishedTail = (fs: FileSystem.FileSystem, path: string) =>
  Effect.scoped(Effect.gen(function*() {
    const info = yield* fs.stat(path)
    if (info.size === BigInt(0)) return undefined
    const file = yield* fs.open(path, { flag: "r" })
    const readAt = (start: bigint, length: number) =>
      Effect.gen(function*() {
        const bytes = new Uint8Array(length)
        yield* file.seek(start, "start")
        yield* file.read(bytes)
        return bytes
      })
    const lastByte = yield* readAt(info.size - BigInt(1), 1)
    if (lastByte[0] === 0x0a) return undefined
    const block = BigInt(64 * 1024)
    const blocks: Array<Uint8Array> = []
    let end: bigint = info.size
    let from = BigInt(0)
    while (end > BigInt(0)) {
      const start = end > block ? end - block : BigInt(0)
      const bytes = yield* readAt(start, Number(end - start))
      const newline = bytes.lastIndexOf(0x0a)
      if (newline !== -1) {
        blocks.unshift(bytes.subarray(newline + 1))
        from = start + BigInt(newline + 1)
        break
      }
      blocks.unshift(bytes)
      end = start
    }
    const joined = new Uint8Array(blocks.reduce((n, b) => n + b.length, 0))
    blocks.reduce((at, b) => (joined.set(b, at), at + b.length), 0)
    const text = new TextDecoder().decode(joined)
    return { from, text: text.endsWith("\r") ? text.slice(0, -1) : text }
  })).pipe(
    Effect.catchIf(
      (error) => error._tag === "SystemError" && error.reason === "NotFound",
      () => Effect.succeed(undefined)
    )
  )

/**
 * Appends messages, one line each, creating the file if needed, in one write that is flushed to the disk before it
 * returns; a write that fails part way (a full disk) is cut back, leaving the file as it was. Earlier lines are never rewritten. If the file does not end with a newline, its last line is either a
 * message (a hand edit that lost the newline: a newline is written first) or a torn write, which is removed first:
 * it was never acknowledged (see {@link Contents.torn}).
 *
 * @since 0.1.0
 * @category files
 */
export const append = (
  path: string,
  messages: ReadonlyArray<Message.Message>
): Effect.Effect<void, TranscriptError, FileSystem.FileSystem> =>
  messages.length === 0 ? Effect.void : Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const lines = messages.map((message) => `${encodeLine(message)}\n`).join("")
    // A commit is written whole or not at all: an interrupted append must not leave half a line behind. Local file
    // operations only, and no lock is taken here (a writer's lock, such as the CLI's session lock, is held outside).
    yield* Effect.uninterruptible(Effect.gen(function*() {
      const tail = yield* unfinishedTail(fs, path)
      let separator = ""
      // a torn write (not JSON) is removed; anything else stays, on a line of its own
      if (tail !== undefined) {
        if (isJson(tail.text)) separator = "\n"
        else yield* fs.truncate(path, tail.from)
      }
      // where this commit starts: a write that fails part way (a full disk) is cut back to it, so the file holds no
      // part of a commit that was not acknowledged (for one writer: see the CLI's session lock)
      const start = yield* fs.stat(path).pipe(
        Effect.map((info) => info.size),
        Effect.catchIf(
          (error) => error._tag === "SystemError" && error.reason === "NotFound",
          () => Effect.succeed(FileSystem.Size(0))
        )
      )
      yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(path, { flag: "a" })
        yield* file.writeAll(new TextEncoder().encode(separator + lines))
        yield* file.sync
      })).pipe(Effect.tapError(() => Effect.ignore(fs.truncate(path, start))))
    }))
  }).pipe(
    Effect.mapError((cause) =>
      new TranscriptError({ reason: "Write", path, detail: Describe.describeCause(cause), cause })
    )
  )

/**
 * A short description of a file-system failure for an error message: the platform's `SystemError` reason
 * (`NotFound`, `PermissionDenied`, …) rather than its long message, which carries absolute paths; for a reason the
 * platform does not name, Node's error code and its text (`ENOSPC: no space left on device`). Transcripts describe
 * their read and write failures with it; so do the CLI's file tools.
 *
 * @since 0.1.0
 * @category errors
 */
export const describeCause: (cause: unknown) => string = Describe.describeCause
