/**
 * Holds new requests while the kernel is not ready for them: during a restart (until the new socket's handshake
 * confirmed iopub: a cell sent earlier could run before iopub is connected and lose its `status: idle`), and after
 * an interrupt until the interrupted cell's reply drained. Holds chain: requests wait for every hold in force.
 */
export class SendGate {
  #gate: Promise<void> | undefined;

  /** True while some hold is in force. */
  get held(): boolean {
    return this.#gate !== undefined;
  }

  /**
   * Holds requests until `until` settles (a rejection counts as settled) and every earlier hold ended; `release`
   * runs right before the requests held behind it go.
   */
  hold(until: Promise<unknown>, release?: () => void): void {
    const gate: Promise<void> = Promise.all([this.#gate, until.catch(() => {})]).then(() => {
      release?.();
      if (this.#gate === gate) this.#gate = undefined;
    });
    this.#gate = gate;
  }

  /** Runs `send` now when nothing is held, else once every hold in force has ended. */
  whenOpen(send: () => void): void {
    const gate = this.#gate;
    if (gate) void gate.then(send);
    else send();
  }
}
