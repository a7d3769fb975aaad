/**
 * V8 flags the server runs with, measured in the bench soak (100k users resident in the memory
 * engine, 1,000 messages/s). `--no-memory-reducer`: V8's memory reducer takes a steady, low
 * allocation rate (what a well-behaved server shows) for idleness and runs a compacting full GC
 * to return memory: a 94–161 ms stop about every 100 s there. Without it the full GCs pause
 * 10–25 ms, but for the first one after start-up: the heap first grows to 4× what survived the
 * start-up GC (448 MB, 190 MB live), and that GC marked almost all inside its pause (157 ms,
 * once). `--heap-growing-percent=50` removed that one too, but made the Redis engine's small heap
 * collect so often at saturation that its GC cost per request went from 11 to 16 µs (9.9% to
 * 13.7% of busy time, bench `gc`): not taken.
 * The memory is still reused; it is only not handed back to the OS while the server idles.
 *
 * They must be on the node command line (the Dockerfile and `npm start` put them there; worker
 * threads share them): set later with v8.setFlagsFromString, the reducer still runs (measured).
 * The startup log warns when they are missing.
 */
export const SERVER_V8_FLAGS = ['--no-memory-reducer'] as const;

export function missingFromCommandLine(execArgv: readonly string[] = process.execArgv): string[] {
  return SERVER_V8_FLAGS.filter((flag) => !execArgv.includes(flag));
}
