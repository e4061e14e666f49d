/**
 * The fleet's connection to Redis: one `ioredis` client that never queues a command while disconnected, never sends
 * one again after a lost connection, bounds what it reads ({@link ReadBound}) and destroys its socket at once when
 * released; the first connection's wait, bounded by `connectTimeout` and interruptible; and the scripts sent over it.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import * as FleetAddress from "../FleetAddress.js"
import * as ReadBound from "./readBound.js"
import type * as Scripts from "./scripts.js"

/**
 * The text of an error the client reports.
 *
 * @internal
 */
export const errorText = (u: unknown): string =>
  Predicate.isObject(u) && "message" in u && typeof u.message === "string" ? u.message : String(u)

/**
 * @internal
 */
export interface Connection {
  readonly client: Redis
  /** The server, in words that never name its credentials (`FleetAddress.describeUrl`). */
  readonly where: string
  /** Why the first connection was not made within `connectTimeout`; `undefined` when it was. */
  readonly unreachable: string | undefined
  /** The client's count of connections made (each reconnection adds one). */
  readonly readyCount: () => number
  /**
   * Sends the script on the keys `keys` at once (EVALSHA; EVAL when the server lost its script cache, as a restarted
   * one has).
   */
  readonly run: (
    script: Scripts.Script,
    args: ReadonlyArray<string | number>,
    keys: ReadonlyArray<string>
  ) => Promise<unknown>
  /** Why a script's call failed, in words that name the server and never its credentials. */
  readonly failure: (error: unknown) => string
}

/**
 * Connects to `url`, waiting at most `connectTimeout` for the first connection; the client closes with the scope.
 * Never fails: a server not reached in time is `unreachable`, and the client goes on trying to connect.
 *
 * @internal
 */
export const make = (
  url: string,
  connectTimeout: Duration.Duration
): Effect.Effect<Connection, never, Scope.Scope> =>
  Effect.gen(function*() {
    const where = FleetAddress.describeUrl(url)
    // The client's own state, kept up to date by its events.
    const link = { ready: 0, lastError: undefined as string | undefined }
    // Acquired uninterruptibly, as resources are, and never blocks: `lazyConnect` makes no connection here, and both
    // `disconnect`s destroy their socket at once. The waits on the network come after, each interruptible and bounded.
    const client = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Redis(url, {
          lazyConnect: true,
          // fail at once while disconnected, instead of queueing behind a reconnection
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
          // a command cut off by a lost connection is not sent again later: its timeout already decided for it
          autoResendUnfulfilledCommands: false,
          connectTimeout: Duration.toMillis(connectTimeout),
          // at release, destroy the socket at once: the default (2 s) holds the process when the socket already
          // failed, as it has while the server is unreachable, since it never closes a second time
          disconnectTimeout: 0,
          retryStrategy: (times) => Math.min(100 * times, 1000),
          connectionName: "reprise-fleet"
        })
      ),
      (client) => Effect.sync(() => client.disconnect())
    )
    client.on("error", (error: unknown) => {
      link.lastError = errorText(error)
    })
    client.on("ready", () => {
      link.ready++
      link.lastError = undefined
    })
    const clientReads = ReadBound.guard(client, (detail) => {
      link.lastError = detail
    })
    // Interruptible, whatever the layer is built in: the CLI builds it in an uninterruptible region, where a timeout
    // could not end a wait that is not (a server that accepts the connection and never answers would hold it, and
    // Ctrl-C with it, for good).
    const connected = yield* Effect.interruptible(
      Effect.async<boolean>((resume) => {
        const ready = () => resume(Effect.succeed(true))
        const failed = () => resume(Effect.succeed(false))
        client.once("ready", ready)
        client.once("error", failed)
        client.connect().catch(() => undefined)
        return Effect.sync(() => {
          client.off("ready", ready)
          client.off("error", failed)
        })
      }).pipe(Effect.timeoutTo({ duration: connectTimeout, onSuccess: (ok) => ok, onTimeout: () => false }))
    )

    const run: Connection["run"] = (script, args, keys) => {
      const sent = client.evalsha(script.sha, keys.length, ...keys, ...args).catch((error: unknown) =>
        errorText(error).startsWith("NOSCRIPT")
          ? client.eval(script.source, keys.length, ...keys, ...args)
          : Promise.reject(error)
      )
      sent.then(clientReads.completed, clientReads.completed)
      return sent
    }

    return {
      client,
      where,
      unreachable: connected
        ? undefined
        : `${where} is not reachable (${link.lastError ?? `no connection within ${Duration.format(connectTimeout)}`})`,
      readyCount: () => link.ready,
      run,
      failure: (error) =>
        client.status === "ready"
          ? `${where}: ${errorText(error)}`
          : `${where} is not connected${link.lastError === undefined ? "" : ` (${link.lastError})`}`
    }
  })
