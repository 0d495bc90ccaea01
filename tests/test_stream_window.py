"""The request-n window of a request-stream sized by bytes as well as items (RSocket 1.0
Protocol §Flow Control; ``ConnectionConfig.stream_window_bytes`` / ``max_stream_window``).

A client protocol on a StringTransport is fed PAYLOAD frames; the REQUEST_N frames it writes
are read back. No reactor: the consumer is ``take_ready``.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from zope.interface import implementer

from rsocket_tx.client import make_setup
from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.core.fragmentation import encode_payload_bearing
from rsocket_tx.core.frames import FrameType, RequestNFrame, RequestStreamFrame, decode
from rsocket_tx.core.framing import FrameReader
from rsocket_tx.core.payload import Payload
from rsocket_tx.interfaces import IFrameTransport
from rsocket_tx.protocol import RSocketClientFactory
from rsocket_tx.streams import DEFAULT_PREFETCH

_NEXT = 0x20  # PAYLOAD flag N


def _client(**settings):
    clock = Clock()
    factory = RSocketClientFactory(make_setup(), reactor=clock,
                                   config=ConnectionConfig(**settings))
    proto = factory.buildProtocol(None)
    transport = StringTransport()
    transport.clock = clock
    proto.makeConnection(transport)
    return proto, transport


def _sent(transport):
    """The frames written since the last call (decoded)."""
    transport.clock.advance(0)  # (requests are written at the end of the reactor turn)
    data = transport.value()
    transport.clear()
    return [decode(f) for f in FrameReader().feed(data)]


def _items(sid: int, n: int, size: int) -> bytes:
    frame = encode_payload_bearing(FrameType.PAYLOAD, sid, _NEXT, b"", b"x" * size, None)
    return (len(frame).to_bytes(3, "big") + frame) * n


def _requested(frames, sid):
    return [f.request_n for f in frames if isinstance(f, RequestNFrame) and f.stream_id == sid]


def _run(proto, transport, stream, size, rounds):
    """Deliver what was requested, ``rounds`` times, consuming everything; return the
    REQUEST_N amounts and the most items outstanding (requested, not yet consumed)."""
    granted = [f for f in _sent(transport) if isinstance(f, RequestStreamFrame)][0] \
        .initial_request_n
    consumed = 0
    most = granted
    amounts = []
    for _ in range(rounds):
        owed = granted - consumed
        proto.dataReceived(_items(stream.stream_id, owed, size))
        consumed += len(stream.take_ready())
        more = _requested(_sent(transport), stream.stream_id)
        amounts.extend(more)
        granted += sum(more)
        most = max(most, granted - consumed)
    return amounts, most


def test_small_items_grow_the_default_window_to_the_byte_budget():
    proto, transport = _client(stream_window_bytes=65_000, max_stream_window=8192)
    stream = proto.rsocket.request_stream(Payload(b"go"))
    amounts, most = _run(proto, transport, stream, 64, 4)
    # 64-byte items count 65 bytes: 1000 of them fit 65,000 bytes; the first top-up (after
    # half of the 256 up front) carries the growth, later ones half the window
    assert amounts[0] == DEFAULT_PREFETCH + (1000 - DEFAULT_PREFETCH)
    assert amounts[1:] == [1000] * (len(amounts) - 1)
    assert most == 1000


def test_the_window_is_bounded_by_max_stream_window():
    proto, transport = _client(stream_window_bytes=1 << 30, max_stream_window=512)
    stream = proto.rsocket.request_stream(Payload(b"go"))
    amounts, most = _run(proto, transport, stream, 1, 4)
    assert most == 512
    assert set(amounts[1:]) == {512}


def test_large_items_keep_the_window_at_prefetch():
    proto, transport = _client(stream_window_bytes=256 * 1024)
    stream = proto.rsocket.request_stream(Payload(b"go"))
    amounts, most = _run(proto, transport, stream, 4096, 3)  # 63 of them fit 256 KiB
    assert amounts == [DEFAULT_PREFETCH] * len(amounts)
    assert most == DEFAULT_PREFETCH


def test_an_explicit_prefetch_is_a_fixed_window():
    proto, transport = _client(stream_window_bytes=256 * 1024)
    stream = proto.rsocket.request_stream(Payload(b"go"), prefetch=16)
    amounts, most = _run(proto, transport, stream, 1, 4)
    assert set(amounts) == {16}
    assert most == 16


def test_window_bytes_zero_keeps_the_default_window():
    proto, transport = _client(stream_window_bytes=0)
    stream = proto.rsocket.request_stream(Payload(b"go"))
    amounts, most = _run(proto, transport, stream, 1, 3)
    assert most == DEFAULT_PREFETCH


@implementer(IFrameTransport)
class _MessageTransport(StringTransport):
    """A message transport (as WebSocket): each frame written is one message."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[bytes] = []

    def writeFrames(self, frames):
        self.frames.extend(frames)


