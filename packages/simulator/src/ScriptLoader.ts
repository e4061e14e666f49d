/**
 * Loading a simulator script: decoding a JSON value, JSON text or a file into a {@link SimulatorScript.Script},
 * and the {@link ScriptError} that says, field by field, why a script cannot be used. Scripts are decoded with
 * excess properties rejected, so a typo is reported, e.g.
 * `routes["openai-chat"].steps[1].afterBytes: Expected a non-negative integer, actual -3`.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as SimulatorScript from "./SimulatorScript.js"

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@reprise/simulator/ScriptLoader/ScriptError")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * A script that cannot be used.
 *
 * - `File`: the script file could not be read.
 * - `Json`: the text is not JSON.
 * - `Schema`: the JSON does not match the script format (`issues` name each bad field).
 * - `Fixture`: a fixture file named by the script could not be read.
 *
 * @since 0.1.0
 * @category errors
 */
export class ScriptError extends Schema.TaggedError<ScriptError>("@reprise/simulator/ScriptLoader/ScriptError")(
  "ScriptError",
  {
    reason: Schema.Literal("File", "Json", "Schema", "Fixture"),
    /** The file involved (script or fixture), when there is one. */
    file: Schema.optional(Schema.String),
    /** One line per problem, each starting with the path of the bad field. */
    issues: Schema.Array(Schema.String),
    cause: Schema.optional(Schema.Defect)
  }
) {
  /**
   * @since 0.1.0
   */
  readonly [TypeId]: TypeId = TypeId

  /**
   * @since 0.1.0
   */
  override get message(): string {
    const where = this.file === undefined ? "" : ` (${this.file})`
    switch (this.reason) {
      case "File":
        return `cannot read simulator script${where}: ${this.issues.join("; ")}`
      case "Json":
        return `simulator script is not valid JSON${where}: ${this.issues.join("; ")}`
      case "Fixture":
        return `cannot read fixture${where}: ${this.issues.join("; ")}`
      case "Schema":
        return `invalid simulator script${where}:\n${this.issues.map((issue) => `  - ${issue}`).join("\n")}`
    }
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isScriptError = (u: unknown): u is ScriptError => Predicate.hasProperty(u, TypeId)

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/

/**
 * Renders the path of a decode issue the way it would be written in JavaScript:
 * `routes["openai-chat"].steps[1].afterBytes`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const formatPath = (path: ReadonlyArray<PropertyKey>, root = "(script)"): string => {
  let out = ""
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`
    else if (typeof key === "string" && identifier.test(key)) out += out === "" ? key : `.${key}`
    else out += `[${JSON.stringify(String(key))}]`
  }
  return out === "" ? root : out
}

const fromParseError = (error: ParseResult.ParseError, file: string | undefined, root?: string): ScriptError => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  // An optional field is a union with `undefined`, whose branch fails too ("Expected undefined, actual …") at
  // the bad field and at each optional level above it: noise next to the real issue, which is always reported.
  const real = issues.filter((issue) => !issue.message.startsWith("Expected undefined, actual"))
  return new ScriptError({
    reason: "Schema",
    file,
    issues: (real.length > 0 ? real : issues).map((issue) => `${formatPath(issue.path, root)}: ${issue.message}`)
  })
}

const decodeOptions = { errors: "all", onExcessProperty: "error" } as const
const decodeScriptEither = Schema.decodeUnknownEither(SimulatorScript.Script, decodeOptions)
const decodeRouteEither = Schema.decodeUnknownEither(SimulatorScript.RouteScript, decodeOptions)
const decodeStepEither = Schema.decodeUnknownEither(SimulatorScript.Step, decodeOptions)

// -----------------------------------------------------------------------------
// decoding
// -----------------------------------------------------------------------------

/**
 * Decodes a script from a JSON value. Excess properties are errors, so a misspelt field is reported.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decode = (input: unknown, options?: { readonly file?: string | undefined }): Effect.Effect<
  SimulatorScript.Script,
  ScriptError
> =>
  Either.match(decodeScriptEither(input), {
    onLeft: (error) => Effect.fail(fromParseError(error, options?.file)),
    onRight: Effect.succeed
  })

/**
 * Decodes the script of one route.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodeRoute = (input: unknown): Effect.Effect<SimulatorScript.RouteScript, ScriptError> =>
  Either.match(decodeRouteEither(input), {
    onLeft: (error) => Effect.fail(fromParseError(error, undefined, "(route)")),
    onRight: Effect.succeed
  })

/**
 * Decodes one step.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodeStep = (input: unknown): Effect.Effect<SimulatorScript.Step, ScriptError> =>
  Either.match(decodeStepEither(input), {
    onLeft: (error) => Effect.fail(fromParseError(error, undefined, "(step)")),
    onRight: Effect.succeed
  })

/**
 * Parses JSON text and decodes it as a script.
 *
 * @since 0.1.0
 * @category decoding
 */
export const parse = (text: string, options?: { readonly file?: string | undefined }): Effect.Effect<
  SimulatorScript.Script,
  ScriptError
> =>
  Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (cause) =>
      new ScriptError({ reason: "Json", file: options?.file, issues: [String((cause as Error).message)], cause })
  }).pipe(Effect.flatMap((json) => decode(json, options)))

/**
 * Reads and decodes a script file. The script's `fixturesDir` (default `.`) is resolved against the file's
 * directory, so fixture paths in a script file are relative to where the file lives.
 *
 * @since 0.1.0
 * @category decoding
 */
export const load = (
  file: string
): Effect.Effect<SimulatorScript.Script, ScriptError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    // a script is a file: a FIFO would block the read, a device (/dev/zero) would never end it
    const info = yield* fs.stat(file).pipe(
      Effect.mapError((cause) => new ScriptError({ reason: "File", file, issues: [cause.message], cause }))
    )
    if (info.type !== "File") {
      return yield* new ScriptError({ reason: "File", file, issues: [`not a regular file (${info.type})`] })
    }
    const text = yield* fs.readFileString(file).pipe(
      Effect.mapError((cause) => new ScriptError({ reason: "File", file, issues: [cause.message], cause }))
    )
    const script = yield* parse(text, { file })
    return { ...script, fixturesDir: path.resolve(path.dirname(file), script.fixturesDir ?? ".") }
  })
