/**
 * The built-in tools, which exist so that exactly-once tool execution can be seen from outside:
 *
 * - `now {}` returns the current time in ISO 8601 (UTC), read through Effect's `Clock` (so `TestClock` controls it).
 * - `append_file {path, line}` appends `line` and a newline to `path`, relative to a workspace directory, and
 *   returns `ok`. It refuses absolute paths, paths that resolve outside the workspace (`..`) and symbolic links that
 *   lead outside it, and it writes only a regular file with exactly one link: a FIFO, a device, a socket, a
 *   directory or a file with another name (a hard link, which may be outside the workspace) is refused. A refusal is
 *   an error result the model sees, naming the path as given and the reason, not a failed turn. It never creates
 *   directories, and it never waits for a FIFO's reader.
 *
 * Both tools are interruptible: interrupted, a call ends at once and has no result committed (see `Tool`); the next
 * turn answers it with `Chat.interruptedToolResults`.
 *
 * {@link toolkit} and {@link layer} build a {@link Tool.Toolkit} from tool names (as given to `--tools`); an unknown
 * name, or `append_file` without a usable workspace, is a {@link ToolSelectionError}.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Tool from "@reprise/core/Tool"
import * as Transcript from "@reprise/core/Transcript"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as NFS from "node:fs"

/**
 * `now {}`: the current time in ISO 8601, e.g. `2025-01-31T12:00:00.000Z`.
 *
 * @since 0.1.0
 * @category tools
 */
export const now: Tool.Tool<{}, {}> = Tool.make("now", {
  description: "Returns the current date and time in ISO 8601 (UTC).",
  parameters: Schema.Struct({}),
  handler: () => Effect.map(DateTime.now, DateTime.formatIso)
})

/**
 * @since 0.1.0
 * @category models
 */
export const AppendFileParameters = Schema.Struct({
  path: Schema.String.annotations({ description: "The file to append to, relative to the workspace directory." }),
  line: Schema.String.annotations({ description: "The text to append; a newline is added after it." })
})

/**
 * @since 0.1.0
 * @category models
 */
export interface AppendFileParameters extends Schema.Schema.Type<typeof AppendFileParameters> {}

/**
 * @since 0.1.0
 * @category models
 */
export interface AppendFileOptions {
  /** The directory every path is relative to, and confined to. Relative to the current directory if relative. */
  readonly workspace: string
}

/**
 * `append_file {path, line}` confined to `options.workspace`.
 *
 * The check resolves the workspace and the target through `realPath`: an existing target must really be inside the
 * workspace; a new file's directory must exist and really be inside it; a dangling symbolic link is refused. Only a
 * regular file with exactly one link is written: a FIFO, a device, a socket or a directory is refused (so is a file
 * with more than one link, since another of its names may be outside the workspace), before it is opened and again
 * on the opened descriptor.
 *
 * The file is opened with `O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK`: a symbolic link swapped in as
 * the last component after the check fails the open, and a FIFO swapped in fails it too (`ENXIO`) instead of
 * waiting for a reader, which would hold a worker thread that no interruption can free. Once it is open, the
 * descriptor must be a regular file with one link, and the path must still name it from a directory that is really
 * inside the workspace; only then is the line written. Node has no `openat`, so a directory swapped between the
 * checks and the open can still make the open create an empty file elsewhere; it is never written to.
 *
 * @since 0.1.0
 * @category tools
 */
