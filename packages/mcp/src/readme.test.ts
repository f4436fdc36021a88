import { readFile } from 'node:fs/promises';
import { defaultCell, readmeDefaultsFor } from '@kernelwarden/test-env';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SERVER_NAME } from './server-options.js';
import { DEFAULT_MAX_SOURCE_BYTES } from './source-check.js';
import {
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_MAX_IMAGE_BYTES,
  DEFAULT_MAX_IMAGES,
  DEFAULT_MAX_TEXT_CHARS,
  DEFAULT_MAX_WAIT_MS,
  DEFAULT_PROGRESS_INTERVAL_MS,
  DEFAULT_RUN_CODE_TIMEOUT_MS,
} from './tool-options.js';

const readme = () => readFile(new URL('../README.md', import.meta.url), 'utf8');

/** A marked block of readme-examples.test-d.ts (type-checked by tsc), dedented as the README shows it. */
async function example(name: string): Promise<string> {
  const source = await readFile(new URL('./readme-examples.test-d.ts', import.meta.url), 'utf8');
  const body = source.split(`// readme-example:${name}:start\n`)[1]?.split(`  // readme-example:${name}:end`)[0] ?? '';
  return body.replace(/^ {2}/gm, '');
}

describe('README', () => {
  it('opens with the type-checked MCP server example, in about ten lines of code', async () => {
    const block = await example('mcp');
    const text = await readme();
    expect(text).toContain(
      `import { createMcpServer, McpStdioTransport } from '@kernelwarden/mcp';\nimport { KernelSession } from '@kernelwarden/supervisor';\nimport { createWatchdog } from '@kernelwarden/watchdog';\n\n${block}\`\`\``,
    );
    expect(text.indexOf(block)).toBeLessThan(text.indexOf('## '));
    expect(block.trimEnd().split('\n').length).toBeLessThanOrEqual(10);
  });

  it('shows the type-checked AI SDK example in about ten lines of code', async () => {
    const block = await example('ai');
    expect(await readme()).toContain(`import { generateText, stepCountIs } from 'ai';\n\n${block}\`\`\``);
    expect(block.trimEnd().split('\n').length).toBeLessThanOrEqual(17);
  });

  it('states the output caps the code applies', async () => {
    const text = await readme();
    expect(text).toContain(`| text per result | ${DEFAULT_MAX_TEXT_CHARS} characters |`);
    expect(text).toContain(`| images per result | ${DEFAULT_MAX_IMAGES} |`);
    expect(text).toContain(`| size of one image | ${DEFAULT_MAX_IMAGE_BYTES} bytes |`);
  });

  it("states the options' defaults as the code has them", async () => {
    const expected = {
      maxTextChars: defaultCell(DEFAULT_MAX_TEXT_CHARS, 'DEFAULT_MAX_TEXT_CHARS'),
      maxImages: defaultCell(DEFAULT_MAX_IMAGES, 'DEFAULT_MAX_IMAGES'),
      maxImageBytes: defaultCell(DEFAULT_MAX_IMAGE_BYTES, 'DEFAULT_MAX_IMAGE_BYTES'),
      defaultTimeoutMs: defaultCell(DEFAULT_RUN_CODE_TIMEOUT_MS, 'DEFAULT_RUN_CODE_TIMEOUT_MS'),
      progressIntervalMs: defaultCell(DEFAULT_PROGRESS_INTERVAL_MS, 'DEFAULT_PROGRESS_INTERVAL_MS'),
      heartbeatMs: defaultCell(DEFAULT_HEARTBEAT_MS, 'DEFAULT_HEARTBEAT_MS'),
      maxSourceBytes: defaultCell(DEFAULT_MAX_SOURCE_BYTES, 'DEFAULT_MAX_SOURCE_BYTES'),
      maxWaitMs: defaultCell(DEFAULT_MAX_WAIT_MS, 'DEFAULT_MAX_WAIT_MS'),
      clock: '`systemClock`',
      'name (server only)': defaultCell(DEFAULT_SERVER_NAME, 'DEFAULT_SERVER_NAME'),
    };
    expect(readmeDefaultsFor(await readme(), '`resolveKernelToolOptions(options)`', expected)).toEqual(expected);
  });
});
