import { homedir } from 'node:os';
import { join } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_JOURNAL_MAX_AGE_MS,
  DEFAULT_JOURNAL_MAX_BYTES,
  DEFAULT_LAUNCHER,
  DEFAULT_LINGER_MS,
  DEFAULT_POOL,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_ROOT_DIR,
  DEFAULT_SERVER_COMMAND,
  DEFAULT_STARTUP_TIMEOUT_MS,
  DEFAULT_STOP_TIMEOUT_MS,
  resolveLocalGatewayOptions,
  resolveLocation,
  resolveStopOptions,
} from './options.js';
import { DEFAULT_START_QUEUE_TIMEOUT_MS, defaultMaxConcurrentStarts, defaultMaxKernels } from './start-capacity.js';

describe('resolveLocalGatewayOptions', () => {
  it('applies every default, taken from the named constants', () => {
    expect(resolveLocalGatewayOptions({}, {})).toEqual({
      stateDir: join(homedir(), '.local', 'state', 'kernelwarden'),
      command: DEFAULT_SERVER_COMMAND,
      signal: undefined,
      lingerMs: DEFAULT_LINGER_MS,
      startupTimeoutMs: DEFAULT_STARTUP_TIMEOUT_MS,
      requestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MS,
      jupyterPath: [],
      serverEnv: {},
      serverArgs: [],
      rootDir: DEFAULT_ROOT_DIR,
      stopTimeoutMs: DEFAULT_STOP_TIMEOUT_MS,
      onEvent: undefined,
      pool: DEFAULT_POOL,
      maxKernels: defaultMaxKernels(),
      maxConcurrentStarts: defaultMaxConcurrentStarts(),
      startQueueTimeoutMs: DEFAULT_START_QUEUE_TIMEOUT_MS,
      journal: { enabled: true, maxBytes: DEFAULT_JOURNAL_MAX_BYTES, maxAgeMs: DEFAULT_JOURNAL_MAX_AGE_MS },
      launcher: DEFAULT_LAUNCHER,
      launcherPreload: [],
    });
  });

  it('takes the launcher from the option, else KERNELWARDEN_LAUNCHER; the preload likewise; names a bad one', () => {
    expect(DEFAULT_LAUNCHER).toBe('fork');
    expect(resolveLocalGatewayOptions({}, {}).launcher).toBe('fork');
    expect(resolveLocalGatewayOptions({}, { KERNELWARDEN_LAUNCHER: 'exec' }).launcher).toBe('exec');
    expect(resolveLocalGatewayOptions({ launcher: 'fork' }, { KERNELWARDEN_LAUNCHER: 'exec' }).launcher).toBe('fork');
    expect(
      resolveLocalGatewayOptions({}, { KERNELWARDEN_LAUNCHER_PRELOAD: ' numpy, pandas.core ,' }).launcherPreload,
    ).toEqual(['numpy', 'pandas.core']);
    expect(resolveLocalGatewayOptions({ launcherPreload: ['scipy'] }, {}).launcherPreload).toEqual(['scipy']);
    const failures: [() => unknown, string][] = [
      [() => resolveLocalGatewayOptions({ launcher: 'spawn' as 'fork' }, {}), 'launcher'],
      [() => resolveLocalGatewayOptions({}, { KERNELWARDEN_LAUNCHER: 'forks' }), 'KERNELWARDEN_LAUNCHER'],
      [() => resolveLocalGatewayOptions({ launcherPreload: ['numpy', 'os;rm'] }, {}), 'launcherPreload.1'],
      [() => resolveLocalGatewayOptions({}, { KERNELWARDEN_LAUNCHER_PRELOAD: 'a-b' }), 'KERNELWARDEN_LAUNCHER_PRELOAD'],
    ];
    for (const [call, path] of failures) {
      let error: unknown;
      try {
        call();
      } catch (e) {
        error = e;
      }
      expect(InvalidOptionsError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain(path);
    }
  });

  it('sizes the start capacity from the machine: a start slot per core, kernels from three quarters of its memory', () => {
    expect(defaultMaxConcurrentStarts(2)).toBe(2);
    expect(defaultMaxConcurrentStarts(0)).toBe(1);
    expect(defaultMaxKernels(24 * 1024 ** 3)).toBe(115);
    expect(defaultMaxKernels(1024 ** 3)).toBe(4);
    const given = resolveLocalGatewayOptions({ maxKernels: 8, maxConcurrentStarts: 3, startQueueTimeoutMs: 0 }, {});
    expect(given).toMatchObject({ maxKernels: 8, maxConcurrentStarts: 3, startQueueTimeoutMs: 0 });
    for (const [field, value] of [
      ['maxKernels', 0],
      ['maxConcurrentStarts', 1.5],
      ['startQueueTimeoutMs', -1],
    ] as const) {
      let error: unknown;
      try {
        resolveLocalGatewayOptions({ [field]: value }, {});
      } catch (e) {
        error = e;
      }
      expect(InvalidOptionsError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain(field);
    }
  });

  it('takes the warm pool from KERNELWARDEN_POOL (0, a python3 count, or counts per kernelspec), pool over it', () => {
    expect(resolveLocalGatewayOptions({}, { KERNELWARDEN_POOL: '0' }).pool).toEqual({});
    expect(resolveLocalGatewayOptions({}, { KERNELWARDEN_POOL: '2' }).pool).toEqual({ python3: 2 });
    expect(resolveLocalGatewayOptions({}, { KERNELWARDEN_POOL: 'python3=1, ir=2' }).pool).toEqual({
      python3: 1,
      ir: 2,
    });
    expect(resolveLocalGatewayOptions({ pool: { ir: 1, python3: 0 } }, { KERNELWARDEN_POOL: '3' }).pool).toEqual({
      ir: 1,
    });
    for (const bad of ['python3=many', '-1', 'no/slash=1']) {
      let error: unknown;
      try {
        resolveLocalGatewayOptions({}, { KERNELWARDEN_POOL: bad });
      } catch (e) {
        error = e;
      }
      expect(InvalidOptionsError.isInstance(error), bad).toBe(true);
      expect((error as InvalidOptionsError).issues[0]?.path).toMatch(/^KERNELWARDEN_POOL/);
    }
    expect(() => resolveLocalGatewayOptions({ pool: { python3: 1.5 } }, {})).toThrow(/pool\.python3/);
  });

  it('takes the state directory and the server from the environment, and explicit options over both', () => {
    const env = {
      KERNELWARDEN_STATE_DIR: 'rel/state',
      XDG_STATE_HOME: '/xdg',
      KERNELWARDEN_JUPYTER_SERVER: '/venv/js',
    };
    expect(resolveLocalGatewayOptions({}, env)).toMatchObject({
      stateDir: join(process.cwd(), 'rel/state'),
      command: '/venv/js',
    });
    expect(resolveLocalGatewayOptions({}, { XDG_STATE_HOME: '/xdg' }).stateDir).toBe('/xdg/kernelwarden');
    expect(resolveLocalGatewayOptions({ stateDir: '/s', command: 'js', lingerMs: 0 }, env)).toMatchObject({
      stateDir: '/s',
      command: 'js',
      lingerMs: 0,
    });
    // An empty variable counts as unset.
    expect(resolveLocalGatewayOptions({}, { KERNELWARDEN_JUPYTER_SERVER: '' }).command).toBe(DEFAULT_SERVER_COMMAND);
  });

  it('throws InvalidOptionsError naming the field, for acquire, stop and status alike', () => {
    const path = (f: () => unknown) => {
      try {
        f();
      } catch (error) {
        expect(InvalidOptionsError.isInstance(error)).toBe(true);
        return (error as InvalidOptionsError).path;
      }
      throw new Error('expected InvalidOptionsError');
    };
    expect(path(() => resolveLocalGatewayOptions({ startupTimeoutMs: -1 }))).toBe('startupTimeoutMs');
    expect(path(() => resolveLocalGatewayOptions({ serverEnv: { 'not a name': 'x' } }))).toBe('serverEnv.not a name');
    expect(path(() => resolveStopOptions({ stopTimeoutMs: -5 }))).toBe('stopTimeoutMs');
    expect(path(() => resolveLocalGatewayOptions({ journal: { maxBytes: 1.5 } }))).toBe('journal.maxBytes');
    expect(path(() => resolveLocalGatewayOptions({ journal: { maxAgeMs: -1 } }))).toBe('journal.maxAgeMs');
    expect(path(() => resolveLocalGatewayOptions({ journal: { lines: 5 } as never }))).toBe('journal.lines');
    expect(path(() => resolveLocalGatewayOptions({ journal: { enabled: 'no' } as never }))).toBe('journal.enabled');
    expect(resolveLocalGatewayOptions({ journal: { enabled: false } }, {}).journal.enabled).toBe(false);
    expect(resolveLocalGatewayOptions({ journal: { maxBytes: 0 } }, {}).journal).toEqual({
      enabled: true,
      maxBytes: 0,
      maxAgeMs: DEFAULT_JOURNAL_MAX_AGE_MS,
    });
    expect(path(() => resolveLocation({ lingerMs: 5 } as never))).toBe('lingerMs');
    expect(resolveStopOptions({}, {}).stopTimeoutMs).toBe(DEFAULT_STOP_TIMEOUT_MS);
  });
});
