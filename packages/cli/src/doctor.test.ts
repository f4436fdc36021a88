import type { LimitSupport } from '@kernelwarden/isolation';
import { describe, expect, it } from 'vitest';
import { type DoctorProbe, doctorCommand, formatDoctor, limitChecks, runDoctor } from './doctor.js';
import { INTERPRETER_PROBE } from './python-interpreter.js';

function fakeMachine(opts: {
  node?: string;
  commands?: Record<string, string>;
  specs?: Record<string, string> | 'broken';
  bwrapWorks?: boolean;
  files?: Record<string, string>;
  env?: Record<string, string>;
  /** What each interpreter answers to the probe: its version and ipykernel's, a line each. */
  interpreters?: Record<string, string>;
}): DoctorProbe {
  const commands = opts.commands ?? {};
  return {
    nodeVersion: opts.node ?? '22.3.0',
    ...(opts.env ? { env: opts.env } : {}),
    readFile: (path) =>
      opts.files?.[path] ?? (path === commands['jupyter-server'] ? '#!/usr/bin/python3\n' : undefined),
    run(cmd, args) {
      if (cmd === 'sh') {
        const name = String(args[1]).replace('command -v ', '');
        const path = commands[name];
        return { status: path ? 0 : 1, stdout: path ? `${path}\n` : '', stderr: '' };
      }
      if (String(args[1]).includes('KernelSpecManager')) return { status: 0, stdout: '/usr/bin/python3\n', stderr: '' };
      if (args[1] === INTERPRETER_PROBE) {
        const facts = opts.interpreters?.[cmd] ?? (cmd === '/usr/bin/python3' ? '3.11.2\n6.17.0\n' : undefined);
        return facts === undefined
          ? { status: null, stdout: '', stderr: '' }
          : { status: 0, stdout: facts, stderr: '' };
      }
      if (cmd === '/usr/bin/python3') {
        if (opts.specs === 'broken') return { status: 1, stdout: '', stderr: 'ModuleNotFoundError: jupyter_client' };
        return { status: 0, stdout: JSON.stringify(opts.specs ?? {}), stderr: '' };
      }
      if (cmd === 'bwrap') {
        return opts.bwrapWorks
          ? { status: 0, stdout: '', stderr: '' }
          : { status: 1, stdout: '', stderr: 'bwrap: No permissions to creating new namespace' };
      }
      if (args[0] === '--version')
        return { status: 0, stdout: cmd.endsWith('R') ? 'R version 4.2.2\n' : '1.23.3\n', stderr: '' };
      return { status: null, stdout: '', stderr: '' };
    },
  };
}

