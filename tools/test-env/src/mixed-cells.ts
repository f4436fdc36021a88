/** What a load cell's check reads of an `ExecuteResult` (core's type, structurally). */
export interface CellResult {
  status: string;
  stdout: string;
  error?: { ename: string; evalue: string } | undefined;
  outputs: readonly { type: string; data?: unknown }[];
}

/** One cell of a load run: its code, and what its result must be. */
export interface MixedCell {
  code: string;
  kind: 'assign' | 'print' | 'sleep' | 'raise' | 'arithmetic';
  /** Why `result` is not this cell's right result, or undefined when it is. */
  wrong(result: CellResult): string | undefined;
}

const PRINT_BYTES = 10_000;

/**
 * The `count` cells of session `session` in a load run: assignments, 10 kB prints, short sleeps, exceptions and
 * arithmetic, in turn, each depending on the session's own earlier cells — so a cell answered by another session's
 * kernel, or a lost or reordered one, is caught.
 */
export function mixedCells(session: number, count = 20, sleepSeconds = 0.05): MixedCell[] {
  const cells: MixedCell[] = [];
  const base = session * 1_000;
  for (let j = 0; j < count; j++) {
    const value = base + j;
    switch (j % 5) {
      case 0:
        cells.push({
          kind: 'assign',
          code: `v = ${value}\nacc = globals().get('acc', 0) + v`,
          wrong: (r) =>
            r.status === 'ok' && r.stdout === '' ? undefined : `status ${r.status}, stdout ${r.stdout.length} B`,
        });
        break;
      case 1: {
        const expected = `${value - 1}:${'x'.repeat(PRINT_BYTES)}\n`;
        cells.push({
          kind: 'print',
          code: `print(f"{v}:" + "x" * ${PRINT_BYTES})`,
          wrong: (r) =>
            r.status === 'ok' && r.stdout === expected
              ? undefined
              : `status ${r.status}, stdout ${r.stdout.slice(0, 40)}… (${r.stdout.length} B)`,
        });
        break;
      }
      case 2:
        cells.push({
          kind: 'sleep',
          code: `import time\ntime.sleep(${sleepSeconds})\nv = v + 1`,
          wrong: (r) => (r.status === 'ok' ? undefined : `status ${r.status}`),
        });
        break;
      case 3:
        cells.push({
          kind: 'raise',
          code: `raise ValueError(f"session ${session} cell ${j} v={v}")`,
          wrong: (r) =>
            r.status === 'error' &&
            r.error?.ename === 'ValueError' &&
            r.error.evalue === `session ${session} cell ${j} v=${value - 2}`
              ? undefined
              : `status ${r.status}, error ${r.error?.ename}: ${r.error?.evalue}`,
        });
        break;
      default: {
        cells.push({
          kind: 'arithmetic',
          code: 'v * 3 + 7',
          wrong: (r) => {
            const result = r.outputs.find((o) => o.type === 'execute_result');
            const got = (result?.data as Record<string, unknown> | undefined)?.['text/plain'];
            return r.status === 'ok' && got === String((value - 3) * 3 + 7)
              ? undefined
              : `status ${r.status}, got ${String(got)}`;
          },
        });
      }
    }
  }
  return cells;
}
