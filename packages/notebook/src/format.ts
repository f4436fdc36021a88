import { randomBytes, randomUUID } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { z } from 'zod/v3';
import { NotebookFormatError, NotebookIOError } from './errors.js';
import { cloneJson, PyJsonSyntaxError, parsePyJson, splitLinesKeepEnds, stringifyPyJson } from './pyjson.js';
import type { JsonObject, Notebook, NotebookCell } from './types.js';

/** The nbformat minor version that has cell ids (4.5); notebooks of that minor or later get ids, older ones none. */
export const CELL_ID_MINOR = 5;
/** The newest nbformat v4 minor version this package knows (what `upgradeNotebook` and `cellsToNotebook` write). */
export const NBFORMAT_MINOR = 5;

const multiline = z.union([z.string(), z.array(z.string())]);
const jsonObject = z.record(z.string(), z.unknown());
const output = z.discriminatedUnion('output_type', [
  z.object({ output_type: z.literal('stream'), name: z.string(), text: multiline }).passthrough(),
  z.object({ output_type: z.literal('display_data'), data: jsonObject, metadata: jsonObject }).passthrough(),
  z
    .object({
      output_type: z.literal('execute_result'),
      data: jsonObject,
      metadata: jsonObject,
      execution_count: z.number().int().min(0).nullable(),
    })
    .passthrough(),
  z
    .object({
      output_type: z.literal('error'),
      ename: z.string(),
      evalue: z.string(),
      traceback: z.array(z.string()),
    })
    .passthrough(),
]);
const cellId = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-zA-Z0-9-_]+$/, 'must be 1 to 64 letters, digits, "-" or "_"');
const cellMetadata = z.object({ tags: z.array(z.string()).optional() }).passthrough();
const cell = z.discriminatedUnion('cell_type', [
  z
    .object({
      cell_type: z.literal('code'),
      id: cellId.optional(),
      metadata: cellMetadata,
      source: multiline,
      outputs: z.array(output),
      execution_count: z.number().int().min(0).nullable(),
    })
    .passthrough(),
  z
    .object({
      cell_type: z.literal('markdown'),
      id: cellId.optional(),
      metadata: cellMetadata,
      source: multiline,
      attachments: z.record(z.string(), jsonObject).optional(),
    })
    .passthrough(),
  z
    .object({
      cell_type: z.literal('raw'),
      id: cellId.optional(),
      metadata: cellMetadata,
      source: multiline,
      attachments: z.record(z.string(), jsonObject).optional(),
    })
    .passthrough(),
]);
const notebookSchema = z
  .object({
    nbformat: z.literal(4, { errorMap: () => ({ message: 'only nbformat 4 notebooks are supported' }) }),
    nbformat_minor: z.number().int().min(0),
    metadata: z
      .object({
        kernelspec: z.object({ name: z.string(), display_name: z.string() }).passthrough().optional(),
        language_info: z.object({ name: z.string() }).passthrough().optional(),
      })
      .passthrough(),
    cells: z.array(cell),
  })
  .passthrough();

/** A mimetype whose value is JSON data, left alone by the line splitting (`application/json`, `…+json`). */
function isJsonMime(mime: string): boolean {
  return mime === 'application/json' || (mime.startsWith('application/') && mime.endsWith('+json'));
}

/** Non-`text/` mimetypes whose strings nbformat still splits into lines. */
const SPLIT_MIMES = new Set(['application/javascript', 'image/svg+xml']);

function rejoinBundle(data: JsonObject): void {
  for (const [key, value] of Object.entries(data)) {
    if (!isJsonMime(key) && Array.isArray(value) && value.every((line) => typeof line === 'string')) {
      data[key] = value.join('');
    }
  }
}

function splitBundle(data: JsonObject): void {
  for (const [key, value] of Object.entries(data)) {
    if (typeof value === 'string' && (key.startsWith('text/') || SPLIT_MIMES.has(key))) {
      data[key] = splitLinesKeepEnds(value);
    }
  }
}

const asObject = (v: unknown): JsonObject | undefined =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as JsonObject) : undefined;

/** nbformat's `rejoin_lines`: list-of-lines strings back into strings (in place). */
function rejoinLines(nb: Notebook): void {
  for (const c of nb.cells as unknown as JsonObject[]) {
    if (Array.isArray(c.source)) c.source = c.source.join('');
    for (const attachment of Object.values(asObject(c.attachments) ?? {})) {
      const bundle = asObject(attachment);
      if (bundle) rejoinBundle(bundle);
    }
    if (c.cell_type === 'code') {
      for (const out of (c.outputs as JsonObject[] | undefined) ?? []) {
        if (out.output_type === 'execute_result' || out.output_type === 'display_data') {
          const data = asObject(out.data);
          if (data) rejoinBundle(data);
        } else if (out.output_type && Array.isArray(out.text)) {
          out.text = out.text.join('');
        }
      }
    }
  }
}

/** nbformat's `split_lines`: multi-line strings into lists of lines, for the file (in place). */
function splitLines(nb: Notebook): void {
  for (const c of nb.cells as unknown as JsonObject[]) {
    if (typeof c.source === 'string') c.source = splitLinesKeepEnds(c.source);
    for (const attachment of Object.values(asObject(c.attachments) ?? {})) {
      const bundle = asObject(attachment);
      if (bundle) splitBundle(bundle);
    }
    if (c.cell_type === 'code') {
      for (const out of (c.outputs as JsonObject[] | undefined) ?? []) {
        if (out.output_type === 'execute_result' || out.output_type === 'display_data') {
          const data = asObject(out.data);
          if (data) splitBundle(data);
        } else if (out.output_type === 'stream' && typeof out.text === 'string') {
          out.text = splitLinesKeepEnds(out.text);
        }
      }
    }
  }
}

