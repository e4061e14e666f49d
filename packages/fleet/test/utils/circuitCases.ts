/**
 * Transitions of a circuit (threshold 3) that hold on any clock: the in-memory circuit (on the TestClock) and the
 * fleet's scripts (on a real Redis, with a short cool-down) must both give them. `wait` lets the cool-down, or the
 * probe's lease, run out.
 */
import type * as Circuit from "@reprise/core/Circuit"

export type Step =
  | { readonly op: "admit"; readonly expect: Circuit.Admission["_tag"] }
  | { readonly op: "failed"; readonly expect: Circuit.State }
  | { readonly op: "state"; readonly expect: Circuit.State }
  | { readonly op: "succeeded" }
  | { readonly op: "wait" }

export interface Case {
  readonly name: string
  readonly steps: ReadonlyArray<Step>
}

export const failureThreshold = 3

const open: ReadonlyArray<Step> = [
  { op: "failed", expect: "closed" },
  { op: "failed", expect: "closed" },
  { op: "failed", expect: "open" }
]

export const cases: ReadonlyArray<Case> = [
  {
    name: "closed until the threshold; then open, refusing sends for the rest of its cool-down",
    steps: [
      { op: "admit", expect: "Closed" },
      { op: "failed", expect: "closed" },
      { op: "admit", expect: "Closed" },
      { op: "failed", expect: "closed" },
      { op: "state", expect: "closed" },
      { op: "failed", expect: "open" },
      { op: "admit", expect: "Open" },
      { op: "state", expect: "open" },
      { op: "admit", expect: "Open" }
    ]
  },
  {
    name: "a success resets the count of consecutive failures",
    steps: [
      { op: "failed", expect: "closed" },
      { op: "failed", expect: "closed" },
      { op: "succeeded" },
      { op: "failed", expect: "closed" },
      { op: "failed", expect: "closed" },
      { op: "failed", expect: "open" }
    ]
  },
  {
    name: "after the cool-down one probe; every other send waits for it; its success closes the circuit",
    steps: [
      ...open,
      { op: "wait" },
      { op: "state", expect: "half-open" },
      { op: "admit", expect: "Probe" },
      { op: "admit", expect: "Open" },
      { op: "state", expect: "open" },
      { op: "succeeded" },
      { op: "state", expect: "closed" },
      { op: "admit", expect: "Closed" },
      // counted from zero again
      { op: "failed", expect: "closed" },
      { op: "failed", expect: "closed" }
    ]
  },
  {
    name: "a failed probe opens the circuit for a fresh cool-down",
    steps: [
      ...open,
      { op: "wait" },
      { op: "admit", expect: "Probe" },
      { op: "failed", expect: "open" },
      { op: "admit", expect: "Open" },
      { op: "wait" },
      { op: "admit", expect: "Probe" },
      { op: "admit", expect: "Open" }
    ]
  },
  {
    name: "a probe that never reports holds the circuit for one cool-down; then another probe goes",
    steps: [
      ...open,
      { op: "wait" },
      { op: "admit", expect: "Probe" },
      { op: "wait" },
      { op: "state", expect: "half-open" },
      { op: "admit", expect: "Probe" },
      { op: "admit", expect: "Open" }
    ]
  }
]
