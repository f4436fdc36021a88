import { NotebookParameterError } from './errors.js';
import { cellTags, newCellId, upgradeNotebook } from './format.js';
import { PyFloat, pyFloatRepr } from './pyjson.js';
import type { CodeCell, Notebook } from './types.js';

/**
 * A parameter value: what JSON (or YAML) can say. A whole-number `number` is an integer; wrap it in `PyFloat` (or
 * give a non-whole number) for a float. Object keys keep JavaScript's order.
 */
export type ParameterValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | PyFloat
  | ParameterValue[]
  | { [key: string]: ParameterValue };

/** Parameters by name, in injection order. */
export type Parameters = Record<string, ParameterValue> | ReadonlyArray<readonly [string, ParameterValue]>;

/** The languages parameters can be written in. */
export type ParameterLanguage = 'python' | 'R';

/** The tag of the cell whose defaults the injected cell overrides. */
export const PARAMETERS_TAG = 'parameters';
/** The tag of the cell holding the injected parameters. */
export const INJECTED_PARAMETERS_TAG = 'injected-parameters';

/** Python's `str.encode('unicode_escape').decode()`, as papermill escapes strings. */
function unicodeEscape(s: string, r: boolean): string {
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if (c < 0x7f) out += ch;
    // R reads "\xe9" as a raw byte (not UTF-8): latin-1 characters are written as \u00e9 there.
    else if (c < 0x100) out += r ? `\\u${c.toString(16).padStart(4, '0')}` : `\\x${c.toString(16).padStart(2, '0')}`;
    else if (c < 0x10000) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += `\\U${c.toString(16).padStart(8, '0')}`;
  }
  return out;
}

function str(s: string, r: boolean): string {
  return `"${unicodeEscape(s, r).replaceAll('"', '\\"')}"`;
}

function entries(value: object): [string, ParameterValue][] {
  return Object.entries(value) as [string, ParameterValue][];
}

/** One value as papermill's translator for `language` writes it. */
export function translateValue(value: ParameterValue, language: ParameterLanguage, name = ''): string {
  const r = language === 'R';
  if (value === null) return r ? 'NULL' : 'None';
  if (typeof value === 'string') return str(value, r);
  if (typeof value === 'boolean') return r ? (value ? 'TRUE' : 'FALSE') : value ? 'True' : 'False';
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' || value instanceof PyFloat) {
    const n = typeof value === 'number' ? value : value.value;
    const float = value instanceof PyFloat || !Number.isInteger(n);
    if (!float) return Number.isSafeInteger(n) ? String(n) : BigInt(n).toString();
    if (Number.isFinite(n)) return pyFloatRepr(n);
    if (r) return Number.isNaN(n) ? 'NaN' : n > 0 ? 'Inf' : '-Inf';
    return Number.isNaN(n) ? "float('nan')" : n > 0 ? "float('inf')" : "float('-inf')";
  }
  if (Array.isArray(value)) {
    const items = value.map((v) => translateValue(v, language, name)).join(', ');
    return r ? `list(${items})` : `[${items}]`;
  }
  if (typeof value === 'object') {
    const items = entries(value)
      .map(([k, v]) =>
        r
          ? `${str(k, r)} = ${translateValue(v, language, name)}`
          : `${str(k, r)}: ${translateValue(v, language, name)}`,
      )
      .join(', ');
    return r ? `list(${items})` : `{${items}}`;
  }
  throw new NotebookParameterError(`parameter ${name}: a ${typeof value} cannot be written as a ${language} literal`, {
    parameter: name,
  });
}

const NAME = /^[A-Za-z_.][A-Za-z0-9_.]*$/;

/**
 * The source of the injected cell, as papermill writes it (without black): `# Parameters`, then one
 * `name = literal` line per parameter. R names lose their leading underscores, as papermill drops them.
 */
