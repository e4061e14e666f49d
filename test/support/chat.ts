/**
 * Shared pieces of the loopback suites (recovery-nested-budget, chat-transient-recovery, fault-matrix): the real
 * undici provider pointed at the simulator, fast live-clock policy, a notification recorder, a counting tool, error
 * class names and the conversation as each protocol puts it in a request body.
 */
import * as Policy from "@reprise/core/Policy"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Tool from "@reprise/core/Tool"
import * as TransportError from "@reprise/core/TransportError"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import type * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect, Predicate, Redacted, Schema } from "effect"

export const KEY = "sk-reprise-loopback-never-printed"

/** The real provider of `route` (undici), pointed at the simulator. */
export const provider = (
  sim: Simulator.Service,
  route: SimulatorScript.Route,
  options: { readonly firstByteTimeout?: number | undefined; readonly idleTimeout?: number | undefined } = {}
) =>
  HttpProvider.layerUndici(route, {
    apiKey: Redacted.make(KEY),
    baseUrl: sim.baseUrl(route),
    ...(options.firstByteTimeout === undefined ? {} : { firstByteTimeout: Duration.millis(options.firstByteTimeout) }),
    ...(options.idleTimeout === undefined ? {} : { idleTimeout: Duration.millis(options.idleTimeout) })
  })

/** Live-clock backoff for loopback tests: 5 ms, doubling, at most 20 ms, no jitter. */
export const fastPolicy = Policy.layer({
  backoffBase: Duration.millis(5),
  backoffMax: Duration.millis(20),
  jitter: false
})

/** Records every recovery notification, in order. */
export const recorder = () => {
  const seen: Array<RecoveryNotifications.Notification> = []
  const layer = RecoveryNotifications.layerCallback((n) => Effect.sync(() => void seen.push(n)))
  const of = <T extends RecoveryNotifications.Notification["_tag"]>(tag: T) =>
    seen.filter((n): n is Extract<RecoveryNotifications.Notification, { _tag: T }> => n._tag === tag)
  return { seen, layer, of }
}

/** `TransportError.Reset`, `ProviderRejection.BadRequest`, `RecoveryExhausted.Attempts`, else the `_tag`. */
export const errorClass = (error: unknown): string => {
  if (TransportError.isTransportError(error)) return `TransportError.${error.reason}`
  if (ProviderRejection.isProviderRejection(error)) return `ProviderRejection.${error.reason}`
  if (RecoveryExhausted.isRecoveryExhausted(error)) return `RecoveryExhausted.${error.reason}`
  return Predicate.hasProperty(error, "_tag") ? String(error._tag) : String(error)
}

/** A tool that records every call it runs: `record {line}` returns `recorded <line>`. */
export const countingTool = () => {
  const calls: Array<string> = []
  const tool = Tool.make("record", {
    description: "Records one line and returns a receipt.",
    parameters: Schema.Struct({ line: Schema.String }),
    handler: ({ line }) =>
      Effect.sync(() => {
        calls.push(line)
        return `recorded ${line}`
      })
  })
  return { calls, tool, layer: Tool.layer([tool]) }
}

/**
 * The conversation entries of a recorded request body: `messages` (Chat Completions, Anthropic) or `input`
 * (Responses, subscription).
 */
export const conversation = (route: SimulatorScript.Route, body: unknown): ReadonlyArray<Record<string, unknown>> => {
  const key = route === "openai-chat" || route === "anthropic" ? "messages" : "input"
  if (!Predicate.isRecord(body) || !Array.isArray(body[key])) throw new Error(`request body has no ${key}: ${body}`)
  return body[key] as ReadonlyArray<Record<string, unknown>>
}

/** The tool results a request carries, in the protocol's own shape, reduced to `{ id, content }`. */
export const toolResults = (
  route: SimulatorScript.Route,
  body: unknown
): ReadonlyArray<{ readonly id: unknown; readonly content: unknown }> => {
  const entries = conversation(route, body)
  switch (route) {
    case "openai-chat":
      return entries.filter((m) => m.role === "tool").map((m) => ({ id: m.tool_call_id, content: m.content }))
    case "anthropic":
      return entries.flatMap((m) =>
        m.role === "user" && Array.isArray(m.content)
          ? (m.content as ReadonlyArray<Record<string, unknown>>)
            .filter((block) => block.type === "tool_result")
            .map((block) => ({ id: block.tool_use_id, content: block.content }))
          : []
      )
    case "openai-responses":
    case "subscription":
      return entries.filter((item) => item.type === "function_call_output").map((item) => ({
        id: item.call_id,
        content: item.output
      }))
  }
}

/**
 * A context-length rejection as the protocol's server sends it: HTTP 400 with code `context_length_exceeded`
 * (OpenAI), or an `invalid_request_error` saying "prompt is too long: …" (Anthropic).
 */
export const overflowStep = (route: SimulatorScript.Route): SimulatorScript.Step =>
  route === "anthropic"
    ? {
      kind: "status",
      status: 400,
      error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" }
    }
    : {
      kind: "status",
      status: 400,
      error: {
        type: "invalid_request_error",
        code: "context_length_exceeded",
        message: "This model's maximum context length is 128000 tokens."
      }
    }
