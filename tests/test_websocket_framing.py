"""The WebSocket framing path of rsocket_tx.transports.websocket, byte by byte, in memory: the
server and client protocols on a ``StringTransport`` with a ``Clock``, fed hand-built frames
(RFC 6455 §5.2) cut into reads at every size, and what they write parsed back. Covers the fast
path (whole binary messages parsed and unmasked by our code, several per read, a message cut
across reads) and what it leaves to autobahn (control frames, fragments, close codes, masking
rules per role, non-minimal lengths, reserved opcodes and bits, messages too large)."""

from __future__ import annotations

import base64
import hashlib
import os
import struct

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.defer import succeed
from twisted.internet.interfaces import IStreamClientEndpoint, IStreamServerEndpoint
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted_support import EchoResponder
from zope.interface import implementer

from rsocket_tx import Payload
from rsocket_tx.client import make_setup
from rsocket_tx.core.errors import ErrorCode
from rsocket_tx.core.frames import (
    ErrorFrame,
    PayloadFrame,
    RequestResponseFrame,
    decode,
    encode,
)
from rsocket_tx.protocol import RSocketClientFactory, RSocketServerFactory
from rsocket_tx.transports.websocket import WebSocketClientEndpoint, WebSocketServerEndpoint

ADDRESS = IPv4Address("TCP", "127.0.0.1", 40000)
KEY = b"dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 §1.3's example key
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

BINARY, TEXT, CONTINUATION, CLOSE, PING, PONG = 2, 1, 0, 8, 9, 10


# --------------------------------------------------------------------- frames (RFC 6455 §5.2)


def xor(mask: bytes, data: bytes) -> bytes:
    return bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def ws_frame(payload: bytes, opcode: int = BINARY, *, fin: bool = True, mask: bytes | None = None,
             rsv: int = 0, length_bytes: int | None = None) -> bytes:
    """One WebSocket frame. ``length_bytes``: force the 2- or 8-byte extended length (to send
    a length not in its minimal encoding)."""
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | rsv << 4 | opcode])
    bit = 0x80 if mask is not None else 0
    if length_bytes is None:
        length_bytes = 0 if n <= 125 else 2 if n <= 0xFFFF else 8
    if length_bytes == 0:
        head += bytes([bit | n])
    elif length_bytes == 2:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if mask is None:
        return head + payload
    return head + mask + xor(mask, payload)


def parse_frames(data: bytes, *, masked: bool) -> list[tuple[int, bool, bytes]]:
    """(opcode, fin, payload) of each frame in ``data``; every frame must carry the mask bit
    ``masked`` says, and ``data`` must end on a frame boundary."""
    frames = []
    pos = 0
    while pos < len(data):
        b0, b1 = data[pos], data[pos + 1]
        assert bool(b1 & 0x80) == masked, "mask bit"
        n = b1 & 0x7F
        pos += 2
        if n == 126:
            n = struct.unpack_from("!H", data, pos)[0]
            assert n >= 126, "minimal length encoding"
            pos += 2
        elif n == 127:
            n = struct.unpack_from("!Q", data, pos)[0]
            assert n > 0xFFFF, "minimal length encoding"
            pos += 8
        mask = None
        if masked:
            mask = data[pos:pos + 4]
            pos += 4
        payload = data[pos:pos + n]
        assert len(payload) == n, "a whole frame"
        pos += n
        frames.append((b0 & 0x0F, bool(b0 & 0x80), xor(mask, payload) if mask else payload))
    return frames


def close_code(frames: list[tuple[int, bool, bytes]]) -> int | None:
    for opcode, _, payload in frames:
        if opcode == CLOSE:
            return struct.unpack("!H", payload[:2])[0]
    return None


def rsocket_frames(frames: list[tuple[int, bool, bytes]]) -> list:
    return [decode(payload) for opcode, _, payload in frames if opcode == BINARY]


