/**
 * `reprise serve`: the relay (`@reprise/server`'s `Relay.layer`) in the foreground, until SIGINT or SIGTERM, over the
 * upstream that `reprise chat` would use with the same flags and variables (`Settings.upstreamOptions`,
 * `Settings.resolveUpstream`, `Turn.providerLayer`: one provider, or with `--fallback` a plan of routes with its
 * circuits, and the fleet's shared limits with `--fleet`).
 *
 * It prints one line on stdout once it listens, `reprise relay listening on http://HOST:PORT`, and the relay writes
 * one access-log line per request on stderr. A bad relay flag, a non-loopback `--host` without downstream keys
 * (`REPRISE_SERVE_KEYS`) and an address that cannot be listened on are usage errors (exit 2), before anything
 * listens; the keys are never printed.
 *
 * @since 0.1.0
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as Relay from "@reprise/server/Relay"
import type * as RelayProtocol from "@reprise/server/RelayProtocol"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { UsageError } from "./ExitCode.js"
import * as Output from "./Output.js"
import * as Sanitize from "./Sanitize.js"
import * as Settings from "./Settings.js"
import * as Turn from "./Turn.js"

/**
 * The relay's own flags.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly host: string
  readonly port: number
  readonly preview: RelayProtocol.PreviewMode
  readonly maxConcurrent: Option.Option<number>
  readonly maxBodyBytes: Option.Option<number>
}

const usage = (detail: string) => Effect.fail(new UsageError({ detail }))

/** A URL's host part: an IPv6 address in brackets. */
const hostOfUrl = (host: string) => host.includes(":") ? `[${host}]` : host

/**
 * Checks the relay's flags, resolves the upstream settings, and serves until interrupted. The URL line is written
 * once the server listens; what `port 0` chose is in it.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (parsed: Settings.UpstreamParsed, options: Options) =>
  Effect.gen(function*() {
    if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65535) {
      return yield* usage(`--port must be between 0 and 65535, got ${options.port}`)
    }
    if (options.host.trim() === "") return yield* usage("--host must name an address, got an empty one")
    const tooSmall = (flag: string, value: Option.Option<number>) =>
      Option.isSome(value) && value.value < 1 ? usage(`${flag} must be at least 1, got ${value.value}`) : Effect.void
    yield* tooSmall("--max-concurrent", options.maxConcurrent)
    yield* tooSmall("--max-body-bytes", options.maxBodyBytes)
    const keys = yield* Effect.mapError(
      Relay.keysConfig,
      // never the value: only which variable could not be read
      () => new UsageError({ detail: `${Relay.keysVariable} could not be read` })
    )
    if (!Relay.isLoopback(options.host) && keys.length === 0) {
      return yield* usage(
        `--host ${options.host} is not a loopback address: set ${Relay.keysVariable} (the keys clients must ` +
          `present) to listen on it`
      )
    }
    const settings = yield* Settings.resolveUpstream(parsed)
    const output = yield* Output.Output
    const relay = Relay.layer({
      host: options.host,
      port: options.port,
      keys,
      preview: options.preview,
      model: settings.model,
      maxConcurrent: Option.getOrUndefined(options.maxConcurrent),
      maxBodyBytes: Option.getOrUndefined(options.maxBodyBytes),
      accessLog: (entry) => Effect.provideService(Output.stderr(accessLine(entry)), Output.Output, output)
    }).pipe(Layer.provide(Turn.providerLayer(settings)))
    return yield* Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(relay).pipe(
        Effect.catchTags({
          RelayError: (error) => usage(error.message),
          ServeError: (error) =>
            usage(`cannot listen on ${options.host}:${options.port}: ${describeCause(error.cause)}`)
        })
      )
      const address = Context.get(context, HttpServer.HttpServer).address
      const url = address._tag === "TcpAddress"
        ? `http://${hostOfUrl(options.host)}:${address.port}`
        : `unix:${address.path}`
      yield* Output.stdout(`reprise relay listening on ${url}\n`)
      return yield* Effect.never
    }))
  })

/**
 * One access-log line: `reprise relay POST /v1/chat/completions 200 mode=hold attempts=2 route="openai-chat gpt-4.1"
 * duration_ms=812`. It holds no key and no body.
 */
const accessLine = (entry: Relay.AccessEntry): string => Sanitize.escapeControls(Relay.formatAccessEntry(entry)) + "\n"

/** The reason a listen failed, in a few words (`EADDRINUSE`, `EACCES`, …). */
const describeCause = (cause: unknown): string => {
  if (typeof cause === "object" && cause !== null) {
    const code = (cause as { code?: unknown }).code
    if (typeof code === "string") return code
    const message = (cause as { message?: unknown }).message
    if (typeof message === "string") return message
  }
  return String(cause)
}
