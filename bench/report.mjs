// Renders bench results as a terminal table and as Markdown, and puts the Markdown into README.md between the
// `<!-- bench:start -->` and `<!-- bench:end -->` markers of its "Benchmarks" section.
import { readFileSync, writeFileSync } from 'node:fs';
import { machineLine } from './machine.mjs';

const RATIO_HEADERS = {
  ratio: 'ratio to reference',
  p90Ratio: 'p90 ratio to reference',
  ratioToJupyterlab: 'ratio to @jupyterlab/services',
  ratioToStock: 'ratio to the stock server',
};
const EXTRA_HEADERS = {
  p90: 'p90 (ms)',
  rssPeakOverBaselineMB: 'peak RSS over baseline (MB)',
  received: 'output received',
  cpuMs: 'client CPU per cell (ms, median)',
};

function num(v, unit) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
  if (unit === 'ms') return v >= 100 ? v.toFixed(0) : v.toFixed(2);
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3);
}

function ratio(v) {
  return typeof v === 'number' && Number.isFinite(v) ? `${v.toFixed(2)}x` : '—';
}

function tableOf(section) {
  // A section with columns of its own (the load section) brings its table.
  if (section.table) return section.table;
  const ratios = section.ratioColumns ?? [];
  const extras = section.extraColumns ?? [];
  const head = [
    'client',
    'server',
    'median',
    'min',
    'max',
    'unit',
    ...ratios.map((c) => RATIO_HEADERS[c]),
    ...extras.map((c) => EXTRA_HEADERS[c]),
  ];
  const body = section.rows.map((r) => [
    r.client,
    r.server,
    num(r.median, r.unit),
    num(r.min, r.unit),
    num(r.max, r.unit),
    r.unit,
    ...ratios.map((c) => ratio(r[c])),
    ...extras.map((c) => (typeof r[c] === 'number' ? r[c].toFixed(c === 'cpuMs' ? 2 : 1) : (r[c] ?? '—'))),
  ]);
  return { head, body };
}

function caption(section) {
  return section.reference ? `${section.title}. Reference: ${section.reference}.` : `${section.title}.`;
}

function goalLines(results) {
  return (results.goals ?? []).map(
    (g) => `${g.met ? 'MET ' : 'MISSED'} ${g.goal}: ${g.value === null ? 'no figure' : (g.display ?? ratio(g.value))}`,
  );
}

/** A plain-text report for the terminal. */
export function renderText(results) {
  const out = [machineLine(results.machine), ''];
  for (const section of results.sections) {
    const { head, body } = tableOf(section);
    const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => String(r[i]).length)));
    const line = (cells) =>
      cells.map((c, i) => (i < 2 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ');
    out.push(caption(section), line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line), '');
  }
  out.push(...goalLines(results));
  if (results.crashes.length) {
    out.push('', 'CRASHES:', ...results.crashes.map((c) => `  ${c.client} in ${c.where}: ${c.message}`));
  }
  out.push(`(${results.durationS ?? '?'} s)`);
  return out.join('\n');
}

/** The same report as Markdown tables. */
export function renderMarkdown(results) {
  const out = [`Measured ${results.date.slice(0, 16).replace('T', ' ')} UTC — ${machineLine(results.machine)}.`, ''];
  for (const section of results.sections) {
    const { head, body } = tableOf(section);
    out.push(
      `**${caption(section)}**`,
      '',
      `| ${head.join(' | ')} |`,
      `|${head.map((_, i) => (i < 2 ? ' --- ' : ' ---: ')).join('|')}|`,
    );
    for (const r of body) out.push(`| ${r.join(' | ')} |`);
    out.push('');
  }
  const goals = goalLines(results);
  if (goals.length) out.push('Goals:', '', ...goals.map((g) => `- ${g}`), '');
  if (results.crashes.length)
    out.push('Crashes:', '', ...results.crashes.map((c) => `- ${c.client} in ${c.where}: ${c.message}`), '');
  out.push(`Whole run: ${results.durationS ?? '?'} s.`, '');
  return out.join('\n');
}

/** Replaces the text between the bench markers in README.md (the markers must already be there). */
export function updateReadme(readmeUrl, markdown) {
  const text = readFileSync(readmeUrl, 'utf8');
  const start = '<!-- bench:start -->';
  const end = '<!-- bench:end -->';
  const a = text.indexOf(start);
  const b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error('README.md has no <!-- bench:start --> … <!-- bench:end --> markers');
  writeFileSync(readmeUrl, `${text.slice(0, a + start.length)}\n${markdown}\n${text.slice(b)}`);
}
