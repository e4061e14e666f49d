/**
 * Transcripts (sessions) as JSONL files: one committed {@link Message.Message} per line, Schema-encoded, in the order
 * the messages were committed.
 *
 * The file is append-only. {@link load} only reads it: a missing file is an empty transcript, and a line that is not
 * a message fails with a {@link TranscriptError} naming the file and the 1-based line, leaving the file untouched.
 * {@link append} only appends whole lines (one write per call, opened with `O_APPEND`); nothing here rewrites or
 * truncates a file. Only committed messages are written (`Chat.step` reports them; see `Chat.persistTo`), so a
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
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { describeCause } from "./internal/describe.js"
import * as Message from "./Message.js"

/**
 * A transcript file that cannot be used.
 *
 * - `Corrupt`: a line is not a message (bad JSON or not a valid message); `line` is its 1-based number.
 * - `Read`/`Write`: the file could not be read or appended to.
 *
 * @since 0.1.0
 * @category errors
 */
export class TranscriptError extends Schema.TaggedError<TranscriptError>("@reprise/core/TranscriptError")(
  "TranscriptError",
  {
    reason: Schema.Literal("Corrupt", "Read", "Write"),
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
  override get message(): string {
    switch (this.reason) {
      case "Corrupt":
        return `${this.path}:${this.line}: not a transcript message (${this.detail}); the file was left unchanged`
      case "Read":
        return `${this.path}: cannot read the transcript (${this.detail})`
      case "Write":
        return `${this.path}: cannot append to the transcript (${this.detail})`
    }
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isTranscriptError = (u: unknown): u is TranscriptError => Predicate.isTagged(u, "TranscriptError")

const MessageFromJson = Schema.parseJson(Message.Message)
const encodeMessage = Schema.encodeSync(MessageFromJson)
const decodeMessage = Schema.decodeUnknownEither(MessageFromJson)

/**
 * One message as one JSONL line (without its newline).
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeLine = (message: Message.Message): string => encodeMessage(message)

/**
 * Decodes one line; the error explains, in one line, why it is not a message.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decodeLine = (line: string): Either.Either<Message.Message, string> =>
  Either.mapLeft(
    decodeMessage(line),
    (error) =>
      ParseResult.ArrayFormatter.formatErrorSync(error)
        .map((issue) => issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`)
        .join("; ")
  )

/**
 * Decodes the text of a transcript file. Empty (or blank) lines are skipped; a final line without its newline is
 * read like any other.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decode = (
  path: string,
  text: string
): Either.Either<ReadonlyArray<Message.Message>, TranscriptError> => {
  const messages: Array<Message.Message> = []
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].endsWith("\r") ? lines[i].slice(0, -1) : lines[i]
    if (line.trim().length === 0) continue
    const decoded = decodeLine(line)
    if (Either.isLeft(decoded)) {
      return Either.left(new TranscriptError({ reason: "Corrupt", path, line: i + 1, detail: decoded.left }))
    }
    messages.push(decoded.right)
  }
  return Either.right(messages)
}

/**
 * Reads a transcript to resume it. A missing file is an empty transcript; a corrupt line fails with its line number.
 * The file is only read.
 *
 * @since 0.1.0
 * @category files
 */
export const load = (
  path: string
): Effect.Effect<ReadonlyArray<Message.Message>, TranscriptError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(path).pipe(
      Effect.catchIf(
        (error) => error._tag === "SystemError" && error.reason === "NotFound",
        () => Effect.succeed("")
      ),
      Effect.mapError((cause) => new TranscriptError({ reason: "Read", path, detail: describeCause(cause), cause }))
    )
    return yield* decode(path, text)
  })

/**
 * Whether a non-empty file lacks its final newline (so that a new line must not be glued onto the last one).
 */
const endsWithoutNewline = (fs: FileSystem.FileSystem, path: string) =>
  Effect.scoped(Effect.gen(function*() {
    const info = yield* fs.stat(path)
    if (info.size === BigInt(0)) return false
    const file = yield* fs.open(path, { flag: "r" })
    yield* file.seek(info.size - BigInt(1), "start")
    const last = new Uint8Array(1)
    yield* file.read(last)
    return last[0] !== 0x0a
  })).pipe(
    Effect.catchIf(
      (error) => error._tag === "SystemError" && error.reason === "NotFound",
      () => Effect.succeed(false)
    )
  )

/**
 * Appends messages, one line each, creating the file if needed. Existing lines are never rewritten; if the file
 * does not end with a newline (a hand edit), one is written first so the new line stands on its own.
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
    const separator = (yield* endsWithoutNewline(fs, path)) ? "\n" : ""
    // A commit is written whole or not at all: an interrupted write must not leave half a line behind.
    yield* Effect.uninterruptible(fs.writeFileString(path, separator + lines, { flag: "a" }))
  }).pipe(
    Effect.mapError((cause) => new TranscriptError({ reason: "Write", path, detail: describeCause(cause), cause }))
  )
