"""What a server logs (issue 16, items 1-2): a handler's bug is logged with its traceback and
the peer's ERROR[APPLICATION_ERROR] keeps the exception's type; a handler returning the wrong
type is logged with what was expected; one line when a connection opens and one when it
closes, in words; the connection id and the peer on every line a connection logs, frame debug
lines included. Real loopback connections; the log is read with an observer on the global
log publisher."""

from __future__ import annotations

import re

import pytest
import pytest_twisted
from twisted.internet import defer, reactor
from twisted.internet.address import IPv4Address, IPv6Address, UNIXAddress
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted_support import wait, wire

from rsocket_tx import ApplicationError, Payload, RejectedError, Responder
from rsocket_tx.bridge import ConnectionLogger, describe_peer
from rsocket_tx.core.frames import RequestResponseFrame, SetupFrame
from rsocket_tx.faces.tap import make_frame_logger

aio = pytest_twisted.ensureDeferred

SETUP = SetupFrame(keepalive_interval=30_000, max_lifetime=90_000,
                   metadata_mime_type=b"application/octet-stream",
                   data_mime_type=b"application/octet-stream")

#: what a failure event logged for the KeyError of the handlers below looks like
KEY_ERROR_LOGGED = pytest.mark.logs_failure(
    "the handler's KeyError is a bug: the server logs it with its traceback",
    match=r"(?s)\[c\d+ 127\.0\.0\.1:\d+\] .* failed on stream \d+ .*in lookup\n.*"
          r"builtins\.KeyError: 'missing-key'")


def lookup():
    """A bug: a missing key (the traceback must show this function)."""
    return {}["missing-key"]


@pytest.fixture
def events():
    """Every log event published while the test runs (a list of event dicts)."""
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    yield seen
    globalLogPublisher.removeObserver(seen.append)


def connection_events(events, namespace="rsocket_tx.protocol"):
    return [e for e in events if e.get("log_namespace") == namespace]


def failures(events):
    return [e for e in events if "log_failure" in e]


def text(event) -> str:
    return formatEvent(event)


def local_address(rs) -> str:
    """The client's own address, as the server's log names its peer."""
    host = rs._protocol.transport.getHost()
    return f"{host.host}:{host.port}"


def later() -> defer.Deferred:
    d = defer.Deferred()
    reactor.callLater(0, d.callback, None)
    return d


async def until(condition, turns: int = 5000) -> None:
    """Let the reactor run until ``condition()`` holds (a bounded number of turns)."""
    for _ in range(turns):
        if condition():
            return
        await later()
    raise AssertionError("the condition never held")


# ------------------------------------------------------------------ handler errors

class Buggy(Responder):
    def request_response(self, payload):
        kind = payload.data
        if kind == b"sync":
            return lookup()
        if kind == b"deferred":
            return defer.maybeDeferred(lookup)
        if kind == b"wrong-type":
            return "a str, not a Payload"
        if kind == b"rejected":
            raise RejectedError("not now")
        if kind == b"application":
            raise ApplicationError("deliberate")

        async def coroutine():
            await later()
            return lookup()

        return coroutine()

    def request_stream(self, payload):
        kind = payload.data
        if kind == b"raises":
            lookup()
        if kind == b"not-iterable":
            return 42

        def source():
            yield Payload(b"one")
            lookup()

        return source()

    def request_channel(self, payload, inbound):
        lookup()

    def fire_and_forget(self, payload):
        lookup()

    def metadata_push(self, metadata):
        lookup()


