import type { KernelDiagnostics, KernelLimitReading } from './gateway-client-options.js';

export type { KernelLimitReading };

/** Formats a byte count the way a user wrote it: `512 MiB`, `2 GiB`. */
export function formatBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1 && Number.isInteger(value / 1024)) {
    value /= 1024;
    unit++;
  }
  if (unit === 0 && bytes >= 1024) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${value} ${units[unit]}`;
}

/**
 * Tells a kernel killed for memory from one that died otherwise: the out-of-memory kill count of the kernel's
 * cgroups is read when the kernel has started and when each cell is sent, and again when it dies; a higher count is
 * an out-of-memory death. A kill of a subprocess the kernel survived is absorbed by the next reading.
 */
export class LimitDeaths {
  readonly #read: ((kernelId: string) => KernelLimitReading | undefined) | undefined;
  readonly #kernelId: string;
  #baseline: number | undefined;

  constructor(diagnostics: KernelDiagnostics | undefined, kernelId: string) {
    this.#read = diagnostics?.limitEvents?.bind(diagnostics);
    this.#kernelId = kernelId;
  }

  /** Takes the reading later deaths are compared with. */
  mark(): void {
    if (!this.#read) return;
    this.#baseline = this.#reading()?.oomKills;
  }

  /** When the kernel was killed for memory since the last mark: what to tell the user about its limit. */
  oomDeath(): { memoryLimitBytes: number | undefined } | undefined {
    if (!this.#read || this.#baseline === undefined) return undefined;
    const now = this.#reading();
    if (!now || now.oomKills <= this.#baseline) return undefined;
    this.#baseline = now.oomKills;
    return { memoryLimitBytes: now.memoryLimitBytes };
  }

  #reading(): KernelLimitReading | undefined {
    try {
      return this.#read?.(this.#kernelId);
    } catch {
      return undefined;
    }
  }
}
