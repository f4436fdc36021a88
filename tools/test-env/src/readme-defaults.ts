/**
 * How a README's defaults table writes a default: the value as code, then the constant that holds it —
 * `` `10_000` (`DEFAULT_INTERRUPT_GRACE_MS`) `` — so a test can hold the table to the constants.
 */
export function defaultCell(value: unknown, constant: string): string {
  return `\`${literal(value)}\` (\`${constant}\`)`;
}

/**
 * The default column of the first table after the first line that contains `heading` (a heading, or the list item
 * that introduces the table): the option in the first column, without its backticks, to the text of the column
 * named `default`.
 */
export function readmeDefaults(markdown: string, heading: string): Map<string, string> {
  const lines = markdown.split('\n');
  const at = lines.findIndex((line) => line.includes(heading));
  if (at < 0) throw new Error(`README has no line with "${heading}"`);
  const start = lines.findIndex((line, i) => i > at && line.trimStart().startsWith('|'));
  if (start < 0) throw new Error(`README has no table under "${heading}"`);
  const cells = (line: string) =>
    line
      .trim()
      .replace(/^\||\|$/g, '')
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim());
  const header = cells(lines[start] ?? '').map((cell) => cell.toLowerCase());
  const column = header.indexOf('default');
  if (column < 0) throw new Error(`the table under "${heading}" has no "default" column`);
  const rows = new Map<string, string>();
  for (const line of lines.slice(start + 2)) {
    if (!line.trimStart().startsWith('|')) break;
    const row = cells(line);
    rows.set((row[0] ?? '').replace(/`/g, ''), row[column] ?? '');
  }
  return rows;
}

function literal(value: unknown): string {
  if (typeof value === 'string') return `'${value}'`;
  if (typeof value === 'number' && Number.isInteger(value) && Math.abs(value) >= 10_000) {
    return String(value).replace(/\B(?=(\d{3})+(?!\d))/g, '_');
  }
  return String(value);
}

/**
 * For each option of `expected` (option → `defaultCell(…)`), the start of its README default cell, as long as the
 * expected text: `expect(readmeDefaultsFor(readme, heading, expected)).toEqual(expected)` shows every mismatch.
 * An option missing from the table comes back `undefined`.
 */
export function readmeDefaultsFor(
  markdown: string,
  heading: string,
  expected: Record<string, string>,
): Record<string, string | undefined> {
  const rows = readmeDefaults(markdown, heading);
  return Object.fromEntries(
    Object.entries(expected).map(([option, cell]) => [option, rows.get(option)?.slice(0, cell.length)]),
  );
}
