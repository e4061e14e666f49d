/**
 * Cases of the retry budget that hold within one second of the store's clock (no floor, or the first second of a
 * fresh fleet): the in-memory fleet (on the TestClock) and the Lua scripts (on a real Redis) must both give them.
 */
import { Duration } from "effect"
import type * as RetryBudget from "../../src/RetryBudget.js"

export interface Case {
  readonly name: string
  readonly settings: RetryBudget.Settings
  /** `d` deposits a first attempt, `w` asks for a replay. */
  readonly ops: string
  /** The answer to each `w`, in order. */
  readonly allowed: ReadonlyArray<boolean>
  /** The allowance reported with the last `w`. */
  readonly lastAllowance: number
}

const window = Duration.seconds(10)

export const cases: ReadonlyArray<Case> = [
  {
    name: "ratio only: replays + 1 <= 0.5 × first attempts",
    settings: { ratio: 0.5, floor: 0, window },
    ops: "ddddwwwddww",
    allowed: [true, true, false, true, false],
    lastAllowance: 3
  },
  {
    name: "the default 20 %: one replay per five first attempts",
    settings: { ratio: 0.2, floor: 0, window },
    ops: "ddddwdwwdddddw",
    allowed: [false, true, false, true],
    lastAllowance: 2
  },
  {
    name: "no first attempts: the floor of the first second alone",
    settings: { ratio: 0.2, floor: 3, window },
    ops: "wwww",
    allowed: [true, true, true, false],
    lastAllowance: 3
  },
  {
    name: "ratio and floor add up",
    settings: { ratio: 0.5, floor: 1, window },
    ops: "ddwwwdwdw",
    allowed: [true, true, false, false, true],
    lastAllowance: 3
  },
  {
    name: "a ratio whose product lands a hair below a whole number (0.57 × 100 = 56.99…)",
    settings: { ratio: 0.57, floor: 0, window },
    ops: "d".repeat(100) + "w".repeat(58),
    allowed: [...Array.from({ length: 57 }, () => true), false],
    lastAllowance: 57
  }
]
