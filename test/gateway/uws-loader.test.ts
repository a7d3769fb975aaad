import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadedUws, loadUws, UWS_BUILDS } from '../../server/gateway/uws.js';

/** server/gateway/uws.ts: the declared uWebSockets.js builds, tried in order; never the slow fallback. */
describe('the uWebSockets.js loader', () => {
  it('loaded a declared build from its native binary, and says which and from where', () => {
    expect(UWS_BUILDS).toContain(loadedUws.build);
    expect(loadedUws.path).toMatch(new RegExp(`uws_${process.platform}_${process.arch}_${process.versions.modules}\\.node$`));
    expect(existsSync(loadedUws.path)).toBe(true);
    expect(loadedUws.version).toMatch(/^\d+\.\d+/);
    // The native module, not the packages' ws-based fallback shim (which has no native listen).
    expect(typeof loadedUws.module.App).toBe('function');
    expect(typeof loadedUws.module.us_listen_socket_close).toBe('function');
  });

  it('fails loudly when no build loads, naming the runtime and what each attempt said', () => {
    expect(() => loadUws(['no-such-uws-build', 'another-missing-build'])).toThrow(
      new RegExp(
        `no uWebSockets.js native binary loads here \\(node ${process.version.replace(/\./g, '\\.')}, ABI ${process.versions.modules}.*\\n  no-such-uws-build: not installed\\n  another-missing-build: not installed\\nRedpoint does not run on the slow fallback`,
      ),
    );
  });

  it('tries the builds in order: a missing first one does not stop a working second one', () => {
    const loaded = loadUws(['no-such-uws-build', loadedUws.build]);
    expect(loaded.build).toBe(loadedUws.build);
    expect(loaded.path).toBe(loadedUws.path);
  });
});