def test_over_a_message_transport_the_window_stays_in_items():
    # each item is a WebSocket message: a window grown by bytes (4,032 messages of 64 bytes)
    # measured at half the rate of the 256-item window in make bench
    clock = Clock()
    factory = RSocketClientFactory(make_setup(), reactor=clock,
                                   config=ConnectionConfig(stream_window_bytes=256 * 1024))
    proto = factory.buildProtocol(None)
    transport = _MessageTransport()
    proto.makeConnection(transport)
    stream = proto.rsocket.request_stream(Payload(b"go"))
    clock.advance(0)
    sent = [decode(f) for f in transport.frames]
    granted = [f for f in sent if isinstance(f, RequestStreamFrame)][0].initial_request_n
    assert granted == DEFAULT_PREFETCH
    item = encode_payload_bearing(FrameType.PAYLOAD, stream.stream_id, _NEXT, b"", b"x" * 64,
                                  None)
    amounts = []
    for _ in range(4):
        transport.frames.clear()
        proto.framesReceived([item] * 128)
        assert len(stream.take_ready()) == 128
        clock.advance(0)
        amounts += _requested([decode(f) for f in transport.frames], stream.stream_id)
    assert amounts == [128] * 4  # half the 256-item window each time, never grown


# --------------------------------------------------------------------- the batch path


def _connection():
    from rsocket_tx.core.connection import RSocketConnection
    conn = RSocketConnection("client", ConnectionConfig(), setup=make_setup(), now=0.0)
    conn.data_to_send()
    return conn


def test_items_of_one_read_are_one_batch_per_stream_when_asked():
    from rsocket_tx.core.events import PayloadReceived, PayloadsReceived
    conn = _connection()
    a = conn.request_stream(Payload(b"a"), 100)
    b = conn.request_stream(Payload(b"b"), 100)
    wire = _items(a, 2, 1) + _items(b, 1, 2) + _items(a, 1, 3)
    plain = conn.receive_data(wire, 0.0)
    assert [e.__class__ for e in plain] == [PayloadReceived] * 4
    conn.batch_payloads = True
    events = conn.receive_data(wire, 0.0)
    assert [(e.__class__, e.stream_id, [p.data for p in e.payloads]) for e in events] == [
        (PayloadsReceived, a, [b"x", b"x"]), (PayloadsReceived, b, [b"xx"]),
        (PayloadsReceived, a, [b"xxx"])]


def test_a_batch_reaches_the_consumer_in_order():
    proto, transport = _client()
    assert proto.connection.batch_payloads
    stream = proto.rsocket.request_stream(Payload(b"go"), prefetch=10)
    _sent(transport)
    frames = b"".join(
        len(f).to_bytes(3, "big") + f
        for f in (encode_payload_bearing(FrameType.PAYLOAD, stream.stream_id, _NEXT, b"",
                                         b"%d" % i, None) for i in range(10)))
    proto.dataReceived(frames)
    assert [p.data for p in stream.take_ready()] == [b"%d" % i for i in range(10)]
