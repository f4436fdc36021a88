export type { CellsToNotebookOptions, SessionCell } from './build.js';
export { cellsToNotebook } from './build.js';
export { START_ALLOWANCE_MS } from './cell-executor.js';
export {
  NotebookCellError,
  NotebookCellTimeoutError,
  NotebookError,
  NotebookFormatError,
  NotebookIOError,
  NotebookKernelError,
  NotebookParameterError,
} from './errors.js';
export {
  CELL_ID_MINOR,
  loadNotebook,
  NBFORMAT_MINOR,
  newCellId,
  parseNotebook,
  readNotebook,
  serializeNotebook,
  upgradeNotebook,
  writeNotebook,
} from './format.js';
export type { KernelMessage } from './outputs.js';
export {
  CellOutputs,
  coalesceStreams,
  NotebookOutputs,
  nbclientTimestamp,
  outputFromCore,
  outputFromMessage,
  TIMING_KEYS,
} from './outputs.js';
export type { ParameterLanguage, Parameters, ParameterValue } from './parameters.js';
export {
  INJECTED_PARAMETERS_TAG,
  injectParameters,
  PARAMETERS_TAG,
  parameterLanguage,
  parameterSource,
  parseParameterValue,
  translateValue,
} from './parameters.js';
export { compareCodePoints, PyFloat, parsePyJson, pyFloatRepr, splitLinesKeepEnds, stringifyPyJson } from './pyjson.js';
export { notebookLanguage, RAISES_EXCEPTION_TAG, runNotebook, SKIP_EXECUTION_TAG } from './run.js';
export type { CellStartEvent, NotebookSession, RunNotebookOptions } from './run-options.js';
export type { MessageTap, TapListener, TappedMessage } from './tap.js';
export { createMessageTap } from './tap.js';
export type {
  CellReport,
  CellStatus,
  CodeCell,
  JsonObject,
  Notebook,
  NotebookCell,
  NotebookOutput,
  NotebookRun,
  TextCell,
} from './types.js';