export const appendFile = (
  options: AppendFileOptions
): Tool.Tool<AppendFileParameters, typeof AppendFileParameters.Encoded, FileSystem.FileSystem | Path.Path> =>
  Tool.make("append_file", {
    description: "Appends one line of text (and a newline) to a file in the workspace directory. Returns ok.",
    parameters: AppendFileParameters,
    handler: (params) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const refuse = (detail: string) =>
          Effect.fail(new Tool.ToolError({ tool: "append_file", reason: "Refused", detail }))
        const failed = (detail: string) => (cause: unknown) =>
          new Tool.ToolError({
            tool: "append_file",
            reason: "Failed",
            detail: `${detail}: ${describeFailure(cause)}`,
            cause
          })

        if (params.path.length === 0) return yield* refuse("path is empty")
        if (params.path.includes("\0")) return yield* refuse(`path contains a NUL character: ${params.path}`)
        if (path.isAbsolute(params.path)) {
          return yield* refuse(`absolute paths are refused, give a path relative to the workspace: ${params.path}`)
        }
        const root = yield* Effect.mapError(
          fs.realPath(path.resolve(options.workspace)),
          failed("the workspace directory is not accessible")
        )
        const within = (candidate: string): boolean => {
          const relative = path.relative(root, candidate)
          return relative === "" ||
            (relative !== ".." && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative))
        }
        const outside = `path resolves outside the workspace: ${params.path}`
        // Only a regular file with one name is written: another name (a hard link) may be outside the workspace.
        const unfit = (type: FileSystem.File.Type, links: number) =>
          type !== "File"
            ? refuse(`not a regular file (${type}): ${params.path}`)
            : links !== 1
            ? refuse(`the file has ${links} links (a hard link may lead outside the workspace): ${params.path}`)
            : Effect.void
        const target = path.resolve(root, params.path)
        if (!within(target) || target === root) return yield* refuse(outside)

        // `file` is the target with every symbolic link resolved: what is opened, without following links.
        let file: string
        const real = yield* Effect.option(fs.realPath(target))
        if (Option.isSome(real)) {
          if (!within(real.value)) return yield* refuse(outside)
          file = real.value
          // refused before it is opened: opening a device or a FIFO can have effects of its own
          const info = yield* Effect.mapError(fs.stat(file), failed(`cannot append to ${params.path}`))
          yield* unfit(info.type, Option.getOrElse(info.nlink, () => 1))
        } else {
          // The target does not exist, or it is a symbolic link to nothing: following such a link could create a
          // file anywhere, so it is refused; otherwise the new file's directory must really be inside the workspace.
          if (Option.isSome(yield* Effect.option(fs.readLink(target)))) {
            return yield* refuse(`path is a symbolic link to a missing file: ${params.path}`)
          }
          const directory = yield* Effect.mapError(
            fs.realPath(path.dirname(target)),
            failed(`the directory of ${params.path} does not exist`)
          )
          if (!within(directory)) return yield* refuse(outside)
          file = path.join(directory, path.basename(target))
        }

        const append = (fd: number) =>
          Effect.gen(function*() {
            const opened = yield* Effect.mapError(fstat(fd), failed(`cannot append to ${params.path}`))
            yield* unfit(typeOf(opened), opened.nlink)
            // the path still names the opened file, from a directory that is really inside the workspace
            const directory = yield* Effect.mapError(
              fs.realPath(path.dirname(file)),
              failed(`the directory of ${params.path} is gone`)
            )
            if (!within(directory)) return yield* refuse(outside)
            const named = yield* Effect.option(fs.stat(file))
            if (
              Option.isNone(named) || named.value.dev !== opened.dev ||
              Option.getOrUndefined(named.value.ino) !== opened.ino
            ) {
              return yield* refuse(`path changed while it was opened: ${params.path}`)
            }
            yield* Effect.mapError(
              writeAll(fd, new TextEncoder().encode(`${params.line}\n`)),
              failed(`cannot append to ${params.path}`)
            )
          })
        yield* withAppendDescriptor(file, append).pipe(
          Effect.catchIf(isErrnoException, (error) => {
            switch (error.code) {
              // what appeared there after the check: a FIFO without a reader (O_NONBLOCK: no wait), a socket, a
              // directory
              case "ENXIO":
              case "EISDIR":
              case "EOPNOTSUPP":
                return Effect.flatMap(Effect.option(fs.stat(file)), (info) => {
                  const type = Option.isSome(info) && info.value.type !== "File" ? info.value.type : "Unknown"
                  return refuse(`not a regular file (${type}): ${params.path}`)
                })
              // O_NOFOLLOW: the last component became a symbolic link after the check
              case "ELOOP":
                return refuse(`path changed while it was opened: ${params.path}`)
              default:
                return Effect.fail(failed(`cannot append to ${params.path}`)(error))
            }
          })
        )
        return "ok"
      })
  })

