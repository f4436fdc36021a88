// kernelwarden's own client: GatewayKernel from the built packages/gateway-client/dist, with its defaults (v1 framing
// where offered, the delayed-ACK stall workaround on).
const DIST = new URL('../../packages/gateway-client/dist/index.js', import.meta.url);
const LOCAL_GATEWAY_DIST = new URL('../../packages/local-gateway/dist/index.js', import.meta.url);

let loaded;

/** The server config LocalGateway writes (iopub high-water mark lifted), from packages/local-gateway's built dist. */
export async function loadLocalGatewayServerConfig() {
  const mod = await import(LOCAL_GATEWAY_DIST.href);
  if (typeof mod.LOCAL_GATEWAY_SERVER_CONFIG !== 'string')
    throw new Error(
      `${LOCAL_GATEWAY_DIST.pathname} does not export LOCAL_GATEWAY_SERVER_CONFIG (build @kernelwarden/local-gateway)`,
    );
  return mod.LOCAL_GATEWAY_SERVER_CONFIG;
}

/** Loads GatewayKernel from the built dist; throws a clear error when the package is not built or lacks it. */
export async function loadGatewayKernel() {
  loaded ??= import(DIST.href).then((mod) => {
    if (typeof mod.GatewayKernel?.start !== 'function')
      throw new Error(`${DIST.pathname} does not export GatewayKernel yet (build @kernelwarden/gateway-client)`);
    return mod.GatewayKernel;
  });
  return loaded;
}

export class KernelwardenClient {
  #kernel;

  constructor(kernel) {
    this.#kernel = kernel;
  }

  get kernelId() {
    return this.#kernel.id;
  }

  /**
   * `GatewayKernel.start()` on a python3 kernel: create, connect, kernel_info handshake. `gateway` (a LocalGateway
   * ticket, say) is used as given; else `{ baseUrl, token }`.
   */
  static async start({ baseUrl, token, gateway, kernelName = 'python3', options = {} }) {
    const GatewayKernel = await loadGatewayKernel();
    const kernel = await GatewayKernel.start({ gateway: gateway ?? { baseUrl, token }, kernelName, ...options });
    return new KernelwardenClient(kernel);
  }

  /** Executes `code`; GatewayKernel settles once both execute_reply and status idle arrived. */
  async run(code, { onText } = {}) {
    const result = await this.#kernel.execute(code, {
      onOutput: onText
        ? (output) => {
            if (output.type === 'stream') onText(output.text, output.name);
          }
        : undefined,
    });
    return { status: result.status, outputDropped: result.outputDropped === true, truncated: result.truncated };
  }

  async interrupt() {
    const { delivered } = await this.#kernel.interrupt();
    if (!delivered) throw new Error('interrupt not delivered');
  }

  async close() {
    await this.#kernel.shutdown();
  }
}
