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

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/** A reply loaded for each route: a model's requests may arrive on any of them. @internal */
export type Sources = Readonly<Record<SimulatorScript.Route, Source>>

/** @internal */
export interface LoadedModelStep {
  readonly step: SimulatorScript.Step
  /** The step's index in the model's `steps`; undefined for `then`. */
  readonly index: number | undefined
  /** The step's own reply, if it names one. */
  readonly sources: Sources | undefined
}

/** @internal */
export interface LoadedModel {
  /** The model's default reply; undefined: the route's. */
  readonly reply: Sources | undefined
  readonly steps: ReadonlyArray<LoadedModelStep>
  /** What every request after the steps gets. */
  readonly then: LoadedModelStep
  readonly rejectPrefill: boolean
  readonly outage: SimulatorScript.Outage | undefined
}

/** @internal */
export type LoadedModels = ReadonlyMap<string, LoadedModel>

const loadSources = (
  env: Env,
  dir: string,
  reply: SimulatorScript.Reply
): Effect.Effect<Sources, ScriptLoader.ScriptError> =>
  Effect.all({
    "openai-chat": loadReply(env, dir, "openai-chat", reply),
    "openai-responses": loadReply(env, dir, "openai-responses", reply),
    anthropic: loadReply(env, dir, "anthropic", reply),
    subscription: loadReply(env, dir, "subscription", reply)
  })

const loadModelStep = (env: Env, dir: string, step: SimulatorScript.Step, index: number | undefined) =>
  step.kind !== "status" && step.reply !== undefined
    ? Effect.map(loadSources(env, dir, step.reply), (sources): LoadedModelStep => ({ step, index, sources }))
    : Effect.succeed<LoadedModelStep>({ step, index, sources: undefined })

const loadModel = (
  env: Env,
  dir: string,
  script: SimulatorScript.ModelScript
): Effect.Effect<LoadedModel, ScriptLoader.ScriptError> =>
  Effect.gen(function*() {
    return {
      reply: script.reply === undefined ? undefined : yield* loadSources(env, dir, script.reply),
      steps: yield* Effect.forEach(script.steps ?? [], (step, index) => loadModelStep(env, dir, step, index)),
      then: yield* loadModelStep(env, dir, script.then ?? { kind: "stream" }, undefined),
      rejectPrefill: script.rejectPrefill ?? false,
      outage: script.outage
    }
  })

/**
 * Loads the model scripts of a whole script.
 *
 * @internal
 */
export const loadModels = (
  env: Env,
  script: SimulatorScript.Script
): Effect.Effect<LoadedModels, ScriptLoader.ScriptError> => {
  const dir = fixturesDir(env, script)
  return Effect.map(
    Effect.forEach(
      Object.entries(script.models ?? {}),
      ([name, model]) => Effect.map(loadModel(env, dir, model), (loaded) => [name, loaded] as const)
    ),
    (entries) => new Map(entries)
  )
}

/**
 * The step the `n`th request for a model (0-based, outages and refused prefills left out) gets, and the source of
 * its reply on `route`.
 *
 * @internal
 */
export const pickModel = (
  model: LoadedModel,
  n: number,
  route: SimulatorScript.Route,
  routeReply: Source
): { readonly step: SimulatorScript.Step; readonly index: number | undefined; readonly source: Source } => {
  const chosen = model.steps[n] ?? model.then
  return {
    step: chosen.step,
    index: chosen.index,
    source: chosen.sources?.[route] ?? model.reply?.[route] ?? routeReply
  }
}

/** The message of a refused assistant prefill. @internal */
export const prefillMessage =
  "This model does not continue a conversation that ends with an assistant message: assistant prefill is not supported."

/** The answer to a request that ends with an assistant message, for a model that refuses prefill. @internal */
export const prefillRejection: SimulatorScript.Step = {
  kind: "status",
  status: 400,
  error: { type: "invalid_request_error", code: "prefill_not_supported", message: prefillMessage }
}

/**
 * Whether a request body's last message (`messages`, or `input` on the Responses routes) has role `assistant`.
 *
 * @internal
 */
export const endsWithAssistant = (body: unknown): boolean => {
  if (typeof body !== "object" || body === null) return false
  const record = body as { readonly messages?: unknown; readonly input?: unknown }
  const list = Array.isArray(record.messages) ? record.messages : Array.isArray(record.input) ? record.input : []
  const last: unknown = list.at(-1)
  return typeof last === "object" && last !== null && (last as { readonly role?: unknown }).role === "assistant"
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