describe('runDoctor', () => {
  it('reports everything present as ok', () => {
    const checks = runDoctor(
      fakeMachine({
        commands: { 'jupyter-server': '/usr/bin/jupyter-server', R: '/usr/bin/R', bwrap: '/usr/bin/bwrap' },
        specs: { python3: '/usr/share/jupyter/kernels/python3', ir: '/usr/local/share/jupyter/kernels/ir' },
        bwrapWorks: true,
      }),
    );
    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['Node.js', true],
      ['jupyter-server', true],
      ['kernelspec python3', true],
      ['kernelspec ir', true],
      ['python kernel', true],
      ['R', true],
      ['bubblewrap', true],
      ['namespaces (bwrap sandbox)', true],
    ]);
    expect(checks.find((c) => c.name === 'jupyter-server')?.detail).toBe('/usr/bin/jupyter-server (1.23.3)');
    expect(checks.find((c) => c.name === 'python kernel')?.detail).toBe(
      '/usr/bin/python3 (Python 3.11.2, ipykernel 6.17.0), from the python3 kernelspec',
    );
    expect(formatDoctor(checks)).toMatch(/Everything kernelwarden needs is here/);
  });

  it('gives a fix for every missing piece', () => {
    const checks = runDoctor(fakeMachine({ node: '20.11.0', files: { '/proc/sys/user/max_user_namespaces': '0\n' } }));
    const missing = checks.filter((c) => !c.ok);
    expect(missing.map((c) => c.name)).toEqual([
      'Node.js',
      'jupyter-server',
      'kernelspec python3',
      'kernelspec ir',
      'python kernel',
      'R',
      'bubblewrap',
      'namespaces (bwrap sandbox)',
    ]);
    for (const check of missing) expect(check.fix, check.name).toBeTruthy();
    expect(checks[0]?.detail).toBe('v20.11.0 (kernelwarden needs >= 20.19)');
    const text = formatDoctor(checks);
    expect(text).toMatch(/FAIL {2}jupyter-server/);
    expect(text).toMatch(/warn {2}R: /);
    expect(text).toMatch(/fix: sudo apt-get install -y jupyter-server/);
  });

  it('names the interpreter of VIRTUAL_ENV, and the command that installs ipykernel where it is missing', () => {
    const machine = (ipykernel: string) =>
      fakeMachine({
        commands: { 'jupyter-server': '/usr/bin/jupyter-server' },
        env: { VIRTUAL_ENV: '/home/u/proj/.venv' },
        interpreters: { '/home/u/proj/.venv/bin/python': `3.12.1\n${ipykernel}\n` },
      });
    expect(runDoctor(machine('7.4.0')).find((c) => c.name === 'python kernel')).toMatchObject({
      ok: true,
      detail: '/home/u/proj/.venv/bin/python (Python 3.12.1, ipykernel 7.4.0), from VIRTUAL_ENV',
    });
    expect(runDoctor(machine('')).find((c) => c.name === 'python kernel')).toMatchObject({
      ok: false,
      required: true,
      detail: '/home/u/proj/.venv/bin/python (Python 3.12.1, no ipykernel), from VIRTUAL_ENV',
      fix: '/home/u/proj/.venv/bin/python -m pip install ipykernel',
    });
  });

  it('names the namespace switch that blocks bubblewrap', () => {
    const checks = runDoctor(
      fakeMachine({
        commands: { bwrap: '/usr/bin/bwrap' },
        files: { '/proc/sys/kernel/apparmor_restrict_unprivileged_userns': '1' },
      }),
    );
    const ns = checks.find((c) => c.name === 'namespaces (bwrap sandbox)');
    expect(ns?.detail).toMatch(/No permissions/);
    expect(ns?.fix).toMatch(/apparmor_restrict_unprivileged_userns=0/);
  });

  it('explains a jupyter-server whose Python cannot list kernelspecs', () => {
    const checks = runDoctor(
      fakeMachine({ commands: { 'jupyter-server': '/usr/bin/jupyter-server' }, specs: 'broken' }),
    );
    expect(checks.find((c) => c.name === 'kernelspec python3')).toMatchObject({
      ok: false,
      detail: '/usr/bin/python3 cannot list kernelspecs: ModuleNotFoundError: jupyter_client',
    });
  });

  it('checks the jupyter-server KERNELWARDEN_JUPYTER_SERVER names, and the kernelspecs its Python sees', () => {
    const venvServer = '/home/u/venv/bin/jupyter-server';
    const checks = runDoctor(
      fakeMachine({
        commands: { 'jupyter-server': '/usr/bin/jupyter-server', [venvServer]: venvServer },
        files: { [venvServer]: '#!/usr/bin/python3\n' },
        specs: { python3: '/home/u/venv/share/jupyter/kernels/python3' },
        env: { KERNELWARDEN_JUPYTER_SERVER: venvServer },
      }),
    );
    expect(checks.find((c) => c.name === 'jupyter-server')?.detail).toBe(
      `${venvServer} (1.23.3, from KERNELWARDEN_JUPYTER_SERVER)`,
    );
    expect(checks.find((c) => c.name === 'kernelspec python3')?.detail).toBe(
      '/home/u/venv/share/jupyter/kernels/python3',
    );
  });

  it('says when KERNELWARDEN_JUPYTER_SERVER names no executable', () => {
    const checks = runDoctor(
      fakeMachine({
        commands: { 'jupyter-server': '/usr/bin/jupyter-server' },
        env: { KERNELWARDEN_JUPYTER_SERVER: '/nowhere/jupyter-server' },
      }),
    );
    expect(checks.find((c) => c.name === 'jupyter-server')).toMatchObject({
      ok: false,
      detail: 'KERNELWARDEN_JUPYTER_SERVER=/nowhere/jupyter-server is not an executable',
    });
    expect(checks.find((c) => c.name === 'jupyter-server')?.fix).toMatch(/KERNELWARDEN_JUPYTER_SERVER/);
  });
});

