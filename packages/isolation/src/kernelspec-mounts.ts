// What an isolated kernel's sandbox mounts: the directories resolved and made canonical, and checked to be
// launchable, before anything is written.
import { lstatSync, readdirSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import {
  checkWrapInputs,
  hostFilesystem,
  privateTempDirs,
  type SandboxPolicy,
  sandboxHostPaths,
} from './bubblewrap.js';
import { IsolationPolicyError } from './errors.js';
import { resolveKernelArgv, safeLaunchArgv } from './interpreter.js';
import type { BaseKernelSpec, InstallIsolatedKernelSpecOptions } from './kernelspec-options.js';
import { checkKernelSpecPath } from './launch-check.js';
import { isAbsolutePath, isWithin } from './paths.js';
import { findExecutable } from './sandbox.js';

/** The host's GPU device nodes (NVIDIA, AMD's kfd, DRI, accel), which a limits-only kernel keeps in its `/dev`. */
function gpuDevices(): string[] {
  const devices: string[] = [];
  const add = (dir: string, keep: (name: string) => boolean) => {
    let names: string[] = [];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names.filter(keep).sort()) {
      try {
        if (lstatSync(join(dir, name)).isCharacterDevice()) devices.push(join(dir, name));
      } catch {
        // gone meanwhile
      }
    }
  };
  add('/dev', (name) => name.startsWith('nvidia') || name === 'kfd');
  add('/dev/dri', () => true);
  add('/dev/accel', () => true);
  return devices;
}

/** kernelwarden's state directory, as `LocalGateway` chooses it: `KERNELWARDEN_STATE_DIR`, XDG, or the default. */
export function kernelwardenStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KERNELWARDEN_STATE_DIR) return resolve(env.KERNELWARDEN_STATE_DIR);
  if (env.XDG_STATE_HOME) return join(resolve(env.XDG_STATE_HOME), 'kernelwarden');
  return join(homedir(), '.local', 'state', 'kernelwarden');
}

function existingStateDir(): string[] {
  try {
    return [realpathSync.native(kernelwardenStateDir())];
  } catch {
    return [];
  }
}

function validateBase(spec: BaseKernelSpec): void {
  const issues: { path: string; message: string }[] = [];
  if (typeof spec?.name !== 'string' || !/^[A-Za-z0-9._-]+$/.test(spec.name))
    issues.push({ path: 'baseSpec.name', message: 'expected a kernelspec name' });
  if (!Array.isArray(spec?.argv) || spec.argv.length === 0 || spec.argv.some((a) => typeof a !== 'string'))
    issues.push({ path: 'baseSpec.argv', message: 'expected a non-empty array of strings' });
  else if (spec.argv.some((a) => a.includes('{resource_dir}')) && !isAbsolutePath(spec.resourceDir))
    issues.push({ path: 'baseSpec.resourceDir', message: 'argv uses {resource_dir}: give the base spec folder' });
  if (issues.length > 0) throw new InvalidOptionsError(issues, { subject: 'isolated kernelspec' });
}

/**
 * Refuses a kernel whose interpreter would be hidden by the policy: it would only fail later, as a kernel that
 * dies at start-up, with a far less helpful message.
 */
function checkInterpreterVisible(policy: SandboxPolicy, command: string, searchPath: string | undefined): void {
  const lexical = isAbsolutePath(command) ? command : findExecutable(command, searchPath);
  if (!lexical) return;
  let real = lexical;
  try {
    real = realpathSync.native(lexical);
  } catch {
    // a missing interpreter fails at launch like it would without isolation
  }
  for (const path of new Set([lexical, real])) {
    const root = policy.roots.find((r) => isWithin(path, r));
    if (root && !policy.allowedRoots.some((a) => isWithin(path, a))) {
      throw new IsolationPolicyError(
        `The kernel's interpreter ${path} lies in the hidden root ${root}: the kernel could not start; allow its ` +
          'installation directory or use an interpreter outside the hidden roots',
        { path },
      );
    }
  }
}

/** The canonical path of an existing directory the caller named, or `IsolationPolicyError`. */
function canonicalExisting(path: string, what: string, field: string): string {
  if (!isAbsolutePath(path)) {
    throw new InvalidOptionsError([{ path: field, message: 'expected an absolute path' }], {
      subject: 'isolated kernelspec',
    });
  }
  try {
    return realpathSync.native(path);
  } catch (cause) {
    throw new IsolationPolicyError(`${what} does not exist: ${path}`, { path, cause });
  }
}

