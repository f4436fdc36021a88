import type { MessageHeader } from '@kernelwarden/jupyter-protocol';

/**
 * The header of a Jupyter message: `MessageHeader` of `@kernelwarden/jupyter-protocol`, under the name testkit
 * gave it first.
 * @deprecated Use `MessageHeader` from `@kernelwarden/jupyter-protocol`.
 */
export type JupyterHeader = MessageHeader;
