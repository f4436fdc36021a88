import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as api from './index.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The Default column of the `acquire` options table, by option name. */
function defaultsTable(): Map<string, string> {
  const start = readme.indexOf('| Option (`acquire`) | Default | Meaning |');
  expect(start).toBeGreaterThan(0);
  const rows = readme.slice(start).split('\n\n')[0]?.split('\n').slice(2) ?? [];
  return new Map(
    rows.map((row) => {
      const [name, value] = row.split(' | ').map((cell) => cell.replace(/^\| /, ''));
      return [name?.replaceAll('`', '') ?? '', value ?? ''];
    }),
  );
}

describe('README', () => {
  it('opens with the type-checked example', () => {
    const source = readFileSync(new URL('./readme-examples.test-d.ts', import.meta.url), 'utf8');
    const block = (source.split('// readme-example:start\n')[1]?.split('  // readme-example:end')[0] ?? '').replace(
      /^ {2}/gm,
      '',
    );
    expect(block.length).toBeGreaterThan(100);
    expect(readme).toContain(`import { LocalGateway } from '@kernelwarden/local-gateway';\n\n${block}\`\`\``);
    expect(readme.indexOf(block)).toBeLessThan(readme.indexOf('## '));
  });

  it("states acquire()'s defaults as the code applies them", () => {
    const table = defaultsTable();
    expect(table.get('lingerMs')).toBe(`\`${api.DEFAULT_LINGER_MS}\``);
    expect(table.get('startupTimeoutMs')).toBe(`\`${api.DEFAULT_STARTUP_TIMEOUT_MS}\``);
    expect(table.get('requestTimeoutMs')).toBe(`\`${api.DEFAULT_REQUEST_TIMEOUT_MS}\``);
    expect(table.get('stopTimeoutMs')).toBe(`\`${api.DEFAULT_STOP_TIMEOUT_MS}\``);
    expect(table.get('rootDir')).toBe(`\`'${api.DEFAULT_ROOT_DIR}'\``);
    expect(table.get('command')).toBe(
      `env \`${api.JUPYTER_SERVER_ENV}\`, else \`'${api.DEFAULT_SERVER_COMMAND}'\` (looked up on PATH)`,
    );
    expect(table.get('stateDir')).toMatch(new RegExp(`^env \`${api.STATE_DIR_ENV}\`, else`));
    for (const empty of ['jupyterPath', 'serverArgs']) expect(table.get(empty)).toBe('`[]`');
    expect(table.get('serverEnv')).toBe('`{}`');
    expect(table.get('launcher')).toBe(`env \`${api.LAUNCHER_ENV}\`, else \`'${api.DEFAULT_LAUNCHER}'\``);
    expect(table.get('launcherPreload')).toBe(`env \`${api.LAUNCHER_PRELOAD_ENV}\` (comma-separated), else \`[]\``);
  });
});
