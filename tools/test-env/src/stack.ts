import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** What a test run runs on: the jupyter-server's version and the interpreter and ipykernel of its python3 kernel. */
export interface TestStack {
  jupyterServer: string;
  command: string;
  ipykernel?: string;
  python?: string;
  pythonPath?: string;
}

function which(command: string): string | undefined {
  if (command.includes('/')) return command;
  try {
    return execFileSync('sh', ['-c', 'command -v "$0"', command], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The interpreter named by the server's shebang: what jupyter puts in place of a bare `python` in a kernelspec. */
function serverInterpreter(command: string): string | undefined {
  const path = which(command);
  if (!path) return undefined;
  try {
    const words = readFileSync(path, 'utf8').split('\n', 1)[0]?.replace(/^#!/, '').trim().split(/\s+/) ?? [];
    return words[0]?.endsWith('/env') ? which(words[1] ?? '') : words[0];
  } catch {
    return undefined;
  }
}

/**
 * Asks a running server which stack it is (`GET /api`, `GET /api/kernelspecs`) and the python3 kernel's interpreter
 * for its ipykernel, so that each run's log says what it was run on.
 */
export async function describeStack(server: { baseUrl: string; token: string; command: string }): Promise<TestStack> {
  const headers = { Authorization: `token ${server.token}` };
  const api = (await (await fetch(`${server.baseUrl}/api`, { headers })).json()) as { version?: string };
  const specs = (await (await fetch(`${server.baseUrl}/api/kernelspecs`, { headers })).json()) as {
    kernelspecs?: Record<string, { spec?: { argv?: string[] } }>;
  };
  const stack: TestStack = {
    jupyterServer: api.version ?? 'unknown',
    command: which(server.command) ?? server.command,
  };
  const argv0 = specs.kernelspecs?.python3?.spec?.argv?.[0];
  const python = argv0 && /^python(\d+(\.\d+)?)?$/.test(argv0) ? serverInterpreter(server.command) : argv0;
  if (!python) return stack;
  try {
    const out = execFileSync(
      python,
      ['-c', 'import sys, ipykernel; print(ipykernel.__version__, sys.version.split()[0])'],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        timeout: 20_000,
      },
    );
    const [ipykernel, version] = out.trim().split(' ');
    return { ...stack, ipykernel, python: version, pythonPath: python };
  } catch {
    return { ...stack, pythonPath: python };
  }
}

/** One line for the run's log. */
export function stackLine(stack: TestStack): string {
  const kernel = stack.ipykernel
    ? `python3 kernel: ipykernel ${stack.ipykernel}, Python ${stack.python} (${stack.pythonPath})`
    : `python3 kernel: ${stack.pythonPath ?? 'no python3 kernelspec'}`;
  return `integration tests on jupyter-server ${stack.jupyterServer} (${stack.command}); ${kernel}`;
}
