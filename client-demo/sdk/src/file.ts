import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { type CacheAdapter, type CachedState, validCachedState } from './cache/cache.js';

/** Node: one JSON file, replaced atomically (write a temp file, then rename). */
export class FileCache implements CacheAdapter {
  private writes = 0;

  constructor(private readonly path: string) {}

  async load(): Promise<CachedState | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    try {
      return validCachedState(JSON.parse(text));
    } catch {
      // A torn or foreign file is as good as none: the next sync rewrites it.
      return undefined;
    }
  }

  async save(state: CachedState): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const tmp = `${this.path}.${process.pid}.${++this.writes}.tmp`;
    await writeFile(tmp, JSON.stringify(state));
    await rename(tmp, this.path);
  }

  async clear(): Promise<void> {
    await rm(this.path, { force: true });
  }
}
