/**
 * What a request asks for, from its method, path, query and body: a send to a route, a resume, poll or cancel of a
 * background response, or nothing the simulator serves (404, 405).
 *
 * @internal
 */
import * as Predicate from "effect/Predicate"
import type * as RecordedRequest from "../RecordedRequest.js"
import type * as SimulatorScript from "../SimulatorScript.js"
import * as Background from "./background.js"

/** @internal */
export type Target =
  | {
    readonly _tag: "Send"
    readonly route: SimulatorScript.Route
    /** `"background": true` on the Responses route. */
    readonly background: boolean
    /** `"stream": true`: a background send streams; without it, it answers the queued response object. */
    readonly stream: boolean
  }
  | { readonly _tag: "Resume"; readonly id: string; readonly startingAfter: string | null }
  | { readonly _tag: "Poll"; readonly id: string }
  | { readonly _tag: "Cancel"; readonly id: string }
  | { readonly _tag: "NotAllowed"; readonly route: SimulatorScript.Route; readonly allowed: string }
  | { readonly _tag: "NotFound" }

const routePaths: ReadonlyArray<readonly [string, SimulatorScript.Route]> = [
  ["/v1/chat/completions", "openai-chat"],
  ["/chat/completions", "openai-chat"],
  ["/v1/responses", "openai-responses"],
  ["/responses", "openai-responses"],
  ["/v1/messages", "anthropic"],
  ["/subscription/responses", "subscription"],
  ["/subscription/v1/responses", "subscription"],
  ["/backend-api/codex/responses", "subscription"]
]

/** The route a send path belongs to, if any (a trailing slash is ignored). @internal */
export const routeOfPath = (pathname: string): SimulatorScript.Route | undefined => {
  const path = pathname.length > 1 && pathname.endsWith("/") ? pathname.slice(0, -1) : pathname
  return routePaths.find(([p]) => p === path)?.[1]
}

const flag = (body: unknown, name: string) => Predicate.hasProperty(body, name) && body[name] === true

/** @internal */
export const classify = (method: string, url: URL, body: unknown): Target => {
  const found = routeOfPath(url.pathname)
  if (found !== undefined) {
    return method !== "POST"
      ? { _tag: "NotAllowed", route: found, allowed: "POST" }
      : {
        _tag: "Send",
        route: found,
        background: found === "openai-responses" && flag(body, "background"),
        stream: flag(body, "stream")
      }
  }
  const resource = Background.resource(url.pathname)
  if (resource === undefined) return { _tag: "NotFound" }
  const allowed = resource.action === "cancel" ? "POST" : "GET"
  if (method !== allowed) return { _tag: "NotAllowed", route: "openai-responses", allowed }
  if (resource.action === "cancel") return { _tag: "Cancel", id: resource.id }
  return url.searchParams.get("stream") === "true"
    ? { _tag: "Resume", id: resource.id, startingAfter: url.searchParams.get("starting_after") }
    : { _tag: "Poll", id: resource.id }
}

/** The route a target is recorded under: undefined for what the simulator does not serve. @internal */
export const routeOf = (target: Target): SimulatorScript.Route | undefined => {
  switch (target._tag) {
    case "Send":
      return target.route
    case "Resume":
    case "Poll":
    case "Cancel":
      return "openai-responses"
    case "NotAllowed":
    case "NotFound":
      return undefined
  }
}

/** @internal */
export const kindOf = (target: Target): RecordedRequest.RequestKind | undefined => {
  switch (target._tag) {
    case "Send":
      return "send"
    case "Resume":
      return "resume"
    case "Poll":
      return "poll"
    case "Cancel":
      return "cancel"
    case "NotAllowed":
    case "NotFound":
      return undefined
  }
}
