/** The part of autocannon 9's API the bench uses (the package ships no types). */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  export interface AutocannonRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    /** Called before each request; may rewrite it (a fresh body per request). */
    setupRequest?: (req: AutocannonRequest, context: Record<string, unknown>) => AutocannonRequest;
  }

  export interface AutocannonOptions {
    url: string;
    connections?: number;
    pipelining?: number;
    /** Seconds. */
    duration?: number;
    /** Seconds before a request counts as timed out. */
    timeout?: number;
    method?: string;
    headers?: Record<string, string>;
    requests?: AutocannonRequest[];
  }

  export interface AutocannonResult {
    errors: number;
    timeouts: number;
    non2xx: number;
    /** Seconds actually run. */
    duration: number;
    requests: { average: number; total: number; sent: number };
  }

  export interface AutocannonInstance extends EventEmitter {
    stop(): void;
  }

  type Callback = (err: Error | null, result: AutocannonResult) => void;

  function autocannon(options: AutocannonOptions, callback: Callback): AutocannonInstance;
  export default autocannon;
}
