"""The Twisted side of the batch path (``RSocketConnection.batch_requests``): the whole
fire-and-forgets and request-responses of one read reach the responder in one loop, and the
answers to our request-responses fire their Deferreds in one loop. What the application sees
stays what it saw one event at a time: the order, an ERROR for a handler that raised,
Deferred and coroutine answers, a connection closed by a handler ending the read's work, and
interceptors that observe every request."""

from __future__ import annotations

import pytest
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted_support import parse, server_protocol, wire

from rsocket_tx import Payload, Responder
from rsocket_tx.client import make_setup
from rsocket_tx.core import errors as E
from rsocket_tx.core import frames as F
from rsocket_tx.interceptors import Interceptor
from rsocket_tx.protocol import RSocketClientFactory

SETUP = wire(make_setup())


def fnf(sid: int, data: bytes) -> F.Frame:
    return F.RequestFnfFrame(stream_id=sid, data=data)


def rr(sid: int, data: bytes) -> F.Frame:
    return F.RequestResponseFrame(stream_id=sid, data=data)


def answer(sid: int, data: bytes) -> F.Frame:
    return F.PayloadFrame(stream_id=sid, data=data, next=True, complete=True)


class Recording(Responder):
    """Records every request in order; answers a request-response with its data upper-cased,
    raises on ``b"raise"``, answers ``b"later"`` from a Deferred (:attr:`later`) and
    ``b"async"`` from a coroutine; closes the connection on a fire-and-forget ``b"close"``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, bytes]] = []
        self.later: Deferred = Deferred()

    def fire_and_forget(self, payload):
        self.seen.append(("fnf", payload.data))
        if payload.data == b"close":
            self.rsocket.close(0)

    def request_response(self, payload):
        self.seen.append(("rr", payload.data))
        if payload.data == b"raise":
            raise KeyError("no such thing")
        if payload.data == b"later":
            return self.later
        if payload.data == b"async":
            async def answer():
                return Payload(b"ASYNC")
            return answer()
        return Payload(payload.data.upper())


def served(read: bytes):
    responder = Recording()
    proto, transport, clock = server_protocol(lambda: responder)
    proto.dataReceived(SETUP)
    transport.clear()
    proto.dataReceived(read)
    return responder, proto, transport, clock


def test_requests_of_one_read_are_served_in_order_and_answered_in_one_write():
    responder, proto, transport, _ = served(wire(
        fnf(1, b"a"), rr(3, b"b"), rr(5, b"c"), fnf(7, b"d"), rr(9, b"e")))
    assert proto.connection.batch_requests  # (the batch path: nothing observes each event)
    assert responder.seen == [("fnf", b"a"), ("rr", b"b"), ("rr", b"c"), ("fnf", b"d"),
                              ("rr", b"e")]
    frames = parse(transport.value())
    assert [(f.stream_id, f.data, f.complete) for f in frames] == [
        (3, b"B", True), (5, b"C", True), (9, b"E", True)]


@pytest.mark.logs_failure("a handler's bug is logged with its traceback", match="KeyError")
def test_a_raising_handler_gets_an_error_and_the_rest_of_the_batch_is_served():
    responder, _, transport, _ = served(wire(rr(1, b"x"), rr(3, b"raise"), rr(5, b"y")))
    assert [s[1] for s in responder.seen] == [b"x", b"raise", b"y"]
    frames = parse(transport.value())
    assert [type(f).__name__ for f in frames] == ["PayloadFrame", "ErrorFrame", "PayloadFrame"]
    error = frames[1]
    assert error.stream_id == 3 and error.error_code == E.ErrorCode.APPLICATION_ERROR
    assert "KeyError" in error.data.decode()


def test_deferred_and_coroutine_answers_in_a_batch():
    responder, proto, transport, _ = served(wire(rr(1, b"later"), rr(3, b"async"), rr(5, b"z")))
    frames = parse(transport.value())
    assert [(f.stream_id, f.data) for f in frames] == [(3, b"ASYNC"), (5, b"Z")]
    transport.clear()
    responder.later.callback(Payload(b"LATER"))
    [frame] = parse(transport.value())
    assert (frame.stream_id, frame.data, frame.complete) == (1, b"LATER", True)


def test_a_handler_closing_the_connection_ends_the_work_of_the_read():
    responder, proto, transport, _ = served(wire(
        fnf(1, b"a"), fnf(3, b"close"), fnf(5, b"b"), rr(7, b"c")))
    assert responder.seen == [("fnf", b"a"), ("fnf", b"close")]
    assert not proto.is_open


def test_interceptors_see_each_request_of_a_read():
    seen = []

    class Watching(Interceptor):
        def request_started(self, request):
            seen.append((request.interaction, request.stream_id))

    responder = Recording()
    proto, transport, _ = server_protocol(lambda: responder, interceptors=[Watching()])
    proto.dataReceived(SETUP)
    proto.dataReceived(wire(fnf(1, b"a"), rr(3, b"b"), rr(5, b"c")))
    assert not proto.connection.batch_requests  # (each request is observed)
    assert [s[1] for s in seen] == [1, 3, 5]
    assert [s[1] for s in responder.seen] == [b"a", b"b", b"c"]


def client():
    clock = Clock()
    proto = RSocketClientFactory(make_setup(), reactor=clock).buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    clock.advance(0)
    transport.clear()
    return proto, transport, clock


def test_answers_of_one_read_fire_their_deferreds_in_order():
    proto, transport, clock = client()
    rs = proto.rsocket
    order = []
    ds = [rs.request_response(Payload(b"%d" % i)) for i in range(3)]
    for d in ds:
        d.addCallback(lambda p: order.append(p.data))
    clock.advance(0)
    ids = [f.stream_id for f in parse(transport.value())]
    assert ids == [1, 3, 5]
    proto.dataReceived(wire(answer(3, b"B"), answer(1, b"A"), answer(5, b"C")))
    assert order == [b"B", b"A", b"C"]


def test_a_callback_closing_the_connection_fails_the_other_answers_of_the_read():
    proto, transport, clock = client()
    rs = proto.rsocket
    first = rs.request_response(Payload(b"1"))
    second = rs.request_response(Payload(b"2"))
    first.addCallback(lambda _: proto.close())
    failures = []
    second.addErrback(failures.append)
    clock.advance(0)
    proto.dataReceived(wire(answer(1, b"A"), answer(3, b"B")))
    [failure] = failures
    assert failure.check(E.ConnectionLostError)


def test_cancel_of_a_request_response_sends_cancel_on_its_stream():
    proto, transport, clock = client()
    rs = proto.rsocket
    rs.request_response(Payload(b"1"))
    d = rs.request_response(Payload(b"2"))
    canceled = []
    d.addErrback(lambda f: canceled.append(f.trap(CancelledError)))
    clock.advance(0)
    transport.clear()
    d.cancel()
    assert canceled == [CancelledError]
    [cancel] = parse(transport.value())
    assert isinstance(cancel, F.CancelFrame) and cancel.stream_id == 3
    proto.dataReceived(wire(answer(3, b"late"), answer(1, b"A")))  # (the late one: dropped)
