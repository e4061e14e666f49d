import { Effect, Ref } from "effect"
import * as RecoveryNotifications from "../../src/RecoveryNotifications.js"

/** Records every notification in order. */
export const recorder = Effect.map(Ref.make<Array<RecoveryNotifications.Notification>>([]), (ref) => ({
  layer: RecoveryNotifications.layerCallback((n) => Ref.update(ref, (all) => [...all, n])),
  all: Ref.get(ref),
  tags: Effect.map(Ref.get(ref), (all) => all.map((n) => n._tag))
}))
