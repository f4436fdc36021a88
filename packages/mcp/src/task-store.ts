import { randomBytes } from 'node:crypto';
import { type CreateTaskOptions, isTerminal, type TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import {
  type CallToolResult,
  isTaskAugmentedRequestParams,
  type Request,
  type RequestId,
  type Result,
  type Task,
} from '@modelcontextprotocol/sdk/types.js';

/** How long a task and its result are kept after it ends when the client asks for no TTL: one hour. */
export const DEFAULT_TASK_TTL_MS = 3_600_000;
/** The longest TTL a client may ask for: one day. */
const MAX_TASK_TTL_MS = 86_400_000;
/**
 * How long the bookkeeping task of a call that did not ask for one is kept when its result is never read (the SDK
 * runs a plain call of a task-capable tool through a task, and reads its result at once).
 */
const PLAIN_TASK_TTL_MS = 60_000;
/** Tasks per `tasks/list` page. */
const PAGE_SIZE = 20;

interface Entry {
  task: Task;
  sessionId: string | undefined;
  /** True when the client asked for the task (its call carried `task`). */
  asked: boolean;
  result?: Result;
  /** A cancelled cell's own result, once its interrupt has settled. */
  cancelled?: Promise<CallToolResult>;
  onCancel?: () => void;
  expiry?: NodeJS.Timeout;
}

/**
 * The SDK's `TaskStore` for the server's tasks, in memory, with what `run_code` as an MCP task needs: it tells
 * tasks the client asked for from the SDK's bookkeeping task of a plain call (hidden from `tasks/list`, dropped once
 * read), tells the cell when a client cancels its task (`tasks/cancel`) and keeps that cell's result for
 * `tasks/result`, bounds every TTL (counted from the end of the task), and never holds the process open: its
 * expiry timers are unref'd.
 */
export class KernelTaskStore implements TaskStore {
  readonly #tasks = new Map<string, Entry>();

  async createTask(
    taskParams: CreateTaskOptions,
    _requestId: RequestId,
    request: Request,
    sessionId?: string,
  ): Promise<Task> {
    const asked = isTaskAugmentedRequestParams(request.params) && request.params.task !== undefined;
    const ttl = asked ? Math.min(taskParams.ttl ?? DEFAULT_TASK_TTL_MS, MAX_TASK_TTL_MS) : PLAIN_TASK_TTL_MS;
    const now = new Date().toISOString();
    const task: Task = {
      taskId: randomBytes(16).toString('hex'),
      status: 'working',
      ttl,
      createdAt: now,
      lastUpdatedAt: now,
      pollInterval: taskParams.pollInterval ?? 1000,
    };
    this.#tasks.set(task.taskId, { task, sessionId, asked });
    return { ...task };
  }

  /** True when the client asked for this task (its call carried `task`). */
  askedFor(taskId: string): boolean {
    return this.#tasks.get(taskId)?.asked ?? false;
  }

  /**
   * Runs `stop` when the task is cancelled; `result` is the cell's own result, which `tasks/result` of the
   * cancelled task then answers.
   */
  watch(taskId: string, stop: () => void, result: Promise<CallToolResult>): void {
    const entry = this.#tasks.get(taskId);
    if (!entry) return;
    entry.onCancel = () => {
      entry.cancelled = result;
      stop();
    };
    void result.finally(() => {
      entry.onCancel = undefined;
    });
  }

  async getTask(taskId: string, sessionId?: string): Promise<Task | null> {
    const entry = this.#lookup(taskId, sessionId);
    return entry ? { ...entry.task } : null;
  }

  async storeTaskResult(
    taskId: string,
    status: 'completed' | 'failed',
    result: Result,
    sessionId?: string,
  ): Promise<void> {
    const entry = this.#found(taskId, sessionId);
    if (isTerminal(entry.task.status)) {
      throw new Error(`Task ${taskId} has already ended (${entry.task.status}); its result is stored once`);
    }
    entry.result = result;
    this.#setStatus(entry, status);
  }

  async getTaskResult(taskId: string, sessionId?: string): Promise<Result> {
    const entry = this.#found(taskId, sessionId);
    if (entry.cancelled) return entry.cancelled;
    if (!entry.result) throw new Error(`Task ${taskId} has no result yet`);
    // A plain call's task is read once, by the SDK answering that call.
    if (!entry.asked) this.#drop(taskId);
    return entry.result;
  }

  async updateTaskStatus(
    taskId: string,
    status: Task['status'],
    statusMessage?: string,
    sessionId?: string,
  ): Promise<void> {
    const entry = this.#found(taskId, sessionId);
    if (isTerminal(entry.task.status)) {
      throw new Error(`Task ${taskId} has already ended (${entry.task.status}) and cannot become ${status}`);
    }
    if (statusMessage) entry.task.statusMessage = statusMessage;
    this.#setStatus(entry, status);
    if (status === 'cancelled') {
      const stop = entry.onCancel;
      entry.onCancel = undefined;
      stop?.();
    }
  }

  async listTasks(cursor?: string, sessionId?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const ids = [...this.#tasks.keys()].filter((id) => this.#tasks.get(id)!.asked && this.#lookup(id, sessionId));
    let start = 0;
    if (cursor !== undefined) {
      const at = ids.indexOf(cursor);
      if (at < 0) throw new Error(`Invalid cursor: ${cursor}`);
      start = at + 1;
    }
    const page = ids.slice(start, start + PAGE_SIZE);
    const tasks = page.map((id) => ({ ...this.#tasks.get(id)!.task }));
    return start + PAGE_SIZE < ids.length ? { tasks, nextCursor: page.at(-1)! } : { tasks };
  }

  /** Forgets every task (the server closed). */
  cleanup(): void {
    for (const entry of this.#tasks.values()) clearTimeout(entry.expiry);
    this.#tasks.clear();
  }

  #setStatus(entry: Entry, status: Task['status']): void {
    entry.task.status = status;
    entry.task.lastUpdatedAt = new Date().toISOString();
    if (!isTerminal(status) || !entry.task.ttl) return;
    clearTimeout(entry.expiry);
    const taskId = entry.task.taskId;
    entry.expiry = setTimeout(() => this.#drop(taskId), entry.task.ttl);
    entry.expiry.unref();
  }

  #drop(taskId: string): void {
    clearTimeout(this.#tasks.get(taskId)?.expiry);
    this.#tasks.delete(taskId);
  }

  /** The task, unless it belongs to another session. */
  #lookup(taskId: string, sessionId: string | undefined): Entry | undefined {
    const entry = this.#tasks.get(taskId);
    if (entry && sessionId !== undefined && entry.sessionId !== undefined && entry.sessionId !== sessionId) return;
    return entry;
  }

  #found(taskId: string, sessionId: string | undefined): Entry {
    const entry = this.#lookup(taskId, sessionId);
    if (!entry) throw new Error(`Task ${taskId} not found`);
    return entry;
  }
}
