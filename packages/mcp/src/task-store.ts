import type { CreateTaskOptions } from '@modelcontextprotocol/sdk/experimental/tasks';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
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
 * How long the SDK's bookkeeping task of a call that did not ask for a task is kept: the SDK runs such a call of a
 * task-capable tool through a task of its own, and reads its result at once.
 */
const PLAIN_TASK_TTL_MS = 60_000;

/**
 * The SDK's `InMemoryTaskStore`, with what `run_code` as an MCP task needs: it knows which tasks a client asked
 * for (the SDK also makes one for a plain call of a task-capable tool), tells the cell when a client cancels its
 * task (`tasks/cancel`), keeps the result of a cancelled cell for `tasks/result`, and bounds every TTL.
 */
export class KernelTaskStore extends InMemoryTaskStore {
  readonly #plain = new Set<string>();
  readonly #onCancel = new Map<string, () => void>();
  /** Results of cancelled tasks (the SDK's store keeps none for a task that ended cancelled), or their promise. */
  readonly #cancelled = new Map<string, Promise<CallToolResult>>();

  override async createTask(
    taskParams: CreateTaskOptions,
    requestId: RequestId,
    request: Request,
    sessionId?: string,
  ): Promise<Task> {
    await this.#forgetEnded();
    const asked = isTaskAugmentedRequestParams(request.params) && request.params.task !== undefined;
    const ttl = asked ? Math.min(taskParams.ttl ?? DEFAULT_TASK_TTL_MS, MAX_TASK_TTL_MS) : PLAIN_TASK_TTL_MS;
    const task = await super.createTask({ ...taskParams, ttl }, requestId, request, sessionId);
    if (!asked) this.#plain.add(task.taskId);
    return task;
  }

  /** Drops what is kept about tasks the SDK's store has let go of (their TTL passed). */
  async #forgetEnded(): Promise<void> {
    for (const taskId of [...this.#plain, ...this.#cancelled.keys()]) {
      if (await super.getTask(taskId)) continue;
      this.#plain.delete(taskId);
      this.#cancelled.delete(taskId);
    }
  }

  /** True when the client asked for this task (its call carried `task`). */
  askedFor(taskId: string): boolean {
    return !this.#plain.has(taskId);
  }

  /**
   * Runs `stop` when the task is cancelled; `result` is the cell's own result, which `tasks/result` of the
   * cancelled task then answers.
   */
  watch(taskId: string, stop: () => void, result: Promise<CallToolResult>): void {
    this.#onCancel.set(taskId, () => {
      this.#cancelled.set(taskId, result);
      stop();
    });
    void result.finally(() => this.#onCancel.delete(taskId));
  }

  override async updateTaskStatus(
    taskId: string,
    status: Task['status'],
    statusMessage?: string,
    sessionId?: string,
  ): Promise<void> {
    await super.updateTaskStatus(taskId, status, statusMessage, sessionId);
    if (status !== 'cancelled') return;
    const stop = this.#onCancel.get(taskId);
    this.#onCancel.delete(taskId);
    stop?.();
  }

  override async getTaskResult(taskId: string, sessionId?: string): Promise<Result> {
    const cancelled = this.#cancelled.get(taskId);
    if (cancelled && (await this.getTask(taskId, sessionId))) return cancelled;
    return super.getTaskResult(taskId, sessionId);
  }

  override async listTasks(cursor?: string, sessionId?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const page = await super.listTasks(cursor, sessionId);
    return { ...page, tasks: page.tasks.filter((task) => !this.#plain.has(task.taskId)) };
  }

  override cleanup(): void {
    super.cleanup();
    this.#plain.clear();
    this.#onCancel.clear();
    this.#cancelled.clear();
  }
}
