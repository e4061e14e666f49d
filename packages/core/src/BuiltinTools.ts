/**
 * The built-in tools, which exist so that exactly-once tool execution can be seen from outside:
 *
 * - `now {}` returns the current time in ISO 8601 (UTC), read through Effect's `Clock` (so `TestClock` controls it).
 * - `append_file {path, line}` appends `line` and a newline to `path`, relative to a workspace directory, and
 *   returns `ok`. It refuses absolute paths, paths that resolve outside the workspace (`..`) and symbolic links that
 *   lead outside it; a refusal is an error result the model sees, not a failed turn. It never creates directories.
 *
 * {@link toolkit} and {@link layer} build a {@link Tool.Toolkit} from tool names (as given to `--tools`); an unknown
 * name, or `append_file` without a usable workspace, is a {@link ToolSelectionError}.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { describeCause } from "./internal/describe.js"
import * as Tool from "./Tool.js"

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
 * workspace; a new file's directory must exist and really be inside it; a dangling symbolic link is refused.
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
            detail: `${detail}: ${describeCause(cause)}`,
            cause
          })

        if (params.path.length === 0) return yield* refuse("path is empty")
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
        const target = path.resolve(root, params.path)
        if (!within(target) || target === root) return yield* refuse(outside)

        const real = yield* Effect.option(fs.realPath(target))
        if (Option.isSome(real)) {
          if (!within(real.value)) return yield* refuse(outside)
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
        }
        yield* Effect.mapError(
          fs.writeFileString(target, `${params.line}\n`, { flag: "a" }),
          failed(`cannot append to ${params.path}`)
        )
        return "ok"
      })
  })

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
 * A tool selection that cannot be built: an unknown name, or `append_file` without a workspace directory that
 * exists.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolSelectionError
  extends Schema.TaggedError<ToolSelectionError>("@reprise/core/BuiltinTools/ToolSelectionError")(
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
