/**
 * `Chat.step` is one conversation turn with its tool loop:
 *
 * 1. reply with recovery (`Overflow.generate`: `Recovery.generate`, retried with smaller views of the conversation
 *    on a context overflow; the {@link Tool.Toolkit}'s definitions in the request);
 * 2. commit the reply: its assistant message is reported to `onCommit` (which may persist it) and kept;
 * 3. run the committed reply's tool calls, outside recovery, one at a time and in order: each call runs at most once
 *    and only from a committed reply, never from a preview or a failed attempt;
 * 4. commit each result the same way;
 * 5. reply again, with everything committed so far in the request, until a reply asks for no tools (bounded by
 *    `maxSteps` replies, else a {@link ChatError}).
 *
 * Every reply is its own recovery scope (wrap the step in `Budget.scoped` to give the whole step one allowance).
 * A retry inside a later reply replays only that reply: the messages committed earlier in the step are part of
 * every request it sends. When a reply fails, the step fails with that reply's error unchanged; the messages
 * committed before it have already been reported to `onCommit`, so a caller that keeps (or persists) them there
 * loses nothing.
 *
 * @since 0.1.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type * as Generation from "./Generation.js"
import type * as Message from "./Message.js"
import * as Overflow from "./Overflow.js"
import type * as Provider from "./Provider.js"
import * as Recovery from "./Recovery.js"
import * as Tool from "./Tool.js"
import * as Transcript from "./Transcript.js"

/**
 * What a step commits, in order: each reply, then the result of each of its tool calls. `message` is what a
 * transcript stores.
 *
 * @since 0.1.0
 * @category models
 */
export type Commit = Data.TaggedEnum<{
  /** A committed reply; `message.toolCalls` are about to run (a CLI prints its `tool_call` events here). */
  Reply: { readonly reply: Generation.Reply; readonly message: Message.AssistantMessage }
  /** The committed result of one tool call (`message.isError` for an error result). */
  ToolResult: { readonly call: Message.ToolCall; readonly message: Message.ToolResultMessage }
}>

/**
 * @since 0.1.0
 * @category constructors
 */
