/**
 * The `jupyter_server_config.py` that `LocalGateway` writes into its server's own config directory at every start.
 *
 * jupyter-server reads a kernel's iopub through a ZMQ SUB socket with ZMQ's default receive high-water mark of
 * 1,000 messages. When the server falls behind a chatty kernel (a cell printing with `flush=True` makes one message
 * per line; on this 2-core machine the server fell ~1,000 messages behind within 20,000 lines), ZMQ silently drops
 * whatever exceeds the mark — lines vanish, and so may the cell's `status: idle`. No server option changes the mark,
 * so this file makes every SUB socket the server creates unbounded (it must be set before the socket connects).
 * The backlog then waits in the server's memory instead; it is bounded by what the kernel prints while the server
 * catches up. Use it for a server of your own by copying it into that server's `JUPYTER_CONFIG_DIR`.
 */
export const LOCAL_GATEWAY_SERVER_CONFIG = `# Written by kernelwarden's LocalGateway at every start; edits are overwritten.
# Unbounded receive high-water mark for the server's ZMQ SUB sockets (kernel iopub): with ZMQ's default of 1,000
# messages, a server that falls behind a chatty kernel silently drops output (and sometimes the final idle status).
import zmq

if not getattr(zmq.Context.socket, "_kernelwarden_unbounded_sub", False):
    _kernelwarden_create_socket = zmq.Context.socket

    def _kernelwarden_socket(self, socket_type, *args, **kwargs):
        sock = _kernelwarden_create_socket(self, socket_type, *args, **kwargs)
        if socket_type == zmq.SUB:
            sock.setsockopt(zmq.RCVHWM, 0)
        return sock

    _kernelwarden_socket._kernelwarden_unbounded_sub = True
    zmq.Context.socket = _kernelwarden_socket
`;
