/**
 * The exit codes of the `kernelwarden` command, one per outcome a script may want to tell apart.
 *
 * Use the names instead of bare numbers when you wrap the CLI.
 */
export const ExitCode = {
  /** The cell ran to its end. */
  ok: 0,
  /** The cell raised (its traceback went to stderr). Also `doctor` when something is missing. */
  cellError: 1,
  /** The command line was wrong (an unknown flag, a bad duration, a missing file). */
  usage: 2,
  /**
   * The gateway could not be reached, refused the token or could not start a kernel (a busy or full gateway too:
   * `GATEWAY_BUSY`, `GATEWAY_CAPACITY`, whose message says the failure is temporary).
   */
  gatewayUnavailable: 3,
  /**
   * `--hide`/`--allow` or a limit (`--memory`, `--max-processes`, `--cpu-time`, `--no-network`) was asked for but cannot
   * be enforced here (no bubblewrap, nothing that enforces that limit, or a remote gateway); no kernel was started.
   */
  isolationUnavailable: 4,
  /**
   * The kernel died while the cell ran (`os._exit()`, a crash, a kill, running out of memory): the server restarted
   * it with its variables gone, or could not. The message says which.
   */
  kernelDied: 5,
  /**
   * The gateway stopped answering while the cell ran (`GATEWAY_DOWN`: a gateway set's health checks found it down):
   * the kernel on it is lost with its state. The message names the gateway and says no restart was attempted.
   */
  gatewayDown: 6,
  /** Something failed that is none of the above (a bug or a broken kernel); the message says what. */
  internal: 70,
  /** The cell ran past `--timeout`; the watchdog stopped it and, when it had to, reset the kernel. */
  timedOut: 124,
  /** The user interrupted the command with Ctrl-C (128 + SIGINT). */
  interrupted: 130,
  /**
   * Standard output was closed by its reader (`kernelwarden run … | head`): the cell was stopped and nothing more
   * is printed, as a program killed by SIGPIPE (128 + SIGPIPE) ends.
   */
  stdoutClosed: 141,
} as const;

/** One of the values of `ExitCode`. */
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];
