#!/usr/bin/env node
// Makes sure the real Jupyter stack the integration tests and the CLI need is on this machine:
// jupyter-server, the python3 and ir kernelspecs, and a working bubblewrap. Quick and silent when all is there.
// When something is missing it installs it (pip where PyPI answers, else apt-get as root on Debian);
// otherwise it stops with the exact command a person should run.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const APT_PACKAGES = ['jupyter-server', 'python3-ipykernel', 'r-base-core', 'r-cran-irkernel', 'bubblewrap', 'tmux'];
const quiet = process.argv.includes('--quiet');
const checkOnly = process.argv.includes('--check');

function has(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

function serverPython() {
  // The interpreter jupyter-server runs under (its shebang), which is the one that knows its kernelspecs.
  try {
    const path = execFileSync('sh', ['-c', 'command -v jupyter-server'], { encoding: 'utf8' }).trim();
    const first = readFileSync(path, 'utf8').split('\n', 1)[0];
    if (first.startsWith('#!')) return first.slice(2).trim().split(/\s+/)[0];
  } catch {
    // not installed
  }
  return undefined;
}

function kernelspecs() {
  const python = serverPython();
  if (!python) return {};
  try {
    const out = execFileSync(
      python,
      [
        '-c',
        'import json; from jupyter_client.kernelspec import find_kernel_specs; print(json.dumps(find_kernel_specs()))',
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
    );
    return JSON.parse(out);
  } catch {
    return {};
  }
}

function bwrapWorks() {
  if (!has('bwrap')) return false;
  const r = spawnSync('bwrap', ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-pid', 'true'], {
    stdio: 'ignore',
  });
  return r.status === 0;
}

export function missing() {
  const specs = kernelspecs();
  const gaps = [];
  if (!has('jupyter-server')) gaps.push('jupyter-server');
  if (!specs.python3) gaps.push('the python3 kernelspec (ipykernel)');
  if (!specs.ir) gaps.push('the ir kernelspec (IRkernel)');
  if (!has('R')) gaps.push('R');
  if (!bwrapWorks()) gaps.push('a working bubblewrap (bwrap)');
  if (!has('tmux')) gaps.push('tmux (drives the terminal tests of the CLI)');
  return gaps;
}

async function pypiReachable() {
  try {
    const res = await fetch('https://pypi.org/simple/pip/', { signal: AbortSignal.timeout(3000) });
    return res.ok;
  } catch {
    return false;
  }
}

function run(cmd, args) {
  if (!quiet) console.error(`setup-jupyter: ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, {
    stdio: ['ignore', quiet ? 'ignore' : 'inherit', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return r.status === 0;
}

function registerIrKernel() {
  // Debian's r-cran-irkernel ships IRkernel but may not register the kernelspec.
  if (kernelspecs().ir || !has('R')) return;
  run('R', ['--slave', '-e', "IRkernel::installspec(user = FALSE, prefix = '/usr/local')"]) ||
    run('R', ['--slave', '-e', 'IRkernel::installspec(user = TRUE)']);
}

async function main() {
  let gaps = missing();
  if (gaps.length === 0) return;
  if (gaps.length === 1 && gaps[0].startsWith('the ir kernelspec') && has('R')) {
    registerIrKernel();
    gaps = missing();
    if (gaps.length === 0) return;
  }
  if (checkOnly) {
    console.error(`setup-jupyter: missing ${gaps.join(', ')}`);
    process.exit(1);
  }
  console.error(`setup-jupyter: missing ${gaps.join(', ')}; installing`);
  const isRoot = process.getuid?.() === 0;
  const debian = has('apt-get') && has('dpkg');
  const pipFirst = (await pypiReachable()) && has('pip3');
  if (pipFirst) {
    run('pip3', ['install', '--quiet', 'jupyter_server', 'ipykernel']);
    run('python3', ['-m', 'ipykernel', 'install', '--sys-prefix']);
  }
  if (missing().length > 0 && isRoot && debian) {
    run('apt-get', ['update', '-qq']);
    run('apt-get', ['install', '-y', '-qq', ...APT_PACKAGES]);
  }
  registerIrKernel();
  gaps = missing();
  if (gaps.length > 0) {
    const cmd = debian
      ? `sudo apt-get update && sudo apt-get install -y ${APT_PACKAGES.join(' ')}`
      : 'pip install jupyter_server ipykernel && R -e "install.packages(\'IRkernel\'); IRkernel::installspec()" and install bubblewrap';
    console.error(`setup-jupyter: still missing ${gaps.join(', ')}.\nRun: ${cmd}`);
    process.exit(1);
  }
  if (!quiet) console.error('setup-jupyter: the Jupyter stack is ready');
}

await main();
