import { closeSync, constants, mkdirSync, openSync, readlinkSync, realpathSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import type { ExecuteResult, Output } from '@kernelwarden/core';
import { descriptorDirectory } from '@kernelwarden/core/os';
import { MISSING_REPLY_ENAME } from '@kernelwarden/gateway-client';
import { formatSize } from './size.js';
import { TerminalTextFilter, terminalSafe } from './terminal-text.js';

/** The most images one cell saves to `--outputs-dir` unless `--max-images` says otherwise. */
export const DEFAULT_MAX_IMAGES = 100;
/** The most bytes one cell's images take in `--outputs-dir`, all together, unless `--max-images-size` says otherwise. */
export const DEFAULT_MAX_IMAGES_BYTES = 64 * 1024 * 1024;

/** A place text goes: `process.stdout`, `process.stderr`, or a test's collector. */
export interface TextSink {
  isTTY?: boolean;
  write(text: string): unknown;
}

/** A file the printer saved from a cell's rich output. */
export interface SavedFile {
  /** The MIME type it came from (`image/png`). */
  mime: string;
  /** Where it was written. */
  path: string;
  /** Its size in bytes. */
  bytes: number;
}

const IMAGE_TYPES: Record<string, { ext: string; binary: boolean }> = {
  'image/png': { ext: 'png', binary: true },
  'image/jpeg': { ext: 'jpg', binary: true },
  'image/gif': { ext: 'gif', binary: true },
  'image/svg+xml': { ext: 'svg', binary: false },
};

/** Images a cell produced that the printer did not save, and why. */
export interface UnsavedImages {
  /** Images dropped for lack of `--outputs-dir`. */
  noOutputsDir: number;
  /** Images past `--max-images`. */
  overCount: number;
  /** Images that would have taken the cell's images past `--max-images-size`. */
  overSize: number;
  /**
   * Images refused because their place was tampered with while the command ran: a file of their name already
   * there (a link planted by the kernel, say), or the outputs directory no longer the one named at start.
   */
  refused: number;
  /** The bytes of the images not saved (decoded size). */
  bytes: number;
}

/**
 * The canonical path each outputs directory had when this process first used it — before any cell it runs can
 * have put a link in its way (`repl` makes a printer per cell; the first fixes the directory for the rest).
 */
const OUTPUTS_DIRS = new Map<string, string>();

function pinnedOutputsDir(dir: string): string {
  let canonical = OUTPUTS_DIRS.get(dir);
  if (canonical === undefined) {
    canonical = canonicalFuturePath(dir);
    OUTPUTS_DIRS.set(dir, canonical);
  }
  return canonical;
}

/** The canonical path of `path`'s deepest existing ancestor, then the rest of `path` as named. */
function canonicalFuturePath(path: string): string {
  const rest: string[] = [];
  for (let head = path; ; head = dirname(head)) {
    try {
      return join(realpathSync.native(head), ...rest);
    } catch {
      if (dirname(head) === head) return path;
      rest.unshift(basename(head));
    }
  }
}

/** Where this process's open descriptors can be named (Linux): a file is created through its directory's descriptor. */
const FD_DIR = descriptorDirectory();

/**
 * Turns a cell's outputs into terminal output as they arrive: stdout stream text to stdout; stderr text and
 * tracebacks to stderr; `text/plain` results to stdout; images saved to `outputsDir` with a line saying where.
 * Everything the kernel sent passes the terminal filter (`terminal-text.ts`): on a terminal only text and colours
 * reach it, other control sequences are shown escaped; a pipe gets the same without colours.
 *
 * Saving is bounded per cell: at most `maxImages` images and `maxImageBytes` bytes of them all together; an image
 * past either is not written, and `finish()` says how many were left out and which flag raises the bound.
 *
 * Create one per cell; pass `printer.onOutput` as the cell's `onOutput`, then call `finish(result)`. With
 * `quiet` it prints nothing and only saves files (the `--json` mode; `unsaved` and `notes()` say what was left out).
 */
export class OutputPrinter {
  readonly #stdout: TextSink;
  readonly #stderr: TextSink;
  readonly #outputsDir: string | undefined;
  readonly #quiet: boolean;
  readonly #stderrColor: boolean;
  readonly #outFilter: TerminalTextFilter;
  readonly #errFilter: TerminalTextFilter;
  readonly #prefix: string;
  readonly #isExit: (error: { ename: string; evalue: string }) => boolean;
  readonly #saved: SavedFile[] = [];
  readonly #maxImages: number;
  readonly #maxImageBytes: number;
  #savedBytes = 0;
  #errorShown = false;
  readonly #unsaved: UnsavedImages = { noOutputsDir: 0, overCount: 0, overSize: 0, refused: 0, bytes: 0 };
  /** The canonical outputs directory, fixed when this process first used it. */
  readonly #pinnedDir: string | undefined;
  /** The outputs directory, open once it is needed: every image is created in it through this descriptor. */
  #dirFd: number | undefined;
  #stdoutEndsWithNewline = true;

  constructor(opts: {
    stdout: TextSink;
    stderr: TextSink;
    outputsDir?: string | undefined;
    quiet?: boolean;
    color?: boolean;
    filePrefix: string;
    /** Most images saved. @defaultValue `DEFAULT_MAX_IMAGES` (100) */
    maxImages?: number | undefined;
    /** Most bytes saved, all images together. @defaultValue `DEFAULT_MAX_IMAGES_BYTES` (64 MiB) */
    maxImageBytes?: number | undefined;
    /** Errors that are not shown: a script's own exit (`sys.exit(3)`), which the interpreter does not report. */
    isExit?: ((error: { ename: string; evalue: string }) => boolean) | undefined;
  }) {
    this.#stdout = opts.stdout;
    this.#stderr = opts.stderr;
    this.#outputsDir = opts.outputsDir;
    this.#pinnedDir = opts.outputsDir === undefined ? undefined : pinnedOutputsDir(opts.outputsDir);
    this.#quiet = opts.quiet ?? false;
    this.#stderrColor = opts.color ?? opts.stderr.isTTY === true;
    this.#outFilter = new TerminalTextFilter({ colors: opts.color ?? opts.stdout.isTTY === true });
    this.#errFilter = new TerminalTextFilter({ colors: this.#stderrColor });
    this.#prefix = opts.filePrefix;
    this.#isExit = opts.isExit ?? (() => false);
    this.#maxImages = opts.maxImages ?? DEFAULT_MAX_IMAGES;
    this.#maxImageBytes = opts.maxImageBytes ?? DEFAULT_MAX_IMAGES_BYTES;
  }

  /** Images not saved so far, and why. */
  get unsaved(): Readonly<UnsavedImages> {
    return this.#unsaved;
  }

  /** One sentence per reason images were not saved (empty when every image was saved). */
  notes(): string[] {
    const u = this.#unsaved;
    const images = (n: number) => `${n} image output${n === 1 ? '' : 's'}`;
    const notes: string[] = [];
    if (u.noOutputsDir > 0) {
      notes.push(
        `${images(u.noOutputsDir)} not saved; pass --outputs-dir DIR to keep ${u.noOutputsDir === 1 ? 'it' : 'them'}`,
      );
    }
    if (u.overCount > 0) {
      notes.push(
        `${images(u.overCount)} not saved: past --max-images ${this.#maxImages} (pass --max-images N to keep more)`,
      );
    }
    if (u.overSize > 0) {
      notes.push(
        `${images(u.overSize)} not saved: past --max-images-size ${formatSize(this.#maxImageBytes)} of images ` +
          'for the cell (pass --max-images-size SIZE to keep more)',
      );
    }
    if (u.refused > 0) {
      notes.push(
        `${images(u.refused)} not saved: a file of ${u.refused === 1 ? 'its' : 'their'} name was already in ` +
          `${this.#outputsDir}, or a link was put in its way while the cell ran`,
      );
    }
    return notes;
  }

  /** Files saved so far. */
  get saved(): readonly SavedFile[] {
    return this.#saved;
  }

  /** Handles one output; pass it as `onOutput`. */
  readonly onOutput = (output: Output): void => {
    switch (output.type) {
      case 'stream':
        if (output.name === 'stdout') this.#writeStdout(output.text);
        else this.#writeStderr(output.text);
        return;
      case 'error':
        this.#errorShown = true;
        if (this.#isExit(output)) return;
        this.#writeError(output.traceback, output.ename, output.evalue);
        return;
      default:
        this.#rich(output.data);
    }
  };

  /**
   * Prints what the streamed outputs did not show (a traceback the kernel only put in its reply) and a hint when
   * images were dropped for lack of `--outputs-dir`.
   */
  finish(result: ExecuteResult): void {
    this.#writeStdout(this.#outFilter.flush(), true);
    this.#writeStderr(this.#errFilter.flush(), true);
    if (result.error && !this.#errorShown && !this.#isExit(result.error)) {
      this.#writeError(result.error.traceback, result.error.ename, result.error.evalue);
    }
    if (!this.#stdoutEndsWithNewline && this.#stdout.isTTY && !this.#quiet) {
      this.#stdout.write('\n');
      this.#stdoutEndsWithNewline = true;
    }
    if (!this.#quiet) for (const note of this.notes()) this.#stderr.write(`kernelwarden: ${note}\n`);
    if (result.outputDropped && !this.#quiet) this.#stderr.write(`kernelwarden: ${droppedOutputNote(result)}\n`);
    if (this.#dirFd !== undefined && this.#dirFd >= 0) closeSync(this.#dirFd);
    this.#dirFd = undefined;
  }

  /** Writes kernel text to stdout through the filter (`filtered`: it already went through). */
  #writeStdout(text: string, filtered = false): void {
    if (this.#quiet || text === '') return;
    const shown = filtered ? text : this.#outFilter.write(text);
    if (shown === '') return;
    this.#stdout.write(shown);
    this.#stdoutEndsWithNewline = shown.endsWith('\n');
  }

  #writeStderr(text: string, filtered = false): void {
    if (this.#quiet || text === '') return;
    const shown = filtered ? text : this.#errFilter.write(text);
    if (shown !== '') this.#stderr.write(shown);
  }

  #writeError(traceback: readonly string[], ename: string, evalue: string): void {
    if (this.#quiet) return;
    this.#writeStderr(this.#errFilter.flush(), true);
    const raw = traceback.length > 0 ? traceback.join('\n') : `${ename}: ${evalue}`;
    const text = terminalSafe(raw, { colors: this.#stderrColor });
    this.#stderr.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  #rich(data: Record<string, unknown>): void {
    let savedAny = false;
    for (const [mime, kind] of Object.entries(IMAGE_TYPES)) {
      const payload = data[mime];
      if (typeof payload !== 'string') continue;
      const bytes = kind.binary ? base64Bytes(payload) : Buffer.byteLength(payload, 'utf8');
      savedAny = true;
      if (this.#outputsDir === undefined) {
        this.#unsaved.noOutputsDir++;
        this.#unsaved.bytes += bytes;
        break;
      }
      if (this.#saved.length >= this.#maxImages) {
        this.#unsaved.overCount++;
        this.#unsaved.bytes += bytes;
        continue;
      }
      if (this.#savedBytes + bytes > this.#maxImageBytes) {
        this.#unsaved.overSize++;
        this.#unsaved.bytes += bytes;
        continue;
      }
      this.#save(mime, kind, payload);
    }
    const text = data['text/plain'];
    if (!savedAny && typeof text === 'string') this.#writeStdout(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** Creates one image file in the pinned outputs directory; false when that was refused (see `createImageFile`). */
  #create(name: string, bytes: Buffer): boolean {
    const dir = this.#pinnedDir!;
    if (this.#dirFd === undefined) this.#dirFd = openPinnedDir(dir);
    if (this.#dirFd < 0) return false;
    return createImageFile(this.#dirFd, dir, name, bytes);
  }

  #save(mime: string, kind: { ext: string; binary: boolean }, payload: string): void {
    const name = `${this.#prefix}-${this.#saved.length + this.#unsaved.refused + 1}.${kind.ext}`;
    const path = join(this.#outputsDir!, name);
    const bytes = kind.binary ? Buffer.from(payload, 'base64') : Buffer.from(payload, 'utf8');
    if (!this.#create(name, bytes)) {
      this.#unsaved.refused++;
      this.#unsaved.bytes += bytes.length;
      return;
    }
    this.#saved.push({ mime, path, bytes: bytes.length });
    this.#savedBytes += bytes.length;
    if (!this.#quiet) {
      const shown = relative(process.cwd(), path);
      this.#stderr.write(`kernelwarden: saved ${mime} to ${shown.startsWith('..') ? path : shown}\n`);
    }
  }
}

/**
 * Creates `name` in the outputs directory, never through a link: the directory is opened once and checked to be
 * the canonical one of the command's start (a cell may have swapped a directory on its path for a link since), and
 * the file is created through that descriptor, exclusively and without following a link planted under its name.
 * False when the directory or the name was tampered with; other errors (no permission, a full disk) are thrown.
 */
function createImageFile(dirFd: number, dir: string, name: string, bytes: Buffer): boolean {
  const at = FD_DIR === undefined ? join(dir, name) : `${FD_DIR}/${dirFd}/${name}`;
  let fd: number;
  try {
    fd = openSync(at, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o666);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ELOOP') return false;
    throw error;
  }
  try {
    writeFileSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Opens `dir` (made first if missing) and checks it is `dir` itself, reached through no link; -1 if not. */
function openPinnedDir(dir: string): number {
  mkdirSync(dir, { recursive: true });
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  let real: string;
  try {
    real = FD_DIR === undefined ? realpathSync.native(dir) : readlinkSync(`${FD_DIR}/${fd}`);
  } catch {
    real = '';
  }
  if (real === dir) return fd;
  closeSync(fd);
  return -1;
}

/** The decoded size of base64 text, without decoding it. */
function base64Bytes(text: string): number {
  let length = text.length;
  while (length > 0 && /[=\s]/.test(text[length - 1]!)) length--;
  return Math.floor((length * 3) / 4);
}

/**
 * Why a cell's output has a hole: a message over the client's frame limit (`maxFrameBytes`) was dropped unread (its
 * protocol error says so), or the server dropped or lost messages (its iopub rate limit, a reopened connection).
 */
function droppedOutputNote(result: ExecuteResult): string {
  if (result.error?.ename === MISSING_REPLY_ENAME && result.error.evalue.includes('maxFrameBytes')) {
    return 'some output was dropped: a message of the kernel was larger than the frame limit (maxFrameBytes) and was dropped unread';
  }
  return "some output was dropped: the gateway dropped it (its iopub rate limit) or it was lost while the kernel's connection was reopened";
}
