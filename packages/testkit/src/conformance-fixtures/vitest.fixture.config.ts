import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The config of the child vitest run in vitest.test.ts; the repository's own projects never include fixtures.
export default defineConfig({
  cacheDir: join(tmpdir(), 'kernelwarden-testkit-fixture-cache'),
  test: {
    root: fileURLToPath(new URL('.', import.meta.url)),
    include: ['*.fixture.ts'],
  },
});
