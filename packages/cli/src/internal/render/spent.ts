/**
 * What a turn spent, as its renderer hears it: the ledger (see `Ledger`) of each reply of the turn that recovery
 * committed (`Committed`) or gave up on (`Exhausted`, `Failed`).
 *
 * @internal
 */
import type * as Ledger from "@reprise/core/Ledger"
import type * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Notices from "./notices.js"

/**
 * The ledgers of one turn.
 *
 * @internal
 */
export interface Spent {
  /** Keeps the ledger `notification` carries, if it carries one. */
  readonly record: (notification: RecoveryNotifications.Notification) => void
  /** The ledger of the reply recovery gave up on, if one failed with a ledger. */
  readonly failed: () => Ledger.Ledger | undefined
  /** The turn's discarded attempts together (`Notices.discardedOf`): `undefined` when none was billed. */
  readonly discarded: () => Ledger.Totals | undefined
}

/**
 * @internal
 */
export const make = (): Spent => {
  const ledgers: Array<Ledger.Ledger> = []
  let failed: Ledger.Ledger | undefined
  return {
    record: (n) => {
      switch (n._tag) {
        case "Committed":
          if (n.reply.ledger !== undefined) ledgers.push(n.reply.ledger)
          return
        case "Exhausted":
        case "Failed":
          if (n.ledger === undefined) return
          ledgers.push(n.ledger)
          failed = n.ledger
          return
      }
    },
    failed: () => failed,
    discarded: () => Notices.discardedOf(ledgers)
  }
}
