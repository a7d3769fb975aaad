import type * as UwsModule from 'uWebSockets.js';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * The uWebSockets.js builds Redpoint declares (package.json), in the order they are tried. Each
 * ships one native binary per platform and Node ABI, each linked against some glibc: the pinned
 * build (`uWebSockets.js`, a republished 20.30) has Node 20 (ABI 115) and loads on glibc 2.28+;
 * the maintained republished build (an optional dependency) has Node 20, 22, 24 and 25 (ABIs
 * 115, 127, 137, 141) but needs glibc 2.38 (Debian 13, Ubuntu 24.04). The official build is
 * published only from its Git repository: installed under the name `uWebSockets.js` (docs/operations.md,
 * "Production checklist"), it takes the first entry's place.
 */
export const UWS_BUILDS: readonly string[] = ['uWebSockets.js', '@btc-vision/uwebsockets.js'];

/** Which build loaded, from where: logged at startup. */
export interface LoadedUws {
  module: typeof UwsModule;
  build: string;
  version: string;
  path: string;
}

/**
 * Loads the first declared build whose native binary loads on this platform, Node ABI and glibc.
 * The packages' own entry points are bypassed: they fall back silently to a slow `ws`-based shim
 * when the binary does not load (or UWS_USE_FALLBACK is set), and Redpoint refuses to run on that
 * shim, so a runtime that no build fits fails loudly at start, naming what each attempt said.
 */
export function loadUws(builds: readonly string[] = UWS_BUILDS): LoadedUws {
  const require = createRequire(import.meta.url);
  const file = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const attempts: string[] = [];
  for (const build of builds) {
    let dir: string;
    try {
      // Found from its entry point (its package.json may not be exported); nothing is loaded yet.
      dir = packageRoot(require.resolve(build));
    } catch {
      attempts.push(`${build}: not installed`);
      continue;
    }
    // The republished builds keep the binaries under binaries/, the official one at its root.
    const path = [join(dir, 'binaries', file), join(dir, file)].find((p) => existsSync(p));
    if (!path) {
      attempts.push(`${build}: has no ${file} (no binary for this platform and Node version)`);
      continue;
    }
    try {
      return { module: require(path) as typeof UwsModule, build, version: versionIn(dir), path };
    } catch (err) {
      attempts.push(`${build}: ${path}: ${(err instanceof Error ? err.message : String(err)).split('\n')[0]}`);
    }
  }
  throw new Error(
    `no uWebSockets.js native binary loads here (node ${process.version}, ABI ${process.versions.modules}, ${process.platform}-${process.arch}, glibc ${glibcVersion()}):\n` +
      attempts.map((a) => `  ${a}`).join('\n') +
      '\nRedpoint does not run on the slow fallback. Node 20 runs the pinned build (glibc >= 2.28); Node 22 and 24 need the maintained build, which needs glibc >= 2.38 (Debian 13, Ubuntu 24.04), or the official build installed from its repository (docs/operations.md, "Production checklist"). Reinstall with npm ci.',
  );
}

/** The nearest directory above `entry` that holds a package.json: the package's root. */
function packageRoot(entry: string): string {
  let dir = dirname(entry);
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

function versionIn(dir: string): string {
  try {
    return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function glibcVersion(): string {
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return report?.header?.glibcVersionRuntime ?? 'none';
}

export const loadedUws: LoadedUws = loadUws();
export const uws = loadedUws.module;

/** The native App has `close()` (closes every socket, listen sockets included); the typings lack it. */
export function closeApp(app: UwsModule.TemplatedApp): void {
  (app as UwsModule.TemplatedApp & { close(): void }).close();
}
export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket, WebSocket } from 'uWebSockets.js';
