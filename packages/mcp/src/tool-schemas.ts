import { z } from 'zod/v3';

/** The input of `run_code`, shared by the MCP tool and the AI SDK tool. */
export const runCodeInput = {
  code: z.string().describe('The code to run, as one cell. State (variables, imports) persists across calls.'),
  language: z.enum(['python', 'r']).optional().describe("'python' (default) or 'r'; each language has its own kernel."),
  timeout_seconds: z
    .number()
    .nonnegative()
    .optional()
    .describe('Stop the cell after this many seconds (0: no limit). Defaults to the server setting.'),
};

/** The input of `restart_kernel`. */
export const restartKernelInput = {
  language: z.enum(['python', 'r']).optional().describe("The kernel to restart: 'python' (default) or 'r'."),
};

/** The input of `start_background`. */
export const startBackgroundInput = {
  code: z.string().describe('Python code to run in the background, on a kernel of its own.'),
};

/** The input of `check_background`. */
export const checkBackgroundInput = {
  exec_id: z.string().describe('The id start_background returned.'),
  wait_seconds: z
    .number()
    .nonnegative()
    .max(600)
    .optional()
    .describe('Wait up to this many seconds for the cell to finish before answering (default 0).'),
};

/** What each tool tells the model it does. */
export const TOOL_DESCRIPTIONS = {
  run_code:
    'Run Python or R code in a persistent Jupyter kernel and return its output (stdout, stderr, the value of the ' +
    'last expression, tracebacks, and plots as images). Variables persist across calls per language. Long outputs ' +
    'are cut in the middle. A timeout interrupts the cell; a cell that ignores the interrupt gets its kernel ' +
    'restarted, and the result says that its variables are gone.',
  restart_kernel: "Restart the Python or R kernel: a fresh interpreter, all of that language's variables gone.",
  start_background:
    'Start Python code in the background on a kernel of its own (it does not see run_code variables) and return ' +
    'an id at once; use check_background to follow it.',
  check_background: "Report a background cell's status (running, done, failed, interrupted) and its output so far.",
} as const;
