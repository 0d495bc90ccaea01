"""Wrong peer, clear words (hardening issue, item 5): a client that meets a server of another
protocol names it and says what to use, instead of timing out or blaming max lifetime; a
server names the client of another protocol and the twistd plugin that serves it; a server's
"closed" line says that the server closed a connection whose SETUP or RESUME it rejected.

Real loopback servers of every protocol (``rsocket_tx.serve``, ``rsocket_tx.jini.serve``,
``rsocket_tx.rsnet.serve``, the 2015 draft's server factory, the WebSocket and TLS server
endpoints) and the real clients against them; the guesses themselves on the sniffers' test
vectors."""

from __future__ import annotations

import pytest
import pytest_twisted
from tlscerts import make_tls_files
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted_support import EchoResponder, run_command, server_protocol, wait, wire

from rsocket_tx import Payload, connect, serve
from rsocket_tx.core import errors as E
from rsocket_tx.core.frames import ErrorFrame, KeepaliveFrame, ResumeFrame, SetupFrame
from rsocket_tx.jini import EchoDispatcher, JiniMuxClient
from rsocket_tx.jini import codec as jini_codec
from rsocket_tx.jini.server import serve as jini_serve
from rsocket_tx.reactivesocket import frames as rs2015
from rsocket_tx.reactivesocket.client import connect as rs2015_connect
from rsocket_tx.reactivesocket.protocol import ReactiveSocketServerFactory
from rsocket_tx.rsnet import codec as rsnet_codec
from rsocket_tx.rsnet.client import connect as rsnet_connect
from rsocket_tx.rsnet.server import serve as rsnet_serve
from rsocket_tx.transports.oneport import OnePortFactory
from rsocket_tx.transports.peers import guess_client, guess_server
from rsocket_tx.transports.tls import tls_server_endpoint
from rsocket_tx.transports.websocket import WebSocketServerEndpoint

aio = pytest_twisted.ensureDeferred

# the first bytes of each protocol's client (the sniffers' test vectors, tests/test_oneport.py)
SETUP = SetupFrame(keepalive_interval=30_000, max_lifetime=90_000,
                   metadata_mime_type=b"application/octet-stream",
                   data_mime_type=b"application/octet-stream")
RSOCKET_SETUP = wire(SETUP)
JINI_HEADER = bytes.fromhex("4a6d757801008000")
RSNET_HELLO = bytes.fromhex("f152534e") + b"\x01\x00"
RS2015_SETUP = bytes.fromhex("00000012" "00" "00" "0001" "0000000000000000" "00" "00")
CLIENT_HELLO = bytes.fromhex("160301020001") + bytes(32)
HTTP_GET = b"GET /rsocket HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\r\n"
# what servers answer: a TLS 1.2 alert (fatal, protocol_version) and a ServerHello header
TLS_ALERT = bytes.fromhex("15030300020246")
SERVER_HELLO = bytes.fromhex("160303004a02000046") + bytes(16)
RS2015_SETUP_ERROR = rs2015.frame_with_length(rs2015.encode(
    rs2015.SetupErrorFrame(error_code=rs2015.SetupErrorCode.INVALID_SETUP, data=b"why")))


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("wrong-peer-tls"))


@pytest.fixture
def logged():
    """The text of every log event published while the test runs, with its level."""
    seen: list[tuple[LogLevel, str]] = []

    def observer(event):
        if event.get("log_namespace", "").startswith("rsocket_tx"):
            seen.append((event.get("log_level"), formatEvent(event)))

    globalLogPublisher.addObserver(observer)
    yield seen
    globalLogPublisher.removeObserver(observer)


@pytest_twisted.async_yield_fixture
async def ports():
    """Listening ports to stop at the end (append to it)."""
    listening: list = []
    yield listening
    for port in listening:
        factory = getattr(port, "factory", None)
        close = getattr(factory, "close_connections", None)
        if close is not None:
            await wait(close())
        await wait(port.stopListening())


def tcp(port) -> TCP4ClientEndpoint:
    return TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port)


def local() -> TCP4ServerEndpoint:
    return TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1")


async def first_request_error(endpoint, *, client=connect, **settings) -> str:
    """Connect an RSocket (or 2015-draft) client to ``endpoint``, make a request-response
    and return the words of the error it fails with (the connection's close error)."""
    rsocket = await wait(client(endpoint, reactor=reactor, **settings))
    with pytest.raises(E.ConnectionError) as failed:
        await wait(rsocket.request_response(Payload(b"hello")))
    assert rsocket.close_reason is not None
    assert str(rsocket.close_reason) == str(failed.value)  # (the same words both ways)
    return str(failed.value)


