import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { InvalidOptionsError, type ReadIsolationPolicy } from '@kernelwarden/core';
import { bwrapArguments, checkWrapInputs } from './bubblewrap.js';
import { IsolationPolicyError, IsolationUnavailableError } from './errors.js';
import { resolveKernelArgv } from './interpreter.js';
import { isAbsolutePath, isWithin } from './paths.js';
import { verifyIsolation } from './probe.js';
import { assertSandbox, type DetectSandboxOptions, findExecutable } from './sandbox.js';

/** A kernelspec to wrap, as `GET /api/kernelspecs` returns it (`spec` plus its `name`). */
export interface BaseKernelSpec {
  /** The kernelspec's name, e.g. `python3` or `ir`. */
  name: string;
  /** Its command line, with jupyter's `{connection_file}` placeholder. */
  argv: readonly string[];
  /** Environment variables the gateway sets for the kernel (kept as they are). */
  env?: Readonly<Record<string, string>>;
  /** Shown name; the isolated spec appends ` (isolated)`. */
  display_name: string;
  /** The kernel's language, e.g. `python` or `R`. */
  language: string;
  /** How the gateway interrupts the kernel. @defaultValue 'signal' */
  interrupt_mode?: 'signal' | 'message';
  /** Kept, with a `kernelwarden` entry added describing the isolation. */
  metadata?: Readonly<Record<string, unknown>>;
  /** The base kernelspec's own folder; needed only when `argv` uses `{resource_dir}`. */
  resourceDir?: string;
}

