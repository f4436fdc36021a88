import { defineConfig } from 'vitest/config';

const sources = ['packages/*/src/**/*.test.ts', 'tools/*/src/**/*.test.ts'];
const integration = ['packages/*/src/**/*.integration.test.ts', 'tools/*/src/**/*.integration.test.ts'];

const jsonReport = process.env.KERNELWARDEN_JSON_REPORT;

export default defineConfig({
  test: {
    ...(jsonReport ? { reporters: ['default', 'json'], outputFile: { json: jsonReport } } : {}),
    projects: [
      {
        test: {
          name: 'unit',
          sequence: { groupOrder: 0 },
          include: sources,
          exclude: [...integration, '**/node_modules/**', '**/dist/**'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          sequence: { groupOrder: 1 },
          include: integration,
          exclude: ['**/node_modules/**', '**/dist/**'],
          globalSetup: ['tools/test-env/src/global-setup.ts'],
          // LocalGateway's warm pool is off unless a test turns it on: a pooled kernel would be one more kernel in every
          // listing a test checks. The pool's own tests (and the CLI's) pass a pool explicitly.
          env: { KERNELWARDEN_POOL: '0' },
          testTimeout: 120_000,
          hookTimeout: 120_000,
          maxWorkers: 2,
        },
      },
    ],
  },
});