@KEY_ERROR_LOGGED
@pytest.mark.parametrize("kind", [b"sync", b"deferred", b"coroutine"])
@aio
async def test_request_response_bug_is_logged_with_traceback_and_keeps_its_type(
        harness, events, kind):
    rs = await harness.connect(await harness.serve(Buggy))
    with pytest.raises(ApplicationError) as info:
        await wait(rs.request_response(Payload(kind)))
    assert info.value.message == "KeyError: 'missing-key'"
    assert info.value.error_code == 0x201
    [event] = failures(events)
    assert isinstance(event["log_failure"].value, KeyError)
    assert event["log_level"] == LogLevel.error
    assert event["log_namespace"] == "rsocket_tx.protocol"
    assert "in lookup" in event["log_failure"].getTraceback()  # the handler's own frames
    server = harness.server_protocols[-1]
    assert event["conn"] == server.log.conn
    assert event["peer"] == local_address(rs)
    assert text(event).startswith(f"[{server.log.conn} {local_address(rs)}] "
                                  "request-response handler of Buggy failed on stream 1")
    assert rs.is_open  # (a bug in one request does not end the connection)


@KEY_ERROR_LOGGED
@pytest.mark.parametrize("kind", [b"raises", b"source"])
@aio
async def test_request_stream_bug_is_logged_and_keeps_its_type(harness, events, kind):
    rs = await harness.connect(await harness.serve(Buggy))
    got = []
    with pytest.raises(ApplicationError) as info:
        async for item in rs.request_stream(Payload(kind)):
            got.append(item.data)
    assert info.value.message == "KeyError: 'missing-key'"
    assert got == ([b"one"] if kind == b"source" else [])
    [event] = failures(events)
    assert isinstance(event["log_failure"].value, KeyError)
    assert event["conn"] == harness.server_protocols[-1].log.conn
    assert "failed on stream 1" in text(event)


@KEY_ERROR_LOGGED
@aio
async def test_request_channel_bug_is_logged_and_keeps_its_type(harness, events):
    rs = await harness.connect(await harness.serve(Buggy))
    with pytest.raises(ApplicationError) as info:
        await wait(rs.request_channel(Payload(b"first"), [Payload(b"more")]).collect())
    assert info.value.message == "KeyError: 'missing-key'"
    [event] = failures(events)
    assert text(event).endswith("request-channel handler of Buggy failed on stream 1 (the "
                                "requester gets ERROR[APPLICATION_ERROR])")


@pytest.mark.logs_failure("the one-way handlers' KeyErrors are bugs: the server logs them",
                          match=r"(?s)\[c\d+ 127\.0\.0\.1:\d+\] (fire-and-forget|"
                                r"metadata-push) handler .* raised\n.*in lookup\n.*"
                                r"builtins\.KeyError: 'missing-key'")
@aio
async def test_one_way_handler_bugs_are_logged(harness, events):
    rs = await harness.connect(await harness.serve(Buggy))
    await wait(rs.fire_and_forget(Payload(b"x")))
    await wait(rs.metadata_push(b"m"))
    await until(lambda: len(failures(events)) == 2)
    fnf, push = failures(events)
    assert "fire-and-forget handler Buggy.fire_and_forget raised" in text(fnf)
    assert "metadata-push handler Buggy.metadata_push raised" in text(push)
    assert fnf["conn"] == push["conn"] == harness.server_protocols[-1].log.conn


@pytest.mark.parametrize("kind", [b"rejected", b"application"])
@aio
async def test_deliberate_rsocket_errors_are_not_logged(harness, events, kind):
    rs = await harness.connect(await harness.serve(Buggy))
    with pytest.raises((RejectedError, ApplicationError)) as info:
        await wait(rs.request_response(Payload(kind)))
    assert info.value.message in ("not now", "deliberate")
    assert not failures(events)
    assert not [e for e in events if e.get("log_level", LogLevel.info) >= LogLevel.warn]


@aio
async def test_request_response_returning_the_wrong_type_is_logged(harness, events):
    rs = await harness.connect(await harness.serve(Buggy))
    with pytest.raises(ApplicationError, match="must return a Payload, not str"):
        await wait(rs.request_response(Payload(b"wrong-type")))
    [event] = [e for e in events if e.get("log_level") == LogLevel.error]
    assert text(event) == (
        f"[{harness.server_protocols[-1].log.conn} {local_address(rs)}] request-response "
        "handler of Buggy returned str on stream 1; it must return a Payload (or None: no "
        "payload), directly or from a Deferred or coroutine")


