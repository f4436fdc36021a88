// ESC-introduced sequences: CSI (ESC [ … final), string sequences (OSC ESC ], DCS ESC P, SOS ESC X, PM ESC ^, APC
// ESC _) up to their terminator (BEL or ST), and the two-character escapes (ESC + one character). The same with the
// 8-bit C1 introducers (CSI U+009B, OSC U+009D, DCS U+0090, SOS U+0098, PM U+009E, APC U+009F, ST U+009C).
const SEQUENCES =
  /(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[ -/]*[0-~]?/g;
const STRAY_CONTROLS = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/g;

/**
 * Removes terminal escape sequences (colours, titles, hyperlinks, DCS strings) and every other control character
 * except `\n`, `\t` and `\r`: kernel output (IPython's and R's tracebacks are coloured) for a file, a pipe, JSON or a
 * model, where escapes would only be noise. To show such text on a terminal, the CLI's `terminalSafe` shows what it
 * removes instead.
 */
export function stripAnsi(text: string): string {
  return text.replace(SEQUENCES, '').replace(STRAY_CONTROLS, '');
}
