import { closeSync, fstatSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LocalGateway, type LocalGatewayStatus } from '@kernelwarden/local-gateway';
import type { GatewayAction } from './args.js';
import type { CliIo } from './cli-io.js';
import { formatDuration } from './duration.js';
import { ExitCode } from './exit-code.js';
import { describeFailure } from './failure.js';
import { Spinner } from './spinner.js';
import { terminalSafe, terminalSafeJson } from './terminal-text.js';

/** How long `gateway start` keeps the server up once nobody uses it. */
const START_LINGER_MS = 60 * 60_000;

function stateDirOption(io: CliIo): { stateDir?: string } {
  const dir = io.env.KERNELWARDEN_STATE_DIR;
  return dir ? { stateDir: dir } : {};
}

/** Hides anything that looks like a token in a server log line (jupyter-server prints `?token=…` URLs). */
export function redactTokens(line: string): string {
  return line
    .replace(/([?&]token=)[^&\s'"]+/gi, '$1<redacted>')
    .replace(/(Authorization["']?\s*:\s*["']?(?:token|bearer)\s+)[^\s"']+/gi, '$1<redacted>');
}

/**
 * The log files `gateway logs` shows: the server's own, one kernel's (`--kernel ID`) or every kernel's, oldest
 * first (`--kernel all`).
 */
function logFiles(stateDir: string, kernel: string | undefined): string[] {
  if (kernel === undefined) return [join(stateDir, 'server.log')];
  const dir = join(stateDir, 'kernel-logs');
  if (kernel !== 'all') return [join(dir, `${kernel}.log`)];
  try {
    return readdirSync(dir)
      .filter((name) => name.endsWith('.log'))
      .map((name) => join(dir, name))
      .sort((a, b) => statSync(a).mtimeMs - statSync(b).mtimeMs);
  } catch {
    return [];
  }
}

/** The most bytes read from the end of a log for its last lines: a kernel can make its own log any size. */
const LOG_TAIL_BYTES = 4 * 1024 * 1024;

/**
 * The last `count` lines of a log (within its last `LOG_TAIL_BYTES`), tokens redacted; undefined when it cannot be
 * read.
 */
export function logTail(file: string, count: number): string[] | undefined {
  let text: string;
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return undefined;
  }
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, LOG_TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    let read = 0;
    while (read < length) {
      const n = readSync(fd, buffer, read, length - read, size - length + read);
      if (n === 0) break;
      read += n;
    }
    text = buffer.subarray(0, read).toString('utf8');
    // Past the limit the first line read is a part of one: it is left out when a whole line follows.
    const firstNewline = text.indexOf('\n');
    if (length < size && firstNewline >= 0 && firstNewline < text.length - 1) text = text.slice(firstNewline + 1);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.slice(-count).map(redactTokens);
}

/** A kernel's interpreter, ipykernel and launch, for `gateway status`: ` python /usr/bin/python3, ipykernel 6.17.0, forked`. */
export function kernelRuntime(k: LocalGatewayStatus['kernels'][number]): string {
  const parts = [
    ...(k.interpreter ? [`python ${k.interpreter}`] : []),
    ...(k.interpreter ? [`ipykernel ${k.ipykernel ?? 'unknown'}`] : []),
    ...(k.launch === 'fork' ? ['forked'] : k.launch === 'exec' && k.interpreter ? ["exec'd"] : []),
  ];
  return parts.length === 0 ? '' : ` — ${parts.join(', ')}`;
}

/** The launchers' lines of `gateway status`. */
export function launcherLines(launcher: LocalGatewayStatus['launcher']): string[] {
  if (!launcher) return [];
  if (launcher.mode === 'exec') return ["launchers: none (KERNELWARDEN_LAUNCHER=exec: every kernel is exec'd)"];
  return [
    `launchers: ${launcher.launchers.length === 0 ? 'none yet' : ''}`,
    ...launcher.launchers.map(
      (l) =>
        `  ${l.interpreter} ${l.state}${l.pid ? ` (pid ${l.pid}${l.rssBytes === undefined ? '' : `, ${formatMiB(l.rssBytes)} RSS`})` : ''}` +
        `${l.ipykernel ? `, ipykernel ${l.ipykernel}` : ''}${l.preload.length ? `, preloads ${l.preload.join(',')}` : ''}` +
        `${l.reason ? ` — ${l.reason}` : ''}`,
    ),
    "  (kernels of isolated kernelspecs are always exec'd)",
  ];
}

function formatMiB(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * `kernelwarden gateway start|status|stop|logs`: manages the embedded Jupyter server that `run` and `repl` share.
 * Never prints its token.
 */
export async function gatewayCommand(
  action: GatewayAction,
  opts: { json: boolean; lines: number; kernel?: string | undefined },
  io: CliIo,
): Promise<number> {
  // The log holds kernels' stderr and the state files are on disk: both are shown with control characters escaped.
  const write = (human: string, doc: unknown) =>
    io.stdout.write(opts.json ? `${terminalSafeJson(doc)}\n` : `${terminalSafe(human, { colors: false })}\n`);
  try {
    switch (action) {
      case 'start': {
        const spinner = new Spinner(io.stderr, { enabled: !opts.json });
        spinner.start('starting the embedded Jupyter server…');
        let lease: Awaited<ReturnType<typeof LocalGateway.acquire>>;
        try {
          lease = await LocalGateway.acquire({ ...stateDirOption(io), lingerMs: START_LINGER_MS });
        } finally {
          spinner.stop();
        }
        const { baseUrl, pid, reused, stateDir } = lease;
        await lease.release();
        write(
          `${reused ? 'already running' : 'started'}: ${baseUrl} (pid ${pid}); it stays up while in use and ${formatDuration(START_LINGER_MS)} after, or until 'kernelwarden gateway stop'\nstate: ${stateDir}`,
          { running: true, reused, baseUrl, pid, stateDir },
        );
        return ExitCode.ok;
      }
      case 'status': {
        const status = await LocalGateway.status(stateDirOption(io));
        if (opts.json) {
          write('', status);
        } else if (!status.running) {
          write(`not running (state: ${status.stateDir})`, status);
        } else {
          const lines = [
            `running: ${status.baseUrl} (pid ${status.pid}, since ${status.startedAt})`,
            `server: ${status.command} (${status.interpreter})`,
            `state: ${status.stateDir}`,
            `holders: ${status.holders.length === 0 ? 'none' : status.holders.map((h) => `pid ${h.pid}`).join(', ')}`,
            `kernels: ${status.kernels.length === 0 ? 'none' : ''}`,
            ...status.kernels.map(
              (k) =>
                `  ${k.id} ${k.name} ${k.executionState ?? ''}${k.ownerPid ? ` (pid ${k.ownerPid}${k.ownerAlive ? '' : ', gone'})` : ''}${kernelRuntime(k)}`,
            ),
            ...launcherLines(status.launcher),
          ];
          write(lines.join('\n'), status);
        }
        return ExitCode.ok;
      }
      case 'stop': {
        const result = await LocalGateway.stop(stateDirOption(io));
        write(result.stopped ? `stopped (pid ${result.pid})` : 'not running', result);
        return ExitCode.ok;
      }
      case 'logs': {
        const status = await LocalGateway.status(stateDirOption(io));
        const files = logFiles(status.stateDir, opts.kernel);
        if (files.length === 0) {
          write(`no kernel log yet (${join(status.stateDir, 'kernel-logs')})`, { files: [] });
          return ExitCode.ok;
        }
        const shown = files.map((file) => ({ file, lines: logTail(file, opts.lines) }));
        write(
          shown
            .map(({ file, lines }) => {
              const body = lines ? lines.join('\n') : `no log yet (${file})`;
              return files.length > 1 ? `== ${file} ==\n${body}` : body;
            })
            .join('\n'),
          shown.length === 1 ? { file: shown[0]?.file, lines: shown[0]?.lines ?? [] } : { files: shown },
        );
        return ExitCode.ok;
      }
    }
  } catch (error) {
    const failure = describeFailure(error);
    io.stderr.write(`kernelwarden gateway ${action}: ${failure.message}\n`);
    return failure.exitCode === ExitCode.internal ? ExitCode.gatewayUnavailable : failure.exitCode;
  }
}
