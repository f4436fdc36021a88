"""Server settings whose names differ between jupyter-server 1.x and 2.x, and the server's unbounded iopub readers.

- The iopub rate limits are lifted: the client is not a browser, and the defaults (1,000 messages/s, 1 MB/s) make the
  server drop most of a big cell. jupyter-server 1.x reads them from ServerApp; 2.x from
  ZMQChannelsWebsocketConnection (its ServerApp.iopub_*_rate_limit still work, with a deprecation warning).
- jupyter-server reads a kernel's iopub through a ZMQ SUB socket with ZMQ's default receive high-water mark of 1,000
  messages: when the server falls behind a chatty kernel, ZMQ silently drops what exceeds it (lines, and sometimes the
  cell's final idle status). No server option changes the mark, so every SUB socket the server creates is made
  unbounded before it connects (both 1.x and 2.x open them through jupyter_client's connect_iopub, which calls
  zmq.Context.socket; 2.x's asyncio context inherits it). The backlog waits in the server's memory instead.
"""

import jupyter_server
import zmq

IOPUB_DATA_RATE_LIMIT = 1e12
IOPUB_MSG_RATE_LIMIT = 1e9


def server_major(version=None):
    return int((version or jupyter_server.__version__).split(".")[0])


def apply(c, version=None):
    """Sets the rate limits on the config object the server's version reads, and makes SUB sockets unbounded."""
    limits = c.ZMQChannelsWebsocketConnection if server_major(version) >= 2 else c.ServerApp
    limits.iopub_data_rate_limit = IOPUB_DATA_RATE_LIMIT
    limits.iopub_msg_rate_limit = IOPUB_MSG_RATE_LIMIT
    unbounded_sub_sockets()


def unbounded_sub_sockets():
    """Patches zmq.Context.socket (once) so every SUB socket gets RCVHWM 0."""
    if getattr(zmq.Context.socket, "_kernelwarden_unbounded_sub", False):
        return
    create_socket = zmq.Context.socket

    def socket(self, socket_type, *args, **kwargs):
        sock = create_socket(self, socket_type, *args, **kwargs)
        if socket_type == zmq.SUB:
            sock.setsockopt(zmq.RCVHWM, 0)
        return sock

    socket._kernelwarden_unbounded_sub = True
    zmq.Context.socket = socket
