import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kernelLaunchConfig } from './kernel-launch.js';
import { LOCAL_GATEWAY_SERVER_CONFIG } from './server-config.js';

describe('kernelLaunchConfig', () => {
  it('is valid Python, with the settings quoted as string literals', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-launch-config-'));
    try {
      const file = join(dir, 'jupyter_server_config.py');
      const text =
        LOCAL_GATEWAY_SERVER_CONFIG +
        kernelLaunchConfig({
          instance: '0123456789abcdef',
          ipcDir: '/tmp/kw-ipc-"quoted"',
          kernelLogDir: "/state/kernel-logs/it's",
          loadedMarker: '/state/runtime/kernelwarden-config-loaded',
        });
      writeFileSync(file, text);
      // ast.parse compiles without running it: a syntax error anywhere fails here, not in a server that would then
      // start without its configuration.
      const out = execFileSync(
        'python3',
        ['-c', 'import ast, sys; ast.parse(open(sys.argv[1]).read()); print("ok")', file],
        {
          encoding: 'utf8',
        },
      );
      expect(out.trim()).toBe('ok');
      expect(text).toContain('_KW_IPC_DIR = "/tmp/kw-ipc-\\"quoted\\""');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('boots ipykernel through a snippet that is itself valid Python, and starts R kernels without their init files', () => {
    const text = kernelLaunchConfig({ instance: 'ab', ipcDir: '/i', kernelLogDir: '/l', loadedMarker: '/m' });
    const helpers = text.slice(text.indexOf('_KW_IPYKERNEL_BOOT = r'), text.indexOf('def _kw_safe_id'));
    const out = execFileSync(
      'python3',
      [
        '-c',
        [
          'import ast, json, os as _kw_os',
          helpers,
          'cmd, booted = _kw_boot_ipykernel(["python", "-m", "ipykernel_launcher", "-f", "c.json"], True)',
          'ast.parse(cmd[2])',
          'print(json.dumps({"argv": cmd[:2] + cmd[3:], "booted": booted, "first": cmd[2].splitlines()[0]}))',
          'print(json.dumps(_kw_boot_ipykernel(["R", "-e", "x"], True)))',
          'print(json.dumps(_kw_safe_r(["/usr/bin/R", "--slave", "-e", "IRkernel::main()", "--args", "c.json"])))',
          'print(json.dumps(_kw_safe_r(["R", "--no-restore", "-e", "IRkernel::main()"])))',
          'print(json.dumps(_kw_safe_r(["python", "-m", "ipykernel_launcher"])))',
        ].join('\n'),
      ],
      { encoding: 'utf8' },
    );
    const [python, other, r, rWithOne, notR] = out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as unknown);
    expect(python).toEqual({ argv: ['python', '-c', '-f', 'c.json'], booted: true, first: '_kw_drop_safepath = True' });
    expect(other).toEqual([['R', '-e', 'x'], false]);
    expect(r).toEqual([
      '/usr/bin/R',
      '--no-init-file',
      '--no-environ',
      '--no-restore',
      '--slave',
      '-e',
      'IRkernel::main()',
      '--args',
      'c.json',
    ]);
    expect(rWithOne).toEqual(['R', '--no-init-file', '--no-environ', '--no-restore', '-e', 'IRkernel::main()']);
    expect(notR).toEqual(['python', '-m', 'ipykernel_launcher']);
  });
});
