/**
 * V8 flags the server runs with. `--no-memory-reducer`: V8's memory reducer takes a steady, low
 * allocation rate (what a well-behaved server shows) for idleness and runs a compacting full GC
 * to return memory, which stops the process for 130–450 ms with the memory engine's 100k users
 * resident (bench soak: one about every 100 s); without it, the full GCs are the ordinary ones
 * (12–22 ms there). The memory is still reused; it is only not handed back to the OS.
 *
 * They must be on the node command line (the Dockerfile and `npm start` put them there; worker
 * threads share them): set later with v8.setFlagsFromString, the reducer still runs (measured).
 * The startup log warns when they are missing.
 */
export const SERVER_V8_FLAGS = ['--no-memory-reducer'] as const;

export function missingFromCommandLine(execArgv: readonly string[] = process.execArgv): string[] {
  return SERVER_V8_FLAGS.filter((flag) => !execArgv.includes(flag));
}
