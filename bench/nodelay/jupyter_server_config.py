# jupyter-server config for the bench's "no-delay" server: the stock jupyter-server, except that the kernel channels
# WebSocket turns Nagle's algorithm off (TCP_NODELAY) as soon as it opens. jupyter-server 1.23 never does, so on a
# stock server each small frame after the first waits for the client's delayed ACK (up to 40 ms per cell). This server
# shows what a cell costs without that stall. Load it with `jupyter-server --config=<this file>`.
import sys

try:
    # jupyter-server 2.x
    from jupyter_server.services.kernels.websocket import KernelWebsocketHandler as _Handler
except ImportError:
    # jupyter-server 1.x
    from jupyter_server.services.kernels.handlers import ZMQChannelsHandler as _Handler

_stock_open = _Handler.open


def _open_without_nagle(self, *args, **kwargs):
    # tornado's WebSocketHandler.set_nodelay: valid once the connection is established, i.e. from open() on.
    self.set_nodelay(True)
    return _stock_open(self, *args, **kwargs)


_Handler.open = _open_without_nagle
print("kernelwarden-bench: TCP_NODELAY on kernel WebSockets", file=sys.stderr, flush=True)
