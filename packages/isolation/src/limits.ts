/**
 * Resource and network limits of a kernel, as a policy carries them. Every field is optional: an absent one is no
 * limit. What enforces each one on a machine is `detectLimits()`'s answer; a limit that nothing here can enforce
 * refuses the kernel (`IsolationUnavailableError`, reason `limit-unenforceable`).
 */
export interface KernelLimits {
  /**
   * Memory of the kernel and everything it starts, in bytes: a memory cgroup's limit on all of them together where
   * one is writable, and the data size (`RLIMIT_DATA`) of each process, so one allocation larger than the limit fails
   * in the cell (`MemoryError`, R's `cannot allocate vector`) instead of killing the kernel.
   */
  readonly memoryBytes?: number;
  /**
   * Processes and threads the kernel may run at once, its own and the sandbox's included: a pids cgroup where one is
   * writable, else `RLIMIT_NPROC` (every process of the user counts, and Linux does not enforce it for root).
   */
  readonly maxProcesses?: number;
  /**
   * CPU time, in seconds (rounded up), that each process of the kernel may use over its whole life — all its cells
   * together, not one cell (`RLIMIT_CPU`); a kernel past it is killed, and the gateway restarts it.
   */
  readonly cpuSeconds?: number;
  /**
   * `false`: the kernel gets a network namespace of its own with only a loopback interface (bubblewrap's
   * `--unshare-net`); it still reaches the gateway through its ZMQ Unix sockets. @defaultValue true
   */
  readonly network?: boolean;
}

/** The name of one limit, as `KernelLimits` spells it. */
export type LimitName = keyof KernelLimits;

/** Every limit, in the order messages and reports list them. */
export const LIMIT_NAMES: readonly LimitName[] = Object.freeze([
  'memoryBytes',
  'maxProcesses',
  'cpuSeconds',
  'network',
]);

/** What each limit is called in messages. */
export const LIMIT_LABELS: Readonly<Record<LimitName, string>> = Object.freeze({
  memoryBytes: 'memory limit (memoryBytes)',
  maxProcesses: 'process limit (maxProcesses)',
  cpuSeconds: 'CPU time limit (cpuSeconds)',
  network: 'network cut-off (network: false)',
});

/**
 * Smallest `memoryBytes` accepted (256 MiB): ipykernel alone holds about 140 MiB of data (the stacks and heaps of
 * its eleven threads), so a smaller limit would only make it fail to start.
 */
export const MIN_MEMORY_BYTES = 256 * 1024 * 1024;

/**
 * Smallest `maxProcesses` accepted (16): the sandbox's two processes and ipykernel's eleven threads already count
 * thirteen.
 */
export const MIN_PROCESSES = 16;

/** The limits of `policy` that ask for something: `network: true` and absent fields are left out. */
export function requestedLimits(policy: KernelLimits | undefined): KernelLimits {
  const out: { -readonly [K in LimitName]?: KernelLimits[K] } = {};
  if (policy?.memoryBytes !== undefined) out.memoryBytes = policy.memoryBytes;
  if (policy?.maxProcesses !== undefined) out.maxProcesses = policy.maxProcesses;
  if (policy?.cpuSeconds !== undefined) out.cpuSeconds = policy.cpuSeconds;
  if (policy?.network === false) out.network = false;
  return out;
}

/** True when `policy` asks for at least one limit. */
export function hasLimits(policy: KernelLimits | undefined): boolean {
  return Object.keys(requestedLimits(policy)).length > 0;
}

/**
 * The problems of the limit fields of `value`, each with its field path under `prefix` (`policy.memoryBytes`).
 * Empty when they are all absent or valid.
 */
export function limitIssues(value: unknown, prefix = ''): { path: string; message: string }[] {
  if (value === null || typeof value !== 'object') return [];
  const v = value as Record<string, unknown>;
  const issues: { path: string; message: string }[] = [];
  const at = (name: string) => (prefix ? `${prefix}.${name}` : name);
  if (v.memoryBytes !== undefined) {
    if (typeof v.memoryBytes !== 'number' || !Number.isSafeInteger(v.memoryBytes))
      issues.push({ path: at('memoryBytes'), message: 'expected a whole number of bytes' });
    else if (v.memoryBytes < MIN_MEMORY_BYTES)
      issues.push({ path: at('memoryBytes'), message: `expected at least ${MIN_MEMORY_BYTES} bytes (256 MiB)` });
  }
  if (v.maxProcesses !== undefined) {
    if (typeof v.maxProcesses !== 'number' || !Number.isSafeInteger(v.maxProcesses))
      issues.push({ path: at('maxProcesses'), message: 'expected a whole number' });
    else if (v.maxProcesses < MIN_PROCESSES)
      issues.push({ path: at('maxProcesses'), message: `expected at least ${MIN_PROCESSES}` });
  }
  if (v.cpuSeconds !== undefined) {
    if (typeof v.cpuSeconds !== 'number' || !Number.isFinite(v.cpuSeconds) || v.cpuSeconds <= 0)
      issues.push({ path: at('cpuSeconds'), message: 'expected a number of seconds above 0' });
    else if (Math.ceil(v.cpuSeconds) > 2 ** 31)
      issues.push({ path: at('cpuSeconds'), message: 'expected at most 2^31 seconds' });
  }
  if (v.network !== undefined && typeof v.network !== 'boolean')
    issues.push({ path: at('network'), message: 'expected true or false' });
  return issues;
}