/**
 * How `append_file` opens a file: for appending, created if missing, never through a symbolic link as the last
 * component, and never waiting (a FIFO without a reader fails with `ENXIO`).
 */
const appendFlags = NFS.constants.O_WRONLY | NFS.constants.O_APPEND | NFS.constants.O_CREAT |
  NFS.constants.O_NOFOLLOW | NFS.constants.O_NONBLOCK

const isErrnoException = (u: unknown): u is NodeJS.ErrnoException =>
  u instanceof Error && Predicate.hasProperty(u, "code") && Predicate.isString(u.code)

/** A failure for the model: the error code of a system call (its message carries absolute paths). */
const describeFailure = (cause: unknown): string =>
  isErrnoException(cause) ? String(cause.code) : Transcript.describeCause(cause)

/** The file types of `FileSystem.File.Type`, for a `node:fs` stat. */
const typeOf = (stats: NFS.Stats): FileSystem.File.Type =>
  stats.isFile()
    ? "File"
    : stats.isDirectory()
    ? "Directory"
    : stats.isSymbolicLink()
    ? "SymbolicLink"
    : stats.isBlockDevice()
    ? "BlockDevice"
    : stats.isCharacterDevice()
    ? "CharacterDevice"
    : stats.isFIFO()
    ? "FIFO"
    : stats.isSocket()
    ? "Socket"
    : "Unknown"

/**
 * One `node:fs` call on a descriptor. Uninterruptible: the call runs on a worker thread that cannot be stopped, and
 * the descriptor must not be closed (and its number reused) under it. Such calls on a regular file do not block.
 */
const onDescriptor = <A>(
  call: (callback: (error: NodeJS.ErrnoException | null, value: A) => void) => void
): Effect.Effect<A, NodeJS.ErrnoException> =>
  Effect.uninterruptible(
    Effect.async<A, NodeJS.ErrnoException>((resume) =>
      call((error, value) => resume(error === null ? Effect.succeed(value) : Effect.fail(error)))
    )
  )

const fstat = (fd: number) => onDescriptor<NFS.Stats>((callback) => NFS.fstat(fd, callback))

const writeAll = (fd: number, bytes: Uint8Array): Effect.Effect<void, NodeJS.ErrnoException> =>
  Effect.flatMap(
    onDescriptor<number>((callback) => NFS.write(fd, bytes, 0, bytes.length, null, callback)),
    (written) => written < bytes.length ? writeAll(fd, bytes.subarray(written)) : Effect.void
  )

const close = (fd: number) => onDescriptor<void>((callback) => NFS.close(fd, (error) => callback(error, undefined)))

/**
 * Opens `file` with {@link appendFlags}, interruptibly (a descriptor that arrives after the interruption is closed),
 * runs `use` with the descriptor and closes it, whatever the outcome.
 */
const withAppendDescriptor = <A, E, R>(
  file: string,
  use: (fd: number) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | NodeJS.ErrnoException, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      restore(Effect.async<number, NodeJS.ErrnoException>((resume) => {
        let abandoned = false
        try {
          NFS.open(file, appendFlags, 0o666, (error, fd) => {
            if (!abandoned) resume(error === null ? Effect.succeed(fd) : Effect.fail(error))
            else if (error === null) NFS.close(fd, () => undefined)
          })
        } catch (error) {
          resume(Effect.fail(error as NodeJS.ErrnoException))
        }
        return Effect.sync(() => {
          abandoned = true
        })
      })),
      (fd) =>
        restore(use(fd)).pipe(
          Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Effect.ignore(close(fd))),
          Effect.zipLeft(close(fd))
        )
    )
  )

/**
 * The names of the built-in tools.
 *
 * @since 0.1.0
 * @category constants
 */
