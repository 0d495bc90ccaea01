"""Completion needs no credit (spec §Flow Control; Reactive Streams allows onComplete without
demand): a stream whose source ends right after the item that used the last credit sends
COMPLETE (or ERROR) at once, without waiting for a REQUEST_N that an exact-credit requester
(Reactor's ``limitRate(n)`` or a finite ``request(n)``) never sends.

The outbound pump (:class:`rsocket_tx.streams.OutboundPump`) therefore pulls one item ahead
once its credit is used up. Checked for every kind of source (list, generator, async
generator, a batch source with ``ready(n)``), on the responder (request-stream,
request-channel) and on our channel requester's outbound side, with exact credit 1, 3 and 256;
sans-IO (StringTransport, Clock, hand-built frames), plus a real ``twistd rsocket`` child
answering hand-built frames over TCP.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
import pytest_twisted
from test_protocol import SETUP, client, take
from test_tap import REPO, TWISTD, _Process
from twisted.internet.defer import Deferred
from twisted_support import server_protocol, wire

from rsocket_tx import Payload, Responder
from rsocket_tx.apps.demo import DemoResponder
from rsocket_tx.core.errors import ErrorCode
from rsocket_tx.core.frames import (
    CancelFrame,
    ErrorFrame,
    PayloadFrame,
    RequestChannelFrame,
    RequestNFrame,
    RequestStreamFrame,
)

#: exact credits: one item, a few, a whole default window
CREDITS = (1, 3, 256)
#: the kinds of source a stream handler (or a channel requester) may give
KINDS = ("list", "coroutine of a list", "generator", "async generator", "batch source")


class BatchSource:
    """An async source that also offers ``ready(n)`` (the batch-source API): items are fed
    from outside; its end (or error) is told by ``__anext__`` once the buffer is empty.

    :ivar pulled: items handed out so far (by ``ready`` or ``__anext__``).
    """

    def __init__(self, items=(), end: bool = False) -> None:
        self.buffer: list = list(items)
        self.ended = end
        self.error: BaseException | None = None
        self.pulled = 0
        self._waiter: Deferred | None = None

    def feed(self, items=(), end: bool = False, error: BaseException | None = None) -> None:
        """Add ``items``; ``end``: no more after them; ``error``: fail after them."""
        self.buffer += items
        self.ended = self.ended or end or error is not None
        self.error = error
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.callback(None)

    def ready(self, n: int) -> list:
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        self.pulled += len(out)
        return out

    def __aiter__(self):
        return self

    async def __anext__(self):
        while not self.buffer:
            if self.error is not None:
                raise self.error
            if self.ended:
                raise StopAsyncIteration
            self._waiter = Deferred()
            await self._waiter
        self.pulled += 1
        return self.buffer.pop(0)


def items(n: int, prefix: bytes = b"") -> list[Payload]:
    """``n`` payloads with data ``prefix + b"0"`` ... ``prefix + b"<n-1>"``."""
    return [Payload(prefix + b"%d" % i) for i in range(n)]


def source(kind: str, n: int, error: BaseException | None = None):
    """A source of ``kind`` (one of :data:`KINDS`) giving ``n`` payloads, then ending (or
    raising ``error``); everything is available at once."""
    if kind == "list":
        assert error is None
        return items(n)
    if kind == "coroutine of a list":
        assert error is None

        async def later():
            return items(n)
        return later()
    if kind == "generator":
        def gen():
            yield from items(n)
            if error is not None:
                raise error
        return gen()
    if kind == "async generator":
        async def agen():
            for item in items(n):
                yield item
            if error is not None:
                raise error
        return agen()
    assert kind == "batch source"
    src = BatchSource(items(n))
    src.feed(end=True, error=error)
    return src


def stream_server(handler):
    """A server protocol whose request-stream handler is ``handler(payload)``, after SETUP.

    :returns: ``(proto, transport)``; the transport's output so far is discarded.
    """
    class R(Responder):
        def request_stream(self, payload):
            return handler(payload)

    proto, transport, _ = server_protocol(lambda: R())
    proto.dataReceived(SETUP)
    take(transport)
    return proto, transport


def nexts(frames, sid: int = 1) -> list[bytes]:
    """The data of the NEXT payload frames on ``sid``."""
    return [f.data for f in frames if isinstance(f, PayloadFrame) and f.stream_id == sid
            and f.next]


def completed(frames, sid: int = 1) -> bool:
    """Whether ``frames`` end ``sid`` with COMPLETE (and hold nothing after it on ``sid``)."""
    own = [f for f in frames if f.stream_id == sid]
    return bool(own) and isinstance(own[-1], PayloadFrame) and own[-1].complete and \
        sum(isinstance(f, PayloadFrame) and f.complete for f in own) == 1


def application_error(frames, sid: int = 1) -> ErrorFrame:
    """The one frame on ``sid`` after its NEXT payloads: an ERROR[APPLICATION_ERROR]."""
    own = [f for f in frames if f.stream_id == sid and not (isinstance(f, PayloadFrame)
                                                            and f.next and not f.complete)]
    assert len(own) == 1 and isinstance(own[0], ErrorFrame), own
    assert own[0].error_code == ErrorCode.APPLICATION_ERROR
    return own[0]


# --------------------------------------------------------------------- request-stream


@pytest.mark.parametrize("credit", CREDITS)
@pytest.mark.parametrize("kind", KINDS)
def test_stream_completes_when_the_credit_equals_the_item_count(kind, credit):
    proto, transport = stream_server(lambda payload: source(kind, credit))
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=credit)))
    frames = take(transport)
    assert nexts(frames) == [p.data for p in items(credit)]
    assert completed(frames), frames[-3:]


@pytest.mark.parametrize("credit", CREDITS)
@pytest.mark.parametrize("kind", ["generator", "async generator", "batch source"])
@pytest.mark.logs_failure("the responder's source raises on purpose: the server logs it",
                          match=r"builtins\.ValueError: late")
def test_stream_error_after_the_last_credited_item_needs_no_credit(kind, credit):
    proto, transport = stream_server(lambda payload: source(kind, credit, ValueError("late")))
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=credit)))
    frames = take(transport)
    assert nexts(frames) == [p.data for p in items(credit)]
    assert application_error(frames).data == b"ValueError: late"


@pytest.mark.parametrize("credit", CREDITS)
def test_stream_whose_async_source_ends_later_completes_without_credit(credit):
    """The source's end comes after its last credited item went out: the look-ahead
    ``__anext__`` is outstanding with no credit, and completes the stream when it ends."""
    gate = Deferred()

    async def agen():
        for item in items(credit):
            yield item
        await gate

    proto, transport = stream_server(lambda payload: agen())
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=credit)))
    frames = take(transport)
    assert len(nexts(frames)) == credit and not completed(frames)
    gate.callback(None)
    assert take(transport) == [PayloadFrame(stream_id=1, complete=True)]


@pytest.mark.parametrize("credit", CREDITS)
@pytest.mark.parametrize("end", [
    "complete",
    pytest.param("error", marks=pytest.mark.logs_failure(
        "the responder's source fails on purpose: the server logs it",
        match=r"builtins\.ValueError: feed failed"))])
def test_stream_whose_batch_source_ends_later_ends_without_credit(credit, end):
    src = BatchSource(items(credit))
    proto, transport = stream_server(lambda payload: src)
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=credit)))
    assert len(nexts(take(transport))) == credit
    if end == "complete":
        src.feed(end=True)
        assert take(transport) == [PayloadFrame(stream_id=1, complete=True)]
    else:
        src.feed(error=ValueError("feed failed"))
        assert application_error(take(transport)).data == b"ValueError: feed failed"


@pytest.mark.parametrize("kind", ["generator", "async generator", "batch source"])
def test_look_ahead_is_one_item_held_until_credit_arrives(kind):
    """A longer source: at most one item is pulled beyond the credit; it goes out first when
    REQUEST_N arrives, in order, and the stream completes with the credit exactly used."""
    pulled = []

    def counting():
        for item in items(5):
            pulled.append(item)
            yield item

    async def acounting():
        for item in counting():
            yield item

    batch = BatchSource(items(5), end=True)
    if kind == "batch source":
        proto, transport = stream_server(lambda payload: batch)
    else:
        proto, transport = stream_server(
            lambda payload: counting() if kind == "generator" else acounting())
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=2)))
    assert nexts(take(transport)) == [b"0", b"1"]
    # the third is held, not sent
    assert (batch.pulled if kind == "batch source" else len(pulled)) == 3
    proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=3)))
    frames = take(transport)
    assert nexts(frames) == [b"2", b"3", b"4"]
    assert completed(frames)


@pytest.mark.parametrize("kind", ["generator", "async generator"])
def test_cancel_drops_the_held_item_and_closes_the_source(kind):
    closed = []
    pulled = []

    def gen():
        try:
            for item in items(10):
                pulled.append(item)
                yield item
        finally:
            closed.append(True)

    async def agen():
        try:
            for item in items(10):
                pulled.append(item)
                yield item
        finally:
            closed.append(True)

    proto, transport = stream_server(lambda payload: gen() if kind == "generator" else agen())
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=3)))
    assert nexts(take(transport)) == [b"0", b"1", b"2"]
    assert len(pulled) == 4 and closed == []  # b"3" is held
    proto.dataReceived(wire(CancelFrame(stream_id=1)))
    assert closed == [True]
    proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=5)))
    assert take(transport) == [] and len(pulled) == 4  # the held item never went out


# --------------------------------------------------------------------- request-channel


@pytest.mark.parametrize("credit", CREDITS)
@pytest.mark.parametrize("inbound_end", ["with the request", "after the echoes"])
def test_channel_echo_completes_when_the_requester_completed_with_exact_credit(credit,
                                                                               inbound_end):
    """The demo echo (what ``twistd rsocket`` serves): the requester sends ``credit`` payloads
    and grants ``credit``; the echo completes when the requester's side has."""
    proto, transport, _ = server_protocol(DemoResponder)
    proto.dataReceived(SETUP)
    take(transport)
    sent = items(credit, b"e")
    first_only = inbound_end == "with the request" and credit == 1
    proto.dataReceived(wire(RequestChannelFrame(stream_id=1, initial_request_n=credit,
                                                data=sent[0].data, complete=first_only)))
    rest = [PayloadFrame(stream_id=1, data=p.data, next=True) for p in sent[1:]]
    if inbound_end == "with the request":
        if not first_only:
            proto.dataReceived(wire(*rest, PayloadFrame(stream_id=1, complete=True)))
        frames = take(transport)
    else:
        proto.dataReceived(wire(*rest))
        frames = take(transport)
        assert not completed(frames)
        proto.dataReceived(wire(PayloadFrame(stream_id=1, complete=True)))
        frames += take(transport)
    assert nexts(frames) == [p.data for p in sent]
    assert completed(frames), frames[-3:]


