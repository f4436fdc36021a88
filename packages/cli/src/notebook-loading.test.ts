import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// The notebook package is loaded by `run` for a .ipynb only: a script's start does not pay for it.

const INDEX = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/index.js');
/** The module URLs of the notebook package's entry: in the workspace, or installed. */
const ENTRY = String.raw`(@kernelwarden|packages)\/notebook(\/dist\/index\.js)?$`;
/**
 * Reports on stderr each time the process loads @kernelwarden/notebook: through require() (lazyModule requires its
 * entry file) or an ES module import (resolved by a hook).
 */
const RESOLVE_HOOK = `data:text/javascript,${encodeURIComponent(
  `export async function resolve(specifier, context, next) { const r = await next(specifier, context); if (/${ENTRY}/.test(r.url)) process.stderr.write('LOADED @kernelwarden/notebook (import)\\n'); return r; }`,
)}`;
const WATCH = `data:text/javascript,${encodeURIComponent(
  "import Module, { register } from 'node:module';" +
    `register(${JSON.stringify(RESOLVE_HOOK)});` +
    'const load = Module._load;' +
    `Module._load = function (request, ...rest) { if (/${ENTRY}/.test(String(request))) process.stderr.write('LOADED @kernelwarden/notebook (require)\\n'); return load.call(this, request, ...rest); };`,
)}`;

const dir = mkdtempSync(join(tmpdir(), 'kw-nb-loading-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI's `main` (the built ES module entry) with `args`; none of these reaches a kernel. */
function main(args: string[]) {
  const ran = spawnSync(
    process.execPath,
    [
      '--import',
      WATCH,
      '--input-type=module',
      '-e',
      `import { main } from ${JSON.stringify(INDEX)}; process.exitCode = await main(${JSON.stringify(args)});`,
    ],
    { cwd: dir, encoding: 'utf8', env: { ...process.env, KERNELWARDEN_STATE_DIR: dir }, timeout: 60_000 },
  );
  return { code: ran.status, stderr: ran.stderr };
}

describe('run loads the notebook package for notebooks only', () => {
  it('a script that fails at the gateway never loads it; a notebook that cannot be read does', () => {
    const script = main(['run', '-c', 'print(1)', '--gateway', 'http://127.0.0.1:9']);
    expect(script.code, script.stderr).toBe(3);
    expect(script.stderr).not.toContain('LOADED @kernelwarden/notebook');
    const notebook = main(['run', 'missing.ipynb']);
    expect(notebook.code, notebook.stderr).toBe(2);
    expect(notebook.stderr).toContain('LOADED @kernelwarden/notebook');
    expect(notebook.stderr).toContain('missing.ipynb');
  });
});
