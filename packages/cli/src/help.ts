const MAIN = `kernelwarden — run Python and R through Jupyter kernels, with timeouts that always recover

Usage:
  kernelwarden run [FILE | - | -c CODE] [options]   run one cell and exit
  kernelwarden run NOTEBOOK.ipynb [options]         run a notebook's cells in order
  kernelwarden repl [--lang python|r] [options]     an interactive prompt (:r for R, :py for Python)
  kernelwarden demo                                 a guided tour on the embedded gateway
  kernelwarden mcp [options]                        serve Python and R as tools for AI agents (MCP, stdio)
  kernelwarden gateway start|status|stop|logs       manage the embedded Jupyter gateway
  kernelwarden doctor [--json]                      check jupyter-server, kernelspecs, R, bubblewrap, Node,
                                                    and which limits can be enforced here
  kernelwarden help [COMMAND]                       help on one command

Exit codes: 0 ok, 1 the cell raised, 2 usage, 3 gateway unavailable, 4 isolation or a limit
            unavailable, 5 the kernel died, 6 the gateway went down under the cell, 124 timed out (the kernel was recovered), 70 internal error,
            130 interrupted.

Run 'kernelwarden help run' for the options.`;

/** One option's help lines, by flag name; `lang` differs by command. */
const OPTION_HELP: Record<string, string> = {
  lang: `  -l, --lang python|r        language (default python; r for a .R file)`,
  timeout: `  -t, --timeout DURATION     cell timeout, e.g. 30s, 500ms, 2m; 0 turns it off
                             (default: KERNELWARDEN_CELL_TIMEOUT seconds, else 900s)`,
  'interrupt-grace': `      --interrupt-grace DUR  wait after the timeout's interrupt before killing (default 10s;
                             env KERNELWARDEN_INTERRUPT_GRACE)`,
  'kill-grace': `      --kill-grace DUR       wait after the kill before restarting (default 10s; env KERNELWARDEN_KILL_GRACE)`,
  cwd: `      --cwd DIR              the kernel's working directory (default: the current one)`,
  env: `  -e, --env KEY=VALUE        set an environment variable in the kernel (repeatable)`,
  gateway: `      --gateway URL          use a running Jupyter Server / Kernel Gateway instead of the embedded one`,
  'token-env': `      --token-env VAR        environment variable holding that gateway's token
                             (default KERNELWARDEN_GATEWAY_TOKEN); the token is never printed`,
  hide: `      --hide DIR             the kernel cannot read DIR (bubblewrap; repeatable; embedded gateway only)`,
  allow: `      --allow DIR            ...except this directory inside a hidden one (repeatable)`,
  python: `      --python PATH          the kernels' Python interpreter (default: VIRTUAL_ENV's, else the nearest
                             .venv in the working directory or above, else the python3 kernelspec's);
                             it needs ipykernel; embedded gateway only`,
  'outputs-dir': `  -o, --outputs-dir DIR      save image outputs (PNG, JPEG, GIF, SVG) there and print where`,
  'max-images': `      --max-images N         most images one cell saves there (default 100); the rest are counted, not saved`,
  'max-images-size': `      --max-images-size SIZE most bytes of images one cell saves there, all together (default 64M)`,
  json: `      --json                 print one JSON result on stdout instead of streaming; it carries at most
                             64 MiB of output data, outputs past that are listed without their data`,
  'max-source-size': `      --max-source-size SIZE largest source to run, e.g. 512k, 16M (default 4M;
                             env KERNELWARDEN_MAX_SOURCE_SIZE); sources must be UTF-8 without NUL bytes`,
};

const LIMITS = `Limits (every kernel: Python, R, background, restarted; alone or with --hide; embedded gateway only):
      --memory SIZE          memory of each kernel and all it starts, e.g. 512M, 2G (at least 256M);
                             one allocation past it fails in the cell (MemoryError); env KERNELWARDEN_MEMORY
      --max-processes N      processes and threads of each kernel at once (at least 16); a fork past it
                             fails in the cell; env KERNELWARDEN_MAX_PROCESSES
      --cpu-time DURATION    CPU time of each kernel process over its whole life, whole seconds, e.g. 10m;
                             past it the kernel is killed and restarted; env KERNELWARDEN_CPU_TIME
      --no-network           the kernels get no network but their own loopback; env KERNELWARDEN_NO_NETWORK=1
                             A limit nothing here can enforce exits 4 before any kernel starts
                             ('kernelwarden doctor' shows what enforces each one)`;

/** The options each command takes, in the order its help lists them (the limits follow, for all four). */
export const COMMAND_OPTIONS: Record<'run' | 'repl' | 'demo' | 'mcp', readonly string[]> = {
  run: [
    'lang',
    'timeout',
    'interrupt-grace',
    'kill-grace',
    'cwd',
    'env',
    'gateway',
    'token-env',
    'hide',
    'allow',
    'python',
    'outputs-dir',
    'max-images',
    'max-images-size',
    'json',
    'max-source-size',
  ],
  repl: [
    'lang',
    'timeout',
    'interrupt-grace',
    'kill-grace',
    'cwd',
    'env',
    'gateway',
    'token-env',
    'hide',
    'allow',
    'python',
    'outputs-dir',
    'max-images',
    'max-images-size',
    'max-source-size',
  ],
  demo: ['timeout', 'interrupt-grace', 'kill-grace', 'cwd', 'env', 'hide', 'allow', 'outputs-dir'],
  mcp: [
    'timeout',
    'interrupt-grace',
    'kill-grace',
    'cwd',
    'env',
    'gateway',
    'token-env',
    'hide',
    'allow',
    'python',
    'max-source-size',
  ],
};

