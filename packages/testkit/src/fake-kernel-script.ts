import type { KernelScript } from './fake-kernel.js';

type Value = number | string | boolean | null;

class PyError extends Error {
  constructor(
    readonly ename: string,
    readonly evalue: string,
  ) {
    super(evalue);
  }
}

function repr(v: Value): string {
  if (v === null) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'string') return `'${v.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
  return String(v);
}

function str(v: Value): string {
  return typeof v === 'string' ? v : repr(v);
}

const STRING = /^(['"])(.*)\1$/s;
const NAME = /^[A-Za-z_]\w*$/;

function splitTopLevel(expr: string, separators: string): { parts: string[]; ops: string[] } {
  const parts: string[] = [];
  const ops: string[] = [];
  let quote = '';
  let depth = 0;
  let start = 0;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i] as string;
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = '';
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '(' || c === '[') depth++;
    else if (c === ')' || c === ']') depth--;
    else if (depth === 0 && separators.includes(c) && i > start) {
      parts.push(expr.slice(start, i));
      ops.push(c);
      start = i + 1;
    }
  }
  parts.push(expr.slice(start));
  return { parts: parts.map((p) => p.trim()), ops };
}

function isExpression(expr: string): boolean {
  const { parts } = splitTopLevel(expr, '+-*/');
  return parts.every((p) => p === '' || /^-?\d+(\.\d+)?$/.test(p) || STRING.test(p) || NAME.test(p));
}

function evaluate(expr: string, state: Map<string, unknown>): Value {
  const { parts, ops } = splitTopLevel(expr.trim(), '+-*/');
  const atom = (p: string): Value => {
    if (/^-?\d+$/.test(p)) return Number.parseInt(p, 10);
    if (/^-?\d+\.\d+$/.test(p)) return Number.parseFloat(p);
    const s = STRING.exec(p);
    if (s) return (s[2] as string).replace(/\\(.)/g, (_, ch: string) => (ch === 'n' ? '\n' : ch));
    if (p === 'True') return true;
    if (p === 'False') return false;
    if (p === 'None') return null;
    if (NAME.test(p)) {
      if (!state.has(p)) throw new PyError('NameError', `name '${p}' is not defined`);
      return state.get(p) as Value;
    }
    throw new PyError('SyntaxError', 'invalid syntax');
  };
  let value = atom(parts[0] as string);
  ops.forEach((op, i) => {
    const right = atom(parts[i + 1] as string);
    if (op === '+' && typeof value === 'string' && typeof right === 'string') value = value + right;
    else if (typeof value === 'number' && typeof right === 'number') {
      if (op === '/' && right === 0) throw new PyError('ZeroDivisionError', 'division by zero');
      value = op === '+' ? value + right : op === '-' ? value - right : op === '*' ? value * right : value / right;
    } else throw new PyError('TypeError', `unsupported operand type(s) for ${op}`);
  });
  return value;
}

function statements(code: string): string[] {
  const out: string[] = [];
  for (const line of code.split('\n')) {
    if (/^\s/.test(line) && out.length) {
      out[out.length - 1] += `\n${line}`; // an indented block belongs to the statement above
      continue;
    }
    out.push(...splitTopLevel(line, ';').parts.filter((s) => s !== '' && !s.startsWith('#')));
  }
  return out.map((s) => s.trim()).filter(Boolean);
}

/**
 * The default FakeGateway kernel script: a tiny Python look-alike, enough for kernel-driving code to be tested with
 * real-looking cells. It understands `print(a, b)`, `x = <expr>`, a last-line expression (`execute_result`),
 * literals, names, `+ - * /` (`1/0` raises ZeroDivisionError), unknown names (NameError), `raise E('msg')`,
 * `time.sleep(s)`, `input('p')` / `getpass.getpass('p')`, `display(x)`, `display(HTML('…'))`, `while True: pass` (hangs),
 * `os._exit(1)` (the kernel dies). Any other statement (imports, `os.chdir(...)`) is accepted and does nothing.
 */
export const pythonLikeScript: KernelScript = async (ctx) => {
  const stmts = statements(ctx.code);
  const last = stmts.length - 1;
  try {
    for (const [i, stmt] of stmts.entries()) {
      let m: RegExpExecArray | null;
      if ((m = /^print\((.*)\)$/s.exec(stmt))) {
        const args = m[1]?.trim() ? splitTopLevel(m[1], ',').parts : [];
        ctx.stdout(`${args.map((a) => str(evaluate(a, ctx.state))).join(' ')}\n`);
      } else if ((m = /^raise\s+(\w+)(?:\((.*)\))?$/s.exec(stmt))) {
        const arg = m[2]?.trim() ? str(evaluate(m[2], ctx.state)) : '';
        throw new PyError(m[1] as string, arg);
      } else if ((m = /^(?:time\.)?sleep\((.+)\)$/.exec(stmt))) {
        await ctx.sleep(Number(evaluate(m[1] as string, ctx.state)) * 1000);
      } else if ((m = /^(?:(\w+)\s*=\s*)?(input|getpass\.getpass|getpass)\((.*)\)$/.exec(stmt))) {
        const prompt = m[3]?.trim() ? str(evaluate(m[3], ctx.state)) : '';
        const value = await ctx.input(prompt, { password: m[2] !== 'input' });
        if (m[1]) ctx.state.set(m[1], value);
      } else if ((m = /^display\((HTML|Markdown)\((.+)\)\)$/.exec(stmt))) {
        const mime = m[1] === 'HTML' ? 'text/html' : 'text/markdown';
        ctx.display({
          [mime]: str(evaluate(m[2] as string, ctx.state)),
          'text/plain': `<IPython.core.display.${m[1]} object>`,
        });
      } else if ((m = /^display\((.+)\)$/.exec(stmt))) {
        ctx.display({ 'text/plain': repr(evaluate(m[1] as string, ctx.state)) });
      } else if (/^while\s+True\s*:/.test(stmt)) {
        await ctx.hang();
      } else if (/^os\._exit\(/.test(stmt)) {
        ctx.die();
      } else if ((m = /^([A-Za-z_]\w*)\s*=(?!=)\s*(.+)$/s.exec(stmt)) && isExpression(m[2] as string)) {
        ctx.state.set(m[1] as string, evaluate(m[2] as string, ctx.state));
      } else if (isExpression(stmt)) {
        const value = evaluate(stmt, ctx.state);
        if (i === last && value !== null) ctx.result({ 'text/plain': repr(value) });
      }
    }
  } catch (error) {
    if (error instanceof PyError) ctx.raise(error.ename, error.evalue);
    throw error;
  }
};
