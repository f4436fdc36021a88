# jupyter-server config for the bench's "no-delay" server: the stock jupyter-server 1.23, except that the kernel
# channels WebSocket turns Nagle's algorithm off (TCP_NODELAY) as soon as it opens. jupyter-server 1.23 never does,
# so on a stock server each small frame after the first waits for the client's delayed ACK (up to 40 ms per cell).
# This server shows what a cell costs without that stall. Load it with `jupyter-server --config=<this file>`.
import sys

from jupyter_server.services.kernels import handlers as _kernel_handlers

_stock_open = _kernel_handlers.ZMQChannelsHandler.open


def _open_without_nagle(self, *args, **kwargs):
    # tornado's WebSocketHandler.set_nodelay: valid once the connection is established, i.e. from open() on.
    self.set_nodelay(True)
    return _stock_open(self, *args, **kwargs)


_kernel_handlers.ZMQChannelsHandler.open = _open_without_nagle
print("kernelwarden-bench: TCP_NODELAY on kernel WebSockets", file=sys.stderr, flush=True)
