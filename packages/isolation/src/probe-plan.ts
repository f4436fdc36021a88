// What one isolation probe run is made of, worked out before it runs: its options, canaries and plan.
import { accessSync, constants, readdirSync, realpathSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { privateTempDirs, type SandboxPolicy, type WrapCommandOptions } from './bubblewrap.js';
import { isWithin } from './paths.js';
import type { DetectSandboxOptions } from './sandbox.js';

/** Options of `verifyIsolation()`: the same sandbox options the kernel will get, plus the probe's own. */
export interface VerifyIsolationOptions extends WrapCommandOptions, DetectSandboxOptions {
  /**
   * cgroup directories the kernel's limits live in (where kernels' cgroups are made): the probe must be unable to
   * make a cgroup there or move itself into one. @defaultValue []
   */
  cgroupDirs?: readonly string[];
}

/** A canary in one hidden root: the file the probe must not read there, and its link in the probe directory. */
export interface Canary {
  root: string;
  file: string | undefined;
  planted: boolean;
  link: string | undefined;
}

/** The part of a policy the probe runs under: its mounts and network, without resource limits. */
export function probedPolicy(fullPolicy: SandboxPolicy): SandboxPolicy {
  return {
    roots: fullPolicy.roots,
    allowedRoots: fullPolicy.allowedRoots,
    ...(fullPolicy.tempDir !== undefined ? { tempDir: fullPolicy.tempDir } : {}),
    ...(fullPolicy.network === false ? { network: false } : {}),
  };
}

/**
 * A canary in each hidden root: a file the probe writes there, or one already there when the root is not writable,
 * and a symbolic link to it in the probe directory (which the sandbox can read); each goes into `into` as soon as it
 * is planted, so that it is removed whatever happens next.
 */
export function plantCanaries(roots: readonly string[], probeDir: string, token: string, into: Canary[]): void {
  for (const [i, root] of roots.entries()) {
    const canary: Canary = { root, file: undefined, planted: false, link: undefined };
    const planted = join(root, `.kernelwarden-canary-${token}`);
    try {
      writeFileSync(planted, 'canary\n', { flag: 'wx', mode: 0o600 });
      canary.file = planted;
      canary.planted = true;
    } catch {
      // A root we cannot write in: test against something already there, if anything.
      const existing = readdirSync(root, { withFileTypes: true }).find((e) => e.isFile());
      if (existing) canary.file = join(root, existing.name);
    }
    if (canary.file) {
      canary.link = join(probeDir, `link-${i}`);
      symlinkSync(canary.file, canary.link);
    }
    into.push(canary);
  }
}

/** Removes the canaries the probe wrote (not the files it borrowed). */
export function removeCanaries(canaries: readonly Canary[]): void {
  for (const c of canaries) {
    if (c.planted && c.file) {
      try {
        unlinkSync(c.file);
      } catch {
        // already gone
      }
    }
  }
}

/** Everything one probe run checks, worked out before it runs. */
export interface ProbePlan {
  policy: SandboxPolicy;
  opts: VerifyIsolationOptions;
  token: string;
  /** The host's temporary directory. */
  tempDir: string;
  probeDir: string;
  /** A file in the host's temporary directory, which a private temporary directory must hide. */
  hostTemp: string;
  canaries: readonly Canary[];
  /** What is bound back into the sandbox: the way to each may show when a hidden root is listed. */
  binds: readonly string[];
  /** A file the probe must be able to write in the workspace. */
  writeProbe: string;
  privateTemp: readonly string[];
  /** The sandbox's temporary directory. */
  temp: string;
  /** The mounts the probe tries to undo. */
  undoTargets: readonly string[];
  hostProbe: { dir: string; file: string } | undefined;
  cgroupDirs: readonly string[];
}

export function probePlan(parts: {
  policy: SandboxPolicy;
  opts: VerifyIsolationOptions;
  token: string;
  tempDir: string;
  probeDir: string;
  hostTemp: string;
  canaries: readonly Canary[];
}): ProbePlan {
  const { policy, opts, token, probeDir } = parts;
  const privateTemp = privateTempDirs(policy, opts);
  return {
    ...parts,
    binds: [...policy.allowedRoots, opts.workspace, ...(opts.readWrite ?? []), ...(opts.readOnly ?? []), probeDir],
    writeProbe: join(opts.workspace, `.kernelwarden-probe-${token}`),
    privateTemp,
    temp: privateTemp[0] ?? '/tmp',
    undoTargets: [...policy.roots, ...(opts.hide ?? []), ...privateTemp],
    hostProbe: hostWriteProbe(policy, opts, privateTemp, token),
    cgroupDirs: opts.cgroupDirs ?? [],
  };
}

/**
 * Where the probe tries to write the host outside every writable bind: this user's home directory, when it exists,
 * the user can write it, and no bind or mount of the sandbox covers it (undefined otherwise).
 */
function hostWriteProbe(
  policy: SandboxPolicy,
  opts: VerifyIsolationOptions,
  privateTemp: readonly string[],
  token: string,
): { dir: string; file: string } | undefined {
  let dir: string;
  try {
    dir = realpathSync(homedir());
    accessSync(dir, constants.W_OK);
  } catch {
    return undefined;
  }
  const covering = [opts.workspace, ...(opts.readWrite ?? []), ...privateTemp, ...policy.roots, ...(opts.hide ?? [])];
  if (covering.some((mounted) => isWithin(dir, mounted))) return undefined;
  return { dir, file: join(dir, `.kernelwarden-probe-host-${token}`) };
}
