import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { gatewayLayout } from './layout.js';
import { installPythonPackage, PYTHON_PACKAGE, serverConfigFile, shippedPythonPackageDir } from './python-package.js';
import { LOCAL_GATEWAY_SERVER_CONFIG } from './server-config.js';

/** The Python of Debian's jupyter-server (the default stack), which has jupyter_server, jupyter_client and zmq. */
const PYTHON = '/usr/bin/python3';

describe('the kernelwarden_gateway Python package', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kw-python-package-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('is copied into the state directory, 0700 directories and 0600 files, replacing what was there', () => {
    const layout = gatewayLayout(dir);
    mkdirSync(join(layout.python, PYTHON_PACKAGE, '__pycache__'), { recursive: true });
    writeFileSync(join(layout.python, PYTHON_PACKAGE, 'stale.py'), 'raise SystemExit(1)\n');
    installPythonPackage(layout);
    const shipped = readdirSync(shippedPythonPackageDir())
      .filter((name) => name.endsWith('.py'))
      .sort();
    expect(shipped).toContain('__init__.py');
    const copied = join(layout.python, PYTHON_PACKAGE);
    expect(readdirSync(copied).sort()).toEqual(shipped);
    expect(statSync(layout.python).mode & 0o777).toBe(0o700);
    expect(statSync(copied).mode & 0o777).toBe(0o700);
    for (const name of shipped) {
      expect(statSync(join(copied, name)).mode & 0o777).toBe(0o600);
      expect(readFileSync(join(copied, name), 'utf8')).toBe(
        readFileSync(join(shippedPythonPackageDir(), name), 'utf8'),
      );
    }
  });

  it('refuses to start without the shipped package, naming where it looked', () => {
    expect(() => installPythonPackage(gatewayLayout(dir), join(dir, 'nowhere'))).toThrow(
      expect.objectContaining({ code: 'LOCAL_GATEWAY_CONFIG', message: expect.stringContaining('nowhere') }),
    );
  });

  it('is loaded by the config file from the private copy, which configures the server and its extension', () => {
    const layout = gatewayLayout(dir);
    installPythonPackage(layout);
    const marker = join(dir, "marker-it's");
    const text = serverConfigFile(layout, {
      instance: '0123456789abcdef',
      ipcDir: join(dir, 'ipc-"quoted"'),
      kernelLogDir: join(dir, 'logs'),
      loadedMarker: marker,
      maxConcurrentStarts: 3,
      maxKernels: 9,
      startQueueTimeoutMs: 1500,
      journal: { enabled: false, maxBytes: 1024, maxAgeMs: 2500 },
      launcher: 'exec',
      launcherPreload: ['json', 'os.path'],
      launcherStatusFile: join(dir, 'launchers.json'),
    });
    const file = join(dir, 'jupyter_server_config.py');
    writeFileSync(file, text);
    // Run as jupyter's config loader runs it: with get_config() in its namespace.
    const out = execFileSync(
      PYTHON,
      [
        '-c',
        [
          'import json, sys',
          'from traitlets.config import Config',
          'c = Config()',
          'exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"get_config": lambda: c})',
          'import kernelwarden_gateway as k',
          'print(json.dumps({"file": k.__file__, "transport": c.KernelManager.transport,',
          '  "ipc": k.launch._settings.ipc_dir, "kernels": k.capacity.gate.limits.max_kernels,',
          '  "starts": k.capacity.gate.limits.max_starting, "wait": k.capacity.gate.limits.max_wait,',
          '  "extensions": c.ServerApp.jpserver_extensions.to_dict(),',
          '  "journal": [k.settings.journal_enabled, k.settings.journal_max_bytes, k.settings.journal_max_age_s],',
          '  "launcher": k.fork_launch.mode(), "preload": k.fork_launch._settings.preload}))',
        ].join('\n'),
        file,
      ],
      { encoding: 'utf8', cwd: dir },
    );
    expect(JSON.parse(out)).toEqual({
      file: join(layout.python, PYTHON_PACKAGE, '__init__.py'),
      transport: 'ipc',
      ipc: join(dir, 'ipc-"quoted"'),
      kernels: 9,
      starts: 3,
      wait: 1.5,
      extensions: { update: { kernelwarden_gateway: true } },
      journal: [false, 1024, 2.5],
      launcher: 'exec',
      preload: ['json', 'os.path'],
    });
    expect(JSON.parse(readFileSync(join(dir, 'launchers.json'), 'utf8'))).toMatchObject({
      mode: 'exec',
      launchers: [],
    });
    // The extension writes the marker when jupyter-server loads it (the integration tests start real servers).
    expect(existsSync(marker)).toBe(false);
  });

  it('sets what LOCAL_GATEWAY_SERVER_CONFIG (the file to copy for a server of your own) sets', () => {
    const layout = gatewayLayout(dir);
    installPythonPackage(layout);
    const standalone = join(dir, 'standalone.py');
    writeFileSync(standalone, LOCAL_GATEWAY_SERVER_CONFIG);
    const out = execFileSync(
      PYTHON,
      [
        '-c',
        [
          'import json, sys, zmq',
          'from traitlets.config import Config',
          'ours, theirs = Config(), Config()',
          'exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"get_config": lambda: theirs})',
          'sub = zmq.Context.instance().socket(zmq.SUB)',
          'theirs_hwm = sub.getsockopt(zmq.RCVHWM)',
          'sys.path.insert(0, sys.argv[2])',
          'from kernelwarden_gateway import server_settings',
          'server_settings.apply(ours)',
          'print(json.dumps({"same": ours == theirs, "hwm": theirs_hwm, "keys": sorted(ours.keys())}))',
        ].join('\n'),
        standalone,
        layout.python,
      ],
      { encoding: 'utf8', cwd: dir },
    );
    const found = JSON.parse(out) as { same: boolean; hwm: number; keys: string[] };
    expect(found).toEqual({ same: true, hwm: 0, keys: [expect.any(String)] });
  });
});