# -- the guesses, on the sniffers' test vectors -------------------------------------------------


@pytest.mark.parametrize("first, protocol, plugin", [
    (RSOCKET_SETUP, "rsocket", "twistd rsocket"),
    (JINI_HEADER, "jini-mux", "twistd jini-mux"),
    (RSNET_HELLO, "rsnet", "twistd rsnet"),
    (RS2015_SETUP, "rs2015", "twistd rs2015"),
    (CLIENT_HELLO, "tls", "tls://"),
    (HTTP_GET, "http", "ws://"),
])
def test_a_client_is_named_by_its_first_bytes(first, protocol, plugin):
    guess = guess_client(first)
    assert (guess.protocol, plugin in guess.advice) == (protocol, True)
    assert guess_client(first, exclude=protocol) is None or protocol in ("tls", "http")
    assert guess_client(first[:3]) is None or protocol == "jini-mux"  # (undecided: no guess)


def test_bytes_of_no_protocol_are_not_guessed():
    assert guess_client(b"HELLO? " + bytes(16)) is None
    assert guess_server(b"SSH-2.0-OpenSSH_9.6\r\n") is None
    assert guess_server(b"") is None


@pytest.mark.parametrize("answer, protocol, words", [
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "http", "HTTP/1.1 400 Bad Request"),
    (TLS_ALERT, "tls", "TLS alert"),
    (SERVER_HELLO, "tls", "TLS handshake"),
    (jini_codec.encode(jini_codec.ServerConnectionHeader(32768)), "jini-mux", "rsocket-tx jini"),
    (rsnet_codec.encode(rsnet_codec.ServerHello()), "rsnet", "rsocket-tx rsnet"),
    (wire(ErrorFrame(stream_id=0, error_code=E.ErrorCode.INVALID_SETUP, data=b"why")),
     "rsocket", "ERROR[INVALID_SETUP]: why"),
    (RS2015_SETUP_ERROR, "rs2015", "rsocket-tx rs2015"),
])
def test_a_server_is_named_by_its_answer(answer, protocol, words):
    guess = guess_server(answer)
    assert guess.protocol == protocol
    assert words in str(guess)
    assert guess_server(answer, exclude=protocol) is None or protocol in ("http", "tls")


def test_a_working_rsocket_servers_first_frames_are_not_guessed():
    for frame in (KeepaliveFrame(respond=False, last_received_position=0),):
        assert guess_server(wire(frame), exclude="rsocket") is None
    assert guess_server(wire(ErrorFrame(stream_id=0, error_code=E.ErrorCode.REJECTED_SETUP,
                                        data=b"no")), exclude="rsocket") is None


# -- an RSocket client on a port of another protocol -------------------------------------------


@aio
async def test_rsocket_client_on_a_websocket_port_that_answers_in_http(ports):
    port = await wait(serve(WebSocketServerEndpoint(reactor, local(), "/rsocket"),
                            EchoResponder, reactor=reactor))
    ports.append(port)
    # a SETUP whose bytes hold a line end: the web server reads a bad request line, answers
    # 400 and closes
    words = await first_request_error(tcp(port), setup_payload=Payload(b"\r\n\r\n"))
    assert "the server answered in HTTP (HTTP/1.1 400 Bad Request)" in words
    assert "this looks like a WebSocket (or web) port; connect with ws://host:port/path" \
        in words


@aio
async def test_rsocket_client_on_a_websocket_port_that_never_answers(ports):
    port = await wait(serve(WebSocketServerEndpoint(reactor, local(), "/rsocket"),
                            EchoResponder, reactor=reactor))
    ports.append(port)
    # the web server waits for the end of a request line that never comes
    words = await first_request_error(tcp(port), max_lifetime=300, keepalive_interval=100)
    assert words.startswith("CONNECTION_ERROR: the server never answered: not a byte in the "
                            "300 ms after connecting"), words
    assert "ws://host:port/path" in words
    assert "max lifetime" not in words


@aio
async def test_rsocket_client_on_a_tls_port(ports, certs):
    port = await wait(serve(tls_server_endpoint(reactor, 0, interface="127.0.0.1",
                                                private_key=certs.server_key,
                                                certificate=certs.server_cert),
                            EchoResponder, reactor=reactor))
    ports.append(port)
    words = await first_request_error(tcp(port))
    assert "the server closed the connection without sending a byte" in words
    assert "connect with tls://host:port" in words