@pytest.mark.logs_failure("a stream handler returning a non-iterable is a bug: logged",
                          match=r"TypeError: a stream source must be an iterable or async "
                                r"iterable of Payload, not int")
@aio
async def test_stream_handler_returning_a_non_iterable_is_logged(harness, events):
    rs = await harness.connect(await harness.serve(Buggy))
    with pytest.raises(ApplicationError, match="TypeError: a stream source must be an "
                                               "iterable"):
        await wait(rs.request_stream(Payload(b"not-iterable")).collect())
    [event] = failures(events)
    assert isinstance(event["log_failure"].value, TypeError)


# ------------------------------------------------------------------ connection lines

def lines(events, conn: str) -> list[str]:
    return [text(e) for e in connection_events(events) if e.get("conn") == conn]


@aio
async def test_one_line_when_a_connection_opens_and_one_when_it_closes(harness, events):
    rs = await harness.connect(await harness.serve())
    server = harness.server_protocols[-1]
    client = rs._protocol
    assert server.log.conn != client.log.conn
    assert re.fullmatch(r"c\d+", server.log.conn)
    peer_of_server = local_address(rs)
    peer_of_client = f"127.0.0.1:{client.transport.getPeer().port}"
    await wait(rs.close())
    await wait(server.lost)
    assert lines(events, server.log.conn) == [
        f"[{server.log.conn} {peer_of_server}] RSocket server connection opened",
        f"[{server.log.conn} {peer_of_server}] RSocket server connection closed: the peer "
        "closed the connection (ERROR[CONNECTION_CLOSE]: the connection is closing)"]
    assert lines(events, client.log.conn) == [
        f"[{client.log.conn} {peer_of_client}] RSocket client connection opened",
        f"[{client.log.conn} {peer_of_client}] RSocket client connection closed: closed by "
        "this side"]
    opened = connection_events(events)[0]
    assert (opened["log_level"], opened["conn"], opened["peer"]) == (
        LogLevel.info, server.log.conn, peer_of_server)


async def raw_client_set_up(harness):
    """A raw TCP client that has sent SETUP to a new server, and the server's protocol once
    it has accepted it: ``(raw, server)``."""
    port = await harness.serve()
    raw = await harness.raw(port)
    raw.send(wire(SETUP))
    await until(lambda: harness.server_protocols and harness.server_protocols[-1].setup_info)
    return raw, harness.server_protocols[-1]


@aio
async def test_tcp_dropped_without_connection_close_is_told_in_words(harness, events):
    raw, server = await raw_client_set_up(harness)
    raw.transport.loseConnection()
    await wait(server.lost)
    closed = lines(events, server.log.conn)[-1]
    assert closed.endswith("RSocket server connection closed: the peer closed the connection "
                           "without CONNECTION_CLOSE")
    assert not [e for e in events if "closed cleanly" in text(e)
                or "CONNECTION_ERROR" in text(e)]


@aio
async def test_tcp_reset_is_told_as_connection_lost(harness, events):
    raw, server = await raw_client_set_up(harness)
    raw.transport.abortConnection()
    await wait(server.lost)
    closed = lines(events, server.log.conn)[-1]
    assert re.search(r"RSocket server connection closed: (connection lost: .+|the peer closed "
                     r"the connection without CONNECTION_CLOSE)$", closed), closed