def cut(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


# --------------------------------------------------------------------- server side


@implementer(IStreamServerEndpoint)
class CapturingServerEndpoint:
    """An endpoint that keeps the factory it is asked to listen with."""

    factory = None

    def listen(self, factory):
        self.factory = factory
        return succeed(None)


class RecordingServerFactory(RSocketServerFactory):
    built = None  # the RSocketProtocol built last

    def buildProtocol(self, addr):
        self.built = super().buildProtocol(addr)
        return self.built


class Server:
    """A WebSocket server protocol on a StringTransport, after its opening handshake: feed it
    client frames, read back what it wrote."""

    def __init__(self, headers: bytes = b"", **settings) -> None:
        self.clock = Clock()
        self.rsocket = RecordingServerFactory(EchoResponder, reactor=self.clock, **settings)
        inner = CapturingServerEndpoint()
        WebSocketServerEndpoint(self.clock, inner, "/rsocket").listen(self.rsocket)
        self.transport = StringTransport(peerAddress=ADDRESS)
        self.protocol = inner.factory.buildProtocol(ADDRESS)
        self.transport.protocol = self.protocol
        self.protocol.makeConnection(self.transport)
        self.protocol.dataReceived(
            b"GET /rsocket HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: " + KEY + b"\r\n"
            b"Sec-WebSocket-Version: 13\r\n" + headers + b"\r\n")
        self.response = response = self.transport.value()
        assert response.startswith(b"HTTP/1.1 101 "), response
        self.transport.clear()
        self.rsocket_protocol = self.rsocket.built

    def feed(self, *reads: bytes) -> None:
        for data in reads:
            self.protocol.dataReceived(data)

    def frames(self) -> list[tuple[int, bool, bytes]]:
        out = self.transport.value()
        self.transport.clear()
        return parse_frames(out, masked=False)


def setup() -> bytes:
    return encode(make_setup())


def request(stream_id: int, data: bytes) -> bytes:
    return encode(RequestResponseFrame(stream_id=stream_id, data=data))


SIZES = [0, 1, 119, 120, 121, 65529, 65530, 70000]  # (frames of 6 + n bytes: each length form)


def requests_bytes(masks: list[bytes] | None = None) -> tuple[bytes, dict[int, bytes]]:
    """SETUP then one request-response per size of SIZES, as masked client frames in one
    buffer; the replies expected, by stream id."""
    data = ws_frame(setup(), mask=b"\x01\x02\x03\x04")
    expected = {}
    for k, size in enumerate(SIZES):
        body = bytes((k + i) & 0xFF for i in range(size))
        stream_id = 2 * k + 1
        mask = os.urandom(4) if masks is None else masks[k]
        data += ws_frame(request(stream_id, body), mask=mask)
        expected[stream_id] = body
    return data, expected


@pytest.mark.parametrize("read_size", [1, 2, 3, 5, 13, 127, 1000, 65536, 10**6])
def test_server_messages_cut_into_reads_of_any_size_arrive_whole(read_size):
    server = Server()
    data, expected = requests_bytes()
    server.feed(*cut(data, read_size))
    replies = {f.stream_id: f.data for f in rsocket_frames(server.frames())
               if isinstance(f, PayloadFrame)}
    assert replies == expected
    assert server.rsocket_protocol.is_open


def test_server_messages_cut_at_every_byte_arrive_whole():
    data, expected = requests_bytes()
    head = len(ws_frame(setup(), mask=b"abcd"))
    small = data[:head + sum(len(ws_frame(request(1, b"x" * n), mask=b"abcd"))
                             for n in SIZES[:5])]  # (every split of the small messages)
    for split in range(1, len(small)):
        server = Server()
        server.feed(small[:split], small[split:])
        replies = {f.stream_id: f.data for f in rsocket_frames(server.frames())
                   if isinstance(f, PayloadFrame)}
        assert replies == {sid: expected[sid] for sid in (1, 3, 5, 7, 9)}, split


def test_server_refuses_an_unmasked_client_frame_with_1002():
    # RFC 6455 §5.1: a server MUST close the connection upon an unmasked frame
    server = Server()
    server.feed(ws_frame(setup(), mask=b"abcd") + ws_frame(request(1, b"x")))
    assert close_code(server.frames()) == 1002


@pytest.mark.parametrize("frame", [
    ws_frame(b"x" * 10, mask=b"abcd", length_bytes=2),  # 10 in the 2-byte form
    ws_frame(b"x" * 300, mask=b"abcd", length_bytes=8),  # 300 in the 8-byte form
    ws_frame(b"x", opcode=3, mask=b"abcd"),  # a reserved data opcode
    ws_frame(b"x", opcode=11, mask=b"abcd"),  # a reserved control opcode
    ws_frame(b"x", rsv=4, mask=b"abcd"),  # RSV1 with no extension negotiated
    ws_frame(b"x", opcode=CONTINUATION, mask=b"abcd"),  # a continuation outside a message
    ws_frame(b"", opcode=PING, fin=False, mask=b"abcd"),  # a fragmented control frame
], ids=["non-minimal-16", "non-minimal-64", "opcode-3", "opcode-11", "rsv1", "continuation",
        "fragmented-ping"])
def test_server_refuses_protocol_violations_after_good_messages_with_1002(frame):
    server = Server()
    server.feed(ws_frame(setup(), mask=b"abcd") + ws_frame(request(1, b"before"), mask=b"efgh")
                + frame + ws_frame(request(3, b"after"), mask=b"ijkl"))
    frames = server.frames()
    replies = {f.stream_id: f.data for f in rsocket_frames(frames) if isinstance(f, PayloadFrame)}
    assert replies == {1: b"before"}  # (what came before the violation was handled)
    assert close_code(frames) == 1002


def test_server_answers_pings_between_messages_in_one_read_in_order():
    server = Server()
    server.feed(ws_frame(setup(), mask=b"abcd") + ws_frame(request(1, b"one"), mask=b"efgh")
                + ws_frame(b"are you there", opcode=PING, mask=b"ijkl")
                + ws_frame(request(3, b"two"), mask=b"mnop")
                + ws_frame(b"unsolicited", opcode=PONG, mask=b"qrst")
                + ws_frame(request(5, b"three"), mask=b"uvwx"))
    frames = server.frames()
    kinds = [(op, decode(p).stream_id if op == BINARY else p) for op, _, p in frames]
    assert kinds == [(BINARY, 1), (PONG, b"are you there"), (BINARY, 3), (BINARY, 5)]
    assert server.rsocket_protocol.is_open


def test_server_reassembles_a_fragmented_message_between_whole_ones():
    server = Server()
    body = request(3, b"in three fragments")
    server.feed(ws_frame(setup(), mask=b"abcd") + ws_frame(request(1, b"whole"), mask=b"efgh")
                + ws_frame(body[:5], fin=False, mask=b"ijkl")
                + ws_frame(b"ping", opcode=PING, mask=b"mnop")  # (allowed between fragments)
                + ws_frame(body[5:9], opcode=CONTINUATION, fin=False, mask=b"qrst"))
    server.feed(ws_frame(body[9:], opcode=CONTINUATION, mask=b"uvwx")
                + ws_frame(request(5, b"whole again"), mask=b"yzab"))
    frames = server.frames()
    assert [op for op, _, _ in frames] == [BINARY, PONG, BINARY, BINARY]
    replies = [(f.stream_id, f.data) for f in rsocket_frames(frames)]
    assert replies == [(1, b"whole"), (3, b"in three fragments"), (5, b"whole again")]


def test_server_refuses_a_message_over_the_max_frame_size_with_1009_unbuffered():
    server = Server(max_frame_size=1000)
    server.feed(ws_frame(setup(), mask=b"abcd") + ws_frame(request(1, b"ok"), mask=b"efgh")
                + ws_frame(b"y" * 1001, mask=b"ijkl")[:200])  # (only its head is in)
    frames = server.frames()
    errors = [f for f in rsocket_frames(frames) if isinstance(f, ErrorFrame)]
    assert [f.data for f in rsocket_frames(frames) if isinstance(f, PayloadFrame)] == [b"ok"]
    assert len(errors) == 1 and errors[0].error_code == ErrorCode.CONNECTION_ERROR
    assert b"1001 bytes exceeds the max frame size of 1000" in errors[0].data
    assert close_code(frames) == 1009


def test_server_refuses_a_text_message_with_1003():
    server = Server()
    server.feed(ws_frame(setup(), mask=b"abcd") + ws_frame(b"hello", opcode=TEXT, mask=b"efgh"))
    frames = server.frames()
    assert close_code(frames) == 1003
    assert [f.error_code for f in rsocket_frames(frames)] == [ErrorCode.CONNECTION_ERROR]


@pytest.mark.parametrize("code, clean", [(1000, True), (1001, False), (4000, False)])
def test_server_close_handshake_and_close_codes(code, clean):
    server = Server()
    server.feed(ws_frame(setup(), mask=b"abcd") + ws_frame(request(1, b"last"), mask=b"efgh")
                + ws_frame(struct.pack("!H", code) + b"bye", opcode=CLOSE, mask=b"ijkl"))
    frames = server.frames()
    assert [f.data for f in rsocket_frames(frames)] == [b"last"]
    assert close_code(frames) == 1000  # (our answer, RFC 6455 §5.5.1)
    assert server.transport.disconnecting
    server.protocol.connectionLost(ConnectionDoneFailure())
    reason = server.rsocket_protocol.close_reason
    if clean:
        assert "code" not in str(reason)
    else:  # (the peer's code and reason reach the RSocket connection's close reason)
        assert f"code {code}: bye" in str(reason)


def ConnectionDoneFailure():
    from twisted.internet.error import ConnectionDone
    from twisted.python.failure import Failure

    return Failure(ConnectionDone())


def test_server_writes_unmasked_frames_in_each_length_form():
    server = Server()
    sizes = [0, 119, 120, 65529, 65530]  # payloads of 6 + n bytes: 7-bit, 16-bit, 64-bit forms
    server.feed(ws_frame(setup(), mask=b"abcd"), *[
        ws_frame(request(2 * k + 1, b"z" * n), mask=b"efgh") for k, n in enumerate(sizes)])
    frames = server.frames()  # (parse_frames checks no mask, minimal lengths, whole frames)
    assert [len(f.data) for f in rsocket_frames(frames)] == sizes


# --------------------------------------------------------------------- client side


@implementer(IStreamClientEndpoint)
class StringClientEndpoint:
    """Connects the factory's protocol to a StringTransport."""

    def __init__(self) -> None:
        self.transport = StringTransport(peerAddress=ADDRESS)
        self.protocol = None

    def connect(self, factory):
        self.protocol = factory.buildProtocol(ADDRESS)
        self.protocol.makeConnection(self.transport)
        return succeed(self.protocol)


class Client:
    """Our WebSocket client on a StringTransport, after its opening handshake."""

    def __init__(self, **settings) -> None:
        self.clock = Clock()
        self.endpoint = StringClientEndpoint()
        factory = RSocketClientFactory(make_setup(), reactor=self.clock, **settings)
        results = []
        WebSocketClientEndpoint(self.clock, self.endpoint, "ws://localhost/rsocket").connect(
            factory).addBoth(results.append)
        handshake = self.endpoint.transport.value()
        key = handshake.split(b"Sec-WebSocket-Key: ")[1].split(b"\r\n")[0]
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        self.endpoint.transport.clear()
        self.endpoint.protocol.dataReceived(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        self.rsocket_protocol = results[0]
        self.rsocket = self.rsocket_protocol.rsocket

    def feed(self, *reads: bytes) -> None:
        for data in reads:
            self.endpoint.protocol.dataReceived(data)

    def frames(self) -> list[tuple[int, bool, bytes]]:
        out = self.endpoint.transport.value()
        self.endpoint.transport.clear()
        return parse_frames(out, masked=True)


def test_client_masks_every_frame_with_its_own_key():
    # RFC 6455 §5.3: a client masks every frame, with a new unpredictable key each time
    client = Client()
    client.frames()  # (SETUP)
    client.rsocket.fire_and_forget_many([Payload(b"m" * (k * 37)) for k in range(50)])
    client.clock.advance(0)
    raw = client.endpoint.transport.value()
    frames = client.frames()  # (parse_frames checks the mask bit and lengths, and unmasks)
    assert [len(f.data) for f in rsocket_frames(frames)] == [k * 37 for k in range(50)]
    keys = set()
    pos = 0
    while pos < len(raw):
        n = raw[pos + 1] & 0x7F
        head = 2 + (2 if n == 126 else 8 if n == 127 else 0)
        keys.add(raw[pos + head:pos + head + 4])
        length = n if n < 126 else struct.unpack_from(
            "!H" if n == 126 else "!Q", raw, pos + 2)[0]
        pos += head + 4 + length
    assert len(keys) == 50


def test_client_masks_a_large_payload():
    client = Client()
    client.frames()
    body = os.urandom(200_000)
    client.rsocket.fire_and_forget(Payload(body))
    client.clock.advance(0)
    assert [f.data for f in rsocket_frames(client.frames())] == [body]


@pytest.mark.parametrize("read_size", [1, 7, 100, 4096, 65536, 10**6])
def test_client_receives_messages_cut_into_reads_of_any_size(read_size):
    client = Client()
    client.frames()  # (SETUP)
    got = []
    for k in range(len(SIZES)):
        client.rsocket.request_response(Payload(b"q%d" % k)).addCallback(got.append)
    client.clock.advance(0)
    requests = [f.stream_id for f in rsocket_frames(client.frames())]
    data = b"".join(ws_frame(encode(PayloadFrame(stream_id=sid, data=b"r" * size,
                                                 next=True, complete=True)))
                    for sid, size in zip(requests, SIZES))
    client.feed(*cut(data, read_size))
    assert [len(p.data) for p in got] == SIZES


def test_client_refuses_a_masked_server_frame_with_1002():
    # RFC 6455 §5.1: a client MUST close the connection upon a masked frame
    client = Client()
    client.frames()
    client.feed(ws_frame(encode(PayloadFrame(stream_id=1, data=b"x", next=True,
                                             complete=True)), mask=b"abcd"))
    assert close_code(client.frames()) == 1002


def test_client_answers_a_ping_cut_across_reads():
    client = Client()
    client.frames()
    data = ws_frame(b"hello?", opcode=PING) + ws_frame(b"again", opcode=PING)
    client.feed(*cut(data, 3))
    assert [(op, p) for op, _, p in client.frames()] == [(PONG, b"hello?"), (PONG, b"again")]


def test_server_accepts_no_compression_and_reads_its_messages_on_the_fast_path():
    server = Server(headers=b"Sec-WebSocket-Extensions: permessage-deflate; "
                            b"client_max_window_bits\r\n")
    assert b"sec-websocket-extensions" not in server.response.lower()
    data, expected = requests_bytes()
    server.feed(data)
    replies = {f.stream_id: f.data for f in rsocket_frames(server.frames())
               if isinstance(f, PayloadFrame)}
    assert replies == expected
    # (with RSV1 set, a compressed message would be refused: no extension was agreed)
    server.feed(ws_frame(b"x", rsv=4, mask=b"abcd"))
    assert close_code(server.frames()) == 1002