/**
 * Refuses a workspace (or read-write directory) that is itself a private temporary directory: every launch gives
 * that directory a fresh, empty tmpfs, so it cannot also be the kernel's own folder, and binding it back would share
 * the host's temporary directory with the kernel. A directory below it is fine: it is bound into the private one.
 */
function checkWorkspaceNotTemp(
  policy: SandboxPolicy,
  wrap: { workspace: string; readWrite: string[]; privateTemp?: readonly string[] },
): void {
  const temps = new Set<string>();
  for (const dir of privateTempDirs(policy, wrap)) {
    temps.add(dir);
    try {
      temps.add(realpathSync.native(dir));
    } catch {
      // a private temp that does not exist yet on the host is created inside the sandbox
    }
  }
  const named = [
    { dir: wrap.workspace, what: "The kernel's working directory" },
    ...wrap.readWrite.map((dir) => ({ dir, what: 'The read-write directory' })),
  ];
  for (const { dir, what } of named) {
    if (temps.has(dir)) {
      throw new IsolationPolicyError(
        `${what} ${dir} is a temporary directory every isolated kernel gets a private, empty copy of: it cannot ` +
          `be shared with the kernel too; use a directory of its own (e.g. ${join(dir, 'work')}) or one outside it`,
        { path: dir },
      );
    }
  }
}

/** What the sandbox of a kernel is made of: these, with `hide` and `readWrite` in `wrap`. */
export interface ResolvedMounts {
  /** The canonical workspace. */
  workspace: string;
  /** The base spec's argv, ready to run (`{resource_dir}` filled in, the interpreter resolved, safe to launch). */
  argvBase: string[];
  wrap: {
    workspace: string;
    readWrite: string[];
    hide: string[];
    devices?: string[];
    privateTemp?: readonly string[];
  };
}

/**
 * The base spec checked and its argv resolved, the directories made canonical (each must exist), and what is hidden:
 * the caller's `hide`, kernelwarden's state directory and the kernelspecs themselves (unless already hidden).
 */
export function resolveMounts(opts: InstallIsolatedKernelSpecOptions): ResolvedMounts {
  validateBase(opts.baseSpec);
  const workspace = canonicalExisting(opts.workspace, 'kernel workspace', 'workspace');
  const argvBase = safeLaunchArgv(
    resolveKernelArgv(
      opts.baseSpec.argv.map((a) => a.replaceAll('{resource_dir}', opts.baseSpec.resourceDir ?? '')),
      { pythonExecutable: opts.pythonExecutable, searchPath: opts.searchPath ?? process.env.PATH },
    ),
  );
  const hide = [
    ...new Set([
      ...(opts.hide ?? []).map((dir, i) => canonicalExisting(dir, 'hidden directory', `hide.${i}`)),
      ...(opts.hideStateDir === false ? [] : existingStateDir()),
    ]),
  ];
  // The kernelspecs themselves (unless already hidden): a kernel that could rewrite its own spec would launch
  // unisolated next time.
  const specDir = canonicalExisting(opts.kernelSpecDir ?? '', 'kernelspec directory', 'kernelSpecDir');
  if (![...opts.policy.roots, ...hide].some((dir) => isWithin(specDir, dir))) hide.push(specDir);
  const wrap = {
    workspace,
    readWrite: (opts.extraReadWrite ?? []).map((dir, i) =>
      canonicalExisting(dir, 'read-write directory', `extraReadWrite.${i}`),
    ),
    hide,
    ...(hostFilesystem(opts.policy) ? { devices: gpuDevices() } : {}),
    ...(opts.privateTemp ? { privateTemp: opts.privateTemp } : {}),
  };
  return { workspace, argvBase, wrap };
}

/**
 * Refuses, before anything runs, a sandbox that cannot be built as asked: bad wrap inputs, a workspace that is a
 * private temporary directory, a mounted path a launch could not check, an interpreter the sandbox would not see.
 */
export function checkLaunchable(
  opts: InstallIsolatedKernelSpecOptions,
  argvBase: readonly string[],
  wrap: ResolvedMounts['wrap'],
): void {
  checkWrapInputs(opts.policy, argvBase, wrap);
  checkWorkspaceNotTemp(opts.policy, wrap);
  for (const path of [...sandboxHostPaths(opts.policy, wrap), ...privateTempDirs(opts.policy, wrap)])
    checkKernelSpecPath(path);
  checkInterpreterVisible(opts.policy, argvBase[0]!, opts.searchPath ?? process.env.PATH);
}
