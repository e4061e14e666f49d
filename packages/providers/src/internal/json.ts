/**
 * How deeply a JSON value nests, measured without recursion: a value nested 20,000 levels deep (40 KB of brackets)
 * is valid JSON that `JSON.parse` reads, but every recursive walk of it (`JSON.stringify`, a schema's formatter, a
 * transcript encoder) overflows the stack. Both measures count arrays and objects: `{}` and `[]` are 1 level deep,
 * `{"a": [1]}` 2, a string or number 0.
 *
 * @internal
 */

const quote = 34
const backslash = 92
const openArray = 91
const closeArray = 93
const openObject = 123
const closeObject = 125

/**
 * The nesting depth of a JSON text, in one pass over its characters: brackets inside strings (escaped quotes
 * included) do not count. Meant for a text `JSON.parse` accepts; for any other text it is a bound of what the
 * brackets would nest.
 *
 * @internal
 */
export const textDepth = (text: string): number => {
  let depth = 0
  let max = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === backslash) i++
      else if (c === quote) inString = false
    } else if (c === quote) {
      inString = true
    } else if (c === openArray || c === openObject) {
      if (++depth > max) max = depth
    } else if (c === closeArray || c === closeObject) {
      depth--
    }
  }
  return max
}

/**
 * The nesting depth of a value made by `JSON.parse` (no cycles), walked with an explicit stack.
 *
 * @internal
 */
export const valueDepth = (value: unknown): number => {
  let max = 0
  const values: Array<unknown> = [value]
  const depths: Array<number> = [1]
  while (values.length > 0) {
    const v = values.pop()
    const depth = depths.pop()!
    if (v === null || typeof v !== "object") continue
    if (depth > max) max = depth
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === "object") {
        values.push(child)
        depths.push(depth + 1)
      }
    }
  }
  return max
}
