import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  writeSync,
} from 'node:fs';
import { join, sep } from 'node:path';
import { KernelwardenError } from '@kernelwarden/core';
import { resolveLocalGatewayOptions } from '@kernelwarden/local-gateway';

/**
 * The record of every workspace the CLI gave a contained kernel (`--hide`, a limit): `<state dir>/cli/contained-workspaces`,
 * one canonical path a line (as a JSON string), 0600 in a 0700 directory. What such a kernel wrote there — a
 * `.venv` — is never picked automatically as the interpreter of a later kernel (`choosePython`'s `untrusted`).
 */
export const CONTAINED_WORKSPACES_FILE = join('cli', 'contained-workspaces');

/** The record cannot be written: the contained kernel is not started. */
export class ContainedWorkspaceRecordError extends KernelwardenError {
  static override readonly brand: string = 'ContainedWorkspaceRecordError';

  constructor(message: string) {
    super(message, { code: 'CONTAINED_WORKSPACE_RECORD' });
  }
}

/** Where the record of `env`'s state directory (`KERNELWARDEN_STATE_DIR`, XDG, `~/.local/state/kernelwarden`) lives. */
export function containedWorkspacesPath(env: Record<string, string | undefined>): string {
  return join(resolveLocalGatewayOptions({}, env as NodeJS.ProcessEnv).stateDir, CONTAINED_WORKSPACES_FILE);
}

/** The canonical workspaces recorded in `file`; none when it does not exist or is not this user's private file. */
export function readContainedWorkspaces(file: string): string[] {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return [];
  }
  try {
    const st = fstatSync(fd);
    const uid = process.getuid?.();
    if (!st.isFile() || (uid !== undefined && st.uid !== uid)) return [];
    const workspaces: string[] = [];
    for (const line of readFileSync(fd, 'utf8').split('\n')) {
      if (line === '') continue;
      try {
        const path: unknown = JSON.parse(line);
        if (typeof path === 'string' && path.startsWith('/')) workspaces.push(path);
      } catch {
        // a torn line: the others still count
      }
    }
    return workspaces;
  } finally {
    closeSync(fd);
  }
}

/**
 * Adds the canonical path of `workspace` to the record in `file` (created 0600, its directory 0700), before a
 * contained kernel starts there. Throws `ContainedWorkspaceRecordError` when it cannot: the kernel must not start
 * unrecorded.
 */
export function recordContainedWorkspace(file: string, workspace: string): void {
  let canonical: string;
  try {
    canonical = realpathSync.native(workspace);
  } catch {
    return; // no such directory: no kernel starts in it (reported where it is used)
  }
  if (readContainedWorkspaces(file).includes(canonical)) return;
  const dir = join(file, '..');
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(dir);
    const uid = process.getuid?.();
    if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o077) !== 0) {
      throw new Error(`${dir} is not a directory private to this user`);
    }
    const fd = openSync(
      file,
      constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW,
      0o600,
    );
    try {
      // One write of one line, appended: concurrent commands never interleave within a line.
      writeSync(fd, `${JSON.stringify(canonical)}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    throw new ContainedWorkspaceRecordError(
      `cannot record ${canonical} as a contained kernel's workspace in ${file}: ${(error as Error).message}`,
    );
  }
}

/** The recorded workspace `dir` (canonical) lies in, if any. */
export function containingWorkspace(dir: string, workspaces: readonly string[]): string | undefined {
  return workspaces.find((w) => dir === w || dir.startsWith(w.endsWith(sep) ? w : w + sep));
}
