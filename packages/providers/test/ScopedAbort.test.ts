/**
 * A send scoped by `scopedAbort.ts` is aborted when its scope closes, as with `HttpClient.withScope`, until its abort
 * is taken over. This rests on the platform's client reading a scoped request's controller from its own map (no type
 * exports it): pinned here for the versions in the lockfile, over a real node:http server on 127.0.0.1 and the real
 * undici client of @effect/platform-node.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import * as Http from "node:http"
import * as Body from "../src/internal/body.js"
import * as ScopedAbort from "../src/internal/scopedAbort.js"
import { server, waitFor } from "./support/harness.js"

describe("a send scoped to its scope", () => {
  it.scoped("is aborted when the scope closes before the response", () =>
    Effect.gen(function*() {
      // never answered
      const s = yield* server(() => {})
      const client = ScopedAbort.scopedClient(yield* HttpClient.HttpClient)
      const scope = yield* Scope.make()
      const fiber = yield* Effect.fork(Scope.extend(client.execute(HttpClientRequest.post(`${s.url}/x`)), scope))
      yield* waitFor(() => s.received.length > 0)
      assert.strictEqual(s.received.length, 1)
      yield* Scope.close(scope, Exit.void)
      yield* s.awaitAbort(0)
      const exit = yield* fiber.await
      assert.isTrue(Exit.isFailure(exit), "the request failed once aborted")
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scoped("is not aborted by the scope once its abort is taken over; the taker aborts it", () =>
    Effect.gen(function*() {
      // headers, then a body that does not end; what the server writes later is written through `held`
      let held: Http.ServerResponse | undefined
      const s = yield* server((_req, res) => {
        res.writeHead(200, { "content-type": "text/plain" })
        res.write("started")
        held = res
      })
      const client = ScopedAbort.scopedClient(yield* HttpClient.HttpClient)
      const scope = yield* Scope.make()
      const response = yield* Scope.extend(client.execute(HttpClientRequest.post(`${s.url}/x`)), scope)
      const controller = ScopedAbort.take(scope)
      assert.isDefined(controller)
      assert.isUndefined(ScopedAbort.take(scope), "taken once")
      const body = Body.undiciBody(response)
      assert.isDefined(body, "undici's body")
      yield* Scope.close(scope, Exit.void)
      // The request goes on: what the server writes after the scope closed still arrives. Had closing the scope aborted
      // it, the body would have failed instead (undici destroys it with the request).
      const arrived = Effect.async<string, Error>((resume) => {
        let text = ""
        const readable = body!.readable
        const onData = (chunk: Uint8Array) => {
          text += Buffer.from(chunk).toString("utf8")
          if (!text.includes("more")) return
          readable.off("data", onData)
          resume(Effect.succeed(text))
        }
        readable.on("data", onData)
        readable.on("error", (error: Error) => resume(Effect.fail(error)))
        held!.write("more")
      })
      assert.strictEqual(yield* arrived, "startedmore")
      assert.deepStrictEqual(s.aborted, [], "aborted by the scope")
      // nothing else ends the request now (the body is open, its reader gone): the taker's abort reaches the server
      controller!.abort()
      yield* s.awaitAbort(0)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))
})
