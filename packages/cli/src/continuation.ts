import type { Language } from './args.js';

/** How far an input typed into the repl has come. */
export type InputState = 'complete' | 'incomplete' | 'block';

/** Counts open brackets outside strings and comments; negative means more closers than openers. */
function openBrackets(code: string, language: Language): number {
  let depth = 0;
  let quote: string | undefined;
  let triple = false;
  for (let i = 0; i < code.length; i++) {
    const ch = code[i]!;
    if (quote) {
      if (ch === '\\') {
        i++;
      } else if (triple && code.startsWith(quote.repeat(3), i)) {
        quote = undefined;
        triple = false;
        i += 2;
      } else if (!triple && (ch === quote || ch === '\n')) {
        quote = undefined;
      }
      continue;
    }
    if (ch === '#') {
      const end = code.indexOf('\n', i);
      if (end < 0) break;
      i = end;
    } else if (ch === '"' || ch === "'" || (language === 'r' && ch === '`')) {
      quote = ch;
      triple = language === 'python' && code.startsWith(ch.repeat(3), i);
      if (triple) i += 2;
    } else if (ch === '(' || ch === '[' || ch === '{') {
      depth++;
    } else if (ch === ')' || ch === ']' || ch === '}') {
      depth--;
    }
  }
  return quote && triple ? depth + 1 : depth;
}

const R_TRAILING_OPERATOR = /(?:[+\-*/^,=&|~]|<-|\|>|%[^%]*%)\s*$/;

/**
 * Decides whether the repl should run what was typed so far, ask for more lines, or wait for the empty line that
 * ends a Python block (`def f():`, `for …:`).
 *
 * Use it on the whole buffered input after each line.
 */
export function inputState(code: string, language: Language): InputState {
  const lines = code.split('\n');
  const last = (lines.at(-1) ?? '').replace(/#.*$/, '').trimEnd();
  if (openBrackets(code, language) > 0) return 'incomplete';
  if (language === 'python') {
    if (last.endsWith('\\')) return 'incomplete';
    const opensBlock = lines.some((line) => /:\s*(#.*)?$/.test(line) && !/^\s*#/.test(line));
    return opensBlock ? 'block' : 'complete';
  }
  return R_TRAILING_OPERATOR.test(last) ? 'incomplete' : 'complete';
}

/** One level of indentation in the repl. */
export const INDENT = '    ';

/** Statements after which the next line goes back one level. */
const DEDENT_AFTER = /^\s*(?:return|pass|break|continue|raise)\b/;

/**
 * The indentation the repl types for the next line of a Python block, after `lines`: one level more after a line
 * ending in `:`, one less after `return`/`pass`/`break`/`continue`/`raise`, else the last line's. R gets none.
 */
export function nextIndent(lines: readonly string[], language: Language): string {
  if (language !== 'python') return '';
  const last = lines.at(-1) ?? '';
  const indent = /^[ \t]*/.exec(last)![0];
  const code = last.replace(/#.*$/, '').trimEnd();
  if (code.endsWith(':')) return indent + INDENT;
  if (DEDENT_AFTER.test(code)) return indent.slice(0, Math.max(0, indent.length - INDENT.length));
  return indent;
}
