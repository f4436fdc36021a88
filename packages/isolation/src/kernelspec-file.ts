// The isolated kernelspec itself: its content and name, and writing it into the kernelspec directory.
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { InstallIsolatedKernelSpecOptions } from './kernelspec-options.js';
import type { SpecOwner } from './kernelspec-owner.js';
import type { LimitPlan } from './limit-support.js';
import { requestedLimits } from './limits.js';

/**
 * The isolated kernelspec and its name, `kw-iso-<base>-<hash>`: the hash covers the base spec, the policy, its
 * limits, the launch argv (with a placeholder tag: the kernels' cgroups are named after the hash, which cannot cover
 * itself) and the owner.
 */
export function isolatedSpec(
  opts: InstallIsolatedKernelSpecOptions,
  parts: {
    workspace: string;
    owner: SpecOwner;
    plan: LimitPlan | undefined;
    cgroupDirs: string[];
    argvWith: (tag: string) => string[];
  },
): { name: string; spec: Record<string, unknown> } {
  const { workspace, owner, plan, cgroupDirs, argvWith } = parts;
  const limits = requestedLimits(opts.policy);
  const identity = JSON.stringify({
    base: opts.baseSpec,
    roots: opts.policy.roots,
    allowedRoots: opts.policy.allowedRoots,
    tempDir: opts.policy.tempDir,
    limits,
    // The kernels' cgroups are named after this hash, which cannot cover itself.
    argv: argvWith('0'.repeat(16)),
    owner,
  });
  const hash = createHash('sha256').update(identity).digest('hex').slice(0, 16);
  const name = `kw-iso-${opts.baseSpec.name.toLowerCase()}-${hash}`;
  const spec = {
    argv: argvWith(hash),
    display_name: `${opts.baseSpec.display_name} (isolated)`,
    language: opts.baseSpec.language,
    ...(opts.baseSpec.env ? { env: opts.baseSpec.env } : {}),
    interrupt_mode: opts.baseSpec.interrupt_mode ?? 'signal',
    metadata: {
      ...opts.baseSpec.metadata,
      kernelwarden: {
        isolatedFrom: opts.baseSpec.name,
        roots: opts.policy.roots,
        allowedRoots: opts.policy.allowedRoots,
        workspace,
        owner,
        ...(plan
          ? {
              limits: {
                ...limits,
                mechanisms: plan.mechanisms,
                // Where this spec's kernels' cgroups are made: removed with the spec once empty.
                cgroupDirs,
              },
            }
          : {}),
      },
    },
  };
  return { name, spec };
}

/** Writes `spec` as `<dir>/kernel.json` (0600, in a 0700 directory) in one step, unless it already says the same. */
export function writeKernelSpec(dir: string, spec: Record<string, unknown>): void {
  const text = `${JSON.stringify(spec, null, 1)}\n`;
  const file = join(dir, 'kernel.json');
  try {
    if (readFileSync(file, 'utf8') === text) return;
  } catch {
    // not written yet
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const temporary = join(dir, `.kernel.json.${randomBytes(4).toString('hex')}`);
  writeFileSync(temporary, text, { mode: 0o600 });
  renameSync(temporary, file);
}
