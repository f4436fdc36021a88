import { readFile } from 'node:fs/promises';
import { defaultCell, readmeDefaultsFor } from '@kernelwarden/test-env';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_BACKGROUND,
  DEFAULT_MAX_PEEK_CHARS,
  DEFAULT_SPARES_SIZE,
  resolveSessionOptions,
} from './session-options.js';
import { DEFAULT_IDLE_TTL_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS } from './supervisor-options.js';

const readme = () => readFile(new URL('../README.md', import.meta.url), 'utf8');

/** A marked block of readme-examples.test-d.ts (type-checked by tsc), indented by `indent` as the README shows it. */
async function example(name: string, indent: string): Promise<string> {
  const source = await readFile(new URL('./readme-examples.test-d.ts', import.meta.url), 'utf8');
  const body = source.split(`// readme-example:${name}:start\n`)[1]?.split(`  // readme-example:${name}:end`)[0] ?? '';
  return body.replace(/^ {2}/gm, indent);
}

describe('README', () => {
  it('opens with the type-checked example', async () => {
    const block = await example('opening', '');
    const text = await readme();
    expect(text).toContain(`import { KernelSession } from '@kernelwarden/supervisor';\n\n${block}\`\`\``);
    expect(text.indexOf(block)).toBeLessThan(text.indexOf('## '));
  });

  it('shows a language slot with the type-checked example', async () => {
    expect(await readme()).toContain(`  \`\`\`ts\n${await example('julia', '  ')}  \`\`\``);
  });

  it("states KernelSupervisor's defaults as the code has them", async () => {
    const expected = {
      idleTtlMs: defaultCell(DEFAULT_IDLE_TTL_MS, 'DEFAULT_IDLE_TTL_MS'),
      clock: '`systemClock`',
      shutdownTimeoutMs: defaultCell(DEFAULT_SHUTDOWN_TIMEOUT_MS, 'DEFAULT_SHUTDOWN_TIMEOUT_MS'),
    };
    expect(
      readmeDefaultsFor(await readme(), '`new KernelSupervisor<K extends SupervisedKernel>(opts?)`', expected),
    ).toEqual(expected);
  });

  it("states KernelSession's defaults as the code has them", async () => {
    const expected = {
      executor: '`plainExecutor`',
      'spares.size': defaultCell(DEFAULT_SPARES_SIZE, 'DEFAULT_SPARES_SIZE'),
      idleTtlMs: defaultCell(DEFAULT_IDLE_TTL_MS, 'DEFAULT_IDLE_TTL_MS'),
      clock: '`systemClock`',
      maxBackground: defaultCell(DEFAULT_MAX_BACKGROUND, 'DEFAULT_MAX_BACKGROUND'),
      maxPeekChars: defaultCell(DEFAULT_MAX_PEEK_CHARS, 'DEFAULT_MAX_PEEK_CHARS'),
    };
    expect(readmeDefaultsFor(await readme(), '`new KernelSession<K, H, L>(opts)`', expected)).toEqual(expected);
    // And the resolver applies exactly those.
    const resolved = resolveSessionOptions({ python: () => ({}) as never });
    expect([resolved.sparesSize, resolved.idleTtlMs, resolved.maxBackground, resolved.maxPeekChars]).toEqual([
      DEFAULT_SPARES_SIZE,
      DEFAULT_IDLE_TTL_MS,
      DEFAULT_MAX_BACKGROUND,
      DEFAULT_MAX_PEEK_CHARS,
    ]);
  });
});
