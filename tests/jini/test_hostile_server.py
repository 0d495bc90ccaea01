"""Hostile input against a real Jini ERI mux server on loopback, one test per rule of the Jini
ERI Multiplexing Protocol a client can break: a raw TCP client sends bytes built by hand from
the protocol's text (§Message Structure, §Sessions, §Flow Control and the section of each
message); the server answers with an *Error* message, its last one, and closes that
connection, while a well-behaved client connection (with a request in flight) is served
throughout and new clients are accepted. The same for our client against a raw hostile server
sending what only a client may send.

Each violating message is preceded by a *Ping* answered with *PingAck*: what came before it was
accepted, so the *Error* answers the violating message itself.
"""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted_support import wait

from rsocket_tx.jini.client import JiniMuxClient
from rsocket_tx.jini.config import JiniMuxConfig
from rsocket_tx.jini.errors import JiniMuxError
from rsocket_tx.jini.server import Dispatcher, serve

aio = pytest_twisted.ensureDeferred

# -- the wire, by hand, from the protocol's text ------------------------------------------------

MAGIC = b"Jmux"  # 01001010 01101101 01110101 01111000
VERSION = 1
#: the server's initial ration in these tests, in bytes (header value 1 = 1 * 256)
SERVER_RATION = 256

NO_OPERATION, SHUTDOWN, PING, PING_ACK, ERROR = 0x00, 0x02, 0x04, 0x06, 0x08
INCREMENT_RATION, ABORT, ABORT_PARTIAL, CLOSE, ACKNOWLEDGMENT = 0x10, 0x20, 0x22, 0x30, 0x40
DATA, OPEN, CLOSE_FLAG, EOF, ACK_REQUIRED = 0x80, 0x10, 0x08, 0x04, 0x02

#: the first bytes of the table (§Message Structure): every other value is a violation
VALID_FIRST_BYTES = frozenset(
    [NO_OPERATION, SHUTDOWN, PING, PING_ACK, ERROR, CLOSE, ACKNOWLEDGMENT]
    + [0x10 | shift << 1 for shift in range(8)]  # 0001xxx0 IncrementRation
    + [ABORT, ABORT_PARTIAL]  # 001000x0 Abort
    + [0x80 | flags << 1 for flags in range(16)]  # 100xxxx0 Data
)
INVALID_FIRST_BYTES = [b for b in range(256) if b not in VALID_FIRST_BYTES]
#: messages whose header bytes 2-3 are a length of data that follows
WITH_BODY = {NO_OPERATION, SHUTDOWN, ERROR, ABORT, ABORT_PARTIAL} | {
    b for b in VALID_FIRST_BYTES if b & 0xE0 == DATA}


def connection_header(ration_units: int = 0x0080, *, magic: bytes = MAGIC,
                      version: int = VERSION, reserved: int = 0) -> bytes:
    """A ClientConnectionHeader (or ServerConnectionHeader): magic, version, initialRation
    (units of 256 bytes; 0 = unlimited), reserved."""
    return magic + bytes([version]) + ration_units.to_bytes(2, "big") + bytes([reserved])


def message(first: int, second: int = 0, field: int = 0, body: bytes = b"") -> bytes:
    """A message: the type byte, the session id (or reserved) byte, the 16-bit field
    (length, cookie, increment), then ``body``."""
    return bytes([first, second]) + field.to_bytes(2, "big") + body


def data(session_id: int, body: bytes = b"", *, flags: int = 0) -> bytes:
    return message(DATA | flags, session_id, len(body), body)


def parse(stream: bytes) -> tuple[bytes, list[tuple[int, int, int, bytes]], bytes]:
    """Split a byte stream into its 8-byte connection header, its messages as
    ``(first byte, second byte, 16-bit field, body)``, and an incomplete tail."""
    header, rest = stream[:8], stream[8:]
    messages = []
    while len(rest) >= 4:
        first, second, field = rest[0], rest[1], int.from_bytes(rest[2:4], "big")
        size = 4 + (field if first in WITH_BODY else 0)
        if len(rest) < size:
            break
        messages.append((first, second, field, bytes(rest[4:size])))
        rest = rest[size:]
    return header, messages, bytes(rest)


# -- a raw peer ------------------------------------------------------------------------------


