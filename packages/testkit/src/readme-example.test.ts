import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
// The README shows the block between the markers below, with this import from the published name.
import { FakeGateway } from './index.js';

// readme-example:start
// Your code under test: creates a kernel, retrying while the gateway answers 5xx.
async function createKernel(baseUrl: string, token: string, attempts = 3): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(`${baseUrl}/api/kernels`, {
      method: 'POST',
      headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'python3' }),
    });
    if (res.ok) return ((await res.json()) as { id: string }).id;
    if (res.status < 500 || attempt >= attempts) throw new Error(`create failed: HTTP ${res.status}`);
  }
}

it('retries a busy gateway, then gets a kernel', async () => {
  await using gw = await FakeGateway.start();
  gw.failNext('create', 503, 503);
  const id = await createKernel(gw.baseUrl, gw.token ?? '');
  expect(gw.kernels.has(id)).toBe(true);
  expect(gw.requests.map((r) => r.answer)).toEqual([503, 503, 201]);
});
// readme-example:end

it('the example helper gives up after three 503s', async () => {
  await using gw = await FakeGateway.start();
  gw.failNext('create', 503, 503, 503);
  await expect(createKernel(gw.baseUrl, gw.token ?? '')).rejects.toThrow('HTTP 503');
});

describe('README', () => {
  it('shows exactly the example this file runs, in under 30 lines', async () => {
    const source = await readFile(new URL(import.meta.url), 'utf8');
    const example = source.split('// readme-example:start\n')[1]?.split('// readme-example:end')[0] ?? '';
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    const block = `import { FakeGateway } from '@kernelwarden/testkit';\nimport { expect, it } from 'vitest';\n\n${example}`;
    expect(readme).toContain(`\`\`\`ts\n${block}\`\`\``);
    expect(block.trimEnd().split('\n').length).toBeLessThan(30);
  });
});
