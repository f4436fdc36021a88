import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const scripts = join(dirname(fileURLToPath(import.meta.url)), '../../../scripts');
const roots: string[] = [];

/** A directory laid out like the repository, with `files` (path → text). */
function fixture(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'kw-repo-check-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

function run(script: string, ...args: string[]): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, [join(scripts, script), ...args], { encoding: 'utf8' });
  return { status: result.status, output: result.stdout + result.stderr };
}

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe('scripts/check-words.mjs', () => {
  it('passes on files that use each word for its one meaning', () => {
    const root = fixture({
      'packages/local-gateway/src/ticket.ts': 'export interface LocalGatewayTicket { release(): Promise<void> }\n',
      'packages/supervisor/src/supervisor.ts': '/** The spare kernels of a slot; its lease is current. */\n',
      'packages/gateway-client/README.md': 'The socket reopens under the same session id.\n',
    });
    const { status, output } = run('check-words.mjs', '--root', root);
    expect(output).toContain('check-words: ok');
    expect(status).toBe(0);
  });

  it.each([
    [
      'packages/local-gateway/src/acquire.ts',
      'const lease = addHolder(dir);\n',
      'in local-gateway the word is "ticket"',
    ],
    ['packages/cli/README.md', 'Pass a `LocalGateway` lease as `gateway`.\n', 'hands out tickets'],
    ['bench/run.mjs', 'await GatewayKernel.start({ gateway: lease });\n', 'name it ticket'],
    ['packages/supervisor/README.md', 'Keeps a warm pool of kernels.\n', 'the supervisor keeps spare kernels'],
    [
      'packages/mcp/src/x.ts',
      'supervisor.configurePool(slot, key, factory, opts);\n',
      "the supervisor's API says spares",
    ],
    ['packages/isolation/README.md', 'kernels run in sessions of their own\n', 'process group'],
    ['packages/gateway-client/src/channel.ts', '// reopened under the same session\n', '"session id"'],
  ])('fails on a retired word in %s', (path, text, rule) => {
    const root = fixture({ [path]: text });
    const { status, output } = run('check-words.mjs', '--root', root);
    expect(output).toContain(`${path}:1:`);
    expect(output).toContain(rule);
    expect(status).toBe(1);
  });

  it('scans the rest of docs/ARCHITECTURE.md', () => {
    const root = fixture({
      'docs/ARCHITECTURE.md': '# A\n\nthe LocalGateway lease of a process\n\n## Glossary\n\n| ticket | not a lease |\n',
    });
    const { status, output } = run('check-words.mjs', '--root', root);
    expect(output).toContain('docs/ARCHITECTURE.md:3:');
    expect(status).toBe(1);
  });

  it('skips changelogs, changesets and the glossary section, which name the retired words', () => {
    const root = fixture({
      'packages/supervisor/CHANGELOG.md': 'The warm pool is spares now.\n',
      '.changeset/x.md': 'LocalGatewayLease is LocalGatewayTicket.\n',
      'docs/ARCHITECTURE.md': '# A\n\n## Glossary\n\n| ticket | … | not a lease; LocalGateway leases … |\n',
    });
    expect(run('check-words.mjs', '--root', root).status).toBe(0);
  });
});

describe('scripts/check-cycles.mjs', () => {
  it('passes on a package whose imports form no cycle', () => {
    const root = fixture({
      'packages/a/src/index.ts': "export { one } from './one.js';\nexport type { Shape } from './shape.js';\n",
      'packages/a/src/one.ts': "import type { Shape } from './shape.js';\nexport const one: Shape = { n: 1 };\n",
      'packages/a/src/shape.ts': 'export interface Shape { n: number }\n',
    });
    const { status, output } = run('check-cycles.mjs', '--root', root);
    expect(output).toContain('no import cycle');
    expect(status).toBe(0);
  });

  it('fails on a cycle made of type-only imports, naming the package and the files', () => {
    const root = fixture({
      'packages/a/src/kernel.ts':
        "import type { Script } from './script.js';\nexport interface Kernel { run: Script }\n",
      'packages/a/src/script.ts':
        "import type { Kernel } from './kernel.js';\nexport type Script = (k: Kernel) => void;\n",
      'packages/b/src/ok.ts': 'export const ok = 1;\n',
    });
    const { status, output } = run('check-cycles.mjs', '--root', root);
    expect(output).toContain('a: kernel.ts → script.ts → kernel.ts');
    expect(output).not.toContain('b:');
    expect(status).toBe(1);
  });

  it('fails on a three-file cycle through a re-export, and --report-only prints it without failing', () => {
    const root = fixture({
      'packages/c/src/args.ts': "export { limits } from './limits.js';\nexport const args = 1;\n",
      'packages/c/src/limits.ts': "import { gateway } from './gateway.js';\nexport const limits = gateway;\n",
      'packages/c/src/gateway.ts': "import { args } from './args.js';\nexport const gateway = args;\n",
    });
    const failing = run('check-cycles.mjs', '--root', root);
    expect(failing.output).toContain('c: args.ts → limits.ts → gateway.ts → args.ts');
    expect(failing.status).toBe(1);
    const reported = run('check-cycles.mjs', '--root', root, '--report-only');
    expect(reported.output).toContain('c: args.ts → limits.ts → gateway.ts → args.ts');
    expect(reported.output).toContain('reported only');
    expect(reported.status).toBe(0);
  });
});