export const names = ["now", "append_file"] as const

/**
 * @since 0.1.0
 * @category models
 */
export type Name = typeof names[number]

/**
 * @since 0.1.0
 * @category type ids
 */
export const ToolSelectionErrorTypeId: unique symbol = Symbol.for("@reprise/cli/BuiltinTools/ToolSelectionError")

/**
 * @since 0.1.0
 * @category type ids
 */
export type ToolSelectionErrorTypeId = typeof ToolSelectionErrorTypeId

/**
 * A tool selection that cannot be built: an unknown name, or `append_file` without a workspace directory that
 * exists.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolSelectionError
  extends Schema.TaggedError<ToolSelectionError>("@reprise/cli/BuiltinTools/ToolSelectionError")(
    "ToolSelectionError",
    {
      reason: Schema.Literal("UnknownTool", "MissingWorkspace", "InvalidWorkspace"),
      /** The tool name concerned. */
      tool: Schema.String,
      /** The workspace directory, for `InvalidWorkspace`. */
      workspace: Schema.optional(Schema.String),
      cause: Schema.optional(Schema.Defect)
    }
  )
{
  /**
   * @since 0.1.0
   */
  readonly [ToolSelectionErrorTypeId]: ToolSelectionErrorTypeId = ToolSelectionErrorTypeId

  /**
   * @since 0.1.0
   */
  override get message(): string {
    switch (this.reason) {
      case "UnknownTool":
        return `unknown tool "${this.tool}" (available: ${names.join(", ")})`
      case "MissingWorkspace":
        return `the ${this.tool} tool needs a workspace directory`
      case "InvalidWorkspace":
        return `the workspace ${this.workspace ?? ""} is not an accessible directory`
    }
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isToolSelectionError = (u: unknown): u is ToolSelectionError =>
  Predicate.hasProperty(u, ToolSelectionErrorTypeId)

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The directory `append_file` is confined to. Required when `append_file` is selected. */
  readonly workspace?: string | undefined
}

/**
 * Selects built-in tools by name, in the order given (duplicates are ignored). An unknown name fails with
 * `UnknownTool`; `append_file` needs `options.workspace`, an existing directory.
 *
 * @since 0.1.0
 * @category constructors
 */
export const select = (
  selected: ReadonlyArray<string>,
  options: Options = {}
): Effect.Effect<ReadonlyArray<Tool.Any>, ToolSelectionError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const tools: Array<Tool.Any> = []
    for (const name of new Set(selected)) {
      switch (name) {
        case "now":
          tools.push(now)
          break
        case "append_file": {
          const workspace = options.workspace
          if (workspace === undefined) {
            return yield* new ToolSelectionError({ reason: "MissingWorkspace", tool: name })
          }
          const fs = yield* FileSystem.FileSystem
          const info = yield* Effect.mapError(
            fs.stat(workspace),
            (cause) => new ToolSelectionError({ reason: "InvalidWorkspace", tool: name, workspace, cause })
          )
          if (info.type !== "Directory") {
            return yield* new ToolSelectionError({ reason: "InvalidWorkspace", tool: name, workspace })
          }
          tools.push(appendFile({ workspace }))
          break
        }
        default:
          return yield* new ToolSelectionError({ reason: "UnknownTool", tool: name })
      }
    }
    return tools
  })

/**
 * A {@link Tool.Toolkit} of the named built-in tools (see {@link select}).
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolkit = (
  selected: ReadonlyArray<string>,
  options: Options = {}
): Effect.Effect<Tool.Service, ToolSelectionError, FileSystem.FileSystem | Path.Path> =>
  Effect.flatMap(
    select(selected, options),
    (tools) => Tool.toolkit(tools as ReadonlyArray<Tool.Tool<any, any, FileSystem.FileSystem | Path.Path>>)
  )

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  selected: ReadonlyArray<string>,
  options: Options = {}
): Layer.Layer<Tool.Toolkit, ToolSelectionError, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Tool.Toolkit, toolkit(selected, options))
