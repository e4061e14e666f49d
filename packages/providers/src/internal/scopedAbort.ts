/**
 * A send scoped to its attempt, as `HttpClient.withScope` scopes it, with one difference: the body read in the same
 * scope can take the abort over ({@link take}).
 *
 * `HttpClient.withScope` adds the request's abort to the scope, so a scope that closes aborts the request: a first-byte
 * deadline that passes closes the attempt's scope (`attempt.ts`), and so does an interruption. But the attempt's
 * scope also closes when the attempt is done, as soon as its protocol's terminal event has been read. The body's last
 * bytes (`data: [DONE]`, the chunked encoding's end) may not have reached undici yet; aborting then closes the
 * connection, and the next request opens another (for a real provider, a TLS handshake). The body read in the scope
 * takes the abort over, so that its release can let those bytes arrive first and the connection is kept for the next
 * request (`body.ts`); until then, and for a send whose body is never read that way, closing the scope aborts, as
 * `withScope` does.
 *
 * The platform's client takes a scoped request's controller from a map of its own, made with `GlobalValue` under a
 * key its `withScope` uses and no type exports; this module puts the controller there as `withScope` does.
 * `ScopedAbort.test.ts` pins that for the versions in the lockfile: a send whose scope closes before the response is
 * aborted at the server.
 *
 * @internal
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Effect from "effect/Effect"
import * as GlobalValue from "effect/GlobalValue"
import * as Scope from "effect/Scope"

// The platform's map (`internal/httpClient.ts`): the controller of a scoped request, read when the request is sent.
// Written here as `withScope` writes it, so that a committed reply's connection is kept rather than aborted (no new
// connection, and for a real provider no TLS handshake, per reply).
const scopedRequests = GlobalValue.globalValue(
  "@effect/platform/HttpClient/scopedRequests",
  () => new WeakMap<HttpClientRequest.HttpClientRequest, AbortController>()
)

/** A scoped send's abort: run when its scope closes unless the body has taken it over. */
interface Abort {
  readonly controller: AbortController
  taken: boolean
}

// Each scope's latest scoped send, where the body read in that scope finds it ({@link take}); weak, so that a scope
// that is gone takes nothing with it.
const aborts = new WeakMap<Scope.Scope, Abort>()

// Each client's scoped form, made once per client rather than once per send.
const scoped = new WeakMap<
  HttpClient.HttpClient,
  HttpClient.HttpClient.With<HttpClientError.HttpClientError, Scope.Scope>
>()

/**
 * `client` with each request scoped to the current scope (made once per client): its abort added to the scope, where
 * {@link take} finds it.
 *
 * @internal
 */
export const scopedClient = (
  client: HttpClient.HttpClient
): HttpClient.HttpClient.With<HttpClientError.HttpClientError, Scope.Scope> => {
  let found = scoped.get(client)
  if (found === undefined) {
    found = HttpClient.transform(client, (effect, request) => {
      const abort: Abort = { controller: new AbortController(), taken: false }
      scopedRequests.set(request, abort.controller)
      return Effect.zipRight(
        Effect.scopeWith((scope) => {
          aborts.set(scope, abort)
          return Scope.addFinalizer(
            scope,
            Effect.sync(() => {
              if (!abort.taken) abort.controller.abort()
            })
          )
        }),
        effect
      )
    })
    scoped.set(client, found)
  }
  return found
}

/**
 * Takes over the abort of the send scoped to `scope` (by {@link scopedClient}): closing the scope no longer aborts it,
 * and the caller must. Undefined when no send was scoped there, or its abort was taken already.
 *
 * @internal
 */
export const take = (scope: Scope.Scope): AbortController | undefined => {
  const abort = aborts.get(scope)
  if (abort === undefined) return undefined
  abort.taken = true
  aborts.delete(scope)
  return abort.controller
}
