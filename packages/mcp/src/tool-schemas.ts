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
  max_wait_seconds: z
    .number()
    .nonnegative()
    .optional()
    .describe(
      'Answer after at most this many seconds even if the cell is still running (default 45; 0: wait for the end). ' +
        'A cell still running then goes on in the same kernel: the answer has its output so far and an id for ' +
        'check_background and cancel_cell.',
    ),
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
  exec_id: z.string().describe('The id start_background or run_code returned.'),
  wait_seconds: z
    .number()
    .nonnegative()
    .max(600)
    .optional()
    .describe('Wait up to this many seconds for the cell to finish before answering (default 0; keep it under 50).'),
};

/** The input of `cancel_cell`. */
export const cancelCellInput = {
  exec_id: z.string().describe('The id run_code or start_background returned for a cell that is still running.'),
};

/** The input of `run_notebook`. */
export const runNotebookInput = {
  path: z.string().describe("The notebook (.ipynb) to run, relative to the server's working directory or absolute."),
  parameters: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      'Values injected as papermill does: a cell after the one tagged "parameters" (else at the top) sets them.',
    ),
  output_path: z
    .string()
    .optional()
    .describe('Where to write the executed notebook (.ipynb); default: NAME.out.ipynb beside the input.'),
  allow_errors: z.boolean().optional().describe('Go on after a cell raises (default false: the run stops there).'),
  timeout_seconds: z
    .number()
    .positive()
    .optional()
    .describe('Stop a cell after this many seconds; the run then stops. Defaults to the server setting.'),
};

/** The input of `save_notebook`. */
export const saveNotebookInput = {
  output_path: z
    .string()
    .describe('Where to write the notebook (.ipynb), relative to the working directory or absolute.'),
  language: z
    .enum(['python', 'r'])
    .optional()
    .describe("The kernel whose run_code cells to save: 'python' (default) or 'r'."),
};

/** What each tool tells the model it does. */
export const TOOL_DESCRIPTIONS = {
  run_code:
    'Run Python or R code in a persistent Jupyter kernel and return its output (stdout, stderr, the value of the ' +
    'last expression, tracebacks, and plots as images). Variables persist across calls per language. Long outputs ' +
    'are cut in the middle. A timeout interrupts the cell; a cell that ignores the interrupt gets its kernel ' +
    'restarted, and the result says that its variables are gone. A cell still running after max_wait_seconds ' +
    '(default 45) keeps running: the answer gives its output so far and an id; follow it with check_background ' +
    'or stop it with cancel_cell.',
  restart_kernel: "Restart the Python or R kernel: a fresh interpreter, all of that language's variables gone.",
  start_background:
    'Start Python code in the background on a kernel of its own (it does not see run_code variables) and return ' +
    'an id at once; use check_background to follow it.',
  check_background:
    "Report a background cell's status (running, done, failed, interrupted) and its output so far; for a run_code " +
    'cell that was still running, its output since the last answer, then its final result. wait_seconds waits ' +
    'for the end.',
  cancel_cell:
    'Interrupt a cell that is still running (an id from run_code or start_background). The kernel keeps its ' +
    'variables when the interrupt works; a cell that ignores it gets its kernel restarted, and the answer says so.',
  run_notebook:
    'Run a Jupyter notebook (.ipynb) top to bottom in the persistent kernel of its language (its variables stay ' +
    'for run_code), optionally with parameters, and write the executed notebook with its outputs. Answers with one ' +
    'line per code cell (status, the end of its output or its error) and the path written.',
  save_notebook:
    'Save the cells run_code has run so far (one language, in order, with their outputs) as a Jupyter notebook ' +
    '(.ipynb).',
} as const;