class RawPeer(Protocol):
    """A TCP peer with no mux logic: send bytes, wait for messages, see what came back."""

    def __init__(self) -> None:
        self.received = b""
        self.lost: Deferred[None] = Deferred()
        self.waiters: list[tuple[object, Deferred]] = []
        self.next_cookie = 0x4000

    def dataReceived(self, chunk: bytes) -> None:  # noqa: N802 - Twisted's name
        self.received += chunk
        for waiter in list(self.waiters):
            predicate, d = waiter
            found = predicate(self.messages())
            if found is not None:
                self.waiters.remove(waiter)
                d.callback(found)

    def connectionLost(self, reason=None) -> None:  # noqa: N802 - Twisted's name
        waiters, self.waiters = self.waiters, []
        for _, d in waiters:
            d.errback(AssertionError(f"connection lost; received {self.received!r}"))
        self.lost.callback(None)

    def messages(self) -> list[tuple[int, int, int, bytes]]:
        return parse(self.received)[1] if len(self.received) >= 8 else []

    def send(self, *chunks: bytes) -> None:
        self.transport.write(b"".join(chunks))

    def when(self, predicate) -> Deferred:
        """Fire with ``predicate(messages)`` once it is not None."""
        found = predicate(self.messages())
        if found is not None:
            d: Deferred = Deferred()
            d.callback(found)
            return d
        d = Deferred()
        self.waiters.append((predicate, d))
        return wait(d)

    async def ping(self) -> None:
        """Ping the peer and wait for its PingAck: it is still serving this connection."""
        cookie, self.next_cookie = self.next_cookie, self.next_cookie + 1
        self.send(message(PING, 0, cookie))
        await self.when(lambda ms: True if (PING_ACK, 0, cookie, b"") in ms else None)

    async def response(self, session_id: int) -> bytes:
        """Wait for the end (eof) of the Data of ``session_id``; return its bytes."""
        def complete(ms):
            mine = [m for m in ms if m[0] & 0xE0 == DATA and m[1] == session_id]
            if mine and mine[-1][0] & EOF:
                return b"".join(m[3] for m in mine)
            return None

        return await self.when(complete)


async def error_and_close(peer: RawPeer) -> str:
    """Wait until the other end closes ``peer``'s connection; check that the last thing it
    sent is one complete *Error* message (and no other Error before); return its detail."""
    await wait(peer.lost)
    header, messages, tail = parse(peer.received)
    assert header[:5] == MAGIC + bytes([VERSION]), peer.received
    assert tail == b"", f"incomplete message at the end: {peer.received!r}"
    assert messages, f"no Error message before the close: {peer.received!r}"
    errors = [m for m in messages if m[0] == ERROR]
    assert len(errors) == 1 and messages[-1] is errors[0], messages
    first, reserved, length, detail = errors[0]
    assert reserved == 0 and length == len(detail)
    return detail.decode("utf-8")


# -- the server and its well-behaved client ----------------------------------------------------


class TestDispatcher(Dispatcher):
    """Echoes each request; a body starting with ``b"ack:"`` asks for an *Acknowledgment*
    (``ackRequired`` on the last Data)."""

    __test__ = False

    async def dispatch(self, request):
        body = await request.read_all()
        request.response.write(body)
        request.response.finish(ack_required=body.startswith(b"ack:"))