class _Answer(Protocol):
    """A server that answers the first bytes it reads with ``factory.answer`` and closes."""

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.transport.write(self.factory.answer)
        self.transport.loseConnection()


@pytest.mark.parametrize("answer, words", [
    (TLS_ALERT, "the server answered with a TLS alert: the port speaks TLS; connect with "
                "tls://host:port"),
    (SERVER_HELLO, "the server answered with a TLS handshake record"),
])
@aio
async def test_rsocket_client_given_a_tls_record(ports, answer, words):
    factory = Factory.forProtocol(_Answer)
    factory.answer = answer
    port = await wait(local().listen(factory))
    ports.append(port)
    assert words in await first_request_error(tcp(port))


@aio
async def test_rsocket_client_on_a_jini_mux_port(ports):
    port = await wait(jini_serve(reactor, local(), EchoDispatcher))
    ports.append(port)
    words = await first_request_error(tcp(port))
    assert "the server speaks the Jini ERI multiplexing protocol: use `rsocket-tx jini`" in words


@aio
async def test_rsocket_client_on_an_rsnet_port(ports):
    port = await wait(rsnet_serve(reactor, local(), {"count": lambda request: iter([b"1"])}))
    ports.append(port)
    words = await first_request_error(tcp(port))
    assert "the server speaks the Reactive Streams network protocol: use `rsocket-tx rsnet`" \
        in words


@aio
async def test_rsocket_client_on_a_2015_draft_port(ports):
    port = await wait(local().listen(ReactiveSocketServerFactory(EchoResponder,
                                                                 reactor=reactor)))
    ports.append(port)
    # the 2015 server rejects the 1.0 SETUP at once (its length word would have it wait for
    # 17 KB that never come)
    words = await first_request_error(tcp(port))
    assert "the server speaks the 2015 ReactiveSocket draft: use `rsocket-tx rs2015`" in words


@aio
async def test_connect_waiting_for_a_lease_fails_with_the_clear_words(ports):
    port = await wait(jini_serve(reactor, local(), EchoDispatcher))
    ports.append(port)
    with pytest.raises(E.ConnectionError, match="the server speaks the Jini ERI multiplexing "
                                                "protocol"):
        await wait(connect(tcp(port), reactor=reactor, lease=True))


@aio
async def test_rsocket_tx_cli_names_the_jini_port(ports):
    port = await wait(jini_serve(reactor, local(), EchoDispatcher))
    ports.append(port)
    result = await run_command(["request", f"tcp://127.0.0.1:{port.getHost().port}", "-d",
                                "hello"])
    assert result.status != 0
    assert "the server speaks the Jini ERI multiplexing protocol: use `rsocket-tx jini`" \
        in result.err, result.err


# -- a 2015-draft client on an RSocket 1.0 port --------------------------------------------------


@aio
async def test_2015_client_on_an_rsocket_port(ports):
    port = await wait(serve(local(), EchoResponder, reactor=reactor))
    ports.append(port)
    words = await first_request_error(tcp(port), client=rs2015_connect)
    assert "the server speaks RSocket 1.0 (it answered ERROR[INVALID_SETUP]: " in words
    assert "connect with an RSocket 1.0 client: `rsocket-tx` (rsocket_tx.connect)" in words


@aio
async def test_rs2015_cli_names_the_rsocket_port(ports):
    port = await wait(serve(local(), EchoResponder, reactor=reactor))
    ports.append(port)
    result = await run_command(["rs2015", "request", f"tcp://127.0.0.1:{port.getHost().port}",
                                "hello"])
    assert result.status != 0
    assert "the server speaks RSocket 1.0" in result.err, result.err


# -- servers name the client -------------------------------------------------------------------


def warnings(logged) -> list[str]:
    return [line for level, line in logged if level == LogLevel.warn]


async def until_logged(logged, words: str) -> str:
    """The first line logged that holds ``words`` (the reactor runs until it is)."""
    from test_server_logging import until

    await until(lambda: any(words in line for _, line in logged))
    return next(line for _, line in logged if words in line)