export const Commit = Data.taggedEnum<Commit>()

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<EC = never, RC = never, RH = never> {
  readonly model: string
  readonly system?: string | undefined
  readonly maxTokens?: number | undefined
  /**
   * Every reply of the step in the provider's background mode, where its protocol has one: a cut stream is
   * continued, not replayed (see `Generation.GenerationRequest.background`).
   */
  readonly background?: boolean | undefined
  /** The most replies one step may request (the first included). Default {@link defaultMaxSteps}. */
  readonly maxSteps?: number | undefined
  /**
   * Passed to every reply: stop surfacing output after the first complete tool call (only that call is committed
   * and run), still draining the stream to its terminal event.
   */
  readonly earlyBreakOnToolCall?: boolean | undefined
  /** Generation hooks, for every reply of the step (see `Recovery.Hooks`). */
  readonly hooks?: Recovery.Hooks<RH> | undefined
  /**
   * Where committed messages are kept (a transcript: see {@link persistTo}), called with each commit's messages, in
   * order, before `onCommit` and before the step goes on. A failure here ends the step with that failure, and the
   * commit is not reported to `onCommit`. Through {@link turn}, the first call also carries the turn's opening (the
   * results for interrupted tool calls, the user's message): one batch, so a turn that committed nothing leaves no
   * trace.
   */
  readonly persist?: ((messages: ReadonlyArray<Message.Message>) => Effect.Effect<void, EC, RC>) | undefined
  /**
   * Called with every commit, in order, once it is persisted, before the step goes on (before a reply's tool calls
   * run, before the next reply is requested). A failure here ends the step with that failure. It runs uninterruptibly: an interruption
   * that arrives while a commit is being reported (and persisted) takes effect once it is done, so a transcript
   * never holds half a commit and a commit is never lost to an interruption it preceded. See {@link persistTo}.
   */
  readonly onCommit?: ((commit: Commit) => Effect.Effect<void, EC, RC>) | undefined
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultMaxSteps = 16

/**
 * @since 0.1.0
 * @category models
 */
export interface StepResult {
  /** The messages this step committed, in order: replies and tool results. */
  readonly messages: ReadonlyArray<Message.Message>
  /** The final reply, the one that asked for no tools. */
  readonly reply: Generation.Reply
  /** How many replies the step requested. */
  readonly replies: number
}

/**
 * @since 0.1.0
 * @category type ids
 */
export const ChatErrorTypeId: unique symbol = Symbol.for("@reprise/core/ChatError")

/**
 * @since 0.1.0
 * @category type ids
 */
export type ChatErrorTypeId = typeof ChatErrorTypeId

/**
 * A step that could not finish. `MaxSteps`: every one of `maxSteps` replies asked for tools; their calls ran and
 * their results were committed, but no further reply was requested.
 *
 * @since 0.1.0
 * @category errors
 */
export class ChatError extends Schema.TaggedError<ChatError>("@reprise/core/ChatError")("ChatError", {
  reason: Schema.Literal("MaxSteps"),
  maxSteps: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  readonly [ChatErrorTypeId]: ChatErrorTypeId = ChatErrorTypeId

  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `the model still asked for tools after ${this.maxSteps} replies (the step's limit)`
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isChatError = (u: unknown): u is ChatError => Predicate.hasProperty(u, ChatErrorTypeId)

/**
 * Runs one conversation step over `transcript` (the committed history, the new user message included) and returns
 * what it committed.
 *
 * @since 0.1.0
 * @category chat
 */
export const step = <EC = never, RC = never, RH = never>(
  transcript: ReadonlyArray<Message.Message>,
  options: Options<EC, RC, RH>
): Effect.Effect<
  StepResult,
  Recovery.RecoveryError | ChatError | EC,
  Provider.Provider | Tool.Toolkit | RC | RH
> =>
  Effect.gen(function*() {
    const maxSteps = options.maxSteps ?? defaultMaxSteps
    if (!Number.isInteger(maxSteps) || maxSteps < 1) {
      return yield* Effect.dieMessage(`maxSteps must be an integer >= 1, got ${maxSteps}`)
    }
    const toolkit = yield* Tool.Toolkit
    const committed: Array<Message.Message> = []
    const commit = (entry: Commit): Effect.Effect<void, EC, RC> => {
      committed.push(entry.message)
      const persist = options.persist === undefined ? Effect.void : options.persist([entry.message])
      const report = options.onCommit === undefined ? Effect.void : options.onCommit(entry)
      // a commit is kept and reported whole: an interruption waits for both to finish. Both are the caller's: reprise's
      // own (Transcript.append, the CLI's output) wait on no network and no lock; a hook that can must bound itself.
      return Effect.uninterruptible(Effect.zipRight(persist, report))
    }
    const recovery: Recovery.Options<RH> = {
      ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
      ...(options.earlyBreakOnToolCall === undefined ? {} : { earlyBreakOnToolCall: options.earlyBreakOnToolCall })
    }

    for (let replies = 1;; replies++) {
      const reply = yield* Overflow.generate({
        model: options.model,
        // A copy: the request must not see messages committed after it was made.
        messages: [...transcript, ...committed],
        system: options.system,
        maxTokens: options.maxTokens,
        tools: toolkit.definitions.length === 0 ? undefined : toolkit.definitions,
        ...(options.background === true ? { background: true } : {})
      }, recovery)
      const message = reply.message
      yield* commit(Commit.Reply({ reply, message }))
      if (reply.toolCalls.length === 0) return { messages: committed, reply, replies }

      // Outside recovery: the reply is committed, so nothing below can cause it to be replayed.
      for (const call of reply.toolCalls) {
        const result = yield* toolkit.run(call)
        yield* commit(Commit.ToolResult({ call, message: result }))
      }
      if (replies >= maxSteps) return yield* new ChatError({ reason: "MaxSteps", maxSteps })
    }
  })

/**
 * The content of the error result {@link interruptedToolResults} gives a tool call.
 *
 * @since 0.1.0
 * @category constants
 */
export const interruptedToolCall =
  "interrupted: the step stopped before this tool call's result was committed, and it is not run again. " +
  "It may or may not have taken effect."

/**
 * Error results for the tool calls of the conversation's last reply that have no result: what a step leaves when it
 * stops (interrupted, or the process died) after committing a reply and before committing all of its tool results.
 * Providers reject a conversation with unanswered tool calls, so a caller resuming such a transcript puts these
 * results before the new user message. The calls are not run again (a tool may already have taken effect; see the
 * boundaries in the README): each result says so, with `isError: true`, in the order of the calls. Empty for a
 * conversation whose last reply is fully answered.
 *
 * @since 0.1.0
 * @category chat
 */
export const interruptedToolResults = (
  history: ReadonlyArray<Message.Message>
): Array<Message.ToolResultMessage> => {
  const answered = new Set<string>()
  let i = history.length - 1
  for (; i >= 0; i--) {
    const message = history[i]
    if (message.role !== "tool") break
    answered.add(message.toolCallId)
  }
  const last = history[i]
  if (last === undefined || last.role !== "assistant") return []
  return last.toolCalls.filter((call) => !answered.has(call.id)).map((call) => ({
    role: "tool",
    toolCallId: call.id,
    name: call.name,
    content: interruptedToolCall,
    isError: true
  }))
}

/**
 * A `persist` sink that appends every committed message to a JSONL transcript (see {@link Transcript.append}), one
 * write per commit.
 *
 * @since 0.1.0
 * @category chat
 */
export const persistTo = (
  path: string
): (
  messages: ReadonlyArray<Message.Message>
) => Effect.Effect<void, Transcript.TranscriptError, FileSystem.FileSystem> =>
(messages) => Transcript.append(path, messages)

/**
 * What a {@link turn} committed.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnResult extends StepResult {
  /**
   * What the turn opened with, committed with its first reply: the error results of tool calls an earlier turn left
   * unanswered ({@link interruptedToolResults}), then the user's message.
   */
  readonly opening: ReadonlyArray<Message.Message>
}

/**
 * One user turn over a committed `history`: the user's message, then {@link step}.
 *
 * The conversation's rules for what is committed live here, not in the caller:
 * - a history whose last reply has unanswered tool calls (a turn stopped while its tools ran) is answered first, with
 *   the error results of {@link interruptedToolResults}, before the user's message; the tools are not run again;
 * - those results and the user's message are committed together with the turn's first committed reply, in one
 *   `persist` batch: a turn that committed nothing (exhausted, failed, interrupted) leaves no trace, and its prompt
 *   can simply be sent again;
 * - then every reply and tool result is persisted as it is committed, as in {@link step}.
 *
 * @since 0.1.0
 * @category chat
 */
export const turn = <EC = never, RC = never, RH = never>(
  history: ReadonlyArray<Message.Message>,
  prompt: string | Message.UserMessage,
  options: Options<EC, RC, RH>
): Effect.Effect<
  TurnResult,
  Recovery.RecoveryError | ChatError | EC,
  Provider.Provider | Tool.Toolkit | RC | RH
> => {
  const user: Message.UserMessage = typeof prompt === "string" ? { role: "user", text: prompt } : prompt
  const opening: ReadonlyArray<Message.Message> = [...interruptedToolResults(history), user]
  let opened = false
  const persist = options.persist
  return Effect.map(
    step([...history, ...opening], {
      ...options,
      persist: (messages) => {
        const batch = opened ? messages : [...opening, ...messages]
        opened = true
        return persist === undefined ? Effect.void : persist(batch)
      }
    }),
    (result) => ({ ...result, opening })
  )
}