class Site:
    """A server (initial ration :data:`SERVER_RATION`), a well-behaved client with a request
    in flight, and raw clients."""

    def __init__(self) -> None:
        self.listening = None
        self.clients: list[JiniMuxClient] = []
        self.peers: list[RawPeer] = []

    async def start(self) -> Site:
        config = JiniMuxConfig(initial_ration=SERVER_RATION)
        self.listening = await serve(reactor, "tcp:0:interface=127.0.0.1", TestDispatcher,
                                     config)
        self.port = self.listening.getHost().port
        self.good = self.client()
        assert await wait(self.good.request(b"hello")) == b"hello"
        (self.connection,) = self.good.protocols
        self.in_flight = await wait(self.good.new_request())
        self.in_flight.write(b"during")
        self.sent = b"during"
        return self

    def client(self) -> JiniMuxClient:
        client = JiniMuxClient(reactor, f"tcp:host=127.0.0.1:port={self.port}")
        self.clients.append(client)
        return client

    async def raw(self, ration_units: int = 0x0080) -> RawPeer:
        """A raw client that has exchanged connection headers with the server."""
        peer = await self.raw_unopened()
        peer.send(connection_header(ration_units))
        await peer.when(lambda ms: True if len(peer.received) >= 8 else None)
        assert peer.received[:8] == connection_header(SERVER_RATION // 256)
        return peer

    async def raw_unopened(self) -> RawPeer:
        peer = RawPeer()
        await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", self.port), peer))
        self.peers.append(peer)
        return peer

    async def still_serving(self, *, final: bool = True) -> None:
        """The good client's connection is the same one, open; its request in flight goes
        on; new requests and new clients are served."""
        assert self.good.protocols == [self.connection] and self.connection.is_open
        self.in_flight.write(b"+")
        self.sent += b"+"
        assert await wait(self.good.request(b"next")) == b"next"
        if final:
            self.in_flight.finish()
            assert await wait(self.in_flight.read_all()) == self.sent
            other = self.client()
            assert await wait(other.request(b"new")) == b"new"

    async def stop(self) -> None:
        for peer in self.peers:
            if not peer.lost.called:
                peer.transport.abortConnection()
        for peer in self.peers:
            await wait(peer.lost)
        for client in self.clients:
            await wait(client.close())
        await self.listening.stopListening()
        await wait(self.listening.factory.close_connections())


@pytest_twisted.async_yield_fixture
async def site():
    s = Site()
    try:
        yield await s.start()
    finally:
        await s.stop()


async def violation(site: Site, *steps: bytes, ration_units: int = 0x0080) -> str:
    """A raw client sends ``steps`` (each one acknowledged by a Ping first, except the
    last, the violation): the server answers Error and closes; the good client is served."""
    peer = await site.raw(ration_units)
    for step in steps[:-1]:
        peer.send(step)
        await peer.ping()
    await peer.ping()
    peer.send(steps[-1])
    detail = await error_and_close(peer)
    await site.still_serving()
    return detail


# -- the connection header -----------------------------------------------------------------------


@pytest.mark.parametrize("header", [
    connection_header(magic=b"JMUX"),
    connection_header(magic=b"\x00\x00\x00\x00"),
    connection_header(version=0),
    connection_header(version=2),
    connection_header(reserved=1),
    b"GET / HTTP/1.1\r\n\r\n",
], ids=["magic-case", "magic-zero", "version-0", "version-2", "reserved-byte", "http"])
@aio
async def test_invalid_client_connection_header(site, header):
    """§ClientConnectionHeader: an invalid header is answered with the server's header
    followed by Error."""
    peer = await site.raw_unopened()
    peer.send(header)
    await error_and_close(peer)
    assert peer.received[:8] == connection_header(SERVER_RATION // 256)
    await site.still_serving()


# -- §Message Structure: the table of first bytes ----------------------------------------------


def test_the_table_has_33_first_bytes():
    assert len(VALID_FIRST_BYTES) == 33 and len(INVALID_FIRST_BYTES) == 223


@aio
async def test_every_first_byte_not_in_the_table(site):
    """Each of the 223 first bytes that match no bit pattern of the table (among them the
    reserved low bit of IncrementRation, Abort and Data, and 0xA0-0xFF) is a violation."""
    for first in INVALID_FIRST_BYTES:
        peer = await site.raw()
        peer.send(message(first))
        detail = await error_and_close(peer)
        assert detail, hex(first)
        await site.still_serving(final=False)
    await site.still_serving()


def session_messages(session_byte: int, data_flags: int = 0) -> list:
    """One message of each kind that names a session (Data with ``data_flags``,
    IncrementRation, Abort, Acknowledgment) for the session id byte ``session_byte``, as
    ``pytest.param`` with ids."""
    return [pytest.param(data(session_byte, b"x", flags=data_flags), id="data"),
            pytest.param(message(INCREMENT_RATION, session_byte, 1), id="increment-ration"),
            pytest.param(message(ABORT, session_byte, 0), id="abort"),
            pytest.param(message(ACKNOWLEDGMENT, session_byte, 0), id="acknowledgment")]


@pytest.mark.parametrize("bad", session_messages(0x80, OPEN | EOF))
@aio
async def test_reserved_session_id_bit(site, bad):
    """§Sessions: the top bit of the session id byte is reserved (0); a fork of River uses it
    for 256 sessions, a conforming endpoint refuses it."""
    await violation(site, bad)


@pytest.mark.parametrize("bad", [
    message(PING, 1, 7),
    message(NO_OPERATION, 1, 0),
], ids=["ping", "no-operation"])
@aio
async def test_reserved_byte_of_a_connection_message(site, bad):
    """The second byte of the connection messages is reserved (00000000)."""
    await violation(site, bad)


@aio
async def test_close_or_ack_required_without_eof(site):
    """§Data Message: close and ackRequired only with eof (besides being server-only)."""
    await violation(site, data(0, b"x", flags=OPEN | CLOSE_FLAG))


# -- §Sessions: messages for sessions that are not established ----------------------------------


@pytest.mark.parametrize("bad", session_messages(5))
@aio
async def test_message_for_a_session_never_established(site, bad):
    await violation(site, bad)


@aio
async def test_data_after_eof(site):
    """§Data Message: without open, the session must be established and not finished with
    respect to the sender."""
    await violation(site, data(3, b"x", flags=OPEN | EOF), data(3, b"more"))


@aio
async def test_open_for_a_session_still_established(site):
    """§Data Message: with open, the session id must not identify an established session."""
    await violation(site, data(3, b"x", flags=OPEN), data(3, b"y", flags=OPEN))


@aio
async def test_increment_ration_after_the_client_aborted(site):
    """§IncrementRation: the client must not send it after its Abort for the session."""
    await violation(site, data(3, b"x", flags=OPEN), message(ABORT, 3, 0),
                    message(INCREMENT_RATION, 3, 1))


# -- §Flow Control -------------------------------------------------------------------------------


@aio
async def test_data_past_the_ration(site):
    """§Data Message: a Data longer than the receiver's inbound ration. Exactly the ration
    is fine (session 1, echoed); one byte more is not (session 2)."""
    peer = await site.raw()
    exact = b"r" * SERVER_RATION
    peer.send(data(1, exact, flags=OPEN | EOF))
    assert await peer.response(1) == exact
    peer.send(data(2, b"r" * (SERVER_RATION + 1), flags=OPEN | EOF))
    await error_and_close(peer)
    await site.still_serving()


@aio
async def test_ration_overflow(site):
    """§IncrementRation: an increment that takes the sender's inbound ration (the server's
    outbound ration) past 0x7FFFFFFF. The client announced 0xFFFF * 256 bytes; one increment
    of 0xFFFF << 14 fits, the second does not."""
    big = message(INCREMENT_RATION | 7 << 1, 3, 0xFFFF)
    assert (0xFFFF * 256 + (0xFFFF << 14)) <= 0x7FFFFFFF < 0xFFFF * 256 + 2 * (0xFFFF << 14)
    await violation(site, data(3, flags=OPEN), big, big, ration_units=0xFFFF)


# -- server-only messages sent by the client ---------------------------------------------------


@pytest.mark.parametrize("steps", [
    [data(3, b"x", flags=OPEN), message(CLOSE, 3, 0)],
    [message(SHUTDOWN, 0, 0)],
    [message(SHUTDOWN, 0, 3, b"bye")],
    [data(3, b"x", flags=OPEN), message(ABORT_PARTIAL, 3, 0)],
    [data(3, b"x", flags=OPEN | EOF | CLOSE_FLAG)],
    [data(3, b"x", flags=OPEN | EOF | ACK_REQUIRED)],
    [data(3, b"x", flags=OPEN), data(3, b"y", flags=EOF | ACK_REQUIRED)],
], ids=["close", "shutdown", "shutdown-detail", "abort-partial", "data-close",
        "data-ack-required", "data-ack-required-later"])
@aio
async def test_server_only_message_from_the_client(site, steps):
    await violation(site, *steps)


# -- Acknowledgment and PingAck rules -----------------------------------------------------------


@pytest.mark.parametrize("body", [b"plain", b"ack:me"],
                         ids=["without-ack-required", "second-acknowledgment"])
@aio
async def test_acknowledgment_not_asked_for(site, body):
    """§Acknowledgment: only after a Data with ackRequired for the session (the server asks
    for one for a ``b"ack:"`` body), and at most once per session: the first one is fine."""
    peer = await site.raw()
    peer.send(data(3, body, flags=OPEN | EOF))
    assert await peer.response(3) == body
    last = [m for m in peer.messages() if m[0] & 0xE0 == DATA and m[1] == 3][-1]
    asked = body.startswith(b"ack:")
    assert last[0] & (EOF | ACK_REQUIRED) == (EOF | ACK_REQUIRED if asked else EOF)
    if asked:
        peer.send(message(ACKNOWLEDGMENT, 3, 0))
    await peer.ping()
    peer.send(message(ACKNOWLEDGMENT, 3, 0))
    await error_and_close(peer)
    await site.still_serving()


@aio
async def test_ping_ack_that_answers_no_ping(site):
    """§PingAck: only in response to exactly one Ping received."""
    await violation(site, message(PING_ACK, 0, 0x1234))


# -- what is not a violation -------------------------------------------------------------------


@aio
async def test_no_operation_with_data_is_ignored(site):
    """§NoOperation: ignored, whatever it carries (River's own connection crashes on one
    with data; ours does not)."""
    peer = await site.raw()
    peer.send(message(NO_OPERATION, 0, 5, b"12345"), message(NO_OPERATION),
              data(3, b"after", flags=OPEN | EOF))
    assert await peer.response(3) == b"after"
    await peer.ping()
    assert not peer.lost.called
    assert ERROR not in [m[0] for m in peer.messages()]
    await site.still_serving()


@aio
async def test_client_error_message_ends_only_its_connection(site):
    """§Error Message: the client's Error is its last message; the server discards the
    connection without an Error of its own."""
    peer = await site.raw()
    peer.send(data(3, b"x", flags=OPEN))
    await peer.ping()
    peer.send(message(ERROR, 0, 4, b"oops"))
    await wait(peer.lost)
    assert ERROR not in [m[0] for m in peer.messages()]
    await site.still_serving()


# -- our client against a hostile server -------------------------------------------------------


class HostileServer(Protocol):
    """Answers the client's header with a server header (ration ``ration_units``), then, on
    the client's first Data, sends ``attack(session_id)``; records what the client sends."""

    def __init__(self, attack, ration_units: int = 0x0080, header: bytes | None = None) -> None:
        self.attack = attack
        self.header = header if header is not None else connection_header(ration_units)
        self.received = b""
        self.attacked = False
        self.lost: Deferred[None] = Deferred()

    def dataReceived(self, chunk: bytes) -> None:  # noqa: N802 - Twisted's name
        first = len(self.received) < 8 <= len(self.received) + len(chunk)
        self.received += chunk
        if first:
            self.transport.write(self.header)
        _, messages, _ = parse(self.received)
        opened = [m for m in messages if m[0] & (0xE0 | OPEN) == DATA | OPEN]
        if opened and not self.attacked:
            self.attacked = True
            self.transport.write(self.attack(opened[0][1]))

    def connectionLost(self, reason=None) -> None:  # noqa: N802 - Twisted's name
        self.lost.callback(None)


@pytest.mark.parametrize("attack", [
    lambda sid: data(sid, b"x", flags=OPEN | EOF),
    lambda sid: message(ACKNOWLEDGMENT, sid, 0),
    lambda sid: data(sid, b"x" * (SERVER_RATION + 1)),
    lambda sid: message(0xA0, sid, 0),
], ids=["data-open", "acknowledgment", "data-past-the-ration", "not-in-the-table"])
@aio
async def test_client_against_a_hostile_server(attack):
    """Open (client only) or Acknowledgment (client only) from the server, Data past the
    client's ration, a first byte not in the table: our client sends Error, closes the
    connection, and the request fails."""
    server = HostileServer(attack)
    listening = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
        Factory.forProtocol(lambda: server))
    client = JiniMuxClient(reactor, f"tcp:host=127.0.0.1:port={listening.getHost().port}",
                           JiniMuxConfig(initial_ration=SERVER_RATION))
    try:
        with pytest.raises(JiniMuxError):
            await wait(client.request(b"request"))
        await wait(server.lost)
        header, messages, tail = parse(server.received)
        assert header == connection_header(SERVER_RATION // 256)
        assert tail == b"" and messages[-1][0] == ERROR and messages[-1][3], messages
    finally:
        await wait(client.close())
        await listening.stopListening()