/** Options of `installIsolatedKernelSpec()`. */
export interface InstallIsolatedKernelSpecOptions extends DetectSandboxOptions {
  /**
   * A directory on the local gateway's kernelspec search path (`LocalGateway.acquire()`'s `kernelSpecDir`).
   * Absent (a remote gateway) -> `IsolationUnavailableError` with `reason: 'remote-gateway'`.
   */
  kernelSpecDir: string | undefined;
  /** The kernelspec whose argv is wrapped. */
  baseSpec: BaseKernelSpec;
  /** The policy to enforce (from `createReadIsolationPolicy()` or `teamReadPolicy()`). */
  policy: ReadIsolationPolicy;
  /** The kernel's working directory: read-write, and its current directory. */
  workspace: string;
  /** More directories the kernel may write (bound read-write). @defaultValue [] */
  extraReadWrite?: readonly string[];
  /** More directories hidden like the policy's roots, e.g. the gateway's state directory. @defaultValue [] */
  hide?: readonly string[];
  /** Directories given a private tmpfs per kernel. @defaultValue [policy.tempDir, '/tmp'] */
  privateTemp?: readonly string[];
  /**
   * Also hide kernelwarden's state directory (where `LocalGateway` keeps its token): `KERNELWARDEN_STATE_DIR`, else
   * `$XDG_STATE_HOME/kernelwarden`, else `~/.local/state/kernelwarden`, when it exists. @defaultValue true
   */
  hideStateDir?: boolean;
  /**
   * Replaces a bare `python`/`python3` `argv[0]` of the base spec, as jupyter would with its own interpreter.
   * @defaultValue the interpreter `jupyter-server` on the search path runs on
   */
  pythonExecutable?: string;
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

/** Marker replaced at launch by the steps that hide the runtime directory and bind the connection file. */
const CONNECTION_MARK = '@kernelwarden-connection-file@';

/**
 * POSIX sh run by jupyter as the kernel command: `$1` is the connection file; the rest is the wrapped command, in
 * which the marker becomes `--tmpfs <runtime dir> --bind <file> <file>` (known only at launch), plus a bind of the
 * kernel's own ipc socket directory when the gateway names one (`KERNELWARDEN_KERNEL_IPC_DIR`). No braces: jupyter
 * formats every argv element with `{name}` placeholders.
 */
const LAUNCH_SCRIPT = [
  'cf=$1; shift',
  'rt=$(dirname -- "$cf")',
  'for a do',
  '  shift',
  `  if [ "$a" = '${CONNECTION_MARK}' ]; then`,
  '    set -- "$@" --tmpfs "$rt" --bind "$cf" "$cf"',
  // LocalGateway's kernels talk ZMQ over Unix sockets in a directory of their own: bind just that one back.
  '    if [ -n "$KERNELWARDEN_KERNEL_IPC_DIR" ] && [ -d "$KERNELWARDEN_KERNEL_IPC_DIR" ]; then',
  '      set -- "$@" --bind "$KERNELWARDEN_KERNEL_IPC_DIR" "$KERNELWARDEN_KERNEL_IPC_DIR"',
  '    fi',
  '  else set -- "$@" "$a"; fi',
  'done',
  'exec "$@"',
].join('\n');

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
function checkInterpreterVisible(policy: ReadIsolationPolicy, command: string, searchPath: string | undefined): void {
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

/**
 * Writes a kernelspec into a local gateway's kernelspec directory that launches `baseSpec`'s command under
 * bubblewrap with `policy` enforced, and returns its name — start kernels with that name
 * (`GatewayKernel.start({ kernelName })`). The name is deterministic: `kw-iso-<base>-<hash of policy, base spec,
 * workspace and options>`, so the same request reuses the same spec.
 *
 * Use it on the launch path of every kernel a session with a read policy starts. It first checks the sandbox
 * (`assertSandbox()`) and runs the self-test probe (`verifyIsolation()`); if either fails it throws
 * `IsolationUnavailableError` and writes nothing, so the kernel is never launched unisolated. A remote gateway (no
 * `kernelSpecDir`) is refused the same way. At launch, the gateway's runtime directory (other kernels' keys, the
 * server's token) is hidden and only this kernel's connection file is bound back.
 */
export async function installIsolatedKernelSpec(opts: InstallIsolatedKernelSpecOptions): Promise<string> {
  if (opts.kernelSpecDir === undefined || opts.kernelSpecDir === '') {
    throw new IsolationUnavailableError(
      'This gateway has no local kernelspec directory (a remote gateway): read isolation cannot be enforced on its ' +
        'kernels, so none is started; use the embedded LocalGateway',
      { reason: 'remote-gateway' },
    );
  }
  if (!isAbsolutePath(opts.kernelSpecDir)) {
    throw new InvalidOptionsError([{ path: 'kernelSpecDir', message: 'expected an absolute path' }], {
      subject: 'isolated kernelspec',
    });
  }
  validateBase(opts.baseSpec);
  let workspace: string;
  try {
    workspace = realpathSync.native(opts.workspace);
  } catch (cause) {
    throw new IsolationPolicyError(`kernel workspace does not exist: ${opts.workspace}`, {
      path: opts.workspace,
      cause,
    });
  }
  const argvBase = resolveKernelArgv(
    opts.baseSpec.argv.map((a) => a.replaceAll('{resource_dir}', opts.baseSpec.resourceDir ?? '')),
    { pythonExecutable: opts.pythonExecutable, searchPath: opts.searchPath ?? process.env.PATH },
  );
  const wrap = {
    workspace,
    readWrite: opts.extraReadWrite ?? [],
    hide: [...(opts.hide ?? []), ...(opts.hideStateDir === false ? [] : existingStateDir())],
    ...(opts.privateTemp ? { privateTemp: opts.privateTemp } : {}),
  };
  checkWrapInputs(opts.policy, argvBase, wrap);
  checkInterpreterVisible(opts.policy, argvBase[0]!, opts.searchPath ?? process.env.PATH);
  const sandbox = await assertSandbox(opts);
  await verifyIsolation(opts.policy, {
    ...wrap,
    searchPath: opts.searchPath,
    signal: opts.signal,
    timeoutMs: opts.timeoutMs,
  });

  const argv = [
    '/bin/sh',
    '-c',
    LAUNCH_SCRIPT,
    'kernelwarden-isolated-kernel',
    '{connection_file}',
    sandbox.envPath,
    '--ignore-signal=INT',
    sandbox.bwrapPath,
    ...bwrapArguments(opts.policy, wrap, [CONNECTION_MARK]),
    '--',
    sandbox.envPath,
    '--default-signal=INT',
    ...argvBase,
  ];
  const identity = JSON.stringify({
    base: opts.baseSpec,
    roots: opts.policy.roots,
    allowedRoots: opts.policy.allowedRoots,
    tempDir: opts.policy.tempDir,
    argv,
  });
  const hash = createHash('sha256').update(identity).digest('hex').slice(0, 16);
  const name = `kw-iso-${opts.baseSpec.name.toLowerCase()}-${hash}`;
  const spec = {
    argv,
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
      },
    },
  };
  const text = `${JSON.stringify(spec, null, 1)}\n`;
  const dir = join(opts.kernelSpecDir, name);
  const file = join(dir, 'kernel.json');
  try {
    if (readFileSync(file, 'utf8') === text) return name;
  } catch {
    // not written yet
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const temporary = join(dir, `.kernel.json.${randomBytes(4).toString('hex')}`);
  writeFileSync(temporary, text, { mode: 0o600 });
  renameSync(temporary, file);
  return name;
}

/**
 * Removes a kernelspec written by `installIsolatedKernelSpec()`. Only names it made (`kw-iso-…`) are accepted.
 *
 * Use it when the session that needed the spec ends; kernels already running keep running.
 */
export function removeIsolatedKernelSpec(kernelSpecDir: string, name: string): void {
  if (!/^kw-iso-[a-z0-9._-]+-[0-9a-f]{16}$/.test(name)) {
    throw new InvalidOptionsError([{ path: 'name', message: 'not an isolated kernelspec name' }], {
      subject: 'isolated kernelspec',
    });
  }
  rmSync(join(kernelSpecDir, name), { recursive: true, force: true });
}
