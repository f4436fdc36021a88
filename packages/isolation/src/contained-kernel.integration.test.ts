import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway, type LocalGatewayTicket } from '@kernelwarden/local-gateway';
import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BaseKernelSpec, installIsolatedKernelSpec } from './kernelspec.js';
import { removeIsolatedKernelSpecs } from './kernelspec-cleanup.js';
import { createKernelPolicy } from './policy.js';

// A contained kernel (limits only, no hidden root) on a real jupyter-server (the embedded LocalGateway) under real
// bubblewrap, as root: it must not leave anything on the host that a later kernel or program of the host would run.

let base: string;
let home: string;
let ws: string;
let ticket: LocalGatewayTicket;
const installed: string[] = [];
const hostBinary = `/usr/local/bin/kw-contained-probe-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  base = mkdtempSync(join(testGateway().root, 'contained-'));
  ws = join(base, 'ws');
  mkdirSync(ws);
  // The kernels' home, outside the system temporary directory (a contained kernel gets a private one of those).
  home = mkdtempSync('/var/tmp/kw-contained-home-');
  ticket = await LocalGateway.acquire({
    stateDir: join(base, 'state'),
    lingerMs: 0,
    pool: {},
    serverEnv: { HOME: home },
  });
}, 120_000);

afterAll(async () => {
  if (ticket) {
    const res = await fetch(`${ticket.baseUrl}/api/kernels`, { headers: { Authorization: `token ${ticket.token}` } });
    const kernels = (await res.json()) as { name: string }[];
    removeIsolatedKernelSpecs({
      kernelSpecDir: ticket.kernelSpecDir,
      names: installed,
      inUse: kernels.map((k) => k.name),
    });
    await ticket.release();
  }
  rmSync(home, { recursive: true, force: true });
  rmSync(hostBinary, { force: true });
}, 60_000);

async function baseSpec(name: string): Promise<BaseKernelSpec> {
  const res = await fetch(`${ticket.baseUrl}/api/kernelspecs`, { headers: { Authorization: `token ${ticket.token}` } });
  const listing = (await res.json()) as { kernelspecs: Record<string, { spec: Omit<BaseKernelSpec, 'name'> }> };
  return { name, ...listing.kernelspecs[name]!.spec };
}

async function output(kernel: GatewayKernel, code: string): Promise<string> {
  const result = await kernel.execute(code, { timeoutMs: 60_000 });
  expect(result.status, `${result.stderr}${result.error?.evalue ?? ''}`).toBe('ok');
  return result.stdout;
}

describe('a kernel under limits only', () => {
  it('cannot write the host outside its workspace and private temp: no IPython startup file, usercustomize, .Rprofile or host binary for a later kernel to run', async () => {
    const name = await installIsolatedKernelSpec({
      kernelSpecDir: ticket.kernelSpecDir,
      baseSpec: await baseSpec('python3'),
      policy: createKernelPolicy({ network: false, cpuSeconds: 600 }),
      workspace: ws,
      hide: [ticket.stateDir],
      gatewayPid: ticket.pid,
    });
    installed.push(name);
    const marker = join(home, 'startup-ran');
    const payload = `open(${JSON.stringify(marker)}, "a").write("ran\\n")\n`;
    const contained = await GatewayKernel.start({ gateway: ticket, kernelName: name, startupTimeoutMs: 60_000 });
    let attempts: Record<string, string>;
    try {
      attempts = JSON.parse(
        await output(
          contained,
          [
            'import json, os, site, tempfile',
            'home = os.path.expanduser("~")',
            'targets = {',
            '    "ipython startup": os.path.join(home, ".ipython", "profile_default", "startup", "00-kw.py"),',
            '    "usercustomize": os.path.join(site.getusersitepackages(), "usercustomize.py"),',
            '    "Rprofile": os.path.join(home, ".Rprofile"),',
            `    "host binary": ${JSON.stringify(hostBinary)},`,
            '}',
            'out = {}',
            'for what, path in targets.items():',
            '    try:',
            '        os.makedirs(os.path.dirname(path), exist_ok=True)',
            '        with open(path, "w") as handle:',
            `            handle.write(${JSON.stringify(payload)})`,
            '        out[what] = "written"',
            '    except OSError as error:',
            '        out[what] = error.strerror',
            'with open("mine.txt", "w") as handle:',
            '    out["workspace"] = "written"',
            'with tempfile.NamedTemporaryFile() as handle:',
            '    out["private temp"] = "written"',
            'print(json.dumps(out))',
          ].join('\n'),
        ),
      ) as Record<string, string>;
    } finally {
      await contained.shutdown();
    }
    expect(attempts).toEqual({
      'ipython startup': 'Read-only file system',
      usercustomize: 'Read-only file system',
      Rprofile: 'Read-only file system',
      'host binary': 'Read-only file system',
      workspace: 'written',
      'private temp': 'written',
    });
    // Nothing of it is on the host (the server itself may have made an empty ~/.ipython).
    const written = readdirSync(home, { recursive: true, encoding: 'utf8' });
    expect(written.filter((path) => /00-kw\.py|usercustomize|\.Rprofile/.test(path))).toEqual([]);
    expect(existsSync(hostBinary)).toBe(false);
    expect(readdirSync(ws)).toEqual(['mine.txt']);

    // A plain kernel started afterwards (what a warm pool's refill does) runs nothing the contained one left.
    const plain = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 });
    try {
      expect((await output(plain, 'import os; print(os.path.expanduser("~"))')).trim()).toBe(home);
    } finally {
      await plain.shutdown();
    }
    expect(existsSync(marker)).toBe(false);
  });

  it("imports and sources nothing of its workspace at launch, Python or R, and a forked child's output reaches the cell", async () => {
    const workspace = join(base, 'hostile-ws');
    mkdirSync(workspace);
    const marker = join(base, 'hostile-ran');
    writeFileSync(
      join(workspace, 'zmq.py'),
      [
        'import os, sys',
        `open(${JSON.stringify(marker)}, "a").write("zmq.py ran\\n")`,
        'here = os.path.dirname(os.path.abspath(__file__))',
        'sys.path[:] = [p for p in sys.path if p not in ("", ".", here)]',
        'del sys.modules["zmq"]',
        'import zmq as _real',
        'sys.modules["zmq"] = _real',
      ].join('\n'),
    );
    writeFileSync(
      join(workspace, '.Rprofile'),
      `cat("Rprofile ran\\n", file = ${JSON.stringify(marker)}, append = TRUE)\n`,
    );
    const policy = createKernelPolicy({ network: false });
    for (const language of ['python3', 'ir']) {
      const name = await installIsolatedKernelSpec({
        kernelSpecDir: ticket.kernelSpecDir,
        baseSpec: await baseSpec(language),
        policy,
        workspace,
        extraReadWrite: [base],
        hide: [ticket.stateDir],
        gatewayPid: ticket.pid,
      });
      installed.push(name);
      const kernel = await GatewayKernel.start({ gateway: ticket, kernelName: name, startupTimeoutMs: 60_000 });
      try {
        if (language === 'python3') {
          const said = await output(
            kernel,
            [
              'import os, sys, time',
              'print(os.getcwd(), "" in sys.path, flush=True)',
              'child = os.fork()',
              'if child == 0:',
              '    print("from the forked child", flush=True)',
              '    os._exit(0)',
              'os.waitpid(child, 0)',
              'time.sleep(0.5)',
            ].join('\n'),
          );
          expect(said).toBe(`${workspace} True\nfrom the forked child\n`);
        } else {
          expect(await output(kernel, 'cat(getwd())')).toBe(workspace);
        }
      } finally {
        await kernel.shutdown();
      }
    }
    expect(existsSync(marker)).toBe(false);
  });
});
