#!/usr/bin/env node
// Makes sure the real Jupyter stack the integration tests and the CLI need is on this machine:
// jupyter-server, the python3 and ir kernelspecs, and a working bubblewrap. Quick and silent when all is there.
//
//   node scripts/setup-jupyter.mjs
//     Checks the stack the tests will run on: the jupyter-server named by KERNELWARDEN_JUPYTER_SERVER (an absolute
//     path or a name on PATH), else `jupyter-server` on PATH. When something is missing from the default stack it
//     installs it (pip where PyPI answers, else apt-get as root on Debian); otherwise it stops with the exact command
//     a person should run. A stack named by KERNELWARDEN_JUPYTER_SERVER is someone's own environment: it is checked,
//     never changed.
//
//   node scripts/setup-jupyter.mjs --venv [DIR]
//     Builds the modern stack, jupyter_server 2 and ipykernel 7 in a virtual environment made with `python3 -m venv`
//     (default DIR: .cache/jupyter-venv in this checkout), or checks it in a second when it is already there, and
//     prints its jupyter-server's path on stdout: run the tests on it with
//     KERNELWARDEN_JUPYTER_SERVER=<that path> pnpm test. Kernels launched under read isolation get a private /tmp,
//     so DIR must not be under /tmp.
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const APT_PACKAGES = [
  'jupyter-server',
  'python3-ipykernel',
  'python3-pytest',
  'python3-numpy',
  'r-base-core',
  'r-cran-irkernel',
  'bubblewrap',
  'tmux',
];
/**
 * The modern stack: what pip or conda users run today, with nbclient and nbformat (the notebook tests compare
 * @kernelwarden/notebook's output with theirs; jupyter_server pulls them in through nbconvert, named here so that
 * they stay whatever its requirements do).
 */
const VENV_PACKAGES = ['jupyter_server>=2,<3', 'ipykernel>=7,<8', 'nbclient>=0.10,<1', 'nbformat>=5.9,<6'];
/** What the notebook tests import from the venv. */
const NOTEBOOK_MODULES = ['nbclient', 'nbformat'];
/**
 * The tools CI runs on the embedded server's Python package (packages/local-gateway/python) with the venv's
 * interpreter: pytest (also on the default stack's interpreter), ruff, and numpy (the launcher's tests preload it).
 */
const VENV_TOOLS = ['pytest', 'ruff', 'numpy'];
/**
 * Where PyPI is unreachable (a local index only) pip would otherwise retry each index for minutes; where it answers,
 * these change nothing.
 */
const PIP_FLAGS = ['--retries', '0', '--timeout', '5', '--disable-pip-version-check'];
const CHECKOUT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_VENV = join(CHECKOUT, '.cache', 'jupyter-venv');
const SERVER_VARIABLE = 'KERNELWARDEN_JUPYTER_SERVER';

const argv = process.argv.slice(2);
const quiet = argv.includes('--quiet');
const checkOnly = argv.includes('--check');

