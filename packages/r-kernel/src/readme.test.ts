import { readFile } from 'node:fs/promises';
import { defaultCell, readmeDefaultsFor } from '@kernelwarden/test-env';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_IR_KERNEL_NAME,
  DEFAULT_IR_SHUTDOWN_TIMEOUT_MS,
  DEFAULT_PROCESS_EXIT_TIMEOUT_MS,
  resolveIRKernelOptions,
} from './ir-kernel.js';

describe('README', () => {
  it("states startIRKernel's defaults as the code has them", async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    const expected = {
      kernelName: defaultCell(DEFAULT_IR_KERNEL_NAME, 'DEFAULT_IR_KERNEL_NAME'),
      shutdownTimeoutMs: defaultCell(DEFAULT_IR_SHUTDOWN_TIMEOUT_MS, 'DEFAULT_IR_SHUTDOWN_TIMEOUT_MS'),
      processExitTimeoutMs: defaultCell(DEFAULT_PROCESS_EXIT_TIMEOUT_MS, 'DEFAULT_PROCESS_EXIT_TIMEOUT_MS'),
    };
    expect(readmeDefaultsFor(readme, '`startIRKernel(opts)`', expected)).toEqual(expected);
  });

  it('applies those defaults, and hands the rest to GatewayKernel.start with the kernelspec', () => {
    const gateway = { baseUrl: 'http://127.0.0.1:1' };
    expect(resolveIRKernelOptions({ gateway, cwd: '/w' })).toEqual({
      kernelName: DEFAULT_IR_KERNEL_NAME,
      shutdownTimeoutMs: DEFAULT_IR_SHUTDOWN_TIMEOUT_MS,
      processExitTimeoutMs: DEFAULT_PROCESS_EXIT_TIMEOUT_MS,
      start: { gateway, cwd: '/w', kernelName: DEFAULT_IR_KERNEL_NAME },
    });
    expect(() => resolveIRKernelOptions({ gateway, shutdownTimeoutMs: -1 })).toThrow(
      expect.objectContaining({ path: 'options.shutdownTimeoutMs' }),
    );
  });
});
