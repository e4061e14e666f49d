/**
 * Redrawing a terminal: the escape sequences that erase what was written, and a count of the rows a preview took on
 * the screen, as the terminal wraps it, so that a discarded preview can be erased when all of it is still there.
 *
 * @internal
 */

/**
 * Clears the cursor's line and leaves the cursor in its first column.
 *
 * @internal
 */
export const clearLine = "\r\u001b[K"

/** Moves the cursor `rows` lines up, to the first column, and clears from there to the end of the screen. */
const clearRowsAbove = (rows: number) => `\u001b[${rows}F\u001b[J`

// Double-width ranges of East Asian text (Unicode's East_Asian_Width W and F), as terminals draw them.
const wideRanges: ReadonlyArray<readonly [number, number]> = [
  [0x1100, 0x115f],
  [0x231a, 0x231b],
  [0x2329, 0x232a],
  [0x2e80, 0x303e],
  [0x3041, 0x33ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xa000, 0xa4cf],
  [0xa960, 0xa97f],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe10, 0xfe19],
  [0xfe30, 0xfe6f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x20000, 0x3fffd]
]
const zeroWidth = /^[\p{Mn}\p{Me}\u200b\u2060]$/u
const emoji = /^\p{Emoji_Presentation}$/u
// Where terminals disagree on the width: a joined emoji sequence, a presentation selector, flags, skin tones.
const disputed = /^[\u200c\u200d\ufe0e\ufe0f\u{1f1e6}-\u{1f1ff}\u{1f3fb}-\u{1f3ff}]$/u

/** The cells a character other than ASCII takes on a terminal: 0, 1 or 2, or `undefined` when it cannot be told. */
const cells = (char: string, code: number): number | undefined => {
  // C0 and C1 controls, DEL: they move the cursor or start a sequence
  if (code < 0xa0 || disputed.test(char)) return undefined
  if (zeroWidth.test(char)) return 0
  for (const [from, to] of wideRanges) {
    if (code < from) break
    if (code <= to) return 2
  }
  return emoji.test(char) ? 2 : 1
}

/**
 * Follows the cursor over what a preview writes, from the first column of a row, as the terminal wraps it: how many
 * rows down it went and whether it can still be told. Past the screen's height the first row has scrolled out of
 * reach and counting stops.
 *
 * @internal
 */
export const makeRows = () => {
  let columns = 0
  let limit = 0
  let row = 0
  let column = 0
  let written = false
  let known = false
  return {
    start: (size: { readonly columns: number; readonly rows: number }) => {
      columns = size.columns
      limit = size.rows
      row = 0
      column = 0
      written = false
      known = columns > 0 && limit > 0
    },
    write: (text: string) => {
      for (const char of text) {
        if (!known) return
        if (char === "\n") {
          row++
          column = 0
        } else if (char === "\r") {
          column = 0
        } else if (char === "\t") {
          // to the next tab stop, never past the last column
          if (column < columns) column = Math.min(columns - 1, (Math.floor(column / 8) + 1) * 8)
        } else {
          const code = char.codePointAt(0)!
          const width = code >= 0x20 && code < 0x7f ? 1 : cells(char, code)
          if (width === undefined) {
            // ESC, a backspace, a disputed emoji: the cursor went somewhere this does not follow
            known = false
            return
          }
          if (width === 0) continue
          written = true
          // a character that does not fit goes to the next row (a full row leaves the cursor on its last column)
          if (column + width > columns) {
            row++
            column = 0
          }
          column += width
        }
        if (row >= limit) known = false
      }
    },
    /** Stops following: what was written can no longer be erased (a notice was written in its middle). */
    forget: () => {
      known = false
    },
    /**
     * What erases everything written since {@link start}, when all of it is still on a screen of `size`; `""` when
     * nothing was written; `undefined` when it cannot be erased.
     */
    erase: (size: { readonly columns: number; readonly rows: number }): string | undefined => {
      if (!known || size.columns !== columns || row >= size.rows) return undefined
      if (row === 0) return written || column > 0 ? clearLine : ""
      return clearRowsAbove(row)
    }
  }
}
