import { readdirSync, readFileSync } from 'node:fs';
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    kernelwardenJupyter: { baseUrl: string; token: string; root: string; runtimeDir: string; logFile: string };
  }
}

export { type CuttableProxy, cuttableProxy } from './cuttable-proxy.js';
export { PROCESS_STORM_CELL } from './hostile-cells.js';
export type { TestServer } from './jupyter-server.js';
export { freePort, startTestServer, testServerCommand } from './jupyter-server.js';
export type { Leak } from './leaks.js';
export { findLeaks, leakTeardown, processesMentioning, waitForNoLeaks } from './leaks.js';
export { type CellResult, type MixedCell, mixedCells } from './mixed-cells.js';
export { createOtherUser, type OtherUser } from './other-user.js';
export { defaultCell, readmeDefaults, readmeDefaultsFor } from './readme-defaults.js';
export type { TestStack } from './stack.js';
export { describeStack, stackLine } from './stack.js';

/** The test run's real jupyter-server (started by the integration project's global setup). */
export function testGateway(): { baseUrl: string; token: string; root: string; runtimeDir: string; logFile: string } {
  const jupyter = inject('kernelwardenJupyter');
  if (!jupyter)
    throw new Error('No test jupyter-server: run integration tests through the "integration" vitest project');
  return jupyter;
}

/** Pids of the processes serving kernel `kernelId` (found by its connection file `kernel-<id>.json`). */
export function kernelPids(kernelId: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes(`kernel-${kernelId}.json`)) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}
