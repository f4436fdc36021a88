/**
 * The `jupyter_server_config.py` that `LocalGateway` writes into its server's own config directory at every start:
 * the settings whose names differ between jupyter-server 1.x and 2.x, chosen by the version of the server that
 * loads it, so that the server's log has no "not recognized" or "deprecated" line on either.
 *
 * - The iopub rate limits are lifted: our client is not a browser, and the defaults (1,000 messages/s, 1 MB/s) make
 *   the server drop 92-100 % of a 20 MB cell. jupyter-server 1.x reads them from `ServerApp`; 2.x from
 *   `ZMQChannelsWebsocketConnection` (its `ServerApp.iopub_*_rate_limit` still work, with a deprecation warning).
 * - jupyter-server reads a kernel's iopub through a ZMQ SUB socket with ZMQ's default receive high-water mark of
 *   1,000 messages. When the server falls behind a chatty kernel (a cell printing with `flush=True` makes one
 *   message per line; on a 2-core machine the server fell ~1,000 messages behind within 20,000 lines), ZMQ silently
 *   drops whatever exceeds the mark — lines vanish, and so may the cell's `status: idle`. No server option changes
 *   the mark, so this file makes every SUB socket the server creates unbounded (it must be set before the socket
 *   connects). Both 1.x and 2.x open those sockets through jupyter_client's `connect_iopub`, which calls
 *   `zmq.Context.socket` (2.x's asyncio context inherits it). The backlog then waits in the server's memory
 *   instead; it is bounded by what the kernel prints while the server catches up.
 *
 * Use it for a server of your own by copying it into that server's `JUPYTER_CONFIG_DIR`. LocalGateway's own server gets the same
 * settings from the `kernelwarden_gateway` Python package shipped with this one (`python/kernelwarden_gateway/server_settings.py`).
 */
export const LOCAL_GATEWAY_SERVER_CONFIG = `# Written by kernelwarden's LocalGateway at every start; edits are overwritten.
import jupyter_server
import zmq

c = get_config()  # noqa: F821 (provided by the config loader)

# Deliver all output: the default iopub rate limits drop most of a big cell. jupyter-server 2 moved them from
# ServerApp (deprecated there) to the kernel websocket connection.
if int(jupyter_server.__version__.split(".")[0]) >= 2:
    _kernelwarden_rate_limits = c.ZMQChannelsWebsocketConnection
else:
    _kernelwarden_rate_limits = c.ServerApp
_kernelwarden_rate_limits.iopub_data_rate_limit = 1e12
_kernelwarden_rate_limits.iopub_msg_rate_limit = 1e9

# Unbounded receive high-water mark for the server's ZMQ SUB sockets (kernel iopub): with ZMQ's default of 1,000
# messages, a server that falls behind a chatty kernel silently drops output (and sometimes the final idle status).
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
