import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SDK = join(ROOT, 'client-demo', 'sdk');
/** Files a user of the package would write, copied into the project (see consumer/). */
const CONSUMER = join(dirname(fileURLToPath(import.meta.url)), 'consumer');

/** What the consumer project installs besides the tarball, at the versions this repository pins. */
const WITH = ['ws', '@types/ws', 'react', 'react-dom', '@types/react', '@types/react-dom'];

export interface PackedSdk {
  /** A project outside the repository with the packed tarball installed, as a user would have it. */
  project: string;
  tarball: string;
  /** The files of the tarball, as `npm pack` listed them. */
  files: string[];
  /** Runs a command in the project; rejects with its output on a non-zero exit. */
  exec(file: string, args: string[], timeoutMs?: number): Promise<string>;
  remove(): Promise<void>;
}

/**
 * `npm pack` of client-demo/sdk (its prepack script builds dist/), then `npm install <tarball>`
 * with ws and React into a new project in the OS temp dir. npm's own environment is left out,
 * so that a run under `npm test` does not steer the inner npm back to this repository.
 */
export async function packAndInstall(): Promise<PackedSdk> {
  const dir = await mkdtemp(join(tmpdir(), 'redpoint-sdk-package-'));
  const env = cleanEnv();
  const exec = async (cwd: string, file: string, args: string[], timeoutMs = 120_000): Promise<string> => {
    try {
      const { stdout } = await run(file, args, { cwd, env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 });
      return stdout;
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      throw new Error(`${file} ${args.join(' ')} failed in ${cwd}: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
    }
  };
  try {
    // The prepack script (the build) prints to the same stdout: the JSON starts at a line "[".
    const out = await exec(SDK, 'npm', ['pack', '--json', '--pack-destination', dir]);
    const start = out.startsWith('[') ? 0 : out.indexOf('\n[') + 1;
    const packed = JSON.parse(out.slice(start)) as Array<{ filename: string; files: Array<{ path: string }> }>;
    const info = packed[0];
    if (!info) throw new Error('npm pack listed no tarball');
    const tarball = join(dir, info.filename);
    const project = join(dir, 'consumer');
    await mkdir(project);
    await cp(CONSUMER, project, { recursive: true });
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'redpoint-sdk-consumer', private: true, type: 'module' }, null, 2));
    const pins = await pinned();
    await exec(project, 'npm', [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      '--loglevel=error',
      tarball,
      ...WITH.map((name) => `${name}@${pins(name)}`),
    ]);
    return {
      project,
      tarball,
      files: info.files.map((f) => f.path),
      exec: (file, args, timeoutMs) => exec(project, file, args, timeoutMs),
      remove: () => rm(dir, { recursive: true, force: true }),
    };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** A root dev dependency's exact version. */
async function pinned(): Promise<(name: string) => string> {
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  return (name) => {
    const version = pkg.devDependencies[name];
    if (!version) throw new Error(`${name} is not a dev dependency of the repository`);
    return version;
  };
}

function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_')));
}

/** The repository's own tools (tsc, esbuild), run on the consumer project like any other files. */
export const TOOLS = {
  tsc: join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
};
