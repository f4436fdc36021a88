// The parsed command line: what `parseCommand` returns and the commands take.

/** The language a cell runs in. */
export type Language = 'python' | 'r';

/**
 * How to build the kernel stack: shared by `run`, `repl` and `demo`.
 *
 * Every field comes from a flag; `createStack()` takes the same object.
 */
export interface StackOptions {
  /** Language of the first cell (`repl` can switch). @defaultValue `'python'` (`'r'` for a `.R` file) */
  language: Language;
  /** Cell timeout in ms; `0` disables it; `undefined` leaves the watchdog's default (`KERNELWARDEN_CELL_TIMEOUT` or 900 s). */
  timeoutMs: number | undefined;
  /** How long the watchdog waits after interrupting a timed-out cell before it kills the kernel. */
  interruptGraceMs: number | undefined;
  /** How long the watchdog waits after killing before it restarts the kernel. */
  killGraceMs: number | undefined;
  /** Working directory of the kernel. @defaultValue the current directory */
  cwd: string;
  /** Extra environment variables for the kernel (`--env K=V`). */
  env: Record<string, string>;
  /** A remote gateway URL; absent = the embedded local gateway. */
  gatewayUrl: string | undefined;
  /** Name of the environment variable holding the remote gateway's token. @defaultValue `KERNELWARDEN_GATEWAY_TOKEN` */
  tokenEnv: string;
  /** Directories the kernel must not read (`--hide`). */
  hide: string[];
  /** Directories inside hidden ones the kernel may read again (`--allow`). */
  allow: string[];
  /**
   * The Python interpreter of the kernels (`--python PATH`); absent: `VIRTUAL_ENV`'s, else the nearest `.venv`'s,
   * else the gateway's `python3` kernelspec. It must have ipykernel. Embedded gateway only.
   */
  python?: string | undefined;
  /** Where image outputs are saved; absent = not saved. */
  outputsDir: string | undefined;
  /** Most images one cell saves to `outputsDir` (`--max-images`). @defaultValue `DEFAULT_MAX_IMAGES` (100) */
  maxImages?: number | undefined;
  /**
   * Most bytes one cell's images take in `outputsDir`, all together (`--max-images-size`).
   * @defaultValue `DEFAULT_MAX_IMAGES_BYTES` (64 MiB)
   */
  maxImagesBytes?: number | undefined;
  /** Print one JSON document instead of streaming. */
  json: boolean;
  /**
   * The largest source (file, standard input, `-c`, a repl cell) sent to a kernel, in bytes (`--max-source-size`,
   * `KERNELWARDEN_MAX_SOURCE_SIZE`). @defaultValue `DEFAULT_MAX_SOURCE_BYTES` (4 MiB)
   */
  maxSourceBytes?: number;
  /**
   * Memory of each kernel and everything it starts, in bytes (`--memory`, `KERNELWARDEN_MEMORY`): a memory cgroup
   * where one is writable, and `RLIMIT_DATA` on each process, so one allocation past it fails in the cell
   * (`MemoryError`). At least the isolation package's `MIN_MEMORY_BYTES` (256 MiB). @defaultValue no limit
   */
  memoryBytes?: number | undefined;
  /**
   * Processes and threads each kernel may run at once, the sandbox's own included (`--max-processes`,
   * `KERNELWARDEN_MAX_PROCESSES`): a pids cgroup, else `RLIMIT_NPROC` (not as root). At least `MIN_PROCESSES` (16).
   * @defaultValue no limit
   */
  maxProcesses?: number | undefined;
  /**
   * CPU time, in whole seconds, each process of a kernel may use over its whole life (`--cpu-time`,
   * `KERNELWARDEN_CPU_TIME`; `RLIMIT_CPU`): past it the process is killed and the server restarts the kernel.
   * @defaultValue no limit
   */
  cpuSeconds?: number | undefined;
  /**
   * `false` gives each kernel a network namespace with only loopback (`--no-network`, `KERNELWARDEN_NO_NETWORK=1`);
   * it still reaches the embedded gateway. @defaultValue true (the network is shared)
   */
  network?: false | undefined;
}

/** What `run` executes: a file, inline code, standard input (`-`), or a notebook (`.ipynb`). */
export type RunSource =
  | { kind: 'file'; path: string }
  | { kind: 'code'; code: string }
  | { kind: 'stdin' }
  | NotebookSource;

/** `run NOTEBOOK.ipynb`: the notebook and what to do with it. */
export interface NotebookSource {
  kind: 'notebook';
  path: string;
  /** `--output PATH`; `--inplace` sets it to `path`; absent: the executed notebook is not written. */
  output: string | undefined;
  /** `-p NAME VALUE`, in order, the values as typed (read as papermill reads them when the run starts). */
  parameters: [string, string][];
  /** `--allow-errors`: the run goes on after a cell raises. */
  allowErrors: boolean;
  /** `--lang`, when given: overrides the notebook's own language. */
  lang: Language | undefined;
}

/** A parsed command line. */
export type Command =
  | { command: 'help'; topic: string | undefined }
  | { command: 'version' }
  | { command: 'run'; source: RunSource; stack: StackOptions }
  | { command: 'repl'; stack: StackOptions }
  | { command: 'demo'; stack: StackOptions }
  | { command: 'mcp'; stack: StackOptions; output: McpOutputOptions }
  | { command: 'doctor'; json: boolean }
  | { command: 'gateway'; action: GatewayAction; json: boolean; lines: number; kernel?: string | undefined };

/** How `kernelwarden mcp` caps what one tool result carries (absent: the `@kernelwarden/mcp` defaults). */
export interface McpOutputOptions {
  maxTextChars?: number;
  maxImages?: number;
  maxImageBytes?: number;
}

/** What `kernelwarden gateway` can do with the embedded gateway. */
export type GatewayAction = 'start' | 'status' | 'stop' | 'logs';
