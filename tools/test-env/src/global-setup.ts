import { mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
// The `kernelwardenJupyter` entry of vitest's ProvidedContext is declared there.
import type {} from './index.js';
import { startTestServer, type TestServer, testServerCommand } from './jupyter-server.js';
import { leakTeardown } from './leaks.js';
import { describeStack, stackLine } from './stack.js';

let server: TestServer | undefined;
let root: string | undefined;

/**
 * Starts the test run's real jupyter-server, says which stack it is, and, at the end, fails the run if a kernel it
 * lists or a kernel, server or sandbox process started under the run's root directory is still alive.
 */
export async function setup(project: TestProject): Promise<void> {
  const base = process.env.KERNELWARDEN_TEST_TMP ?? '/tmp';
  mkdirSync(base, { recursive: true });
  root = mkdtempSync(join(base, 'kw-test-'));
  process.env.KERNELWARDEN_TEST_ROOT = root;
  server = await startTestServer({ root: join(root, 'gateway') });
  // Which stack this run is on (KERNELWARDEN_JUPYTER_SERVER chooses it), in its log.
  console.log(stackLine(await describeStack({ ...server, command: testServerCommand() })));
  project.provide('kernelwardenJupyter', {
    baseUrl: server.baseUrl,
    token: server.token,
    root,
    runtimeDir: server.runtimeDir,
    logFile: server.logFile,
  });
}

export async function teardown(): Promise<void> {
  if (!server || !root) return;
  try {
    await leakTeardown(server, root);
  } catch (error) {
    // vitest reports an error thrown here but keeps its exit code: set it so the run fails.
    process.exitCode = 1;
    throw error;
  }
}
