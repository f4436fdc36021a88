import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ENTRY = new URL('../dist/index.js', import.meta.url).href;
const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url));

/**
 * Runs `steps` in a fresh node on the built package and reports, after each, which of zod and ws it has loaded:
 * through `import` (a module load hook sees every ES module and every CommonJS file an import reaches) and through
 * `require` (the CommonJS cache).
 */
function loadedAfter(steps: Record<string, string>): Record<string, string[]> {
  const hook = `data:text/javascript,${encodeURIComponent(`
    export async function load(url, context, next) {
      const m = /\\/node_modules\\/(zod|ws)\\//.exec(url);
      if (m) globalThis.port?.postMessage(m[1]);
      return next(url, context);
    }
    export function initialize(data) { globalThis.port = data.port; }
  `)}`;
  const program = `
    import { createRequire, register } from 'node:module';
    import { MessageChannel } from 'node:worker_threads';
    const seen = new Set();
    const { port1, port2 } = new MessageChannel();
    port1.on('message', (name) => seen.add(name));
    port1.unref();
    register(${JSON.stringify(hook)}, { data: { port: port2 }, transferList: [port2] });
    const require = createRequire(${JSON.stringify(`${PACKAGE_DIR}/`)});
    const loaded = async () => {
      await new Promise((r) => setTimeout(r, 50));
      for (const file of Object.keys(require.cache)) {
        const m = /\\/node_modules\\/(zod|ws)\\//.exec(file);
        if (m) seen.add(m[1]);
      }
      return [...seen].sort();
    };
    const report = {};
    const m = await import(${JSON.stringify(ENTRY)});
    report.import = await loaded();
    ${Object.entries(steps)
      .map(([name, code]) => `{ ${code} } report[${JSON.stringify(name)}] = await loaded();`)
      .join('\n')}
    process.stdout.write(JSON.stringify(report));
    process.exit(0);
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', program], {
    cwd: PACKAGE_DIR,
    encoding: 'utf8',
  });
  return JSON.parse(out) as Record<string, string[]>;
}

describe('the package entry', () => {
  it('loads neither zod nor ws on import; the first client loads zod, the first socket ws', () => {
    const report = loadedAfter({
      client: `globalThis.client = new m.GatewayClient({ baseUrl: 'http://127.0.0.1:9' });`,
      socket: `const s = new globalThis.client.WebSocket('ws://127.0.0.1:9'); s.on('error', () => {});
               if (typeof s.pong !== 'function' || !(s instanceof m.DefaultWebSocket)) throw new Error('not a ws socket');`,
    });
    expect(report).toEqual({ import: [], client: ['zod'], socket: ['ws', 'zod'] });
  });

  it('loads the ES module build of zod, the instance a static import elsewhere shares, not a CommonJS copy', () => {
    const report = loadedAfter({
      client: `new m.GatewayClient({ baseUrl: 'http://127.0.0.1:9' });
               if (Object.keys(require.cache).some((f) => /zod\\/.*\\.cjs$/.test(f))) throw new Error('a CommonJS zod');`,
    });
    expect(report.client).toEqual(['zod']);
  });
});
