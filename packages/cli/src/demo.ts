import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ExecuteResult } from '@kernelwarden/core';
import type { Language, StackOptions } from './args.js';
import type { CliIo } from './cli-io.js';
import { createStack, type Stack } from './compose.js';
import { formatDuration } from './duration.js';
import { ExitCode } from './exit-code.js';
import { describeFailure } from './failure.js';
import { OutputPrinter } from './output-printer.js';
import { Spinner } from './spinner.js';
import { terminalSafe } from './terminal-text.js';

interface Step {
  title: string;
  language: Language;
  code: string;
  /** What the step shows; checked against the outcome so a broken tour says so. */
  expect: 'ok' | 'interrupted' | 'reset';
  /** Interrupt the cell after this long (the "interrupted cell" step). */
  interruptAfterMs?: number;
}

const STEPS: Step[] = [
  {
    title: 'a Python cell',
    language: 'python',
    code: 'import platform\nprint(f"Hello from Python {platform.python_version()}")',
    expect: 'ok',
  },
  {
    title: 'an R cell (its own kernel, started on first use)',
    language: 'r',
    code: 'cat("Hello from", R.version.string, "\\n")',
    expect: 'ok',
  },
  {
    title: 'a plot, saved to a file',
    language: 'r',
    code: 'plot(1:20, (1:20)^2, type = "b", main = "kernelwarden demo")',
    expect: 'ok',
  },
  {
    title: 'a long cell, interrupted after 1.5 s (the kernel keeps its state)',
    language: 'python',
    code: 'import time\nstate = "kept"\nprint("sleeping 60 s…", flush=True)\ntime.sleep(60)',
    expect: 'interrupted',
    interruptAfterMs: 1500,
  },
  {
    title: 'a cell that ignores SIGINT: the watchdog interrupts, kills and restarts the kernel',
    language: 'python',
    code: 'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint("ignoring Ctrl-C…", flush=True)\nwhile True:\n    time.sleep(0.1)',
    expect: 'reset',
  },
  {
    title: 'the recovered kernel answers again (earlier variables are gone)',
    language: 'python',
    code: 'print("state" in globals() and "still there" or "fresh interpreter, ready")',
    expect: 'ok',
  },
];

/** The tour's cell budget: short, so the SIGINT-ignoring step recovers in seconds. */
const DEMO_TIMEOUT_MS = 5000;
const DEMO_GRACE_MS = 1000;

/**
 * `kernelwarden demo`: a scripted tour on the embedded gateway — Python, R, a saved plot, an interrupted cell and
 * a SIGINT-ignoring cell the watchdog recovers — ending in a timeline. Exits 0 when every step showed what it
 * should.
 */
export async function demoCommand(options: StackOptions, io: CliIo): Promise<number> {
  // Without --outputs-dir the plots go to a temporary directory of the tour's own, removed when it ends.
  const temporary = options.outputsDir === undefined;
  const outputsDir = resolve(io.cwd, options.outputsDir ?? mkdtempSync(join(tmpdir(), 'kernelwarden-demo-')));
  try {
    return await tour(options, io, outputsDir, temporary);
  } finally {
    if (temporary) rmSync(outputsDir, { recursive: true, force: true });
  }
}

type Outcome = 'ok' | 'interrupted' | 'reset' | 'error';

/** Records what happened when, since the tour began. */
class Timeline {
  readonly #t0 = performance.now();
  readonly entries: { at: number; text: string }[] = [];
  since(): number {
    return performance.now() - this.#t0;
  }
  mark(text: string): void {
    this.entries.push({ at: this.since(), text });
  }
}

/** Starts the tour's stack on the embedded gateway, marking each kernel's start; a failure's exit code instead. */
async function openTourStack(
  stackOptions: StackOptions,
  io: CliIo,
  spinner: Spinner,
  timeline: Timeline,
): Promise<Stack | number> {
  try {
    spinner.start('starting the embedded Jupyter server…');
    const stack = await createStack(stackOptions, {
      env: io.env,
      onNotice: (message) => io.stderr.write(`kernelwarden: ${message}\n`),
      onKernelStarting: (language) => {
        timeline.mark(`${language === 'r' ? 'R' : 'Python'} kernel starting`);
        spinner.start(`starting the ${language === 'r' ? 'R' : 'Python'} kernel…`);
      },
      onKernelStarted: (language) => {
        spinner.stop();
        timeline.mark(`${language === 'r' ? 'R' : 'Python'} kernel ready`);
      },
    });
    spinner.stop();
    timeline.mark(`gateway ready at ${stack.gateway.baseUrl}`);
    return stack;
  } catch (error) {
    spinner.stop();
    const failure = describeFailure(error);
    io.stderr.write(`kernelwarden demo: ${failure.message}\nRun 'kernelwarden doctor' to see what is missing.\n`);
    return failure.exitCode;
  }
}