export function parameterSource(parameters: Parameters, language: ParameterLanguage): string {
  const list: (readonly [string, ParameterValue])[] = Array.isArray(parameters)
    ? [...parameters]
    : entries(parameters as object);
  let content = '# Parameters\n';
  for (const [rawName, value] of list) {
    if (typeof rawName !== 'string' || !NAME.test(rawName) || (language === 'python' && rawName.includes('.'))) {
      throw new NotebookParameterError(`parameter name ${JSON.stringify(rawName)} is not a ${language} variable name`, {
        parameter: String(rawName),
      });
    }
    const name = language === 'R' ? rawName.replace(/^_+/, '') : rawName;
    content += `${name} = ${translateValue(value, language, rawName)}\n`;
  }
  return content;
}

/**
 * The language parameters are written in, as papermill picks its translator: the kernelspec name, else
 * `language_info.name`, else `kernelspec.language`; `python` and `R` are known (also `ir`/`r` for R here).
 */
export function parameterLanguage(nb: Notebook, override?: string): ParameterLanguage | undefined {
  const kernelspec = (nb.metadata.kernelspec ?? {}) as Record<string, unknown>;
  const info = (nb.metadata.language_info ?? {}) as Record<string, unknown>;
  const candidates = [override, kernelspec.name, info.name, kernelspec.language];
  for (const c of candidates) {
    if (typeof c !== 'string' || c === '') continue;
    const lower = c.toLowerCase();
    if (lower === 'python' || lower === 'python3' || lower === 'python2') return 'python';
    if (lower === 'r' || lower === 'ir') return 'R';
  }
  return undefined;
}

/**
 * Injects `parameters` as papermill does (mutating `nb`): the notebook is upgraded to nbformat 4.5, and a new code
 * cell tagged `injected-parameters` replaces the earlier injected cell, or goes right after the first cell tagged
 * `parameters`, or at the top. Returns the index of the injected cell.
 */
export function injectParameters(nb: Notebook, parameters: Parameters, language: ParameterLanguage): number {
  const source = parameterSource(parameters, language);
  upgradeNotebook(nb);
  const cell: CodeCell = {
    id: newCellId(),
    cell_type: 'code',
    metadata: { tags: [INJECTED_PARAMETERS_TAG] },
    execution_count: null,
    source,
    outputs: [],
  };
  const injected = nb.cells.findIndex((c) => cellTags(c).includes(INJECTED_PARAMETERS_TAG));
  if (injected >= 0) {
    nb.cells.splice(injected, 1, cell);
    return injected;
  }
  const defaults = nb.cells.findIndex((c) => cellTags(c).includes(PARAMETERS_TAG));
  nb.cells.splice(defaults + 1, 0, cell);
  return defaults + 1;
}

const PY_INT = /^[+-]?\d+(?:_\d+)*$/;
const PY_FLOAT =
  /^[+-]?(?:(?:\d+(?:_\d+)*)?\.\d+(?:_\d+)*|\d+(?:_\d+)*\.?)(?:[eE][+-]?\d+(?:_\d+)*)?$|^[+-]?(?:inf|infinity|nan)$/i;

/**
 * A `-p NAME VALUE` value as papermill's command line reads it: `True`, `False`, `None`, then an integer, then a
 * float (`1.0` stays a float: a `PyFloat`), else the text itself. Surrounding whitespace is ignored for numbers, as
 * Python's `int()` and `float()` ignore it; only ASCII digits are read as numbers.
 */
export function parseParameterValue(text: string): ParameterValue {
  if (text === 'True') return true;
  if (text === 'False') return false;
  if (text === 'None') return null;
  const t = text.trim();
  if (PY_INT.test(t)) {
    const digits = t.replaceAll('_', '');
    const n = Number(digits);
    return Number.isSafeInteger(n) ? n : BigInt(digits);
  }
  if (PY_FLOAT.test(t)) {
    const lower = t.toLowerCase().replaceAll('_', '');
    const sign = lower.startsWith('-') ? -1 : 1;
    const bare = lower.replace(/^[+-]/, '');
    const n = bare === 'nan' ? Number.NaN : bare.startsWith('inf') ? sign * Number.POSITIVE_INFINITY : Number(lower);
    return Number.isInteger(n) || Object.is(n, -0) ? new PyFloat(n) : n;
  }
  return text;
}
