import { type Logger, pino } from 'pino';

/** Structured JSON logs on stdout; pipe through `pino-pretty` for people. */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'redpoint' } });
}