class _Send(Protocol):
    """A client that sends ``data`` once connected and records what comes back; ``closed``
    fires when the connection is lost."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.received = b""
        self.closed: Deferred = Deferred()

    def connectionLost(self, reason=None) -> None:  # noqa: N802 - Twisted's name
        self.closed.callback(None)

    def connectionMade(self) -> None:  # noqa: N802 - Twisted's name
        self.transport.write(self.data)

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.received += data


async def send_raw(port, data: bytes) -> _Send:
    from twisted.internet.endpoints import connectProtocol

    client = _Send(data)
    await wait(connectProtocol(tcp(port), client))
    return client


@aio
async def test_rsocket_server_names_a_jini_client(ports, logged):
    port = await wait(serve(local(), EchoResponder, reactor=reactor))
    ports.append(port)
    client = JiniMuxClient(reactor, tcp(port))
    with pytest.raises(Exception):  # noqa: B017 - the Jini client's own error: not ours
        await wait(client.request(b"hello"))
    line = await until_logged(logged, "look like a Jini ERI mux client")
    assert line.endswith("RSocket server connection: the first bytes are not this protocol's; "
                         "they look like a Jini ERI mux client: serve it with `twistd jini-mux` "
                         "(or `twistd mux`, which serves every protocol of rsocket_tx on one "
                         "port)"), line
    assert line in warnings(logged)
    closed = await until_logged(logged, "RSocket server connection closed")
    assert "closed by this side with ERROR[INVALID_SETUP]" in closed


@aio
async def test_rsocket_server_names_an_http_client(ports, logged):
    port = await wait(serve(local(), EchoResponder, reactor=reactor))
    ports.append(port)
    client = await send_raw(port, HTTP_GET)
    line = await until_logged(logged, "look like an HTTP client")
    assert "(a WebSocket upgrade?): 'GET /rsocket HTTP/1.1'" in line
    assert "serve WebSocket on this port" in line
    # the client is told the same in the ERROR[INVALID_SETUP] it gets
    await wait(client.closed)
    assert b"they look like an HTTP client" in client.received


@aio
async def test_jini_server_names_an_rsocket_client(ports, logged):
    port = await wait(jini_serve(reactor, local(), EchoDispatcher))
    ports.append(port)
    await send_raw(port, RSOCKET_SETUP)
    line = await until_logged(logged, "look like an RSocket 1.0 client")
    assert "Jini ERI mux server connection: the first bytes are not this protocol's" in line
    assert "serve it with `twistd rsocket`" in line
    assert line in warnings(logged)


@aio
async def test_rsnet_server_names_a_tls_client(ports, logged):
    port = await wait(rsnet_serve(reactor, local(), {"count": lambda request: iter([b"1"])}))
    ports.append(port)
    await send_raw(port, CLIENT_HELLO)
    line = await until_logged(logged, "look like a TLS client")
    assert "Reactive Streams network server connection: the first bytes are not" in line
    assert "serve TLS on this port" in line


@aio
async def test_2015_server_names_an_rsocket_client_at_once(ports, logged):
    port = await wait(local().listen(ReactiveSocketServerFactory(EchoResponder,
                                                                 reactor=reactor)))
    ports.append(port)
    await send_raw(port, RSOCKET_SETUP)
    line = await until_logged(logged, "look like an RSocket 1.0 client")
    assert "ReactiveSocket server connection: the first bytes are not this protocol's" in line
    assert "serve it with `twistd rsocket`" in line
    closed = await until_logged(logged, "ReactiveSocket server connection closed")
    assert closed.endswith("closed by this side with ERROR[INVALID_SETUP]: the first bytes are "
                           "no ReactiveSocket SETUP: they look like an RSocket 1.0 client")


@aio
async def test_rsnet_client_on_the_jini_port_is_named_by_the_server(ports, logged):
    port = await wait(jini_serve(reactor, local(), EchoDispatcher))
    ports.append(port)
    with pytest.raises(Exception):  # noqa: B017 - the RS-network client's own error
        protocol = await wait(rsnet_connect(reactor, tcp(port)))
        [item async for item in protocol.subscribe("count")]
    line = await until_logged(logged, "look like a Reactive Streams network (RS-network) client")
    assert "serve it with `twistd rsnet`" in line


def test_one_port_server_names_a_protocol_it_does_not_serve(logged):
    from twisted.internet.task import Clock
    from twisted.internet.testing import StringTransport

    factory = OnePortFactory({"rsocket": Factory()}, reactor=Clock())
    sniffer = factory.buildProtocol(None)
    sniffer.makeConnection(StringTransport())
    sniffer.dataReceived(JINI_HEADER)
    (line,) = [line for _, line in logged if "One-port server" in line]
    assert "match no protocol served here; they look like a Jini ERI mux client: serve it " \
           "with `twistd jini-mux`" in line


# -- who closed it: the server's "closed" line -------------------------------------------------


@pytest.mark.parametrize("resume, reason", [
    (False, "closed by this side with ERROR[REJECTED_RESUME]: resume is not supported by this "
            "server"),
    (True, "closed by this side with ERROR[REJECTED_RESUME]: no resumable session has this "
           "token (unknown, or it expired)"),
])
@aio
async def test_a_rejected_resume_is_closed_by_the_server(ports, logged, resume, reason):
    port = await wait(serve(local(), EchoResponder, reactor=reactor, resume=resume))
    ports.append(port)
    await send_raw(port, wire(ResumeFrame(token=b"t" * 16, last_received_server_position=0,
                                          first_available_client_position=0)))
    closed = await until_logged(logged, "RSocket server connection closed")
    assert closed.endswith(reason), closed
    assert "ended by the peer" not in closed


@aio
async def test_a_bad_setup_is_closed_by_the_server(ports, logged):
    port = await wait(serve(local(), EchoResponder, reactor=reactor))
    ports.append(port)
    await send_raw(port, wire(KeepaliveFrame(respond=True, last_received_position=0)))
    closed = await until_logged(logged, "RSocket server connection closed")
    assert closed.endswith("closed by this side with ERROR[INVALID_SETUP]: first frame must be "
                           "SETUP, got KEEPALIVE"), closed


@aio
async def test_a_client_rejected_by_the_server_still_says_the_peer_ended_it(ports, logged):
    port = await wait(serve(local(), EchoResponder, reactor=reactor))
    ports.append(port)
    with pytest.raises(E.SetupError):
        rsocket = await wait(connect(tcp(port), reactor=reactor, resume=True))
        await wait(rsocket.request_response(Payload(b"x")))
    closed = await until_logged(logged, "RSocket client connection closed")
    assert closed.endswith("ended by the peer: ERROR[REJECTED_SETUP]: resume is not supported "
                           "by this server"), closed


# -- a working connection keeps its own words ----------------------------------------------------


@pytest.mark.parametrize("transport", ["tcp", "ws"])
@aio
async def test_a_working_connection_lost_later_is_not_called_a_wrong_peer(ports, transport):
    from rsocket_tx.transports.websocket import WebSocketClientEndpoint

    if transport == "tcp":
        port = await wait(serve(local(), EchoResponder, reactor=reactor))
        endpoint = tcp(port)
    else:
        port = await wait(serve(WebSocketServerEndpoint(reactor, local(), "/rsocket"),
                                EchoResponder, reactor=reactor))
        endpoint = WebSocketClientEndpoint(reactor, tcp(port),
                                           f"ws://127.0.0.1:{port.getHost().port}/rsocket")
    ports.append(port)
    rsocket = await wait(connect(endpoint, reactor=reactor))
    assert await wait(rsocket.request_response(Payload(b"hi"))) == Payload(b"hi")
    rsocket._protocol.transport.abortConnection()  # (the transport fails under it)
    await wait(rsocket._protocol.when_closed())
    assert "the server" not in str(rsocket.close_reason), rsocket.close_reason


def test_only_the_first_reads_are_watched():
    """The first bytes are kept by an instance attribute that is gone once 16 bytes are in:
    every later read takes the class's dataReceived, as before (the hot path)."""
    proto, transport, _ = server_protocol(EchoResponder)
    assert "dataReceived" in vars(proto)
    proto.dataReceived(RSOCKET_SETUP[:5])  # (a SETUP cut short: still watched)
    assert "dataReceived" in vars(proto) and proto.first_bytes == RSOCKET_SETUP[:5]
    proto.dataReceived(RSOCKET_SETUP[5:])
    assert "dataReceived" not in vars(proto)
    assert proto.first_bytes == RSOCKET_SETUP[:256] and proto.setup_info is not None
    assert transport.value() == b""  # (a good SETUP: nothing rejected)
    proto.dataReceived(wire(KeepaliveFrame(respond=True, last_received_position=0)))
    assert proto.first_bytes == RSOCKET_SETUP[:256]  # (later reads are not looked at)
    assert transport.value()  # (the KEEPALIVE's answer: the class's path handled it)