/** nbformat's `strip_transient`: what is never stored in a file (in place). */
function stripTransient(nb: Notebook): void {
  delete nb.metadata.orig_nbformat;
  delete nb.metadata.orig_nbformat_minor;
  delete nb.metadata.signature;
  for (const c of nb.cells) delete c.metadata.trusted;
}

/** A new cell id as nbformat makes them: the first 8 hex digits of a random UUID. */
export function newCellId(): string {
  return randomUUID().replaceAll('-', '').slice(0, 8);
}

/**
 * nbformat's normalisation on read and write: a notebook of minor version 5 or later gets an id for every cell that
 * lacks one, and a fresh id for every cell whose id repeats an earlier one (in place). Older notebooks are left alone.
 */
function normalizeCellIds(nb: Notebook): void {
  if (nb.nbformat_minor < CELL_ID_MINOR) return;
  for (const c of nb.cells) if (c.id === undefined) c.id = newCellId();
  const seen = new Set<string>();
  for (const c of nb.cells) {
    if (c.id !== undefined && seen.has(c.id)) c.id = newCellId();
    if (c.id !== undefined) seen.add(c.id);
  }
}

/**
 * nbformat's `v4.upgrade` for a v4 notebook of an older minor version: every cell gets a new id (before 4.5), the
 * original minor is noted in `metadata.orig_nbformat_minor` (not written to files) and the minor becomes 5. A notebook
 * already at 4.5 or later is returned unchanged. Mutates and returns `nb`.
 */
export function upgradeNotebook(nb: Notebook): Notebook {
  if (nb.nbformat_minor >= NBFORMAT_MINOR) return nb;
  for (const c of nb.cells) c.id = newCellId();
  nb.metadata.orig_nbformat_minor = nb.nbformat_minor;
  nb.nbformat_minor = NBFORMAT_MINOR;
  return nb;
}

function issuesOf(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message }));
}

/**
 * Checks `value` against nbformat v4 and returns the notebook as `nbformat.read()` holds it: a copy with multi-line
 * strings joined, transient fields dropped, and (from minor version 5) missing or repeated cell ids replaced. Throws
 * `NotebookFormatError` with the path of the first bad field.
 */
export function loadNotebook(value: unknown, options: { file?: string } = {}): Notebook {
  const parsed = notebookSchema.safeParse(value);
  if (!parsed.success) throw new NotebookFormatError(issuesOf(parsed.error), { ...options, cause: parsed.error });
  const nb = cloneJson(value) as Notebook;
  rejoinLines(nb);
  stripTransient(nb);
  normalizeCellIds(nb);
  return nb;
}

/** Parses notebook JSON text (as Python's `json` reads it, floats kept) and loads it with `loadNotebook`. */
export function parseNotebook(text: string, options: { file?: string } = {}): Notebook {
  let value: unknown;
  try {
    value = parsePyJson(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (error) {
    const message = error instanceof PyJsonSyntaxError ? `not JSON: ${error.message}` : 'not JSON';
    throw new NotebookFormatError([{ path: '', message }], { ...options, cause: error });
  }
  return loadNotebook(value, options);
}

/** Reads and loads the notebook at `path`. Throws `NotebookIOError` when it cannot be read, `NotebookFormatError` when it is not one. */
export async function readNotebook(path: string, options: { signal?: AbortSignal } = {}): Promise<Notebook> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path, options.signal ? { signal: options.signal } : {});
  } catch (error) {
    if (options.signal?.aborted) throw options.signal.reason;
    const why = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new NotebookIOError(`Cannot read notebook ${path}: ${why}`, { file: path, cause: error });
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (error) {
    throw new NotebookIOError(`Cannot read notebook ${path}: it is not UTF-8 text`, { file: path, cause: error });
  }
  return parseNotebook(text, { file: path });
}

/**
 * The notebook as `nbformat.write()` writes it, byte for byte: indent 1, keys sorted, non-ASCII kept, multi-line
 * strings split into lists of lines (sources, stream text, `text/*`, `image/svg+xml` and `application/javascript`
 * data), transient fields dropped, cell ids normalised (minor version 5 on), and a final newline.
 */
export function serializeNotebook(notebook: Notebook): string {
  const nb = cloneJson(notebook);
  normalizeCellIds(nb);
  splitLines(nb);
  stripTransient(nb);
  const text = stringifyPyJson(nb, 1);
  return text.endsWith('\n') ? text : `${text}\n`;
}

/**
 * Writes the notebook to `path` as `nbformat.write()` does (see `serializeNotebook`), through a temporary file in the
 * same directory renamed over `path`: a reader never sees half a notebook, and `path` may be the input itself.
 */
export async function writeNotebook(path: string, notebook: Notebook): Promise<void> {
  const text = serializeNotebook(notebook);
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(temp, text, { encoding: 'utf8', mode: 0o644 });
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => {});
    const why = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new NotebookIOError(`Cannot write notebook ${path}: ${why}`, { file: path, cause: error });
  }
}

/** Tags of a cell (`metadata.tags`), or none. */
export function cellTags(c: NotebookCell): string[] {
  const tags = c.metadata.tags;
  return Array.isArray(tags) ? tags.filter((t): t is string => typeof t === 'string') : [];
}
