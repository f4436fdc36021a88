/**
 * The `jupyter_server_config.py` that `LocalGateway` writes into its server's config directory: iopub rate limits
 * lifted (named by the server's version) and an unbounded iopub high-water mark, so that big and chatty cells arrive
 * complete. Copy it into the `JUPYTER_CONFIG_DIR` of a server of your own.
 *
 * A frozen copy of `@kernelwarden/local-gateway`'s constant (its tests check that the two are the same), kept so that
 * this package can export it without depending on that one.
 * @deprecated Import `LOCAL_GATEWAY_SERVER_CONFIG` from `@kernelwarden/local-gateway`.
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
