import zmq
from traitlets.config import Config

from kernelwarden_gateway import server_settings


def test_rate_limits_go_where_jupyter_server_1_reads_them():
    c = Config()
    server_settings.apply(c, version="1.23.4")
    assert c.ServerApp.iopub_data_rate_limit == 1e12
    assert c.ServerApp.iopub_msg_rate_limit == 1e9
    assert "ZMQChannelsWebsocketConnection" not in c


def test_rate_limits_go_where_jupyter_server_2_reads_them():
    c = Config()
    server_settings.apply(c, version="2.21.0")
    assert c.ZMQChannelsWebsocketConnection.iopub_data_rate_limit == 1e12
    assert c.ZMQChannelsWebsocketConnection.iopub_msg_rate_limit == 1e9
    assert "ServerApp" not in c


def test_sub_sockets_get_an_unbounded_receive_high_water_mark_and_others_keep_theirs():
    server_settings.apply(Config())
    patched = zmq.Context.socket
    server_settings.apply(Config())
    assert zmq.Context.socket is patched
    ctx = zmq.Context()
    try:
        sub = ctx.socket(zmq.SUB)
        pub = ctx.socket(zmq.PUB)
        assert sub.getsockopt(zmq.RCVHWM) == 0
        assert pub.getsockopt(zmq.SNDHWM) == 1000
        sub.close(0)
        pub.close(0)
    finally:
        ctx.term()
