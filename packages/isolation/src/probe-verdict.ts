// Judging the isolation probe's output against its plan.
import { relative, sep } from 'node:path';
import { isWithin } from './paths.js';
import type { ProbePlan } from './probe-plan.js';

/** Names a listing of `root` may show inside the sandbox: the first step towards anything bound back below it. */
function expectedNames(root: string, binds: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const bind of binds) {
    if (bind !== root && isWithin(bind, root)) {
      const first = relative(root, bind).split(sep)[0];
      if (first) names.add(first);
    }
  }
  return names;
}

/** What the probe's output says: every check made, and every one that failed. */
export interface Verdict {
  checks: string[];
  failures: string[];
}

/** Judges the probe's output lines against its plan, in the order of the script. */
export function judgeProbe(plan: ProbePlan, out: readonly string[]): Verdict {
  const verdict: Verdict = { checks: [], failures: [] };
  judgeEscapes(plan, out, verdict);
  judgeReads(plan, out, verdict);
  judgeWrites(plan, out, verdict);
  judgeContainment(plan, out, verdict);
  return verdict;
}

/** Capabilities, and whether a mount came off (from the sandbox or a user namespace inside it). */
function judgeEscapes(plan: ProbePlan, out: readonly string[], { checks, failures }: Verdict): void {
  const caps = out.filter((l) => l.startsWith('cap ')).map((l) => l.slice(4).split(/\s+/));
  const held = caps.filter(([, value]) => !/^0+$/.test(value ?? ''));
  if (caps.length < 5) failures.push('the sandbox could not tell which capabilities it holds');
  else if (held.length > 0)
    failures.push(
      `the sandbox holds capabilities (${held.map(([k, v]) => `${k?.replace(/:$/, '')} ${v}`).join(', ')})`,
    );
  checks.push('capabilities: none (effective, permitted, inheritable, ambient, bounding)');
  plan.undoTargets.forEach((target, i) => {
    if (out.includes(`undo ${i}`)) failures.push(`the sandbox could unmount ${target}`);
    if (out.includes(`nested undo ${i}`)) failures.push(`a user namespace inside the sandbox could unmount ${target}`);
  });
  plan.canaries.forEach((c, i) => {
    if (out.includes(`nested root ${i} LEAK`) || out.includes(`nested bind ${i} LEAK`))
      failures.push(`a file in hidden root ${c.root} was readable from a user namespace inside the sandbox`);
  });
  if (out.includes('nested temp SHARED'))
    failures.push(
      `the system temporary directory ${plan.tempDir} was visible from a user namespace inside the sandbox`,
    );
  const tried = [out.includes('umount tried') && 'umount', out.includes('umount2 tried') && 'umount2'].filter(Boolean);
  checks.push(
    tried.length > 0
      ? `unmounting: refused (${tried.join(', ')})`
      : 'unmounting: not tried (neither umount nor python3 here)',
    out.includes('nested done')
      ? 'a user namespace inside: could not undo the mounts'
      : 'a user namespace inside: could not be made',
  );
}

/** Hidden roots' canaries and listings, allowed roots' reads. */
function judgeReads(plan: ProbePlan, out: readonly string[], { checks, failures }: Verdict): void {
  plan.canaries.forEach((c, i) => {
    if (out.includes(`root ${i} direct LEAK`)) failures.push(`a file in hidden root ${c.root} was readable`);
    if (out.includes(`root ${i} link LEAK`))
      failures.push(`a file in hidden root ${c.root} was readable through a symbolic link`);
    const extra = unexpectedNames(out, `list ${i} `, c.root, plan.binds);
    if (extra.length > 0) failures.push(`hidden root ${c.root} listed ${extra.slice(0, 3).join(', ')}`);
    checks.push(`hidden ${c.root}: ${c.file ? 'canary unreadable directly and through a link' : 'listing empty'}`);
  });
  plan.policy.allowedRoots.forEach((a, i) => {
    if (out.includes(`allowed ${i} UNREADABLE`)) failures.push(`allowed root ${a} was not readable`);
    checks.push(`allowed ${a}: readable`);
  });
}

/** The workspace, the temporary directories and the host outside the workspace. */
function judgeWrites(plan: ProbePlan, out: readonly string[], { checks, failures }: Verdict): void {
  const { opts, tempDir, temp, hostProbe, privateTemp } = plan;
  if (out.includes('workspace UNWRITABLE')) failures.push(`the workspace ${opts.workspace} was not writable`);
  if (out.includes('temp SHARED')) failures.push(`the system temporary directory ${tempDir} was visible`);
  if (out.includes('temp UNWRITABLE')) failures.push(`the private temporary directory ${temp} was not writable`);
  checks.push(`workspace ${opts.workspace}: writable`);
  if (hostProbe) {
    if (out.includes('host WRITABLE'))
      failures.push(`the sandbox could write ${hostProbe.dir}, outside its workspace and private temp`);
    checks.push(`host ${hostProbe.dir}: read-only`);
  }
  if (privateTemp.length > 0) checks.push(`${temp}: private`);
}

/** Hidden directories' listings, the network interfaces, the cgroups. */
function judgeContainment(plan: ProbePlan, out: readonly string[], { checks, failures }: Verdict): void {
  (plan.opts.hide ?? []).forEach((hidden, i) => {
    const extra = unexpectedNames(out, `hidden ${i} `, hidden, plan.binds);
    if (extra.length > 0) failures.push(`hidden directory ${hidden} listed ${extra.slice(0, 3).join(', ')}`);
    checks.push(`hidden ${hidden}: listing empty`);
  });
  if (plan.policy.network === false) {
    const interfaces = out.filter((l) => l.startsWith('netif ')).map((l) => l.slice('netif '.length));
    const others = interfaces.filter((n) => n !== 'lo');
    if (!interfaces.includes('lo') && others.length === 0)
      failures.push('the sandbox could not tell its network interfaces');
    else if (others.length > 0) failures.push(`the sandbox has network interfaces (${others.join(', ')})`);
    checks.push('network: loopback only');
  }
  plan.cgroupDirs.forEach((dir, i) => {
    if (out.includes(`cgroup ${i} WRITABLE`)) failures.push(`the sandbox could make a cgroup in ${dir}`);
    if (out.includes(`cgroup ${i} JOINED`)) failures.push(`the sandbox could move itself into the cgroup ${dir}`);
    checks.push(`cgroup ${dir}: not writable`);
  });
}

/** The names the probe listed under `prefix` for directory `root` that are not the way to something bound back. */
function unexpectedNames(out: readonly string[], prefix: string, root: string, binds: readonly string[]): string[] {
  const allowedNames = expectedNames(root, binds);
  return out
    .filter((l) => l.startsWith(prefix))
    .map((l) => l.slice(prefix.length))
    .filter((n) => !allowedNames.has(n));
}
