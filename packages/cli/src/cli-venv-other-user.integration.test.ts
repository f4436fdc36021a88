import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createOtherUser, type OtherUser, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Ran, runCli } from './cli-binary.test-fixture.js';

// The CLI runs the kernels on the nearest `.venv` above the working directory. In a directory every user can write
// (like /tmp), another local user can put a `.venv` above someone else's project: it must not be run.

let shared: string;
let other: OtherUser;
let stateDir: string;
let project: string;

const cli = (args: string[]): Promise<Ran> => runCli(args, { stateDir, cwd: project, timeoutMs: 120_000 });

beforeAll(() => {
  other = createOtherUser();
  // A world-writable sticky directory, as /tmp is (in /tmp: the other user must reach it).
  shared = mkdtempSync('/tmp/kw-venv-shared-');
  chmodSync(shared, 0o1777);
  stateDir = mkdtempSync(join(testGateway().root, 'venv-other-user-state-'));
  project = join(shared, 'project');
  mkdirSync(project);
});

afterAll(async () => {
  const stopped = await runCli(['gateway', 'stop'], { stateDir, cwd: project });
  expect(stopped.code, stopped.stderr).toBe(0);
  await other[Symbol.asyncDispose]();
  rmSync(shared, { recursive: true, force: true });
});

describe("another user's .venv above the working directory", () => {
  it('is never run: the kernel runs the default interpreter and nothing of the other user', async () => {
    const marker = join(shared, 'other-user-code-ran');
    const script = other.file(
      'plant.sh',
      [
        'set -e',
        `mkdir -p ${shared}/.venv/bin`,
        `printf '#!/bin/sh\\necho "ran as $(id -u)" >> ${marker}\\nexec /usr/bin/python3 "$@"\\n' > ${shared}/.venv/bin/python`,
        `chmod 755 ${shared}/.venv ${shared}/.venv/bin ${shared}/.venv/bin/python`,
      ].join('\n'),
    );
    const planted = await other.run(['/bin/sh', script]);
    expect(planted.code, planted.stderr).toBe(0);
    const ran = await cli(['run', '-c', 'import sys; print(sys.executable)']);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).not.toContain(join(shared, '.venv'));
    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : 'nothing ran').toBe('nothing ran');
  });
});
