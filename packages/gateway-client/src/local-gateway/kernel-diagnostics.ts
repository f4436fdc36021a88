import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import type { KernelDiagnostics } from '../gateway-client.js';

/** How much of the end of the server log is read for a kernel's stderr. */
const LOG_WINDOW = 65_536;
/** Lines of stderr handed back. */
const TAIL_LINES = 10;
/** A jupyter-server log record (`[I 2026-12-01 11:42:23.574 ServerApp] …`), as opposed to a kernel's own output. */
const SERVER_RECORD = /^\[[A-Z] \d{4}-\d\d-\d\d /;
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
 * line), and their stderr is in the server's log (kernels inherit the server's stderr): the lines after the
 * server's `Kernel started: <id>` (and, for a server that logs it late, just before) that are not its own log
 * records. With kernels starting side by side, another kernel's lines may be among them.
 */
export function kernelDiagnostics(paths: { runtimeDir: string; logFile: string }, token: string): KernelDiagnostics {
  return {
    processAlive(kernelId) {
      if (!KERNEL_ID.test(kernelId)) return undefined;
      const marker = `${paths.runtimeDir}/kernel-${kernelId}.json`;
      let entries: string[];
      try {
        entries = readdirSync('/proc');
      } catch {
        return undefined;
      }
      for (const entry of entries) {
        if (!/^\d+$/.test(entry)) continue;
        try {
          // A zombie's command line reads empty: it counts as exited.
          if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) return true;
        } catch {
          // exited meanwhile
        }
      }
      return false;
    },
    stderrTail(kernelId) {
      if (!KERNEL_ID.test(kernelId)) return [];
      const text = readEnd(paths.logFile);
      const start = text.lastIndexOf(`Kernel started: ${kernelId}`);
      if (start < 0) return [];
      const lineStart = text.lastIndexOf('\n', start) + 1;
      const lineEnd = text.indexOf('\n', start);
      const before = text.slice(0, lineStart).split('\n');
      const after = lineEnd < 0 ? [] : text.slice(lineEnd + 1).split('\n');
      // jupyter-server 1.x logs `Kernel started` as soon as it has spawned the process, before the kernel writes
      // anything; 2.x only once the kernel manager has started, by when a kernel that fails at once has already
      // written its error: the kernel's own lines just before that record count too.
      let first = before.length;
      while (first > 0 && !SERVER_RECORD.test(before[first - 1] ?? '')) first--;
      return [...before.slice(first), ...after]
        .map((line) => line.trimEnd())
        .filter((line) => line !== '' && !SERVER_RECORD.test(line))
        .map((line) => (token ? line.split(token).join('<token>') : line))
        .slice(-TAIL_LINES);
    },
  };
}
