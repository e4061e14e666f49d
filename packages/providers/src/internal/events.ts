/**
 * Constructors of the per-token `GenerationEvent`s, for the protocols' hot paths: each returns a value equal in every
 * respect to what `Generation.TextDelta`, `Generation.ReasoningDelta` and `Generation.ToolCallDelta` return (the same
 * prototype, the structural one of `Data`, and the same own members in the same order: the payload's, then `_tag`),
 * built by setting its members on a fresh object of that prototype. The `Data` constructors copy an argument object
 * onto it (`Object.assign`), one more object and a generic copy per token. test/HotEvents.test.ts checks each against
 * its `Data` constructor.
 *
 * @internal
 */
import * as Generation from "@reprise/core/Generation"

// The prototype every `Data.taggedEnum` value has, taken from one.
const structural: object = Object.getPrototypeOf(Generation.TextDelta({ text: "" }))

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * `Generation.TextDelta({ text })`.
 *
 * @internal
 */
export const textDelta = (text: string): Generation.GenerationEvent => {
  const event: Mutable<Extract<Generation.GenerationEvent, { _tag: "TextDelta" }>> = Object.create(structural)
  event.text = text
  event._tag = "TextDelta"
  return event
}

/**
 * `Generation.ReasoningDelta({ text })`.
 *
 * @internal
 */
export const reasoningDelta = (text: string): Generation.GenerationEvent => {
  const event: Mutable<Extract<Generation.GenerationEvent, { _tag: "ReasoningDelta" }>> = Object.create(structural)
  event.text = text
  event._tag = "ReasoningDelta"
  return event
}

/**
 * `Generation.ToolCallDelta({ index, id, name, argumentsDelta })`.
 *
 * @internal
 */
export const toolCallDelta = (
  index: number,
  id: string | undefined,
  name: string | undefined,
  argumentsDelta: string
): Generation.GenerationEvent => {
  const event: Mutable<Extract<Generation.GenerationEvent, { _tag: "ToolCallDelta" }>> = Object.create(structural)
  event.index = index
  event.id = id
  event.name = name
  event.argumentsDelta = argumentsDelta
  event._tag = "ToolCallDelta"
  return event
}
