/**
 * Imported first by every module of the bench that runs in a measured process (and by the simulator's process), for
 * its one effect: Node's source maps off, as in plain Node.
 *
 * tsx, which runs the bench's own TypeScript, turns source maps on for the whole process (`--import tsx` calls
 * `process.setSourceMapsEnabled(true)`), and every reprise package ships its maps beside `dist/`. Every stack formatted
 * in a bench process (an error built by undici, Node's streams or Effect, whose stack something reads) was then mapped
 * back to the sources, its maps read and kept in memory, which plain Node, as an application runs the compiled
 * packages, does not do. The bench measures the compiled code as a user runs it (docs/performance.md,
 * "How the bench measures").
 */
process.setSourceMapsEnabled(false)

export {}
