// @jupyterlab/services 7.6.6 in Node, used the way its docs show: a KernelManager over ServerConnection settings,
// with `ws` as the WebSocket implementation (the library picks the v1 protocol when the server offers it).
import { KernelManager, ServerConnection } from '@jupyterlab/services';
import WebSocket from 'ws';

export class JupyterLabClient {
  #manager;
  #ownsManager;
  #kernel;

  constructor(manager, ownsManager, kernel) {
    this.#manager = manager;
    this.#ownsManager = ownsManager;
    this.#kernel = kernel;
  }

  get kernelId() {
    return this.#kernel.id;
  }

  /** A KernelManager for `baseUrl`; reuse one across cold starts so only the kernel start is timed. */
  static async manager({ baseUrl, token }) {
    const serverSettings = ServerConnection.makeSettings({
      baseUrl,
      wsUrl: baseUrl.replace(/^http/, 'ws'),
      token,
      appendToken: true,
      WebSocket,
    });
    const manager = new KernelManager({ serverSettings });
    await manager.ready;
    return manager;
  }

  /** Starts a python3 kernel and waits for its kernel_info_reply (`kernel.info`). */
  static async start(opts) {
    const ownsManager = !opts.manager;
    const manager = opts.manager ?? (await JupyterLabClient.manager(opts));
    const kernel = await manager.startNew({ name: opts.kernelName ?? 'python3' });
    await kernel.info;
    return new JupyterLabClient(manager, ownsManager, kernel);
  }

  /** Executes `code`; `future.done` settles once both execute_reply and status idle arrived. */
  async run(code, { onText } = {}) {
    const future = this.#kernel.requestExecute({ code, stop_on_error: false });
    if (onText) {
      future.onIOPub = (msg) => {
        if (msg.header.msg_type === 'stream') onText(msg.content.text, msg.content.name);
      };
    }
    const reply = await future.done;
    return { status: reply.content.status };
  }

  async interrupt() {
    await this.#kernel.interrupt();
  }

  async close() {
    try {
      await this.#kernel.shutdown();
    } finally {
      this.#kernel.dispose();
      if (this.#ownsManager) this.#manager.dispose();
    }
  }
}
