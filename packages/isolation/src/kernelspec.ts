import { join } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import { bwrapArguments, sandboxHostPaths } from './bubblewrap.js';
import { IsolationUnavailableError } from './errors.js';
import { isolatedSpec, writeKernelSpec } from './kernelspec-file.js';
import { checkLaunchable, resolveMounts } from './kernelspec-mounts.js';
import type { InstallIsolatedKernelSpecOptions } from './kernelspec-options.js';
import { currentOwner } from './kernelspec-owner.js';
import { CONNECTION_MARK, LAUNCH_SCRIPT, launchCheckArguments, recordPaths } from './launch-check.js';
import { detectLimits, type LimitPlan, planLimits } from './limit-support.js';
import { hasLimits } from './limits.js';
import { isAbsolutePath } from './paths.js';
import { verifyIsolation } from './probe.js';
import { assertSandbox } from './sandbox.js';

export { kernelwardenStateDir } from './kernelspec-mounts.js';
export type { BaseKernelSpec, InstallIsolatedKernelSpecOptions } from './kernelspec-options.js';

/** The prlimit command that sets every rlimit of `plan` (soft and hard alike) and runs the rest. */
function prlimitPrefix(plan: LimitPlan | undefined): string[] {
  if (!plan?.prlimitPath) return [];
  const set = (name: string, value: number | undefined) => (value === undefined ? [] : [`--${name}=${value}:${value}`]);
  return [
    plan.prlimitPath,
    ...set('data', plan.rlimits.data),
    ...set('nproc', plan.rlimits.nproc),
    ...set('cpu', plan.rlimits.cpu),
    '--',
  ];
}

/**
 * Writes a kernelspec into a local gateway's kernelspec directory that launches `baseSpec`'s command under
 * bubblewrap with `policy` enforced, and returns its name — start kernels with that name
 * (`GatewayKernel.start({ kernelName })`). The name is `kw-iso-<base>-<hash of policy, base spec, workspace,
 * options, the directories' identities and the installing process>`, so the same request from the same process
 * reuses the same spec. The spec records that process as its owner: remove it with `removeIsolatedKernelSpecs()` when
 * the session ends; `sweepIsolatedKernelSpecs()` removes those whose owner is gone.
 *
 * Use it on the launch path of every kernel a session with a read policy starts. It first checks the sandbox
 * (`assertSandbox()`) and runs the self-test probe (`verifyIsolation()`); if either fails it throws
 * `IsolationUnavailableError` and writes nothing, so the kernel is never launched unisolated. A remote gateway (no
 * `kernelSpecDir`) is refused the same way. Then it records the identity (device, inode) of every directory the
 * sandbox mounts and of each of their ancestors; every launch of the spec (restarts included) checks them first and
 * refuses to start the kernel, with a one-line reason on stderr, when any was moved, replaced, swapped for a symbolic
 * link or removed. At launch, the gateway's runtime directory (other kernels' keys, the server's token) is hidden and
 * only this kernel's connection file is bound back. A workspace that is itself a private temporary directory (the
 * system temporary directory) is refused with `IsolationPolicyError`.
 *
 * Limits (`memoryBytes`, `maxProcesses`, `cpuSeconds`, `network: false`) are planned with `detectLimits()` (or
 * `limitSupport`) and `planLimits()`: one nothing here can enforce is refused with `IsolationUnavailableError`
 * (reason `limit-unenforceable`, `limit` naming it) before anything is written. At every launch the launcher makes
 * the kernel's cgroup `kw-<spec hash>-<kernel id>` in the gateway's cgroup (reused by restarts), sets its limits and
 * joins it before exec'ing `prlimit` (the rlimits) and bwrap (`--unshare-net`); a launch that cannot set a limit up
 * fails with a one-line reason naming it. Every kernel under a policy — limits only included — sees the host's
 * filesystem read-only and writes only its workspace, `extraReadWrite` and its private temp: nothing it writes runs
 * in a later kernel or in a program of the host (IPython startup files, `usercustomize.py`, `.Rprofile`, binaries
 * the launcher runs). A limits-only kernel keeps the host's GPU device nodes.
 */
export async function installIsolatedKernelSpec(opts: InstallIsolatedKernelSpecOptions): Promise<string> {
  const specDir = localKernelSpecDir(opts.kernelSpecDir);
  const { workspace, argvBase, wrap } = resolveMounts(opts);
  checkLaunchable(opts, argvBase, wrap);
  const sandbox = await assertSandbox(opts);
  const plan = await planKernelLimits(opts);
  const cgroupDirs = [...new Set(plan?.cgroups.map((c) => c.controller.base) ?? [])];
  await verifyIsolation(opts.policy, {
    ...wrap,
    cgroupDirs,
    searchPath: opts.searchPath,
    signal: opts.signal,
    timeoutMs: opts.timeoutMs,
  });
  // Recorded after the probe (which writes in the hidden roots and the workspace): checked at every launch.
  const record = recordPaths(sandboxHostPaths(opts.policy, wrap));
  const owner = currentOwner(opts.ownerPid);
  const argvWith = (tag: string) => [
    '/bin/sh',
    '-c',
    LAUNCH_SCRIPT,
    'kernelwarden-isolated-kernel',
    '{connection_file}',
    ...launchCheckArguments(sandbox.statPath, record, { tag, limits: plan?.cgroups ?? [] }),
    ...prlimitPrefix(plan),
    sandbox.envPath,
    '--ignore-signal=INT',
    sandbox.bwrapPath,
    ...bwrapArguments(opts.policy, wrap, [CONNECTION_MARK]),
    '--',
    sandbox.envPath,
    '--default-signal=INT',
    ...argvBase,
  ];
  const { name, spec } = isolatedSpec(opts, { workspace, owner, plan, cgroupDirs, argvWith });
  writeKernelSpec(join(specDir, name), spec);
  return name;
}

/** The kernelspec directory of a local gateway; throws for a remote gateway (none) and a relative path. */
function localKernelSpecDir(kernelSpecDir: string | undefined): string {
  if (kernelSpecDir === undefined || kernelSpecDir === '') {
    throw new IsolationUnavailableError(
      'This gateway has no local kernelspec directory (a remote gateway): read isolation cannot be enforced on its ' +
        'kernels, so none is started; use the embedded LocalGateway',
      { reason: 'remote-gateway' },
    );
  }
  if (!isAbsolutePath(kernelSpecDir)) {
    throw new InvalidOptionsError([{ path: 'kernelSpecDir', message: 'expected an absolute path' }], {
      subject: 'isolated kernelspec',
    });
  }
  return kernelSpecDir;
}

/** Each limit by the strongest mechanism here, or a refusal naming the first one nothing can enforce. */
async function planKernelLimits(opts: InstallIsolatedKernelSpecOptions): Promise<LimitPlan | undefined> {
  if (!hasLimits(opts.policy)) return undefined;
  return planLimits(
    opts.policy,
    opts.limitSupport ??
      (await detectLimits({
        pid: opts.gatewayPid,
        searchPath: opts.searchPath,
        signal: opts.signal,
        timeoutMs: opts.timeoutMs,
      })),
  );
}
