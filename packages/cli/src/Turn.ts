/**
 * One turn of the CLI: the user's prompt, the conversation step with its tool loop under recovery, rendering and
 * the session file. Shared by `chat` (one turn) and `repl` (one turn per line).
 *
 * The user's message is committed together with the turn's first committed reply: a prompt whose turn committed
 * nothing (exhausted, interrupted) leaves no trace in the transcript or the session file. A history whose last reply
 * has unanswered tool calls (an earlier turn stopped while its tools ran) is answered first, with the error results of
 * `Chat.interruptedToolResults`; they are committed the same way, before the user's message.
 *
 * @since 0.1.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Budget from "@reprise/core/Budget"
import * as Chat from "@reprise/core/Chat"
import * as Message from "@reprise/core/Message"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import type * as Tool from "@reprise/core/Tool"
import * as Transcript from "@reprise/core/Transcript"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import { identity } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Output from "./Output.js"
import * as Render from "./Render.js"
import * as Sanitize from "./Sanitize.js"
import type * as Settings from "./Settings.js"

/**
 * The provider layer for the settings' protocol over the undici client, with the budget and wait settings.
 *
 * @since 0.1.0
 * @category layers
 */
export const providerLayer = (settings: Settings.Settings) =>
  Layer.mergeAll(
    HttpProvider.layerUndici(settings.protocol, {
      apiKey: settings.apiKey,
      baseUrl: settings.baseUrl,
      firstByteTimeout: settings.firstByteTimeout,
      idleTimeout: settings.idleTimeout,
      maxReplyBytes: settings.maxReplyBytes
    }),
    Budget.layer({ maxAttempts: settings.maxAttempts, deadline: settings.deadline }),
    Policy.layer({ backoffBase: settings.backoffBase, backoffMax: settings.backoffMax })
  )

/**
 * Runs one turn over the committed `history` and returns the messages it committed (the user's prompt first, when
 * anything was committed, after the error results of any tool calls an earlier turn left unanswered).
 *
 * A commit (its append to the session and its rendering) is never cut short by an interruption (`Chat.step`
 * runs it uninterruptibly). Run the turn in an uninterruptible region and pass that region's `restore` as
 * `interruptible`: the step is interruptible, the rest is not, and an interruption that comes after the final reply
 * was committed (while the step was returning) is not a failure: the turn committed, and `result` says so.
 *
 * @since 0.1.0
 * @category turns
 */
export const run = (
  settings: Settings.Settings,
  history: ReadonlyArray<Message.Message>,
  prompt: string,
  interruptible: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = identity
) =>
  Effect.gen(function*() {
    const output = yield* Output.Output
    const sanitizer = Sanitize.make(settings.apiKey)
    const render = yield* Render.make(Render.mode(settings.json, output.isTTY), sanitizer)
    const user = Message.user(prompt)
    // the tools of an interrupted turn are not run again: their calls get error results, sent before the prompt
    const opening: Array<Message.Message> = [...Chat.interruptedToolResults(history), user]
    const committed: Array<Message.Message> = []
    let replies = 0
    let final: Chat.StepResult | undefined
    const persist = (messages: ReadonlyArray<Message.Message>) =>
      Option.match(settings.session, {
        onNone: () => Effect.void,
        // the session file is written by reprise: no part of the key in it, whatever the model sent back
        onSome: (path) => Transcript.append(path, messages.map(sanitizer.message))
      })
    const onCommit = (commit: Chat.Commit) =>
      Effect.gen(function*() {
        const first = committed.length === 0
        if (first) committed.push(...opening)
        committed.push(commit.message)
        yield* persist(first ? [...opening, commit.message] : [commit.message])
        if (commit._tag === "Reply") {
          replies++
          const done = commit.reply.toolCalls.length === 0
          yield* render.commit(commit.reply, done)
          for (const call of commit.reply.toolCalls) yield* render.toolCall(call)
          if (done) final = { messages: committed.slice(opening.length), reply: commit.reply, replies }
        } else {
          yield* render.toolResult(commit.message)
        }
      })
    const step = Chat.step([...history, ...opening], {
      model: settings.model,
      system: Option.getOrUndefined(settings.system),
      maxTokens: Option.getOrUndefined(settings.maxTokens),
      onCommit
    }).pipe(Effect.provideService(RecoveryNotifications.RecoveryNotifications, render.notifications))
    // the countdown of a backoff is cleared however the step ends (committed, failed or interrupted)
    const exit = yield* Effect.exit(
      interruptible((settings.recovery ? step : Recovery.disabled(step)).pipe(Effect.ensuring(render.stop)))
    )
    if (Exit.isSuccess(exit)) return { committed, result: Either.right(exit.value), render }
    // interrupted once the final reply was committed: the turn is done, and nothing of it was lost
    if (final !== undefined && Cause.isInterruptedOnly(exit.cause)) {
      return { committed, result: Either.right(final), render }
    }
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure) && !Cause.isInterrupted(exit.cause)) {
      return { committed, result: Either.left(failure.value), render }
    }
    return yield* Effect.failCause(Cause.stripFailures(exit.cause))
  })

/**
 * @since 0.1.0
 * @category models
 */
export type Requirements = Output.Output | Tool.Toolkit | FileSystem.FileSystem