/** Runs step `index` on the stack (interrupting it on cue), its output printed: how it ended, and why. */
async function runStep(
  stack: Stack,
  step: Step,
  index: number,
  ctx: { io: CliIo; outputsDir: string; timeline: Timeline },
): Promise<{ outcome: Outcome; detail: string }> {
  const { io, timeline } = ctx;
  const printer = new OutputPrinter({
    stdout: io.stdout,
    stderr: io.stderr,
    outputsDir: ctx.outputsDir,
    filePrefix: `demo-${index + 1}`,
  });
  timeline.mark(`cell ${index + 1} (${step.language}) sent`);
  let timer: NodeJS.Timeout | undefined;
  if (step.interruptAfterMs !== undefined) {
    timer = setTimeout(() => {
      timeline.mark(`cell ${index + 1}: Ctrl-C (interrupt)`);
      void stack.interrupt(step.language);
    }, step.interruptAfterMs);
  }
  try {
    const result: ExecuteResult = await stack.execute(step.code, {
      language: step.language,
      onOutput: printer.onOutput,
    });
    printer.finish(result);
    const interrupted =
      result.status === 'aborted' || result.error?.ename === 'KeyboardInterrupt' || result.error?.ename === 'interrupt';
    return {
      outcome: result.status === 'ok' ? 'ok' : interrupted ? 'interrupted' : 'error',
      detail: result.error
        ? `${result.error.ename}${result.error.evalue ? `: ${result.error.evalue}` : ''}`
        : result.status,
    };
  } catch (error) {
    const failure = describeFailure(error);
    return {
      outcome: failure.exitCode === ExitCode.timedOut ? 'reset' : 'error',
      // The watchdog's first clause says it all ("cell exceeded 5s … the kernel was reset").
      detail: failure.message.split(/ \(|\. /)[0] ?? '',
    };
  } finally {
    clearTimeout(timer);
  }
}

async function tour(options: StackOptions, io: CliIo, outputsDir: string, temporary: boolean): Promise<number> {
  const stackOptions: StackOptions = {
    ...options,
    gatewayUrl: undefined,
    outputsDir,
    timeoutMs: options.timeoutMs ?? DEMO_TIMEOUT_MS,
    interruptGraceMs: options.interruptGraceMs ?? DEMO_GRACE_MS,
    killGraceMs: options.killGraceMs ?? DEMO_GRACE_MS,
  };
  // Step details quote the kernel's error values: shown with control characters escaped, like everything else.
  const out = (text: string) => io.stdout.write(`${terminalSafe(text, { colors: false })}\n`);
  const spinner = new Spinner(io.stderr);
  const timeline = new Timeline();

  out(`kernelwarden demo — ${STEPS.length} cells on the embedded Jupyter gateway`);
  out(
    `cell timeout ${formatDuration(stackOptions.timeoutMs!)}, interrupt grace ${formatDuration(stackOptions.interruptGraceMs!)}, kill grace ${formatDuration(stackOptions.killGraceMs!)}; ${temporary ? `plots go to ${outputsDir}, removed at the end (--outputs-dir DIR keeps them)` : `plots go to ${outputsDir}`}\n`,
  );
  const stack = await openTourStack(stackOptions, io, spinner, timeline);
  if (typeof stack === 'number') return stack;
  const unwatch = stack.watchdog.on('*', (event) => {
    timeline.mark(
      `watchdog: ${event.type}${event.acted ? '' : ' (not needed)'} (generation ${event.replacement?.generation ?? event.generation})`,
    );
  });

  let failures = 0;
  try {
    for (const [index, step] of STEPS.entries()) {
      out(`── ${index + 1}. ${step.title} [${step.language === 'r' ? 'R' : 'Python'}]`);
      for (const line of step.code.split('\n')) out(`   ${step.language === 'r' ? '>' : '>>>'} ${line}`);
      const started = timeline.since();
      const { outcome, detail } = await runStep(stack, step, index, { io, outputsDir, timeline });
      const took = formatDuration(timeline.since() - started);
      timeline.mark(`cell ${index + 1}: ${outcome} after ${took}`);
      const good = outcome === step.expect;
      if (!good) failures++;
      out(
        `   → ${outcome} in ${took}${detail && outcome !== 'ok' ? ` (${detail})` : ''}${good ? '' : `  ✗ expected ${step.expect}`}\n`,
      );
    }
  } finally {
    unwatch();
    spinner.start('shutting the kernels down…');
    await stack.close();
    spinner.stop();
    timeline.mark('kernels shut down');
  }

  out('Timeline');
  for (const entry of timeline.entries) out(`  ${(entry.at / 1000).toFixed(2).padStart(7)} s  ${entry.text}`);
  out(
    failures === 0
      ? `\nAll ${STEPS.length} steps behaved as expected.${temporary ? '' : ` Plots: ${outputsDir}`}`
      : `\n${failures} step${failures === 1 ? '' : 's'} did not behave as expected; 'kernelwarden doctor' may say why.`,
  );
  return failures === 0 ? ExitCode.ok : ExitCode.cellError;
}