describe('limitChecks', () => {
  it('says per limit flag what enforces it here, and how to fix one nothing can enforce', () => {
    const status = (enforceable: boolean, detail: string) => ({ enforceable, mechanisms: [], detail });
    const support = {
      limits: {
        memoryBytes: status(true, 'a cgroup v1 memory controller (…), and RLIMIT_DATA on each process'),
        maxProcesses: status(
          false,
          'not enforceable: no writable pids cgroup (…), and Linux does not enforce RLIMIT_NPROC for root',
        ),
        cpuSeconds: status(true, 'RLIMIT_CPU on each process of the kernel'),
        network: status(true, 'a network namespace of its own with only loopback (bubblewrap --unshare-net)'),
      },
    } as unknown as LimitSupport;
    const checks = limitChecks(support);
    expect(checks.map((c) => [c.name, c.ok, c.required])).toEqual([
      ['limit --memory', true, false],
      ['limit --max-processes', false, false],
      ['limit --cpu-time', true, false],
      ['limit --no-network', true, false],
    ]);
    expect(checks[1]?.fix).toMatch(/non-root user, or where a pids cgroup is writable/);
    expect(checks[0]?.fix).toBeUndefined();
    expect(formatDoctor(checks)).toContain('warn  limit --max-processes: not enforceable: no writable pids cgroup');
  });
});

describe('doctorCommand', () => {
  const healthy = () =>
    fakeMachine({
      commands: { 'jupyter-server': '/usr/bin/jupyter-server', R: '/usr/bin/R', bwrap: '/usr/bin/bwrap' },
      specs: { python3: '/usr/share/jupyter/kernels/python3', ir: '/usr/local/share/jupyter/kernels/ir' },
      bwrapWorks: true,
    });
  const support = {
    limits: {
      memoryBytes: {
        enforceable: true,
        mechanisms: ['cgroup-v1', 'rlimit'],
        detail: 'a cgroup v1 memory controller (kernels’ cgroups in /sys/fs/cgroup/memory) …, and RLIMIT_DATA',
      },
      maxProcesses: {
        enforceable: false,
        mechanisms: [],
        detail: 'not enforceable: no writable pids cgroup (…), and Linux does not enforce RLIMIT_NPROC for root',
      },
      cpuSeconds: { enforceable: true, mechanisms: ['rlimit'], detail: 'RLIMIT_CPU on each process of the kernel' },
      network: {
        enforceable: true,
        mechanisms: ['network-namespace'],
        detail: 'a network namespace of its own with only loopback (bubblewrap --unshare-net)',
      },
    },
  } as unknown as LimitSupport;

  function capture() {
    let text = '';
    return { io: { stdout: { write: (chunk: string) => (text += chunk) } }, text: () => text };
  }

  it('prints a line per limit after the other checks, and a limit nothing enforces is a warning, not a failure', async () => {
    const out = capture();
    const code = await doctorCommand(false, out.io, { probe: healthy(), detectLimits: async () => support });
    expect(code).toBe(0);
    const lines = out.text().split('\n');
    const names = lines.filter((l) => /^(ok|warn|FAIL) /.test(l)).map((l) => l.replace(/:.*$/, ''));
    expect(names.slice(-4)).toEqual([
      'ok    limit --memory',
      'warn  limit --max-processes',
      'ok    limit --cpu-time',
      'ok    limit --no-network',
    ]);
    expect(out.text()).toContain('ok    limit --memory: a cgroup v1 memory controller');
    expect(out.text()).toContain('fix: run as a non-root user, or where a pids cgroup is writable');
    expect(out.text()).toContain('1 missing: limit --max-processes.');
  });

  it('gives each limit and its mechanisms in --json', async () => {
    const out = capture();
    await doctorCommand(true, out.io, { probe: healthy(), detectLimits: async () => support });
    const { checks } = JSON.parse(out.text()) as { checks: { name: string; ok: boolean; mechanisms?: string[] }[] };
    expect(checks.filter((c) => c.name.startsWith('limit ')).map((c) => [c.name, c.ok, c.mechanisms])).toEqual([
      ['limit --memory', true, ['cgroup-v1', 'rlimit']],
      ['limit --max-processes', false, []],
      ['limit --cpu-time', true, ['rlimit']],
      ['limit --no-network', true, ['network-namespace']],
    ]);
    expect(checks[0]).toMatchObject({ name: 'Node.js', ok: true });
  });

  it('still exits 1 when something required is missing', async () => {
    const out = capture();
    const code = await doctorCommand(false, out.io, { probe: fakeMachine({}), detectLimits: async () => support });
    expect(code).toBe(1);
    expect(out.text()).toContain('FAIL  jupyter-server');
    expect(out.text()).toContain('limit --no-network');
  });
});