@pytest.mark.parametrize("credit", CREDITS)
@pytest.mark.parametrize("kind", KINDS)
def test_channel_responder_source_completes_with_exact_credit(kind, credit):
    class R(Responder):
        def request_channel(self, payload, inbound):
            return source(kind, credit)  # (the inbound side stays open: it does not matter)

    proto, transport, _ = server_protocol(lambda: R())
    proto.dataReceived(SETUP)
    proto.dataReceived(wire(RequestChannelFrame(stream_id=1, initial_request_n=credit)))
    frames = take(transport)
    assert nexts(frames) == [p.data for p in items(credit)]
    assert completed(frames), frames[-3:]


@pytest.mark.parametrize("credit", (0, *CREDITS))
@pytest.mark.parametrize("kind", KINDS)
def test_channel_requester_outbound_completes_with_exact_credit(kind, credit):
    """Our ``request_channel(payload, outbound)``: the responder grants exactly as many
    REQUEST_N as the outbound source has items (none for an empty one)."""
    proto, transport, _ = client()
    take(transport)
    proto.rsocket.request_channel(Payload(b"first"), source(kind, credit))
    frames = take(transport)
    assert isinstance(frames[0], RequestChannelFrame) and not frames[0].complete
    if credit:
        assert not completed(frames)
        proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=credit)))
        frames = take(transport)
    assert nexts(frames) == [p.data for p in items(credit)]
    assert completed(frames), frames[-3:]


