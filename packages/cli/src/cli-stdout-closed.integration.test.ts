import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cliDirs, cliEnv, runCli } from './cli-binary.test-fixture.js';

// `kernelwarden run … | head`: the reader closes the pipe while the cell still prints.

let stateDir: string;
let workDir: string;

beforeAll(() => {
  ({ stateDir, workDir } = cliDirs('cli-stdout-closed'));
});

afterAll(async () => {
  const stopped = await runCli(['gateway', 'stop'], { stateDir, cwd: workDir });
  expect(stopped.code, stopped.stderr).toBe(0);
});

/** Runs the binary and closes its standard output after the first bytes, as `| head -c 10` does. */
function runClosingStdout(args: string[]): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: workDir, env: cliEnv(stateDir) });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.stdout.once('data', () => child.stdout.destroy());
    child.stdin.end();
    const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(killer);
      resolvePromise({ code, signal, stderr });
    });
  });
}

describe('a standard output its reader closed', () => {
  it('stops the cell, releases its kernel and exits 141 without a stack trace', async () => {
    // The cell never ends by itself: only the closed pipe stops it.
    const ran = await runClosingStdout(['run', '-c', 'while True: print("x" * 100)']);
    expect(ran.signal).toBeNull();
    expect(ran.code, ran.stderr).toBe(141);
    expect(ran.stderr).not.toMatch(/EPIPE|Error|KeyboardInterrupt|\n\s+at /);
    const status = await runCli(['gateway', 'status', '--json'], { stateDir, cwd: workDir });
    expect(status.code, status.stderr).toBe(0);
    const facts = JSON.parse(status.stdout) as { holders: unknown[]; kernels: { executionState?: string }[] };
    expect(facts.holders).toEqual([]);
    // The looping kernel was interrupted and shut down: nothing of the gateway is still busy.
    for (const kernel of facts.kernels) expect(kernel.executionState).not.toBe('busy');
  });
});
