// Test fixture (not exported): the Python that has nbformat (and nbclient) on the stack under test, and a way to run
// a script with it.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const CHECKOUT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The interpreter a jupyter-server executable runs under (its shebang). */
function shebangPython(server: string): string | undefined {
  try {
    const path = server.includes('/')
      ? server
      : execFileSync('sh', ['-c', `command -v ${server}`], { encoding: 'utf8' }).trim();
    const first = readFileSync(path, 'utf8').split('\n', 1)[0] ?? '';
    if (!first.startsWith('#!')) return undefined;
    const words = first.slice(2).trim().split(/\s+/);
    return words[0]?.endsWith('/env') ? words[1] : words[0];
  } catch {
    return undefined;
  }
}

/** True when `python` imports every module of `modules`. */
function imports(python: string, modules: string[]): boolean {
  return spawnSync(python, ['-c', `import ${modules.join(', ')}`], { stdio: 'ignore' }).status === 0;
}

/**
 * The Python of the stack under test (the one `KERNELWARDEN_JUPYTER_SERVER` names, else `jupyter-server` on PATH)
 * when it imports `modules`; otherwise the checkout's venv (`node scripts/setup-jupyter.mjs --venv`) when it does.
 * Throws when none does: a missing nbformat is a failure, not a skip.
 */
export function pythonWith(modules: string[]): string {
  const server = process.env.KERNELWARDEN_JUPYTER_SERVER || 'jupyter-server';
  const candidates = [shebangPython(server), join(CHECKOUT, '.cache/jupyter-venv/bin/python')].filter(
    (p): p is string => p !== undefined && (!p.includes('/') || existsSync(p)),
  );
  for (const python of candidates) if (imports(python, modules)) return python;
  throw new Error(
    `no Python with ${modules.join(', ')} (tried ${candidates.join(', ')}): run node scripts/setup-jupyter.mjs --venv`,
  );
}

/** Runs `script` with `python`, `input` on its stdin, and returns its stdout (throws with its stderr on failure). */
export function runPython(python: string, script: string, input = '', timeoutMs = 120_000): string {
  const r = spawnSync(python, ['-c', script], {
    input,
    encoding: 'utf8',
    timeout: timeoutMs,
    maxBuffer: 256 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`${python} failed (${r.status ?? r.signal}): ${r.stderr}`);
  return r.stdout;
}

/** `nbformat.write(nbformat.reads(text, as_version=4), f)` for each text, by the given Python's nbformat. */
export function nbformatRoundTrip(python: string, texts: string[]): string[] {
  const script = `
import io, json, sys, warnings
import nbformat
warnings.simplefilter("ignore")
out = []
for text in json.load(sys.stdin):
    nb = nbformat.reads(text, as_version=4)
    f = io.StringIO()
    nbformat.write(nb, f)
    out.append(f.getvalue())
sys.stdout.write(json.dumps(out))
`;
  return JSON.parse(runPython(python, script, JSON.stringify(texts)));
}
