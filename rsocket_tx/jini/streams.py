"""The two halves of a session as the application sees them, over Twisted.

* :class:`DataReader`: the data the peer sends on one session (a client's response, a
  server's request body), as an async iterator of ``bytes`` chunks or a Deferred of all of
  them. The ration the peer gets follows what the application takes: a chunk counts as read
  when the iterator hands it out, so a slow reader holds back its own session only (Jini ERI
  Multiplexing Protocol §Flow Control: no session may stall the others).
* :class:`DataWriter`: the data we send on one session (a client's request body, a server's
  response), a Twisted ``IConsumer``: ``write`` never blocks; what the outbound ration does not
  let through waits in the writer, and a registered producer is paused meanwhile.

Both talk to their protocol through :class:`SessionHost`, a documented interface, never
through its internals.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable
from typing import Protocol, cast

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import (
    IConsumer,
    IDelayedCall,
    IProducer,
    IPullProducer,
    IPushProducer,
    IReactorTime,
)
from twisted.logger import Logger
from zope.interface import implementer

from ..bridge import failure_for, fresh_error
from .errors import LocalProtocolError

__all__ = ["SessionHost", "DataReader", "DataWriter", "PUSH_LIMIT"]

_log = Logger()

#: Bytes a writer hands to the connection before it forces a transport write, so that the
#: transport can push back (``pauseProducing``) in the middle of a large write.
PUSH_LIMIT = 256 * 1024


class SessionHost(Protocol):
    """What a session's reader and writer need from their protocol (implemented by
    :class:`~rsocket_tx.jini.protocol.JiniMuxProtocol`).

    ``token`` is the request object the session belongs to: a session id is reused once its
    session has ended, so every call names the request, and a call for a request whose session
    is over does nothing (or, for :meth:`session_send`, raises).
    """

    #: the reactor
    reactor: IReactorTime
    #: the transport asked us to stop producing (its buffer is full)
    paused: bool

    def session_send(self, token: object, data: bytes, eof: bool,
                     ack_required: bool = False) -> int:
        """Send ``data`` (within the outbound ration) and, when it all fits, ``eof`` (with
        ``ack_required``: the server's request for an *Acknowledgment*).

        :returns: bytes accepted.
        """
        ...

    def session_ration(self, token: object) -> int | None:
        """The outbound ration in bytes (None: unlimited)."""
        ...

    def session_consumed(self, token: object, n: int) -> None:
        """The application took ``n`` received bytes: grant the peer more."""
        ...

    def session_eof_consumed(self, token: object) -> None:
        """The application took the end of the received data."""
        ...

    def flush(self, force: bool = False) -> None:
        """Write what the connection queued (``force``: even inside a dispatch)."""
        ...

    def flush_soon(self) -> None:
        """Write what the connection queued at the end of this reactor turn."""
        ...

    def pump_soon(self, writer: DataWriter) -> None:
        """Call ``writer.run_queued_pump()`` before the connection's next write to the
        transport (the end of the read being handled, or of this reactor turn)."""
        ...


class DataReader:
    """The data the peer sends on one session: an async iterator of ``bytes`` chunks (its own
    iterator: iterating again goes on where the last iteration stopped), or :meth:`read_all`.

    A chunk is the data of the peer's Data messages for this session that arrived in one read
    (:func:`~rsocket_tx.jini.protocol.merge_data`; at most the ration we granted). Once the
    end is reached the iteration stops; if the session ends abnormally the chunks received
    before are handed out first, then the iteration raises the error
    (:class:`~rsocket_tx.jini.errors.SessionAbortedError`,
    :class:`~rsocket_tx.jini.errors.ConnectionTerminatedError`).

    :param host: the protocol.
    :param token: the request this data belongs to (it owns this reader: referred to weakly,
        so that the two make no reference cycle).
    :param canceller: called (no arguments) when a pending :meth:`read_all` is cancelled; it
        aborts the session (a bound method is referred to weakly, as ``token``).
    """

    def __init__(self, host: SessionHost, token: object,
                 canceller: Callable[[], None] | None = None) -> None:
        self._host = host
        self._token_ref = weakref.ref(token)
        self._canceller: Callable[[], Callable[[], None] | None] | None = None
        if canceller is not None:
            self._canceller = (weakref.WeakMethod(canceller)
                               if hasattr(canceller, "__self__") else lambda: canceller)
        self._chunks: deque[bytes] = deque()
        self._eof = False
        self._eof_taken = False
        self._error: BaseException | None = None
        self._waiter: Deferred[bytes | None] | None = None
        self._collect: list[bytes] | None = None  # read_all in progress
        self._collected: Deferred[bytes] | None = None
        #: bytes received and not yet taken by the application
        self.buffered = 0

    def __repr__(self) -> str:
        return (f"<DataReader buffered={self.buffered} eof={self._eof} "
                f"error={self._error!r}>")

    @property
    def _token(self) -> object:
        return self._token_ref()

    @property
    def done(self) -> bool:
        """The end (or an error) was reached and every chunk was taken."""
        return not self._chunks and (self._eof or self._error is not None)

    # ------------------------------------------------------------------ from the protocol

    def feed(self, data: bytes) -> None:
        """The next chunk arrived (protocol side)."""
        if self._eof or self._error is not None or not data:
            return
        if self._collect is not None:
            self._collect.append(data)
            self._host.session_consumed(self._token, len(data))
            return
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            self._host.session_consumed(self._token, len(data))
            waiter.callback(data)
            return
        self._chunks.append(data)
        self.buffered += len(data)

    def finish(self) -> None:
        """The peer sent eof (protocol side)."""
        if self._eof or self._error is not None:
            return
        self._eof = True
        if self._collect is not None:
            self._take_eof()
            parts, self._collect = self._collect, None
            d, self._collected = self._collected, None
            assert d is not None
            d.callback(b"".join(parts))
            return
        waiter = self._waiter
        if waiter is not None and not self._chunks:
            self._waiter = None
            self._take_eof()
            waiter.callback(None)

    def fail(self, error: BaseException, discard: bool = False) -> None:
        """The session ended abnormally (protocol side); ``discard`` drops the chunks not yet
        taken (a local abort), else they are handed out before the error."""
        if self._eof or self._error is not None:
            return
        self._error = error
        if discard:
            self._chunks.clear()
            self.buffered = 0
        if self._collect is not None:
            self._collect = None
            d, self._collected = self._collected, None
            assert d is not None
            d.errback(failure_for(error))
            return
        waiter = self._waiter
        if waiter is not None and not self._chunks:
            self._waiter = None
            waiter.errback(failure_for(error))

    # ------------------------------------------------------------------ application side

    def _take_eof(self) -> None:
        if not self._eof_taken:
            self._eof_taken = True
            self._host.session_eof_consumed(self._token)

    def next_chunk(self) -> Deferred[bytes | None]:
        """The next chunk, or None at the end.

        :returns: a Deferred (already fired when a chunk is waiting); it fails with the
            session's error once the chunks received before it were taken.
        :raises LocalProtocolError: another read is pending.
        """
        if self._waiter is not None or self._collect is not None:
            raise LocalProtocolError("a read of this session's data is already pending")
        if self._chunks:
            chunk = self._chunks.popleft()
            self.buffered -= len(chunk)
            self._host.session_consumed(self._token, len(chunk))
            if not self._chunks and self._eof:
                self._take_eof()
            return succeed(chunk)
        if self._error is not None:
            return fail(failure_for(self._error))
        if self._eof:
            self._take_eof()
            return succeed(None)
        self._waiter = Deferred(self._cancel_next)
        return self._waiter

    def _cancel_next(self, d: Deferred[bytes | None]) -> None:
        if self._waiter is d:
            self._waiter = None

    def __aiter__(self) -> DataReader:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self.next_chunk()
        if chunk is None:
            raise StopAsyncIteration
        return chunk

    def read_all(self) -> Deferred[bytes]:
        """Everything (not yet taken) up to the end, as one ``bytes``.

        :returns: a Deferred; it fails with the session's error. Cancelling it aborts the
            session.
        :raises LocalProtocolError: another read is pending.
        """
        if self._waiter is not None or self._collect is not None:
            raise LocalProtocolError("a read of this session's data is already pending")
        parts = list(self._chunks)
        self._chunks.clear()
        if self.buffered:
            self._host.session_consumed(self._token, self.buffered)
            self.buffered = 0
        if self._error is not None:
            return fail(failure_for(self._error))
        if self._eof:
            self._take_eof()
            return succeed(b"".join(parts))
        self._collect = parts
        self._collected = Deferred(self._cancel_all)
        return self._collected

    def _cancel_all(self, d: Deferred[bytes]) -> None:
        if self._collected is d:
            self._collected = None
            self._collect = None
            canceller = self._canceller() if self._canceller is not None else None
            if canceller is not None:
                canceller()


@implementer(IConsumer)
class DataWriter:
    """The data we send on one session, a Twisted ``IConsumer``.

    :meth:`write` queues and sends what the session's outbound ration allows (in Data
    messages of the configured fragment size); the rest goes out as the peer grants more
    (:meth:`pump`). A registered streaming producer (``IPushProducer``) is paused while
    anything waits in the writer or the transport is full, and resumed when all is sent; a
    pull producer (``IPullProducer``) is asked for more each time all is sent.

    :param host: the protocol.
    :param token: the request this data belongs to (it owns this writer: referred to weakly,
        so that the two make no reference cycle).
    """

    def __init__(self, host: SessionHost, token: object) -> None:
        self._host = host
        self._token_ref = weakref.ref(token)
        self._pending: deque[bytes] = deque()
        self._offset = 0  # bytes of _pending[0] already sent
        self._finishing = False
        self._ack_required = False
        self._eof_sent = False
        self._drained: list[Deferred[None]] = []
        self._error: BaseException | None = None
        self._discarding = False
        #: an IPushProducer when ``_streaming``, else an IPullProducer (IConsumer's contract)
        self._producer: IProducer | None = None
        self._streaming = False
        self._producer_paused = False
        self._pull_call: IDelayedCall | None = None
        self._pumping = False
        self._finished: list[Deferred[None]] = []
        self._pump_queued = False
        #: bytes written and not yet handed to the connection
        self.pending = 0

    def __repr__(self) -> str:
        return (f"<DataWriter pending={self.pending} finishing={self._finishing} "
                f"eof_sent={self._eof_sent} error={self._error!r}>")

    @property
    def _token(self) -> object:
        return self._token_ref()

    @property
    def finished(self) -> bool:
        """eof was sent."""
        return self._eof_sent

    @property
    def closed(self) -> bool:
        """No more data may be written: finished, failed or aborted."""
        return self._finishing or self._error is not None

    # ------------------------------------------------------------------ IConsumer

    def write(self, data: bytes) -> None:
        """Send ``data`` (never blocks: what the ration does not let through waits here).

        Without a registered producer the data is handed to the connection when the protocol
        next writes to its transport (the end of the read being handled, or of this reactor
        turn; :meth:`finish` and an abort hand it at once): a body written and finished in one
        turn goes out with its eof, in one *Data* (River sends a small request as one *Data*
        with open and eof). With a producer it is handed at once, so that the producer is
        paused as soon as the ration is spent.

        :raises LocalProtocolError: after :meth:`finish`.
        :raises SessionAbortedError: the session was aborted (by either side).
        :raises ConnectionTerminatedError: the connection ended.
        """
        if self._discarding:
            return
        if self._error is not None:
            raise fresh_error(self._error)
        if self._finishing:
            raise LocalProtocolError("write() after finish()")
        if not data:
            return
        self._pending.append(bytes(data))
        self.pending += len(data)
        if self._producer is not None:
            self.pump()  # (at once: a producer is paused as soon as the ration is spent)
        elif not self._pump_queued:
            self._pump_queued = True
            self._host.pump_soon(self)

    def writeSequence(self, data: list[bytes]) -> None:  # noqa: N802 - Twisted's name
        """:meth:`write` each of ``data``."""
        for chunk in data:
            self.write(chunk)

    def registerProducer(self, producer: IProducer, streaming: bool) -> None:  # noqa: N802
        """Register the producer that feeds this writer (``IConsumer``).

        :raises RuntimeError: a producer is registered already.
        """
        if self._producer is not None:
            raise RuntimeError(f"a producer is already registered: {self._producer!r}")
        if self._error is not None and not self._discarding:
            producer.stopProducing()
            return
        self._producer = producer
        self._streaming = bool(streaming)
        self._producer_paused = False
        self._update_producer()

    def unregisterProducer(self) -> None:  # noqa: N802
        """Forget the producer (``IConsumer``)."""
        self._producer = None
        call, self._pull_call = self._pull_call, None
        if call is not None and call.active():
            call.cancel()

    # ------------------------------------------------------------------ the end

    def finish(self, ack_required: bool = False) -> None:
        """No more data: eof is sent after what is still waiting (at once if nothing is).
        Calling it again does nothing.

        :param ack_required: server only: ask the client for an *Acknowledgment* once it has
            processed the response (§Data Message, ackRequired).
        :raises SessionAbortedError: the session was aborted.
        """
        if self._discarding or self._finishing:
            return
        if self._error is not None:
            raise fresh_error(self._error)
        self._finishing = True
        self._ack_required = ack_required
        self.pump()

    def when_drained(self) -> Deferred[None]:
        """A Deferred that fires once nothing written waits in the writer any more (all of it
        was handed to the connection: the peer's ration let it through), or fails with the
        error that ended the session. A writer of a large body awaits it between writes to
        hold no more than it must."""
        if not self._pending or self._discarding:
            return succeed(None)
        if self._error is not None:
            return fail(failure_for(self._error))
        d: Deferred[None] = Deferred()
        self._drained.append(d)
        return d

    def notify_finish(self) -> Deferred[None]:
        """A Deferred that fires when eof has been sent (everything written handed to the
        connection), or fails with the error that ended the session first. Nothing is logged
        when nobody asked."""
        if self._eof_sent or self._discarding:
            return succeed(None)
        if self._error is not None:
            return fail(failure_for(self._error))
        d: Deferred[None] = Deferred()
        self._finished.append(d)
        return d

    # ------------------------------------------------------------------ from the protocol

    def run_queued_pump(self) -> None:
        """:meth:`pump`, if a :meth:`write` asked for one that has not run yet (protocol
        side: :meth:`SessionHost.pump_soon`)."""
        if self._pump_queued:
            self.pump()

    def pump(self) -> None:
        """Hand what waits to the connection, as far as the ration and the transport allow
        (protocol side: called on more ration, on a transport that drained, before the
        protocol writes to its transport after a :meth:`write`)."""
        self._pump_queued = False
        if self._pumping or self._error is not None or self._eof_sent:
            return
        host = self._host
        self._pumping = True
        try:
            pushed = 0
            pending = self._pending
            while not host.paused:
                if not pending:
                    if self._finishing:
                        host.session_send(self._token, b"", True, self._ack_required)
                        self._eof_sent = True
                    break
                head = pending[0]
                off = self._offset
                remaining = len(head) - off
                ration = host.session_ration(self._token)
                take = remaining if ration is None else min(remaining, ration)
                if take > PUSH_LIMIT:
                    take = PUSH_LIMIT
                if take <= 0:
                    break
                piece = head if off == 0 and take == len(head) else head[off:off + take]
                last = take == remaining
                eof = self._finishing and last and len(pending) == 1
                n = host.session_send(self._token, piece, eof, eof and self._ack_required)
                if n != take:  # pragma: no cover - the ration said it would fit
                    raise AssertionError(f"sent {n} of {take} bytes")
                self.pending -= n
                if last:
                    pending.popleft()
                    self._offset = 0
                else:
                    self._offset = off + n
                if eof:
                    self._eof_sent = True
                    break
                pushed += n
                if pushed >= PUSH_LIMIT:
                    pushed = 0
                    host.flush(force=True)
        finally:
            self._pumping = False
        host.flush_soon()
        if not pending and self._drained:
            drained, self._drained = self._drained, []
            for d in drained:
                d.callback(None)
        if self._eof_sent:
            self._producer = None
            waiters, self._finished = self._finished, []
            for d in waiters:
                d.callback(None)
        else:
            self._update_producer()

    def producing_resumed(self) -> None:
        """The transport drained: go on (protocol side)."""
        self.pump()

    def _update_producer(self) -> None:
        producer = self._producer
        if producer is None:
            return
        blocked = bool(self._pending) or self._host.paused
        if self._streaming:
            if blocked and not self._producer_paused:
                self._producer_paused = True
                cast(IPushProducer, producer).pauseProducing()
            elif not blocked and self._producer_paused:
                self._producer_paused = False
                cast(IPushProducer, producer).resumeProducing()
        elif not blocked and self._pull_call is None and not self._finishing:
            self._pull_call = self._host.reactor.callLater(
                0, self._pull)

    def _pull(self) -> None:
        self._pull_call = None
        producer = self._producer
        if producer is not None and not self._pending and not self._finishing \
                and self._error is None:
            cast(IPullProducer, producer).resumeProducing()

    def discard(self) -> None:
        """The peer is not interested in the rest (the server's Close before our eof): from
        now on writes are silently dropped, a producer is left to run to its end (protocol
        side, §Close Message)."""
        if self._eof_sent or self._error is not None:
            return
        self._discarding = True
        self._error = LocalProtocolError("the peer closed the session")
        self._pending.clear()
        self.pending = 0
        waiters, self._finished = self._finished + self._drained, []
        self._drained = []
        for d in waiters:
            d.callback(None)
        producer = self._producer
        if producer is not None and self._streaming and self._producer_paused:
            self._producer_paused = False
            cast(IPushProducer, producer).resumeProducing()

    def fail(self, error: BaseException) -> None:
        """The session ended abnormally (protocol side): later writes raise ``error``, the
        producer is stopped, :meth:`notify_finish` waiters fail."""
        if self._eof_sent or self._error is not None:
            return
        self._error = error
        self._pending.clear()
        self.pending = 0
        producer, self._producer = self._producer, None
        waiters, self._finished = self._finished + self._drained, []
        self._drained = []
        for d in waiters:
            d.errback(failure_for(error))
        if producer is not None:
            try:
                producer.stopProducing()
            except Exception:  # noqa: BLE001 - a producer's bug must not break the protocol
                _log.failure("stopProducing() of {producer!r} failed", producer=producer)