@aio
async def test_frame_debug_lines_carry_the_connection_id_and_peer(harness, events):
    rs = await harness.connect(await harness.serve(frame_logger=make_frame_logger()))
    assert await wait(rs.request_response(Payload(b"hi"))) == Payload(b"hi")
    server = harness.server_protocols[-1]
    frames = connection_events(events, "rsocket_tx.frames")
    assert frames, "no frame debug line"
    prefix = f"[{server.log.conn} {local_address(rs)}] "
    assert [text(e) for e in frames[:2]] == [
        prefix + "recv SETUP stream=0 keepalive_interval=20000 max_lifetime=90000 "
        "metadata_mime_type=b'application/octet-stream' "
        "data_mime_type=b'application/octet-stream' major_version=1 minor_version=0 data=b''",
        prefix + "recv REQUEST_RESPONSE stream=1 data=b'hi'"]
    assert all(e["conn"] == server.log.conn and e["log_level"] == LogLevel.debug
               for e in frames)


@aio
async def test_every_line_of_a_connection_carries_its_id_and_peer(harness, events):
    rs = await harness.connect(await harness.serve(frame_logger=make_frame_logger()))
    await wait(rs.request_response(Payload(b"hi")))
    await wait(rs.close())
    await wait(harness.server_protocols[-1].lost)
    logged = [e for e in events
              if e.get("log_namespace") in ("rsocket_tx.protocol", "rsocket_tx.frames",
                                            "rsocket_tx.bridge")]
    assert len(logged) >= 6
    for event in logged:
        assert re.fullmatch(r"c\d+", event["conn"]) and event["peer"].startswith("127.0.0.1:")
        assert text(event).startswith(f"[{event['conn']} {event['peer']}] ")


class Chatty(Responder):
    def request_response(self, payload):
        self.log.info("serving {data!r}", data=payload.data)
        return payload


@aio
async def test_the_responders_log_carries_the_connection_id(harness, events):
    rs = await harness.connect(await harness.serve(Chatty))
    await wait(rs.request_response(Payload(b"hi")))
    await wait(rs.fire_and_forget(Payload(b"unhandled")))
    server = harness.server_protocols[-1]
    prefix = f"[{server.log.conn} {local_address(rs)}] "
    [serving] = [e for e in events if e.get("log_namespace") == f"{__name__}.Chatty"]
    assert text(serving) == prefix + "serving b'hi'"
    await until(lambda: any("fire-and-forget not handled" in text(e) for e in events))
    [unhandled] = [e for e in events if "fire-and-forget not handled" in text(e)]
    assert text(unhandled).startswith(prefix + "fire-and-forget not handled by Chatty")
    assert Chatty.log.namespace == f"{__name__}.Chatty"  # (the class's own is untouched)


def test_a_client_frame_logger_without_connections_still_works():
    """``make_frame_logger()`` called as a plain ``(direction, frame)`` callable (a caller's
    own use) logs without a connection id."""
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        make_frame_logger()("send", RequestResponseFrame(stream_id=1, data=b"x"))
    finally:
        globalLogPublisher.removeObserver(seen.append)
    assert [text(e) for e in seen] == ["send REQUEST_RESPONSE stream=1 data=b'x'"]


# ------------------------------------------------------------------ helpers

def test_describe_peer():
    assert describe_peer(IPv4Address("TCP", "10.0.0.1", 7878)) == "10.0.0.1:7878"
    assert describe_peer(IPv6Address("TCP", "::1", 7878)) == "[::1]:7878"
    assert describe_peer(UNIXAddress(b"/run/rsocket.sock")) == "/run/rsocket.sock"
    assert describe_peer(UNIXAddress(None)) == "unix"
    assert describe_peer(None) == "-"


