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

  it('boots ipykernel through a snippet that is itself valid Python', () => {
    const text = kernelLaunchConfig({ instance: 'ab', ipcDir: '/i', kernelLogDir: '/l', loadedMarker: '/m' });
    const boot = execFileSync(
      'python3',
      [
        '-c',
        `${text.slice(text.indexOf('_KW_IPYKERNEL_BOOT = ('), text.indexOf('def _kw_boot_ipykernel'))}\nimport ast\nast.parse(_KW_IPYKERNEL_BOOT)\nprint(_KW_IPYKERNEL_BOOT.count(chr(10)))`,
      ],
      { encoding: 'utf8' },
    );
    expect(Number(boot.trim())).toBe(9);
  });
});
