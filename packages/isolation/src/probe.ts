import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkWrapInputs, type SandboxPolicy, wrapCommand } from './bubblewrap.js';
import { IsolationUnavailableError } from './errors.js';
import { canonicalTempDir } from './policy.js';
import {
  type Canary,
  type ProbePlan,
  plantCanaries,
  probedPolicy,
  probePlan,
  removeCanaries,
  type VerifyIsolationOptions,
} from './probe-plan.js';
import { probeScript } from './probe-script.js';
import { judgeProbe } from './probe-verdict.js';
import { assertSandbox } from './sandbox.js';
import { runProcess } from './subprocess.js';

export type { VerifyIsolationOptions } from './probe-plan.js';

/** What the probe checked; every entry passed when `verifyIsolation()` resolves. */
export interface IsolationReport {
  /** `bwrap --version` of the sandbox that was checked. */
  version: string | undefined;
  /** One line per check, e.g. `hidden /srv/data: canary unreadable`. */
  checks: string[];
}

/**
 * The self-test: runs a probe process under `policy` exactly as a kernel would be wrapped, and resolves only if it
 * could not read a canary in any hidden root (directly, nor through a symbolic link planted in a probe directory),
 * listed nothing there but the way to what is bound back, could read every allowed root, could write in the
 * workspace but not the host's filesystem outside it (the user's home directory, unless a bind covers it), and did
 * not see the host's temporary directory (when it gets a private one). With `network: false` it
 * must have no network interface but loopback; with `cgroupDirs` it must be unable to write them. Otherwise it throws
 * `IsolationUnavailableError` (`reason: 'probe-failed'`, or the sandbox's own reason). Resource limits
 * (`memoryBytes`, `maxProcesses`, `cpuSeconds`) are not applied to the probe: they are set up at each launch.
 *
 * Use it before the first launch under a policy; `installIsolatedKernelSpec()` runs it for you. It writes a canary
 * file in each writable hidden root, one in the system temporary directory and a probe directory there, and removes
 * them all before it settles.
 */
export async function verifyIsolation(
  fullPolicy: SandboxPolicy,
  opts: VerifyIsolationOptions,
): Promise<IsolationReport> {
  checkWrapInputs(fullPolicy, ['/bin/sh'], opts);
  const policy = probedPolicy(fullPolicy);
  const sandbox = await assertSandbox(opts);
  const tempDir = policy.tempDir ?? canonicalTempDir();
  const token = randomBytes(6).toString('hex');
  const probeDir = mkdtempSync(join(tempDir, 'kernelwarden-probe-'));
  const hostTemp = join(tempDir, `kernelwarden-probe-host-${token}`);
  const canaries: Canary[] = [];
  try {
    writeFileSync(hostTemp, 'host temporary file\n', { mode: 0o600 });
    plantCanaries(policy.roots, probeDir, token, canaries);
    const plan = probePlan({ policy, opts, token, tempDir, probeDir, hostTemp, canaries });
    const out = await runProbe(plan, sandbox);
    const verdict = judgeProbe(plan, out);
    if (verdict.failures.length > 0) {
      throw new IsolationUnavailableError(
        `The isolation probe failed, so no kernel is started under this policy: ${verdict.failures.join('; ')}`,
        { reason: 'probe-failed' },
      );
    }
    return { version: sandbox.version, checks: verdict.checks };
  } finally {
    removeCanaries(canaries);
    rmSync(hostTemp, { force: true });
    rmSync(probeDir, { recursive: true, force: true });
  }
}

/**
 * Runs the probe's script under the plan's policy exactly as a kernel would be wrapped, and returns its output lines;
 * throws `IsolationUnavailableError` when it could not run to its end.
 */
async function runProbe(plan: ProbePlan, sandbox: { bwrapPath: string; envPath: string }): Promise<string[]> {
  const { cgroupDirs: _cgroupDirs, ...wrapOptions } = plan.opts;
  const argv = wrapCommand(plan.policy, ['/bin/sh', '-c', probeScript(plan)], {
    ...wrapOptions,
    bwrapPath: sandbox.bwrapPath,
    envPath: sandbox.envPath,
    readOnly: [...(plan.opts.readOnly ?? []), plan.probeDir],
  });
  const result = await runProcess(argv, {
    signal: plan.opts.signal,
    timeoutMs: plan.opts.timeoutMs ?? 10_000,
    timeoutMessage: 'The isolation probe did not finish in time',
  });
  const out = result.stdout.split('\n').filter(Boolean);
  if (result.code !== 0 || !out.includes('probe done')) {
    throw new IsolationUnavailableError(
      `The isolation probe could not run under bubblewrap (exit ${result.code ?? result.signal}): ` +
        result.stderr.trim().split('\n').slice(-3).join(' / '),
      { reason: 'probe-failed' },
    );
  }
  return out;
}
