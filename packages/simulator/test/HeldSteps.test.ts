/**
 * A step with `forMs` is held for a span of the simulator's clock. The server runs on the real clock (it paces real
 * sockets), so the span is tested on the request store with explicit arrival times.
 */
import { assert, describe, it } from "@effect/vitest"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import * as Load from "../src/internal/load.js"
import * as Store from "../src/internal/store.js"

const route = (steps: ReadonlyArray<SimulatorScript.Step>, afterLast: "reply" | "repeat-last" = "reply") => ({
  ...Load.empty,
  "openai-chat": {
    reply: Load.empty["openai-chat"].reply,
    steps: steps.map((step, index) => ({ step, index, source: undefined })),
    afterLast
  }
})

const arrive = (store: Store.Store, at: number) => {
  const { record, step } = store.arrive({
    route: "openai-chat",
    method: "POST",
    path: "/v1/chat/completions",
    headers: {},
    body: undefined,
    receivedAt: at
  })
  return [step.kind === "status" ? step.status : step.kind, record.stepIndex]
}

describe("held steps (forMs)", () => {
  it("an outage of 5 s: every request of the span gets the step, the first after it the next step", () => {
    const store = new Store.Store(route([{ kind: "status", status: 503, forMs: 5000 }]), 100)
    const served = [1000, 1001, 3000, 5999, 6000, 6001].map((at) => arrive(store, at))
    assert.deepStrictEqual(served, [
      [503, 0],
      [503, 0],
      [503, 0],
      [503, 0],
      ["stream", undefined],
      ["stream", undefined]
    ])
  })

  it("held steps in sequence: each span starts at its own first request, not when the previous one ended", () => {
    const store = new Store.Store(
      route([
        { kind: "status", status: 503, forMs: 1000 },
        { kind: "status", status: 429, forMs: 1000 },
        { kind: "status", status: 500 }
      ]),
      100
    )
    const served = [0, 999, 1500, 2499, 2500, 2501].map((at) => arrive(store, at))
    assert.deepStrictEqual(served, [[503, 0], [503, 0], [429, 1], [429, 1], [500, 2], ["stream", undefined]])
  })

  it("repeat-last with a held last step starts a new span after each one (the outage goes on)", () => {
    const store = new Store.Store(route([{ kind: "status", status: 503, forMs: 1000 }], "repeat-last"), 100)
    const served = [0, 1000, 5000].map((at) => arrive(store, at))
    assert.deepStrictEqual(served, [[503, 0], [503, 0], [503, 0]])
  })

  it("setRoute restarts the span", () => {
    const store = new Store.Store(route([{ kind: "status", status: 503, forMs: 1000 }]), 100)
    assert.deepStrictEqual(arrive(store, 0), [503, 0])
    store.setRoute("openai-chat", route([{ kind: "status", status: 503, forMs: 1000 }])["openai-chat"])
    assert.deepStrictEqual(arrive(store, 1500), [503, 0], "a new span from 1500")
    assert.deepStrictEqual(arrive(store, 2499), [503, 0])
    assert.deepStrictEqual(arrive(store, 2500), ["stream", undefined])
  })
})
