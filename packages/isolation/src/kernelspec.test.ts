import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CgroupController } from './cgroup.js';
import { IsolationPolicyError, IsolationUnavailableError } from './errors.js';
import { jupyterServerInterpreter, resolveKernelArgv } from './interpreter.js';
import { installIsolatedKernelSpec } from './kernelspec.js';
import { removeIsolatedKernelSpec } from './kernelspec-cleanup.js';
import type { LimitFacts } from './limit-support.js';
import { createKernelPolicy, createReadIsolationPolicy } from './policy.js';
import { findExecutable } from './sandbox.js';

let base: string;
let specDir: string;
let ws: string;
let temp: string;
let data: string;

beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'kw-spec-')));
  specDir = join(base, 'kernels');
  ws = join(base, 'ws');
  temp = join(base, 'systmp');
  data = join(base, 'data');
  for (const d of [specDir, ws, temp, join(data, 'venv', 'bin')]) mkdirSync(d, { recursive: true });
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

const baseSpec = {
  name: 'python3',
  argv: ['/usr/bin/python3', '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
  display_name: 'Python 3',
  language: 'python',
};

describe('installIsolatedKernelSpec', () => {
  it('writes a deterministic kw-iso-<base>-<hash> spec that wraps the base argv, and removes it again', async () => {
    const policy = createReadIsolationPolicy({ roots: [{ path: data, label: 'data' }], tempDir: temp });
    const opts = { kernelSpecDir: specDir, baseSpec, policy, workspace: ws, privateTemp: [temp], hideStateDir: false };
    const name = await installIsolatedKernelSpec(opts);
    expect(name).toMatch(/^kw-iso-python3-[0-9a-f]{16}$/);
    expect(await installIsolatedKernelSpec(opts)).toBe(name);
    const spec = JSON.parse(readFileSync(join(specDir, name, 'kernel.json'), 'utf8'));
    expect(spec.argv.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    expect(spec.argv.slice(-6)).toEqual(['--default-signal=INT', ...baseSpec.argv]);
    expect(spec.argv).toContain('--die-with-parent');
    expect(spec).toMatchObject({ display_name: 'Python 3 (isolated)', language: 'python', interrupt_mode: 'signal' });
    // No jupyter placeholder but the connection file: jupyter formats every argv element.
    expect(spec.argv.join(' ').match(/\{[A-Za-z0-9_]+\}/g)).toEqual(['{connection_file}', '{connection_file}']);

    const ws2 = join(base, 'ws2');
    mkdirSync(ws2);
    const other = await installIsolatedKernelSpec({ ...opts, workspace: ws2 });
    expect(other).not.toBe(name);
    removeIsolatedKernelSpec(specDir, name);
    expect(readdirSync(specDir)).toEqual([other]);
    expect(() => removeIsolatedKernelSpec(specDir, '../python3')).toThrow(/not an isolated kernelspec name/);
  });

  it("starts an R kernel without its working directory's .Rprofile, .Renviron and .RData", async () => {
    const policy = createKernelPolicy({ network: false, tempDir: temp });
    const rSpec = {
      name: 'ir',
      argv: ['R', '--slave', '-e', 'IRkernel::main()', '--args', '{connection_file}'],
      display_name: 'R',
      language: 'R',
    };
    const name = await installIsolatedKernelSpec({
      kernelSpecDir: specDir,
      baseSpec: rSpec,
      policy,
      workspace: ws,
      privateTemp: [temp],
      hideStateDir: false,
    });
    const spec = JSON.parse(readFileSync(join(specDir, name, 'kernel.json'), 'utf8'));
    expect(spec.argv.slice(-10)).toEqual([
      '--default-signal=INT',
      'R',
      '--no-init-file',
      '--no-environ',
      '--no-restore',
      '--slave',
      '-e',
      'IRkernel::main()',
      '--args',
      '{connection_file}',
    ]);
  });

  it('refuses a kernel whose interpreter lies in a hidden root, before writing anything', async () => {
    const policy = createReadIsolationPolicy({ roots: [{ path: data, label: 'data' }], tempDir: temp });
    const error = await installIsolatedKernelSpec({
      kernelSpecDir: specDir,
      baseSpec: { ...baseSpec, argv: [join(data, 'venv', 'bin', 'python'), '-m', 'ipykernel_launcher'] },
      policy,
      workspace: ws,
    }).catch((e: unknown) => e);
    expect(IsolationPolicyError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/interpreter .* lies in the hidden root/);
    expect(readdirSync(specDir)).toEqual([]);
  });
});

describe('installIsolatedKernelSpec records what every launch checks', () => {
  it('puts the identity of every mounted directory and the owner process in the spec', async () => {
    const hidden = join(ws, 'sub', 'secret');
    mkdirSync(hidden, { recursive: true });
    const policy = createReadIsolationPolicy({ roots: [{ path: hidden, label: 'secret' }], tempDir: temp });
    const name = await installIsolatedKernelSpec({
      kernelSpecDir: specDir,
      baseSpec,
      policy,
      workspace: ws,
      privateTemp: [temp],
      hideStateDir: false,
    });
    const spec = JSON.parse(readFileSync(join(specDir, name, 'kernel.json'), 'utf8'));
    const at = spec.argv.indexOf('{connection_file}');
    const [stat, paths, ids] = spec.argv.slice(at + 1, at + 4) as string[];
    expect(stat).toMatch(/\/stat$/);
    expect(paths!.split('\n')).toEqual(expect.arrayContaining([ws, join(ws, 'sub'), hidden, base]));
    expect(ids!.split('\n')).toHaveLength(paths!.split('\n').length);
    const s = statSync(hidden, { bigint: true });
    expect(ids!.split('\n')[paths!.split('\n').indexOf(hidden)]).toBe(`${s.dev}:${s.ino}`);
    // The directory between the workspace and the hidden root is pinned (bound onto itself).
    expect(spec.argv.join(' ')).toContain(`--bind ${join(ws, 'sub')} ${join(ws, 'sub')}`);
    expect(spec.metadata.kernelwarden.owner).toMatchObject({ pid: process.pid });
    // The kernelspec directory is hidden: a kernel that could rewrite its spec would launch unisolated next time.
    expect(spec.argv.join(' ')).toContain(`--tmpfs ${specDir}`);
    expect(spec.argv).toContain('--cap-drop');
  });

  it('refuses a workspace that is the system temporary directory, naming it and what to do; one below it works', async () => {
    const policy = createReadIsolationPolicy({ roots: [{ path: data, label: 'data' }], tempDir: temp });
    const opts = { kernelSpecDir: specDir, baseSpec, policy, hideStateDir: false };
    const error = await installIsolatedKernelSpec({ ...opts, workspace: temp }).catch((e: unknown) => e);
    expect(IsolationPolicyError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain(
      `The kernel's working directory ${temp} is a temporary directory every isolated kernel gets a private, ` +
        `empty copy of: it cannot be shared with the kernel too; use a directory of its own (e.g. ${join(temp, 'work')})`,
    );
    expect(readdirSync(specDir)).toEqual([]);
    mkdirSync(join(temp, 'work'));
    expect(await installIsolatedKernelSpec({ ...opts, workspace: join(temp, 'work') })).toMatch(/^kw-iso-/);
  });
});

describe('a bare python in the base spec', () => {
  it('becomes the given interpreter, as jupyter would do for an unwrapped spec', async () => {
    const policy = createReadIsolationPolicy({ roots: [{ path: data, label: 'data' }], tempDir: temp });
    const name = await installIsolatedKernelSpec({
      kernelSpecDir: specDir,
      baseSpec: { ...baseSpec, argv: ['python', '-m', 'ipykernel_launcher', '-f', '{connection_file}'] },
      policy,
      workspace: ws,
      privateTemp: [temp],
      pythonExecutable: '/usr/bin/python3',
    });
    const spec = JSON.parse(readFileSync(join(specDir, name, 'kernel.json'), 'utf8'));
    expect(spec.argv.slice(-5)).toEqual(['/usr/bin/python3', '-m', 'ipykernel_launcher', '-f', '{connection_file}']);
  });

  it('defaults to the interpreter jupyter-server runs on (its shebang, through env and the search path)', () => {
    const bin = join(base, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'jupyter-server'), '#!/usr/bin/env sh\n', { mode: 0o755 });
    const searchPath = `${bin}:/usr/bin:/bin`;
    const argv = resolveKernelArgv(['python3', '-m', 'ipykernel_launcher'], { searchPath });
    expect(argv).toEqual([findExecutable('sh', searchPath)!, '-m', 'ipykernel_launcher']);
    expect(resolveKernelArgv(['R', '--slave'], { searchPath })).toEqual(['R', '--slave']);
    expect(resolveKernelArgv(['python'], { searchPath: '/nonexistent' })).toEqual(['python']);
  });

  it("keeps a venv's interpreter link as it is named, never the base interpreter it links to", () => {
    // A venv: bin/python3 is a symbolic link to a base interpreter; only the link's path finds pyvenv.cfg.
    const venv = join(base, 'venv');
    mkdirSync(join(venv, 'bin'), { recursive: true });
    writeFileSync(join(venv, 'pyvenv.cfg'), 'home = /usr/bin\n');
    symlinkSync(process.execPath, join(venv, 'bin', 'python3'));
    writeFileSync(join(venv, 'bin', 'jupyter-server'), `#!${join(venv, 'bin', 'python3')}\n`, { mode: 0o755 });
    const argv = resolveKernelArgv(['python', '-m', 'ipykernel_launcher'], {
      searchPath: `${join(venv, 'bin')}:/usr/bin`,
    });
    expect(argv[0]).toBe(join(venv, 'bin', 'python3'));
    expect(argv[0]).not.toBe(realpathSync(argv[0]!));
  });

  it('takes the jupyter-server named by KERNELWARDEN_JUPYTER_SERVER, off the search path', () => {
    const venv = join(base, 'env2');
    mkdirSync(join(venv, 'bin'), { recursive: true });
    symlinkSync(process.execPath, join(venv, 'bin', 'python'));
    writeFileSync(join(venv, 'bin', 'jupyter-server'), `#!${join(venv, 'bin', 'python')}\n`, { mode: 0o755 });
    const saved = process.env.KERNELWARDEN_JUPYTER_SERVER;
    process.env.KERNELWARDEN_JUPYTER_SERVER = join(venv, 'bin', 'jupyter-server');
    try {
      expect(jupyterServerInterpreter('/usr/bin:/bin')).toBe(join(venv, 'bin', 'python'));
      expect(resolveKernelArgv(['python3', '-f', 'x'], { searchPath: '/usr/bin:/bin' })).toEqual([
        join(venv, 'bin', 'python'),
        '-f',
        'x',
      ]);
    } finally {
      if (saved === undefined) delete process.env.KERNELWARDEN_JUPYTER_SERVER;
      else process.env.KERNELWARDEN_JUPYTER_SERVER = saved;
    }
  });
});

/** Staged machine facts: cgroup v1 memory and pids under /sys/fs/cgroup (read-only inside any sandbox), as root. */
function stagedFacts(over: Partial<LimitFacts> = {}): LimitFacts {
  const v1 = (controller: 'memory' | 'pids'): CgroupController => ({
    controller,
    version: 1,
    mount: `/sys/fs/cgroup/${controller}`,
    mountRoot: '/',
    key: controller,
    up: 0,
    base: '/sys/fs/cgroup',
    files: [],
  });
  return {
    sandbox: { available: true },
    cgroups: { controllers: [v1('memory'), v1('pids')], problems: {} },
    prlimitPath: '/usr/bin/prlimit',
    root: true,
    networkNamespace: { available: true },
    ...over,
  };
}

describe('installIsolatedKernelSpec with limits', () => {
  const MiB = 1024 * 1024;

  it('hands the limits to the launcher: cgroup lines, prlimit before bwrap, --unshare-net, and records them', async () => {
    const policy = createKernelPolicy({
      memoryBytes: 512 * MiB,
      maxProcesses: 64,
      cpuSeconds: 1.5,
      network: false,
      tempDir: temp,
    });
    const name = await installIsolatedKernelSpec({
      kernelSpecDir: specDir,
      baseSpec,
      policy,
      workspace: ws,
      hideStateDir: false,
      limitSupport: stagedFacts(),
    });
    const spec = JSON.parse(readFileSync(join(specDir, name, 'kernel.json'), 'utf8'));
    const argv: string[] = spec.argv;
    const at = argv.indexOf('{connection_file}');
    // stat, the record's paths and ids, then the tag (the spec's own hash), the cgroup file and one line per controller.
    expect(argv.slice(at + 4, at + 7)).toEqual([
      name.slice(-16),
      '/proc/self/cgroup',
      [
        `memory limit (memoryBytes)\t/sys/fs/cgroup/memory\t/\tmemory\t0\tmemory.limit_in_bytes=${512 * MiB}`,
        'process limit (maxProcesses)\t/sys/fs/cgroup/pids\t/\tpids\t0\tpids.max=64',
      ].join('\n'),
    ]);
    expect(argv.slice(at + 7, at + 11)).toEqual([
      '/usr/bin/prlimit',
      `--data=${512 * MiB}:${512 * MiB}`,
      '--cpu=2:2',
      '--',
    ]);
    expect(argv).toContain('--unshare-net');
    // No hidden root: still the host's filesystem read-only, and a private temp.
    expect(argv.join(' ')).toContain('--ro-bind / / --dev /dev --proc /proc');
    expect(argv.join(' ')).not.toContain('--bind / /');
    expect(argv).toContain('TMPDIR');
    expect(spec.metadata.kernelwarden.limits).toEqual({
      memoryBytes: 512 * MiB,
      maxProcesses: 64,
      cpuSeconds: 1.5,
      network: false,
      mechanisms: {
        memoryBytes: ['cgroup-v1', 'rlimit'],
        maxProcesses: ['cgroup-v1'],
        cpuSeconds: ['rlimit'],
        network: ['network-namespace'],
      },
      cgroupDirs: ['/sys/fs/cgroup'],
    });
    // Other limits make another spec.
    const other = await installIsolatedKernelSpec({
      kernelSpecDir: specDir,
      baseSpec,
      policy: createKernelPolicy({ memoryBytes: 256 * MiB, tempDir: temp }),
      workspace: ws,
      hideStateDir: false,
      limitSupport: stagedFacts(),
    });
    expect(other).not.toBe(name);
  });

  it('refuses a limit nothing here can enforce before writing anything', async () => {
    const error = await installIsolatedKernelSpec({
      kernelSpecDir: specDir,
      baseSpec,
      policy: createReadIsolationPolicy({ roots: [{ path: data, label: 'data' }], maxProcesses: 64, tempDir: temp }),
      workspace: ws,
      privateTemp: [temp],
      hideStateDir: false,
      limitSupport: stagedFacts({ cgroups: { controllers: [], problems: { pids: 'staged: none' } } }),
    }).catch((e: unknown) => e);
    expect(IsolationUnavailableError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ reason: 'limit-unenforceable', limit: 'maxProcesses' });
    expect(readdirSync(specDir)).toEqual([]);
  });

  it('names the malformed limit field of a hand-made policy', async () => {
    const error = await installIsolatedKernelSpec({
      kernelSpecDir: specDir,
      baseSpec,
      policy: { roots: [], allowedRoots: [], tempDir: temp, memoryBytes: 12 },
      workspace: ws,
      hideStateDir: false,
      limitSupport: stagedFacts(),
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'InvalidOptionsError', path: 'policy.memoryBytes' });
  });
});