@pytest.mark.parametrize("credit", CREDITS)
@pytest.mark.parametrize("kind", ["generator", "async generator", "batch source"])
def test_channel_requester_outbound_error_needs_no_credit(kind, credit):
    proto, transport, _ = client()
    take(transport)
    stream = proto.rsocket.request_channel(Payload(b"first"),
                                           source(kind, credit, ValueError("input broke")))
    take(transport)
    proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=credit)))
    frames = take(transport)
    assert nexts(frames) == [p.data for p in items(credit)]
    assert application_error(frames).data == b"ValueError: input broke"
    assert stream.ended


# --------------------------------------------------------------------- twistd rsocket


@pytest_twisted.ensureDeferred
async def test_twistd_completes_exact_credit_streams_and_channels(harness):
    """The probe of issue 11: hand-built frames against a real ``twistd -n rsocket`` (the
    demo responder): request-streams whose initial request-n equals their item count, and a
    channel whose requester completed with its first payload and granted request-n 1."""
    from twisted.internet import reactor

    process = _Process(re.compile(rb"listening on 127\.0\.0\.1:(\d+)"))
    argv = [sys.executable, "-c", TWISTD, "-n", "--pidfile=", "rsocket",
            "--listen", "tcp:0:interface=127.0.0.1"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    reactor.spawnProcess(process, sys.executable, argv, env=env, path=str(REPO))
    try:
        port = int((await process.matched.addTimeout(60, reactor)).group(1))
        raw = await harness.raw(port)
        streams = {1: 3, 3: 10, 5: 1, 7: 256}  # stream id: item count = initial request-n
        raw.send(SETUP + wire(
            *[RequestStreamFrame(stream_id=sid, initial_request_n=n, data=b"%d" % n)
              for sid, n in streams.items()],
            RequestChannelFrame(stream_id=9, initial_request_n=1, data=b"x", complete=True)))
        for sid in [*streams, 9]:
            await raw.frame(lambda f, sid=sid: isinstance(f, PayloadFrame)
                            and f.stream_id == sid and f.complete)
        for sid, n in streams.items():
            assert nexts(raw.frames, sid) == [b"%d" % i for i in range(n)]
            assert completed(raw.frames, sid)
        assert nexts(raw.frames, 9) == [b"x"] and completed(raw.frames, 9)
    finally:
        await process.stop()
    assert b"Traceback" not in process.output
