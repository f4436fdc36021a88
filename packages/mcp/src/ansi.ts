// CSI sequences (colours, cursor moves) and OSC sequences (hyperlinks, titles) — IPython's and R's tracebacks use both.
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

/** `text` without terminal escape sequences: a model reads the characters, not the colours. */
export function stripAnsi(text: string): string {
  return text.includes('\x1b') ? text.replace(ANSI, '') : text;
}
