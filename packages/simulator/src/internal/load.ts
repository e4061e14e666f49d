/**
 * Turns a decoded script into what the server serves from: each route's default reply and steps with their
 * fixture files read and framed once, up front, so a missing fixture is a `ScriptError` when the script is set
 * rather than a broken response later.
 *
 * @internal
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as ScriptLoader from "../ScriptLoader.js"
import * as SimulatorScript from "../SimulatorScript.js"
import * as Frames from "./frames.js"
import * as Generate from "./generate.js"

/** @internal */
export type Source =
  | { readonly _tag: "Generated"; readonly reply: SimulatorScript.GeneratedReply }
  | { readonly _tag: "Fixture"; readonly file: string; readonly frames: Frames.Frames }

/** @internal */
export interface LoadedStep {
  readonly step: SimulatorScript.Step
  readonly index: number
  /** The step's own reply, if it names one. */
  readonly source: Source | undefined
}

/** @internal */
export interface LoadedRoute {
  readonly reply: Source
  readonly steps: ReadonlyArray<LoadedStep>
  readonly afterLast: "reply" | "repeat-last"
}

/** @internal */
export type LoadedScript = Readonly<Record<SimulatorScript.Route, LoadedRoute>>

const defaultSource: Source = { _tag: "Generated", reply: {} }

const emptyRoute: LoadedRoute = { reply: defaultSource, steps: [], afterLast: "reply" }

/** @internal */
export const empty: LoadedScript = {
  "openai-chat": emptyRoute,
  "openai-responses": emptyRoute,
  anthropic: emptyRoute,
  subscription: emptyRoute
}

/** @internal */
export interface Env {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  /** Where relative `fixturesDir` values and fixture paths start from. */
  readonly baseDir: string
}

const readFixture = (
  env: Env,
  dir: string,
  route: SimulatorScript.Route,
  reply: SimulatorScript.FixtureReply
): Effect.Effect<Source, ScriptLoader.ScriptError> => {
  const file = env.path.resolve(dir, reply.fixture)
  return env.fs.readFileString(file).pipe(
    Effect.mapError((cause) =>
      new ScriptLoader.ScriptError({ reason: "Fixture", file, issues: [cause.message], cause })
    ),
    Effect.map((text) => {
      const format = reply.format ?? (file.endsWith(".sse") ? "wire" : "chunks")
      const frames = format === "wire" ? Frames.parseWire(text) : Frames.fromChunks(text, route)
      return { _tag: "Fixture", file, frames: Frames.make(frames, route) } as const
    })
  )
}

const loadReply = (
  env: Env,
  dir: string,
  route: SimulatorScript.Route,
  reply: SimulatorScript.Reply
): Effect.Effect<Source, ScriptLoader.ScriptError> =>
  SimulatorScript.isFixtureReply(reply)
    ? readFixture(env, dir, route, reply)
    : Effect.succeed({ _tag: "Generated", reply } as const)

/**
 * Loads one route's script.
 *
 * @internal
 */
export const loadRoute = (
  env: Env,
  dir: string,
  route: SimulatorScript.Route,
  script: SimulatorScript.RouteScript | undefined
): Effect.Effect<LoadedRoute, ScriptLoader.ScriptError> =>
  Effect.gen(function*() {
    if (script === undefined) return emptyRoute
    const reply = script.reply === undefined ? defaultSource : yield* loadReply(env, dir, route, script.reply)
    const steps = yield* Effect.forEach(script.steps ?? [], (step, index) =>
      step.kind !== "status" && step.reply !== undefined
        ? Effect.map(loadReply(env, dir, route, step.reply), (source): LoadedStep => ({ step, index, source }))
        : Effect.succeed<LoadedStep>({ step, index, source: undefined }))
    return { reply, steps, afterLast: script.afterLast ?? "reply" }
  })

/** @internal */
export const fixturesDir = (env: Env, script: SimulatorScript.Script): string =>
  env.path.resolve(env.baseDir, script.fixturesDir ?? ".")

/**
 * Loads a whole script.
 *
 * @internal
 */
export const load = (
  env: Env,
  script: SimulatorScript.Script
): Effect.Effect<LoadedScript, ScriptLoader.ScriptError> => {
  const dir = fixturesDir(env, script)
  return Effect.all({
    "openai-chat": loadRoute(env, dir, "openai-chat", script.routes?.["openai-chat"]),
    "openai-responses": loadRoute(env, dir, "openai-responses", script.routes?.["openai-responses"]),
    anthropic: loadRoute(env, dir, "anthropic", script.routes?.anthropic),
    subscription: loadRoute(env, dir, "subscription", script.routes?.subscription)
  })
}

/**
 * The step the `n`th request (0-based, since the route's script was set) gets, and the source of its reply.
 *
 * @internal
 */
export const pick = (
  route: LoadedRoute,
  n: number
): { readonly step: SimulatorScript.Step; readonly index: number | undefined; readonly source: Source } => {
  const chosen = n < route.steps.length
    ? route.steps[n]
    : route.afterLast === "repeat-last"
    ? route.steps.at(-1)
    : undefined
  if (chosen === undefined) return { step: { kind: "stream" }, index: undefined, source: route.reply }
  return { step: chosen.step, index: chosen.index, source: chosen.source ?? route.reply }
}

/**
 * The frames a source serves to one request.
 *
 * @internal
 */
export const framesOf = (
  route: SimulatorScript.Route,
  source: Source,
  ctx: Generate.Context
): Frames.Frames => source._tag === "Fixture" ? source.frames : Generate.generate(route, source.reply, ctx)
