import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { processesMentioning } from '@kernelwarden/core/os';
import type { KernelDiagnostics } from '@kernelwarden/gateway-client';

/** How much of the end of a kernel's log is read. */
const LOG_WINDOW = 65_536;
/** Lines of stderr handed back. */
const TAIL_LINES = 10;
const KERNEL_ID = /^[A-Za-z0-9-]+$/;

function readEnd(path: string): string {
  let fd: number | undefined;
  try {
    const size = statSync(path).size;
    const length = Math.min(size, LOG_WINDOW);
    const buffer = Buffer.alloc(length);
    fd = openSync(path, 'r');
    readSync(fd, buffer, 0, length, size - length);
    return buffer.toString('utf8');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Diagnostics of the kernels of a LocalGateway server: their processes are found by their connection file in the
 * server's runtime directory (every process of a kernel, a sandbox wrapper included, names it on its command
 * line), and their stdout/stderr is in a log of each kernel's own (`<kernelLogDir>/<kernel id>.log`, where the
 * server's launch settings send it).
 */
export function kernelDiagnostics(
  paths: { runtimeDir: string; kernelLogDir: string },
  token: string,
): KernelDiagnostics {
  return {
    processAlive(kernelId) {
      if (!KERNEL_ID.test(kernelId)) return undefined;
      // A zombie's command line reads empty: it counts as exited.
      const pids = processesMentioning(`${paths.runtimeDir}/kernel-${kernelId}.json`);
      return pids === undefined ? undefined : pids.length > 0;
    },
    stderrTail(kernelId) {
      if (!KERNEL_ID.test(kernelId)) return [];
      return readEnd(join(paths.kernelLogDir, `${kernelId}.log`))
        .split('\n')
        .map((line) => line.trimEnd())
        .filter((line) => line !== '')
        .map((line) => (token ? line.split(token).join('<token>') : line))
        .slice(-TAIL_LINES);
    },
  };
}