function has(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

function isExecutable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function fail(message) {
  console.error(`setup-jupyter: ${message}`);
  process.exit(1);
}

/** The jupyter-server the tests and the CLI will run, as given: the variable's value, else the name on PATH. */
function chosenServer() {
  const chosen = process.env[SERVER_VARIABLE];
  if (!chosen) return { name: 'jupyter-server', fromVariable: false };
  // The tests start servers from several working directories (the CLI's, a temp dir): a relative path would name a
  // different file in each.
  if (chosen.includes('/') && !isAbsolute(chosen)) {
    fail(`${SERVER_VARIABLE}=${chosen} must be an absolute path (or a name on PATH): try ${resolve(chosen)}`);
  }
  return { name: chosen, fromVariable: true };
}

/** The path of the chosen jupyter-server, or undefined when there is none. */
function serverPath(name) {
  if (name.includes('/')) return isExecutable(name) ? name : undefined;
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The interpreter a jupyter-server runs under (its shebang), which is the one that knows its kernelspecs. */
function serverPython(path) {
  if (!path) return undefined;
  try {
    const first = readFileSync(path, 'utf8').split('\n', 1)[0];
    if (!first.startsWith('#!')) return undefined;
    const words = first.slice(2).trim().split(/\s+/);
    // `#!/usr/bin/env python3` -> python3
    return words[0].endsWith('/env') ? words.find((w, i) => i > 0 && !w.startsWith('-')) : words[0];
  } catch {
    return undefined;
  }
}

/** Runs `python -c code` and parses the JSON it prints; undefined when it fails. */
function pythonJson(python, code) {
  try {
    const out = execFileSync(python, ['-c', code], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return JSON.parse(out);
  } catch {
    return undefined;
  }
}

function kernelspecs(python) {
  if (!python) return {};
  return (
    pythonJson(
      python,
      'import json; from jupyter_client.kernelspec import find_kernel_specs; print(json.dumps(find_kernel_specs()))',
    ) ?? {}
  );
}

function bwrapWorks() {
  if (!has('bwrap')) return false;
  const r = spawnSync('bwrap', ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-pid', 'true'], {
    stdio: 'ignore',
  });
  return r.status === 0;
}

/**
 * Whether `python` can import pytest and numpy (the embedded server's Python tests run under the server's
 * interpreter; the kernel launcher's tests preload numpy).
 */
function hasPytest(python) {
  return Boolean(python) && spawnSync(python, ['-c', 'import pytest, numpy'], { stdio: 'ignore' }).status === 0;
}

/** What the tests need and this machine lacks; `server` and `python3` gaps belong to the chosen jupyter-server. */
export function missing(server = chosenServer()) {
  const path = serverPath(server.name);
  const specs = kernelspecs(serverPython(path));
  const gaps = [];
  if (!path) gaps.push({ what: 'jupyter-server', own: true });
  if (!specs.python3) gaps.push({ what: 'the python3 kernelspec (ipykernel)', own: true });
  if (!specs.ir) gaps.push({ what: 'the ir kernelspec (IRkernel)', own: false });
  if (!has('R')) gaps.push({ what: 'R', own: false });
  if (!bwrapWorks()) gaps.push({ what: 'a working bubblewrap (bwrap)', own: false });
  if (!has('tmux')) gaps.push({ what: 'tmux (drives the terminal tests of the CLI)', own: false });
  return gaps;
}

const names = (gaps) => gaps.map((g) => g.what).join(', ');

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
    stdio: ['ignore', quiet ? 'ignore' : 2, 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return r.status === 0;
}

function registerIrKernel(server) {
  // Debian's r-cran-irkernel ships IRkernel but may not register the kernelspec.
  if (kernelspecs(serverPython(serverPath(server.name))).ir || !has('R')) return;
  run('R', ['--slave', '-e', "IRkernel::installspec(user = FALSE, prefix = '/usr/local')"]) ||
    run('R', ['--slave', '-e', 'IRkernel::installspec(user = TRUE)']);
}

/**
 * pytest for the default stack's interpreter, which CI runs the embedded server's Python tests with: Debian's
 * python3-pytest where apt-get can install it (as root), else pip. A stack named by KERNELWARDEN_JUPYTER_SERVER is
 * left alone.
 */
async function ensurePytest(server) {
  const python = serverPython(serverPath(server.name));
  if (server.fromVariable || !python || hasPytest(python)) return;
  if (checkOnly) return console.error(`setup-jupyter: pytest or numpy is missing for ${python}`);
  if (process.getuid?.() === 0 && has('apt-get') && python.startsWith('/usr/bin/')) {
    run('apt-get', ['install', '-y', '-qq', 'python3-pytest', 'python3-numpy']) ||
      (run('apt-get', ['update', '-qq']) &&
        run('apt-get', ['install', '-y', '-qq', 'python3-pytest', 'python3-numpy']));
  }
  if (!hasPytest(python)) run(python, ['-m', 'pip', 'install', '--quiet', ...PIP_FLAGS, 'pytest', 'numpy']);
  // Only CI's Python step needs it (and fails without it): the Node tests run either way.
  if (!hasPytest(python))
    console.error(
      `setup-jupyter: pytest or numpy is missing for ${python}; run: ${python} -m pip install pytest numpy`,
    );
}

async function ensureStack() {
  const server = chosenServer();
  let gaps = missing(server);
  if (gaps.length === 0) return ensurePytest(server);
  if (gaps.length === 1 && gaps[0].what.startsWith('the ir kernelspec') && has('R')) {
    registerIrKernel(server);
    gaps = missing(server);
    if (gaps.length === 0) return;
  }
  if (checkOnly) fail(`missing ${names(gaps)}`);
  const own = gaps.filter((g) => g.own);
  if (server.fromVariable && own.length > 0) {
    const python = serverPython(serverPath(server.name));
    fail(
      `${SERVER_VARIABLE}=${server.name}: missing ${names(own)}.\n` +
        (python
          ? `Run: ${python} -m pip install jupyter_server ipykernel && ${python} -m ipykernel install --sys-prefix`
          : `Point ${SERVER_VARIABLE} at a jupyter-server executable (e.g. <venv>/bin/jupyter-server), or unset it.`),
    );
  }
  console.error(`setup-jupyter: missing ${names(gaps)}; installing`);
  const isRoot = process.getuid?.() === 0;
  const debian = has('apt-get') && has('dpkg');
  const pipFirst = !server.fromVariable && (await pypiReachable()) && has('pip3');
  if (pipFirst) {
    run('pip3', ['install', '--quiet', ...PIP_FLAGS, 'jupyter_server', 'ipykernel']);
    run('python3', ['-m', 'ipykernel', 'install', '--sys-prefix']);
  }
  if (missing(server).length > 0 && isRoot && debian) {
    run('apt-get', ['update', '-qq']);
    run('apt-get', ['install', '-y', '-qq', ...APT_PACKAGES]);
  }
  registerIrKernel(server);
  gaps = missing(server);
  if (gaps.length > 0) {
    const cmd = debian
      ? `sudo apt-get update && sudo apt-get install -y ${APT_PACKAGES.join(' ')}`
      : 'pip install jupyter_server ipykernel && R -e "install.packages(\'IRkernel\'); IRkernel::installspec()" and install bubblewrap';
    fail(`still missing ${names(gaps)}.\nRun: ${cmd}`);
  }
  await ensurePytest(server);
  if (!quiet) console.error('setup-jupyter: the Jupyter stack is ready');
}

// Run by the venv's own interpreter: the stack's versions, and where the python3 kernelspec its jupyter-server offers
// comes from (a python3 kernelspec in a user or system directory would take the place of the venv's own).
const VENV_PROBE = `
import importlib, json, os, sys
import ipykernel, jupyter_client, jupyter_server
from jupyter_client.kernelspec import KernelSpecManager
spec = KernelSpecManager().get_kernel_spec("python3")
def version(name):
    try:
        return importlib.import_module(name).__version__
    except Exception:
        return None
print(json.dumps({
    "nbclient": version("nbclient"),
    "nbformat": version("nbformat"),
    "jupyterServer": jupyter_server.__version__,
    "ipykernel": ipykernel.__version__,
    "jupyterClient": jupyter_client.__version__,
    "python": sys.version.split()[0],
    "specDir": spec.resource_dir,
    "specPython": spec.argv[0],
    "prefix": sys.prefix,
}))
`;

const major = (version) => Number(String(version).split('.')[0]);

/** Why the venv at `dir` is not the modern stack, or undefined when it is. */
function venvProblem(dir) {
  const python = join(dir, 'bin', 'python');
  if (!isExecutable(join(dir, 'bin', 'jupyter-server')) || !isExecutable(python)) return 'not built';
  const found = pythonJson(python, VENV_PROBE);
  if (!found) return 'jupyter_server, ipykernel or jupyter_client cannot be imported';
  if (major(found.jupyterServer) !== 2 || major(found.ipykernel) !== 7) {
    return `it holds jupyter_server ${found.jupyterServer} and ipykernel ${found.ipykernel}`;
  }
  const inside = (path) => !relative(found.prefix, path).startsWith('..');
  // A bare `python` (what pip installs) is replaced by the server's own interpreter when the kernel is launched.
  const ownPython = /^python(\d+(\.\d+)?)?$/.test(found.specPython) || inside(found.specPython);
  if (!inside(found.specDir) || !ownPython) {
    return `its jupyter-server would launch the python3 kernelspec at ${found.specDir} (${found.specPython}), not the venv's own`;
  }
  const lacking = NOTEBOOK_MODULES.filter((name) => !found[name]);
  if (lacking.length > 0) return { lacking: `${lacking.join(' and ')} cannot be imported` };
  return undefined;
}

/** A problem's text: a venv that only lacks the notebook modules is completed in place, not rebuilt. */
const problemText = (problem) => (typeof problem === 'object' ? problem.lacking : problem);

/** Whether the venv holds the tools CI runs on the embedded server's Python package. */
function venvTools(dir) {
  return hasPytest(join(dir, 'bin', 'python')) && isExecutable(join(dir, 'bin', 'ruff'));
}

function describeVenv(dir) {
  const found = pythonJson(join(dir, 'bin', 'python'), VENV_PROBE);
  return found
    ? `jupyter_server ${found.jupyterServer}, ipykernel ${found.ipykernel}, jupyter_client ${found.jupyterClient}, ` +
        `nbclient ${found.nbclient}, nbformat ${found.nbformat}, Python ${found.python}`
    : 'unknown versions';
}

function buildVenv(dirArg) {
  const dir = resolve(dirArg ?? DEFAULT_VENV);
  if (dir === '/tmp' || dir.startsWith('/tmp/')) {
    fail(`${dir}: a venv under /tmp is invisible to kernels that run under read isolation (they get a private /tmp)`);
  }
  const server = join(dir, 'bin', 'jupyter-server');
  let problem = venvProblem(dir);
  if (problem && typeof problem === 'object' && !checkOnly) {
    // The server and kernel are there; only what the notebook tests import is missing: add it.
    console.error(`setup-jupyter: completing the venv in ${dir} (${problem.lacking})`);
    run(join(dir, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', '--quiet', ...PIP_FLAGS, ...VENV_PACKAGES]);
    problem = venvProblem(dir);
  }
  if (problem && !checkOnly) {
    if (existsSync(dir) && readdirSync(dir).length > 0 && !existsSync(join(dir, 'pyvenv.cfg'))) {
      fail(`${dir} exists and is not a virtual environment; remove it or choose another directory`);
    }
    if (!has('python3')) fail('python3 is not on PATH; install Python 3 (with its venv module) first');
    console.error(`setup-jupyter: building jupyter_server 2 + ipykernel 7 in ${dir} (${problemText(problem)})`);
    const built =
      run('python3', ['-m', 'venv', '--clear', dir]) &&
      run(join(dir, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', '--quiet', ...PIP_FLAGS, ...VENV_PACKAGES]);
    if (built && !existsSync(join(dir, 'share', 'jupyter', 'kernels', 'python3', 'kernel.json'))) {
      run(join(dir, 'bin', 'python'), ['-m', 'ipykernel', 'install', '--sys-prefix']);
    }
    problem = venvProblem(dir);
  }
  if (problem) {
    fail(
      `the venv at ${dir} is not usable: ${problemText(problem)}.\n` +
        `Run: python3 -m venv --clear ${dir} && ${dir}/bin/pip install ${PIP_FLAGS.join(' ')} ${VENV_PACKAGES.map((p) => `'${p}'`).join(' ')}`,
    );
  }
  if (!checkOnly && !venvTools(dir)) {
    run(join(dir, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', '--quiet', ...PIP_FLAGS, ...VENV_TOOLS]);
  }
  if (!venvTools(dir)) {
    fail(
      `the venv at ${dir} lacks ${VENV_TOOLS.join(' or ')}.\n` +
        `Run: ${dir}/bin/pip install ${PIP_FLAGS.join(' ')} ${VENV_TOOLS.join(' ')}`,
    );
  }
  if (!quiet) console.error(`setup-jupyter: ${describeVenv(dir)} in ${dir}`);
  process.stdout.write(`${server}\n`);
}

const venvAt = argv.indexOf('--venv');
if (venvAt >= 0) {
  const next = argv[venvAt + 1];
  buildVenv(next && !next.startsWith('--') ? next : undefined);
} else {
  await ensureStack();
}
