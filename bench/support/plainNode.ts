/**
 * Loaded by every process the bench measures in, and by the simulator's, right after tsx and before the process's
 * own modules (`--import tsx --import ./bench/support/plainNode.ts`: `plainNodeImports` in `stats.ts`, and the
 * `bench` script), for its one effect: Node's source maps off, as in plain Node.
 *
 * tsx, which runs the bench's own TypeScript, turns source maps on for the whole process (its registration calls
 * `process.setSourceMapsEnabled(true)`), and every reprise package, like effect's, ships its maps beside `dist/`.
 * With them on, Node reads the map of every module it loads, and every stack formatted in a figure (an error built by
 * undici, Node's streams or Effect, whose stack something reads) is mapped back to the sources, the maps parsed for
 * it. Plain Node, as an application runs the compiled packages, does neither. Turned off here, before the figure's
 * module graph is loaded, neither happens (docs/performance.md, "How the bench measures").
 */
process.setSourceMapsEnabled(false)

export {}
