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
  /** The steps of resume GETs (background responses), counted apart from the sends. Default: none. */
  readonly resume?: {
    readonly steps: ReadonlyArray<LoadedStep>
    readonly afterLast: "reply" | "repeat-last"
  } | undefined
  /** Default: done at once, resumable for five minutes. */
  readonly background?: Background | undefined
}

/** How a route's background responses behave (see `SimulatorScript.BackgroundOptions`). @internal */
export interface Background {
  readonly inProgressPolls: number
  readonly streamForMs: number
}

/** The real API refuses to stream a background response more than five minutes old. @internal */
export const defaultStreamForMs = 300_000

/** Which list of steps a request is served from. @internal */
export type Lane = "send" | "resume"

/** @internal */
export type LoadedScript = Readonly<Record<SimulatorScript.Route, LoadedRoute>>

const defaultSource: Source = { _tag: "Generated", reply: {} }

/** @internal */
export const defaultBackground: Background = { inProgressPolls: 0, streamForMs: defaultStreamForMs }

const noResume = { steps: [], afterLast: "reply" } as const

const emptyRoute: LoadedRoute = {
  reply: defaultSource,
  steps: [],
  afterLast: "reply",
  resume: noResume,
  background: defaultBackground
}

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
    return {
      reply,
      steps,
      afterLast: script.afterLast ?? "reply",
      // A resume serves the stored response: its steps name no reply of their own.
      resume: {
        steps: (script.resume?.steps ?? []).map((step, index): LoadedStep => ({ step, index, source: undefined })),
        afterLast: script.resume?.afterLast ?? "reply"
      },
      background: {
        inProgressPolls: script.background?.inProgressPolls ?? defaultBackground.inProgressPolls,
        streamForMs: script.background?.streamForMs ?? defaultBackground.streamForMs
      }
    }
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
 * The step the `n`th request of a lane (0-based, since the route's script was set) gets, and the source of its
 * reply (a resume's source is unused: it serves the stored response).
 *
 * @internal
 */
export const pick = (
  route: LoadedRoute,
  n: number,
  lane: Lane = "send"
): { readonly step: SimulatorScript.Step; readonly index: number | undefined; readonly source: Source } => {
  const { afterLast, steps } = lane === "send" ? route : route.resume ?? noResume
  const chosen = n < steps.length
    ? steps[n]
    : afterLast === "repeat-last"
    ? steps.at(-1)
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
