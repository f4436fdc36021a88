import { chmodSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IsolationUnavailableError } from './errors.js';
import { createKernelPolicy, createReadIsolationPolicy } from './policy.js';
import { verifyIsolation } from './probe.js';
import { findExecutable } from './sandbox.js';

let base: string;
let temp: string;
let data: string;
let inputs: string;
let ws: string;

beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'kw-probe-')));
  temp = join(base, 'systmp');
  data = join(base, 'data');
  inputs = join(data, 'sessions', 's1', 'inputs');
  ws = join(base, 'ws');
  for (const d of [temp, inputs, ws]) mkdirSync(d, { recursive: true });
  writeFileSync(join(data, 'secret.txt'), 'secret');
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

describe('verifyIsolation', () => {
  it('passes for an enforceable policy and leaves no canary behind', async () => {
    const policy = createReadIsolationPolicy({
      roots: [{ path: data, label: 'data' }],
      allowedRoots: [{ path: inputs, label: 'inputs' }],
      tempDir: temp,
    });
    const report = await verifyIsolation(policy, { workspace: ws, privateTemp: [temp] });
    expect(report.checks).toContain(`hidden ${data}: canary unreadable directly and through a link`);
    expect(report.checks).toContain(`allowed ${inputs}: readable`);
    expect(readdirSync(data).sort()).toEqual(['secret.txt', 'sessions']);
    expect(readdirSync(temp)).toEqual([]);
    expect(readdirSync(ws)).toEqual([]);
  });

  it('refuses with probe-failed when the sandbox would let a hidden root be read', async () => {
    // A hand-made policy that binds its own root back: the probe must catch it.
    const leaky = { roots: [data], allowedRoots: [data], tempDir: temp };
    const error = await verifyIsolation(leaky, { workspace: ws, privateTemp: [temp] }).catch((e: unknown) => e);
    expect(IsolationUnavailableError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ reason: 'probe-failed' });
    expect((error as Error).message).toMatch(/was readable through a symbolic link/);
  });

  it('refuses with no-bubblewrap when bwrap is missing, before writing anything', async () => {
    const policy = createReadIsolationPolicy({ roots: [{ path: data, label: 'data' }], tempDir: temp });
    const error = await verifyIsolation(policy, { workspace: ws, searchPath: '/nonexistent' }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'IsolationUnavailableError', reason: 'no-bubblewrap' });
    expect(readdirSync(data).sort()).toEqual(['secret.txt', 'sessions']);
  });

  it('checks that the sandbox holds no capability and that unmounting is refused', async () => {
    const policy = createReadIsolationPolicy({ roots: [{ path: data, label: 'data' }], tempDir: temp });
    const report = await verifyIsolation(policy, { workspace: ws, privateTemp: [temp] });
    expect(report.checks).toContain('capabilities: none (effective, permitted, inheritable, ambient, bounding)');
    expect(report.checks).toContain('unmounting: refused (umount, umount2)');
    expect(report.checks).toContain('a user namespace inside: could not undo the mounts');
  });

  it('refuses with probe-failed a sandbox that keeps capabilities, whose mounts could be undone', async () => {
    // The real bwrap, but asked to keep every capability in the sandbox instead of dropping them all: what a kernel
    // run by root got before, and what any kernel would get from a sandbox that cannot drop them.
    const bin = join(base, 'bin');
    mkdirSync(bin);
    const real = findExecutable('bwrap', process.env.PATH)!;
    writeFileSync(
      join(bin, 'bwrap'),
      [
        '#!/bin/sh',
        'for a do shift; if [ "$a" = --cap-drop ]; then set -- "$@" --cap-add; else set -- "$@" "$a"; fi; done',
        `exec ${real} "$@"`,
        '',
      ].join('\n'),
    );
    chmodSync(join(bin, 'bwrap'), 0o755);
    const policy = createReadIsolationPolicy({ roots: [{ path: data, label: 'data' }], tempDir: temp });
    const error = await verifyIsolation(policy, {
      workspace: ws,
      privateTemp: [temp],
      searchPath: `${bin}:${process.env.PATH}`,
    }).catch((e: unknown) => e);
    expect(IsolationUnavailableError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ reason: 'probe-failed' });
    const message = (error as Error).message;
    expect(message).toMatch(/the sandbox holds capabilities \(.*CapEff 0*[1-9a-f][0-9a-f]*, CapBnd 0*[1-9a-f]/);
    expect(message).toContain(`the sandbox could unmount ${data}`);
    expect(message).toContain(`the sandbox could unmount ${temp}`);
    expect(message).toContain(`a file in hidden root ${data} was readable`);
    expect(readdirSync(data).sort()).toEqual(['secret.txt', 'sessions']);
  });

  it('checks a limits-only sandbox: hidden state empty, loopback only without network, cgroup dirs out of reach', async () => {
    const state = join(base, 'state');
    mkdirSync(state);
    writeFileSync(join(state, 'token'), 'secret');
    const policy = createKernelPolicy({ network: false, memoryBytes: 512 * 1024 * 1024, tempDir: temp });
    const cgroupDirs = ['/sys/fs/cgroup'];
    const report = await verifyIsolation(policy, { workspace: ws, hide: [state], cgroupDirs });
    expect(report.checks).toEqual(
      expect.arrayContaining([
        `hidden ${state}: listing empty`,
        'network: loopback only',
        'cgroup /sys/fs/cgroup: not writable',
        `host ${realpathSync(homedir())}: read-only`,
      ]),
    );
    expect(report.checks.some((c) => c.endsWith(': private'))).toBe(true);
  });

  it('refuses with probe-failed a sandbox that could write where the limits live', async () => {
    // The workspace is writable from the sandbox: named as a cgroup directory, the probe must catch it.
    const policy = createKernelPolicy({ tempDir: temp });
    const error = await verifyIsolation(policy, { workspace: ws, cgroupDirs: [ws] }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'IsolationUnavailableError', reason: 'probe-failed' });
    expect((error as Error).message).toContain(`the sandbox could make a cgroup in ${ws}`);
    expect((error as Error).message).toContain(`the sandbox could move itself into the cgroup ${ws}`);
  });

  it('refuses with probe-failed a sandbox in which the host filesystem is writable outside the workspace', async () => {
    // The real bwrap, but with the host's root bound read-write instead of read-only.
    const bin = join(base, 'bin');
    mkdirSync(bin);
    const real = findExecutable('bwrap', process.env.PATH)!;
    writeFileSync(
      join(bin, 'bwrap'),
      [
        '#!/bin/sh',
        'root=1',
        'for a do shift; if [ "$root" = 1 ] && [ "$a" = --ro-bind ]; then root=0; set -- "$@" --bind; else set -- "$@" "$a"; fi; done',
        `exec ${real} "$@"`,
        '',
      ].join('\n'),
    );
    chmodSync(join(bin, 'bwrap'), 0o755);
    const home = realpathSync(homedir());
    const error = await verifyIsolation(createKernelPolicy({ network: false, tempDir: temp }), {
      workspace: ws,
      searchPath: `${bin}:${process.env.PATH}`,
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'IsolationUnavailableError', reason: 'probe-failed' });
    expect((error as Error).message).toContain(
      `the sandbox could write ${home}, outside its workspace and private temp`,
    );
    expect(readdirSync(home).filter((name) => name.startsWith('.kernelwarden-probe'))).toEqual([]);
  });
});
