/**
 * Terminal safety for text the CLI did not write itself: a kernel's output and tracebacks, error messages that
 * quote a kernel or a path, the gateway's log.
 *
 * A terminal acts on control characters: OSC sequences set the window title or the clipboard (OSC 52), CSI
 * sequences clear the screen or move the cursor, DCS/APC/PM/SOS strings reach terminal extensions, and some
 * sequences make the terminal answer with text that lands on the shell's input. The filter lets through only
 * printable text, `\n`, `\t`, `\r` (progress bars redraw their line with it; it cannot leave the line) and, when
 * asked (`colors`), SGR colour sequences (`ESC [ … m`). Every other control character (C0, DEL, the 8-bit C1 range
 * U+0080–U+009F) is shown escaped as text, `\x1b` for ESC: an OSC title sequence prints as `\x1b]0;title\x07`.
 * Without `colors`, SGR sequences are removed (a pipe gets plain text).
 */

/** How a filter treats colour sequences. */
export interface TerminalTextOptions {
  /** Keep SGR colour sequences (`ESC [ params m`): true for a terminal, false for a pipe or a file. */
  colors: boolean;
}

/** An SGR sequence: ESC [ then digits, `;` or `:` (no private markers, no intermediates), then `m`. */
const SGR = /^\x1b\[[0-9;:]{0,64}m/;
/** What may still become an SGR sequence once more text arrives. */
const SGR_PREFIX = /\x1b(?:\[[0-9;:]{0,64})?$/;
/** Characters a terminal acts on: C0 except \t \n \r, DEL, C1. */
const CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/;

/** The visible form of one control character: `\x1b`, `\x07`, `\x9b`. */
export function escapeControl(char: string): string {
  return `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`;
}

/**
 * Makes `text` safe to write to a terminal (with `colors`) or to a pipe (without): see the module comment.
 *
 * Use it for whole pieces of text (a message, a log line, a traceback); for a stream that arrives in chunks use a
 * `TerminalTextFilter`, which keeps a colour sequence split across two chunks whole.
 */
export function terminalSafe(text: string, opts: TerminalTextOptions): string {
  const filter = new TerminalTextFilter(opts);
  return filter.write(text) + filter.flush();
}

/**
 * The chunked form of `terminalSafe`: one per output stream. `write()` returns what can be shown now; a chunk that
 * ends inside what may be a colour sequence keeps that tail until the next chunk or `flush()`.
 */
export class TerminalTextFilter {
  readonly #colors: boolean;
  #pending = '';

  constructor(opts: TerminalTextOptions) {
    this.#colors = opts.colors;
  }

  /** Filters one chunk; returns the text to write (possibly empty). */
  write(chunk: string): string {
    let text = this.#pending + chunk;
    this.#pending = '';
    const tail = SGR_PREFIX.exec(text);
    if (tail) {
      this.#pending = tail[0];
      text = text.slice(0, tail.index);
    }
    return this.#filter(text);
  }

  /** Returns what `write()` held back, escaped (the stream ended inside an unfinished sequence). */
  flush(): string {
    const rest = this.#pending;
    this.#pending = '';
    return this.#filter(rest, true);
  }

  #filter(text: string, final = false): string {
    if (!CONTROL.test(text)) return text;
    let out = '';
    let i = 0;
    while (i < text.length) {
      const code = text.charCodeAt(i);
      if (code === 0x1b && !final) {
        const sgr = SGR.exec(text.slice(i, i + 70));
        if (sgr) {
          if (this.#colors) out += sgr[0];
          i += sgr[0].length;
          continue;
        }
      }
      const char = text[i]!;
      out += isControl(code) ? escapeControl(char) : char;
      i++;
    }
    return out;
  }
}

function isControl(code: number): boolean {
  if (code === 0x09 || code === 0x0a || code === 0x0d) return false;
  return code < 0x20 || (code >= 0x7f && code <= 0x9f);
}

/**
 * `JSON.stringify` for a document printed to a terminal: JSON escapes C0 controls but leaves DEL and the C1 range
 * (U+007F–U+009F) raw, which some terminals act on; those are written as `\u00XX` too.
 */
export function terminalSafeJson(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replace(
    /[\x7f-\x9f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
