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