function options(command: keyof typeof COMMAND_OPTIONS): string {
  const lines = COMMAND_OPTIONS[command].map((flag) =>
    flag === 'lang' && command === 'repl'
      ? '  -l, --lang python|r        language of the first cell (default python; :r and :py switch)'
      : OPTION_HELP[flag]!,
  );
  return `Options:\n${lines.join('\n')}\n\n${LIMITS}`;
}

const TOPICS: Record<string, string> = {
  run: `kernelwarden run [FILE | - | -c CODE] [options]
kernelwarden run NOTEBOOK.ipynb [--output OUT.ipynb | --inplace] [-p NAME VALUE]… [--allow-errors] [options]

Runs FILE (or standard input for -, or CODE) as one cell, streams its stdout to stdout and its stderr and
traceback to stderr, then shuts the kernel down.

A .ipynb file is run as a notebook: its code cells in order in one kernel of its language (its kernelspec or
language_info; --lang overrides), each cell's output streamed as a script's. The executed notebook, outputs as
nbclient records them, is written only with --output or --inplace (as jupyter execute) — also when a cell stops
the run. The first cell that raises stops it: exit 1, the cell named with its index. --timeout bounds each cell
(exit 124). Images go to --outputs-dir as for scripts (the notebook keeps them too).

Notebooks:
      --output PATH          write the executed notebook to PATH (.ipynb)
      --inplace              write it over NOTEBOOK.ipynb
  -p, --parameter NAME VALUE set a parameter as papermill does: a cell after the one tagged "parameters"
                             (else at the top); VALUE is True, False, None, an integer, a float, else text
                             (repeatable)
      --allow-errors         run every cell even when some raise (exit 0)

${options('run')}

Examples:
  kernelwarden run -c 'print(1+1)'
  kernelwarden run analysis.R --outputs-dir plots
  kernelwarden run job.py --timeout 2m --json > result.json
  kernelwarden run report.ipynb -p region eu -p alpha 0.6 --output report.out.ipynb
  kernelwarden run -c 'open("/home/me/.ssh/id_rsa")' --hide /home/me --allow /home/me/project
  kernelwarden run agent_code.py --memory 2G --max-processes 128 --cpu-time 10m --no-network`,
  repl: `kernelwarden repl [options]

An interactive prompt. A line ending in ':' (or an open bracket) continues on the next line; an empty line
runs the block.
  :r / :py      switch to R / Python (each keeps its own kernel)
  :help         this list
  :quit         leave (as Ctrl-D does)
  Ctrl-C        interrupt the running cell; press it again within 2 s to kill the kernel at once and
                restart it
In Python a line after one ending in ':' starts indented; an empty line in a nested block goes back a
level, at the first level it runs the block.
  Ctrl-D        exit

${options('repl')}`,
  demo: `kernelwarden demo [options]

A scripted tour on the embedded gateway: a Python cell, an R cell, a plot saved to a file, an interrupted
cell, and a cell that ignores SIGINT which the watchdog recovers — with a timeline at the end.
Plots go to --outputs-dir (default: a temporary directory, removed when the tour ends). It always runs on the
embedded gateway; --memory and the other limits apply to its kernels.

${options('demo')}`,
  mcp: `kernelwarden mcp [options]

Serves the kernels as Model Context Protocol tools over stdin/stdout (run_code, restart_kernel,
start_background, check_background, cancel_cell, run_notebook, save_notebook; notebook paths are relative
to --cwd) until stdin closes or SIGTERM/SIGINT arrives; then every
kernel is shut down and it exits 0. Python and R start on first use. Logs go to stderr; stdout carries only the
protocol. --timeout is the default of run_code's timeout_seconds. A cell still running after 45 s (run_code's
max_wait_seconds) goes on: the answer gives its id, which check_background follows.

${options('mcp')}

Result caps:
      --max-output-chars N   most characters of text in one result, head and tail kept (default 32000)
      --max-images N         most images in one result (default 4)
      --max-image-bytes N    largest image in one result (default 1048576)

Register it with Claude Code:  claude mcp add kernelwarden -- npx -y @kernelwarden/cli mcp`,
  gateway: `kernelwarden gateway start|status|stop|logs [--json] [--lines N] [--kernel ID|all]

Manages the embedded Jupyter server that 'run' and 'repl' share (state in $KERNELWARDEN_STATE_DIR, else
$XDG_STATE_HOME/kernelwarden or ~/.local/state/kernelwarden).
  start    start it (or report the one already running)
  status   is it running, where, and which kernels it holds (the token is never printed)
  stop     stop it and every kernel it runs
  logs     print the last N lines of its log (default 50); with --kernel, of that kernel's own
           stdout/stderr log (kernels never write to the server's log), or of every kernel's with 'all'`,
  doctor: `kernelwarden doctor [--json]

Checks what kernelwarden needs — jupyter-server, the python3 and ir kernelspecs, R, bubblewrap and user
namespaces, the Node.js version — and prints the fix for anything missing. Exits 1 when a required piece (Node, jupyter-server,
the python3 kernelspec) is missing; R, IRkernel and bubblewrap are reported as warnings.
Then one line per limit flag (--memory, --max-processes, --cpu-time, --no-network): whether it can be
enforced here and by what (a cgroup, an rlimit, a network namespace), or why not and the fix; a limit
nothing enforces is a warning (--json: "mechanisms" on each limit's check).`,
};

/**
 * The help text for the whole command or one subcommand.
 *
 * Use it for `--help` and for the hint after a usage error; unknown topics get the main text.
 */
export function helpText(topic?: string): string {
  return (topic ? TOPICS[topic] : undefined) ?? MAIN;
}