def test_connection_logger_fields_and_child():
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        log = ConnectionLogger("rsocket_tx.test", peer="-")
        frames = log.child("rsocket_tx.frames")
        log.peer = "10.0.0.2:4000"  # (a transport attached later: the child follows)
        log.info("hello {who}", who="you")
        frames.debug("recv {what}", what="PING")
        other = ConnectionLogger("rsocket_tx.test")
    finally:
        globalLogPublisher.removeObserver(seen.append)
    assert [text(e) for e in seen] == [f"[{log.conn} 10.0.0.2:4000] hello you",
                                       f"[{log.conn} 10.0.0.2:4000] recv PING"]
    assert [e["log_namespace"] for e in seen] == ["rsocket_tx.test", "rsocket_tx.frames"]
    assert [e["conn"] for e in seen] == [log.conn, log.conn]
    assert int(other.conn[1:]) > int(log.conn[1:])  # a per-process counter


# ------------------------------------------------------------------ the other protocols

@pytest.mark.logs_failure("the Jini dispatcher's KeyError is a bug: the server logs it",
                          match=r"(?s)^\[c\d+ 127\.0\.0\.1:\d+\] dispatch of .*in lookup\n.*"
                                r"builtins\.KeyError: 'missing-key'")
@aio
async def test_jini_dispatcher_bug_is_logged_on_its_connection(events):
    from rsocket_tx.jini import Dispatcher, JiniMuxClient, JiniMuxConfig, SessionAbortedError
    from rsocket_tx.jini import serve as jini_serve

    class Broken(Dispatcher):
        def dispatch(self, request):
            lookup()

    port = await wait(jini_serve(reactor, "tcp:0:interface=127.0.0.1", Broken, JiniMuxConfig()))
    client = JiniMuxClient(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}",
                           JiniMuxConfig())
    try:
        with pytest.raises(SessionAbortedError) as info:
            await wait(client.request(b"x"))
        assert info.value.detail == "KeyError: 'missing-key'"
    finally:
        await wait(client.close())
        await wait(defer.maybeDeferred(port.stopListening))
        for protocol in list(port.factory.protocols):
            await wait(protocol.close())
    [event] = failures(events)
    server_lines = [text(e) for e in events if e.get("conn") == event["conn"]]
    assert server_lines[0] == f"[{event['conn']} {event['peer']}] Jini ERI mux server " \
                              "connection opened"
    assert re.fullmatch(rf"\[{event['conn']} 127\.0\.0\.1:\d+\] Jini ERI mux server "
                        r"connection closed: the peer closed the connection", server_lines[-1])
    client_lines = [text(e) for e in connection_events(events, "rsocket_tx.jini.client")]
    assert client_lines[-1].endswith("Jini ERI mux client connection closed: closed by the "
                                     "application"), client_lines


@pytest.mark.logs_failure("the publishers' bugs are logged by the server",
                          match=r"(?s)^\[c\d+ 127\.0\.0\.1:\d+\] (the source of publisher|"
                                r"publisher refused subscribe).*in lookup\n.*"
                                r"builtins\.KeyError: 'missing-key'")
@aio
async def test_rsnet_publisher_bugs_are_logged_on_their_connection(events):
    from rsocket_tx.rsnet import SubscriptionError
    from rsocket_tx.rsnet.client import connect as rsnet_connect
    from rsocket_tx.rsnet.server import serve as rsnet_serve

    def source(request):
        yield b"one"
        lookup()

    def refuses(request):
        lookup()

    port = await wait(rsnet_serve(reactor, "tcp:0:interface=127.0.0.1",
                                  {"source": source, "refuses": refuses}))
    client = await wait(rsnet_connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}"))
    try:
        for name in ("source", "refuses", "missing"):
            with pytest.raises(SubscriptionError) as info:
                await wait(client.subscribe(name).collect())
            assert info.value.error == ("no such publisher: missing" if name == "missing"
                                        else "KeyError: 'missing-key'")
    finally:
        await wait(client.close())
        await wait(defer.maybeDeferred(port.stopListening))
    source_failed, refused = failures(events)  # (no such publisher: deliberate, not logged)
    assert "the source of publisher 'source' failed for subscriber" in text(source_failed)
    assert "publisher refused subscribe to 'refuses'" in text(refused)
    assert source_failed["conn"] == refused["conn"]
