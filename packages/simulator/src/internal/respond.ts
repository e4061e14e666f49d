/**
 * What each request gets: the fault plan for a send (its step and reply), for a resume (its step and the events of
 * the stored response after its cursor), and the JSON answers of polls, cancels, refusals and of what the
 * simulator does not serve (404, 405). Background sends create their response here, on arrival.
 *
 * @internal
 */
import * as Predicate from "effect/Predicate"
import type * as RecordedRequest from "../RecordedRequest.js"
import type * as SimulatorScript from "../SimulatorScript.js"
import * as Background from "./background.js"
import type * as Generate from "./generate.js"
import * as Load from "./load.js"
import * as Plan from "./plan.js"
import type * as Store from "./store.js"
import type * as Target from "./target.js"

const simulatorError = (status: number, message: string): typeof SimulatorScript.StatusStep.Type => ({
  kind: "status",
  status,
  body: { error: { message, type: "simulator_error", param: null, code: null } }
})

/** What a generated reply needs to know about the request it answers. @internal */
export const contextOf = (record: RecordedRequest.RecordedRequest): Generate.Context => ({
  id: record.id,
  model: Predicate.hasProperty(record.body, "model") && typeof record.body.model === "string"
    ? record.body.model
    : undefined,
  created: Math.floor(record.receivedAt / 1000),
  includeUsage: Predicate.hasProperty(record.body, "stream_options") &&
    Predicate.hasProperty(record.body.stream_options, "include_usage") &&
    record.body.stream_options.include_usage === true
})

/**
 * A background send creates its response on arrival, complete: the server runs it whatever becomes of the
 * connection. Undefined for any other request (and for a background send its step refused with a status).
 *
 * @internal
 */
export const createBackground = (store: Store.Store, arrival: Store.Arrival): Background.Response | undefined => {
  const { record } = arrival
  if (record.kind !== "send" || record.route === undefined || record.responseId === undefined) return undefined
  const ctx = { ...contextOf(record), background: true }
  return store.background.create({
    id: record.responseId,
    route: record.route,
    requestId: record.id,
    createdAt: record.receivedAt,
    ctx,
    frames: Background.prepare(record.route, Load.framesOf(record.route, arrival.source, ctx), record.responseId),
    options: store.loaded[record.route].background ?? Load.defaultBackground
  })
}

const json = (
  route: SimulatorScript.Route,
  requestId: string,
  answer: Background.Answer,
  headers?: Readonly<Record<string, string>> | undefined
): Plan.Plan => Plan.status({ route, requestId }, { kind: "status", status: answer.status, body: answer.body, headers })

/**
 * The plan of a request.
 *
 * @internal
 */
export const plan = (
  store: Store.Store,
  request: {
    readonly arrival: Store.Arrival
    readonly target: Target.Target
    /** The background response a send created. */
    readonly background: Background.Response | undefined
    /** Why a resume is refused, if it is. */
    readonly refusal: Background.Answer | undefined
  }
): Plan.Plan => {
  const { arrival, background, refusal, target } = request
  const { record, step } = arrival
  const requestId = `req_sim_${record.id}`
  const route = record.route
  if (route === undefined) {
    return Plan.status(
      { route: target._tag === "NotAllowed" ? target.route : "openai-chat", requestId },
      target._tag === "NotAllowed"
        ? simulatorError(405, `${record.path} only accepts ${target.allowed}`)
        : simulatorError(404, `no simulator route for ${record.method} ${record.path}`)
    )
  }
  let input: Plan.Input
  switch (target._tag) {
    case "Poll":
      return json(route, requestId, store.background.poll(target.id))
    case "Cancel":
      return json(route, requestId, store.background.cancel(target.id))
    case "Resume": {
      const stored = store.background.get(target.id)
      if (refusal !== undefined || stored === undefined) {
        return json(route, requestId, refusal ?? Background.notFound(target.id))
      }
      const resumed = store.background.resume(stored, target.startingAfter)
      input = { route, step, reply: () => resumed.frames, ctx: stored.ctx, requestId, sequence: resumed.sequence }
      break
    }
    default: {
      if (background !== undefined && !(target._tag === "Send" && target.stream)) {
        // Without `stream: true` a background send answers the response object, queued; a reset before headers
        // still resets, and other steps have no stream to act on.
        return Plan.resetsBeforeHeaders(step)
          ? { _tag: "ResetBeforeHeaders" }
          : json(route, requestId, store.background.createdObject(background), step.headers)
      }
      const ctx = background?.ctx ?? contextOf(record)
      input = {
        route,
        step,
        reply: () => background?.frames ?? Load.framesOf(route, arrival.source, ctx),
        ctx,
        requestId
      }
    }
  }
  const made = Plan.make(input)
  return made instanceof Plan.PlanError
    ? Plan.status(
      { route, requestId },
      simulatorError(500, `simulator: ${route} step ${record.stepIndex ?? "(default)"}: ${made.message}`)
    )
    : made
}
