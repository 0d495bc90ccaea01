"""The sans-IO Reactive Streams network connection (seed ``003``; wire format in
``docs/rsnet.rst``).

One :class:`RSNetConnection` is one end (client or server) of one connection. Bytes come in
through :meth:`~RSNetConnection.receive_data`, which returns :mod:`events
<rsocket_tx.rsnet.events>`; what the connection has to send is taken with
:meth:`~RSNetConnection.chunks_to_send` (one chunk per message) or
:meth:`~RSNetConnection.data_to_send`. Time is passed in (seconds); nothing here reads a clock
or does I/O.

The protocol is symmetric: either end subscribes to the other's publishers. Each end keeps
two tables, one per id space, told apart by the direction of the message:

- *subscriptions* (we subscribed; ids chosen by us): our *subscribe*, *request*, *cancel*
  go out, the peer's *onSubscribe*, *onNext* (and packed, and parts), *onComplete*, *onError*
  come in;
- *publications* (the peer subscribed to one of our publishers; ids chosen by the peer): the
  peer's *subscribe*, *request*, *cancel* come in, our *onSubscribe*, *onNext*, ... go out.

The rules, as this module enforces them (broken by the peer: a protocol violation, *goodbye*
with the reason queued, :class:`~rsocket_tx.rsnet.events.ConnectionClosed`; broken by our
caller: :class:`~rsocket_tx.rsnet.errors.LocalProtocolError`, nothing sent):

- Hello (draft §Protocol negotiation): each side's first message is its hello (the client's
  clientHello, the server's serverHello); the server sends its own at once (it speaks only
  version 0, so it need not wait), the client may send more messages right after its own. A
  message before the peer's hello is a violation, except *goodbye*. A hello of another version
  is answered with *goodbye* and the connection closes: the messages we sent before it count
  as discarded (our subscriptions end with *onError*). The extensions in use are the
  intersection of both lists.
- Reactive Streams §1.9: a publisher answers every *subscribe* with *onSubscribe* before
  anything else for it (also to refuse: *onSubscribe* then *onError*).
- §1.1: an *onNext* (each element of an *onNextPacked*, each split element) uses one unit of
  demand; one beyond the demand is a violation.
- §3.17: demand is cumulative; it saturates at 2^63-1, which then means unbounded.
- §3.9: a *request* of 0 (the wire cannot carry a negative one) is answered with *onError* on
  that subscription, which ends; the connection stays up.
- §1.7, §3.6, §3.12: after *onComplete*/*onError* nothing more comes for a subscription;
  after our *cancel* nothing more is delivered for it.
- Id reuse (draft §The Reactive Streams core protocol): the subscriber may reuse an id after
  it sent *cancel* or received *onComplete*/*onError*; we reuse the lowest free id. After a
  cancel the publisher may still send messages it sent before it saw the cancel, and after a
  reuse those come before the *onSubscribe* answering the new *subscribe*: we count, per id,
  the *onSubscribe* messages owed to older subscriptions, and drop every message of that id
  until the new subscription's own *onSubscribe* arrives.
- The publisher side answers every *subscribe* with exactly one *onSubscribe*, also when the
  *cancel* came before our caller answered (then the connection sends it, with elementSize
  0, and nothing else). It frees an id when it receives *cancel* (or sends a terminal
  signal): the peer's next *subscribe* with that id is a new subscription. A *subscribe* for
  an id that is still open is a violation. A *request* or *cancel* for an id with no open
  subscription is ignored: it crossed our *onComplete*/*onError*.
- Split elements (draft §Split messaging): one split element at a time per subscription; the
  parts of another element, an *onNext* or *onNextPacked* before the last part, or an
  *onComplete* in the middle are violations (an *onError* discards the partial element). The
  element uses its unit of demand at its first part. Bounded by ``max_reassembled_size`` per
  element and ``reassembly_budget`` per connection.
- Goodbye (draft §Closing the connection): ends every subscription, both directions; the
  receiver answers with *goodbyeAck* and the connection is over; the sender waits for the
  *goodbyeAck* (a crossing *goodbye* counts too) up to ``goodbye_timeout``, ignoring anything
  else. A violation is answered with *goodbye* and the connection closes at once.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Sequence
from typing import ClassVar

from ..mux import (
    Credit,
    CreditExceeded,
    CreditUnit,
    Deadlines,
    MuxStream,
    Outbox,
    PeerChosenIds,
    Reassembler,
    ReassemblyBudget,
    ReassemblyLimitExceeded,
    StreamLimitExceeded,
    StreamTable,
)
from . import codec as C
from .config import MAX_ID, MAX_LONG, RSNetConfig
from .errors import LocalProtocolError, ProtocolError
from .events import (
    CancelReceived,
    ConnectionClosed,
    Event,
    HelloReceived,
    OnCompleteReceived,
    OnErrorReceived,
    OnNextReceived,
    OnSubscribeReceived,
    RequestReceived,
    SubscribeReceived,
)

__all__ = ["Role", "ConnectionState", "SubscriptionState", "Subscription", "Publication",
           "RSNetConnection"]


class Role(enum.Enum):
    """Which end of the connection: the client opened it (and sends clientHello)."""

    CLIENT = "client"
    SERVER = "server"


class ConnectionState(enum.Enum):
    """The connection's own state."""

    #: waiting for the peer's hello (our own is sent)
    HELLO = "hello"
    OPEN = "open"
    #: we sent goodbye and wait for its answer
    CLOSING = "closing"
    #: over: nothing more is sent (except what is queued) or delivered
    CLOSED = "closed"


class SubscriptionState(enum.Enum):
    """A subscription we made."""

    #: subscribe sent, our onSubscribe not yet received
    SUBSCRIBING = "subscribing"
    #: onSubscribe received
    ACTIVE = "active"


_HELLO = "hello"
_GOODBYE = "goodbye"


def _demand(initial: int = 0) -> Credit:
    credit = Credit(CreditUnit.ITEMS, 0, MAX_LONG)
    _grant(credit, initial)
    return credit


def _grant(credit: Credit, n: int) -> None:
    """Add ``n`` to a demand, saturating at 2^63-1, which means unbounded (§3.17)."""
    credit.grant_saturating(n)
    if credit.available == MAX_LONG:
        credit.unlimited = True


def _outstanding(credit: Credit) -> int:
    return MAX_LONG if credit.unlimited else credit.available


class Subscription(MuxStream):
    """A subscription we made (subscriber side).

    :ivar publisher: the publisher's name.
    :ivar state: :class:`SubscriptionState`.
    :ivar demand: what we requested and did not receive yet (items :class:`~rsocket_tx.mux.Credit`).
    :ivar element_size: the ``elementSize`` of our onSubscribe (0 before it, or varying sizes).
    :ivar wire_size: the ``elementSize`` in force on the wire for this id (that of the last
        onSubscribe received for it, an older subscription's included).
    :ivar stale: onSubscribe messages still owed to older subscriptions with this id.
    :ivar after_cancel: the id's previous subscription ended with our cancel: messages before
        our onSubscribe are the old one's, dropped.
    """

    __slots__ = ("publisher", "state", "demand", "element_size", "wire_size", "stale",
                 "after_cancel", "reassembler", "part_element")

    def __init__(self, subscriber_id: int, publisher: str, demand: Credit, reassembler:
                 Reassembler) -> None:
        super().__init__(subscriber_id)
        self.publisher = publisher
        self.state = SubscriptionState.SUBSCRIBING
        self.demand = demand
        self.element_size = 0
        self.wire_size = 0
        self.stale = 0
        self.after_cancel = False
        self.reassembler = reassembler
        #: the element id of the split element in progress, or None
        self.part_element: int | None = None


class Publication(MuxStream):
    """A subscription the peer made to one of our publishers (publisher side).

    :ivar publisher: the publisher's name.
    :ivar demand: what the peer requested and we have not sent yet.
    :ivar subscribed: we sent onSubscribe.
    :ivar element_size: the ``elementSize`` we declared.
    """

    __slots__ = ("publisher", "demand", "subscribed", "element_size", "next_element")

    def __init__(self, subscriber_id: int, publisher: str, demand: Credit) -> None:
        super().__init__(subscriber_id)
        self.publisher = publisher
        self.demand = demand
        self.subscribed = False
        self.element_size = 0
        self.next_element = 0


class _Drain:
    """An id whose subscription we cancelled and did not reuse yet."""

    __slots__ = ("stale", "wire_size")

    def __init__(self, stale: int, wire_size: int) -> None:
        self.stale = stale
        self.wire_size = wire_size


def _truncate(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


class RSNetConnection:
    """One end of a Reactive Streams network connection, without I/O.

    Our hello is queued at construction (client: clientHello, server: serverHello). Call
    :meth:`initiate_connection` with the time to start ``config.hello_timeout``.

    :param role: :attr:`Role.CLIENT` (opened the connection) or :attr:`Role.SERVER`.
    :param config: the settings (:class:`~rsocket_tx.rsnet.config.RSNetConfig`; default the
        defaults).
    """

    def __init__(self, role: Role, config: RSNetConfig | None = None) -> None:
        self.role = role
        self.config = config = config if config is not None else RSNetConfig()
        self.state = ConnectionState.HELLO
        self._client = role is Role.CLIENT
        self._decoder = C.MessageDecoder(config)
        self._outbox = Outbox()
        self._deadlines: Deadlines[str] = Deadlines()
        self._budget = ReassemblyBudget(config.reassembly_budget)
        self._subs: StreamTable[Subscription] = StreamTable(0)
        self._pubs: StreamTable[Publication] = StreamTable(config.max_peer_subscriptions)
        self._peer_ids = PeerChosenIds(MAX_ID)
        self._free_ids: list[int] = []  # a heap of released ids below _next_id
        self._next_id = 0
        self._draining: dict[int, _Drain] = {}
        self._closing_sizes: dict[int, int] = {}
        #: the peer's protocol version, once its hello arrived
        self.peer_version: int | None = None
        #: the extensions both sides support (empty until the peer's hello)
        self.extensions: frozenset[int] = frozenset()
        #: why the connection ended (None while it has not)
        self.closed_reason: str | None = None
        hello = C.ClientHello if self._client else C.ServerHello
        self._send(hello(C.VERSION, config.extensions))

    # ---------------------------------------------------------------------------------------
    # properties

    @property
    def is_open(self) -> bool:
        """True until the connection is closed (during the hello and the goodbye too)."""
        return self.state is not ConnectionState.CLOSED

    @property
    def bytes_to_send(self) -> int:
        """Bytes queued and not yet taken."""
        return self._outbox.nbytes

    @property
    def subscriptions(self) -> list[int]:
        """The ids of our open subscriptions (subscriber side)."""
        return self._subs.ids()

    @property
    def publications(self) -> list[int]:
        """The ids of the peer's open subscriptions to our publishers (publisher side)."""
        return self._pubs.ids()

    def subscription(self, subscriber_id: int) -> Subscription | None:
        """Our subscription with this id (read-only use), or None."""
        return self._subs.get(subscriber_id)

    def publication(self, subscriber_id: int) -> Publication | None:
        """The peer's subscription with this id (read-only use), or None."""
        return self._pubs.get(subscriber_id)

    def is_publishing(self, subscriber_id: int) -> bool:
        """Whether ``subscriber_id`` is an open subscription of the peer to our publishers."""
        return subscriber_id in self._pubs

    def demand(self, subscriber_id: int) -> int:
        """Publisher side: the elements we may still send on the subscription (2^63-1 means
        unbounded); 0 when there is no such subscription."""
        p = self._pubs.get(subscriber_id)
        return 0 if p is None else _outstanding(p.demand)

    # ---------------------------------------------------------------------------------------
    # I/O side

    def initiate_connection(self, now: float) -> None:
        """Start ``config.hello_timeout`` at ``now`` (seconds)."""
        if self.state is ConnectionState.HELLO:
            self._deadlines.set(_HELLO, now + self.config.hello_timeout / 1000)

    def chunks_to_send(self) -> list[bytes]:
        """Take the bytes queued for the transport, in order: one whole message per chunk (over
        WebSocket, one message per WebSocket message)."""
        return self._outbox.drain()

    def data_to_send(self) -> bytes:
        """Take the bytes queued for the transport, joined."""
        return b"".join(self._outbox.drain())

    def next_deadline(self) -> float | None:
        """When :meth:`tick` should be called next (seconds), or None."""
        if self.state is ConnectionState.CLOSED:
            return None
        return self._deadlines.next()

    def tick(self, now: float) -> list[Event]:
        """Run the timers due at ``now`` (seconds): the hello timeout (*goodbye* and close), the
        goodbye timeout (close).

        :returns: the events (ending with :class:`~rsocket_tx.rsnet.events.ConnectionClosed`
            when a timer ended the connection).
        """
        if self.state is ConnectionState.CLOSED:
            return []
        for key in self._deadlines.pop_expired(now):
            if key == _HELLO and self.state is ConnectionState.HELLO:
                return self._violation(f"no hello from the {self._peer_name} within "
                                       f"{self.config.hello_timeout} ms")
            if key == _GOODBYE and self.state is ConnectionState.CLOSING:
                return self._close(f"no answer to our goodbye within "
                                   f"{self.config.goodbye_timeout} ms", by_peer=False)
        return []

    def receive_data(self, data: bytes, now: float = 0.0) -> list[Event]:
        """Process bytes received from the peer (cut anywhere).

        :param data: the bytes.
        :param now: the time, in seconds (unused: no timer depends on received data).
        :returns: the events, in order. A protocol violation by the peer queues *goodbye* and
            ends the list with :class:`~rsocket_tx.rsnet.events.ConnectionClosed`
            (``goodbye_sent`` True); what is queued must still be written. Never raises.
        """
        if self.state is ConnectionState.CLOSED:
            return []
        decoder = self._decoder
        decoder.receive_data(data)
        events: list[Event] = []
        size = self._element_size
        try:
            while self.is_open:
                message = decoder.next_message(size)
                if message is None:
                    break
                self._dispatch(message, events)
        except ProtocolError as exc:
            if self.state is ConnectionState.CLOSING:
                events += self._close(f"after our goodbye, the {self._peer_name} sent bytes "
                                      f"that are no message: {exc}", by_peer=False)
            else:
                events += self._violation(str(exc))
        return events

    def receive_frame(self, frame: bytes, now: float = 0.0) -> list[Event]:
        """Bytes of one message-transport message (WebSocket): the same as
        :meth:`receive_data` (a message may hold several protocol messages, or part of one)."""
        return self.receive_data(frame, now)

    def connection_lost(self, why: str = "connection lost") -> list[Event]:
        """The transport is gone.

        :returns: the subscriptions' ends, then
            :class:`~rsocket_tx.rsnet.events.ConnectionClosed` (``by_peer`` True); nothing if
            the connection had already closed.
        """
        if self.state is ConnectionState.CLOSED:
            return []
        return self._close(why, by_peer=True)

    # ---------------------------------------------------------------------------------------
    # application side: subscriber

    def subscribe(self, publisher: str, initial_demand: int = 0) -> int:
        """Subscribe to the peer's publisher ``publisher`` (*subscribe*).

        :param publisher: the publisher's name (the peer parses it); at most
            ``config.max_string_length`` bytes of UTF-8.
        :param initial_demand: elements requested at once, in [0, 2^63-1] (more is clamped:
            §3.17).
        :returns: the subscriber id (the lowest free one).
        :raises LocalProtocolError: the connection is closing or closed, the name is too long,
            ``initial_demand`` < 0, or every id up to 2^32-1 is in use.
        """
        self._check_sending()
        if initial_demand < 0:
            raise LocalProtocolError(f"initial demand must be at least 0, got {initial_demand}")
        if len(publisher.encode("utf-8")) > self.config.max_string_length:
            raise LocalProtocolError(f"publisher name over max_string_length "
                                     f"({self.config.max_string_length} bytes)")
        initial_demand = min(initial_demand, MAX_LONG)
        sid = self._allocate_id()
        s = Subscription(sid, publisher, _demand(initial_demand),
                         Reassembler(self.config.max_reassembled_size, self._budget))
        drain = self._draining.pop(sid, None)
        if drain is not None:
            s.stale = drain.stale
            s.wire_size = drain.wire_size
            s.after_cancel = True
        self._subs.add(s, remote=False)
        self._send(C.Subscribe(publisher, sid, initial_demand))
        return sid

    def request(self, subscriber_id: int, n: int) -> None:
        """Request ``n`` more elements (*request*; cumulative, saturating at 2^63-1: §3.17).

        :param n: at least 1 (more than 2^63-1 is clamped).
        :raises LocalProtocolError: ``n`` < 1 (Reactive Streams §3.9 forbids it), no such open
            subscription, or the connection is closing or closed.
        """
        self._check_sending()
        if n < 1:
            raise LocalProtocolError(f"request(n) needs n >= 1 (Reactive Streams §3.9), got {n}")
        s = self._subs.get(subscriber_id)
        if s is None:
            raise LocalProtocolError(f"no open subscription {subscriber_id}")
        n = min(n, MAX_LONG)
        _grant(s.demand, n)
        self._send(C.Request(subscriber_id, n))

    def cancel(self, subscriber_id: int) -> None:
        """Cancel our subscription (*cancel*): nothing more is delivered for it (§3.6, §3.12)
        and its id is free at once. A subscription that already ended (or a closing or
        closed connection) is a no-op (§3.5, §3.7)."""
        if self.state is ConnectionState.CLOSING or self.state is ConnectionState.CLOSED:
            return
        s = self._subs.remove(subscriber_id)
        if s is None:
            return
        self._send(C.Cancel(subscriber_id))
        s.reassembler.discard()
        owed = s.stale + (1 if s.state is SubscriptionState.SUBSCRIBING else 0)
        self._draining[subscriber_id] = _Drain(owed, s.wire_size)
        self._free_id(subscriber_id)

    # ---------------------------------------------------------------------------------------
    # application side: publisher

    def on_subscribe(self, subscriber_id: int, element_size: int = 0) -> None:
        """Accept the peer's subscription (*onSubscribe*, the answer to
        :class:`~rsocket_tx.rsnet.events.SubscribeReceived`).

        :param element_size: 0 (elements of any size), or the size in bytes of every element
            (draft §Packed messaging: *onNext* then carries no length, and
            :meth:`on_next_packed` may be used); at most 2^30.
        :raises LocalProtocolError: no such subscription, onSubscribe already sent, a bad
            ``element_size``, or the connection is closing or closed.
        """
        p = self._publication(subscriber_id)
        if p.subscribed:
            raise LocalProtocolError(f"onSubscribe was already sent for {subscriber_id}")
        if not 0 <= element_size <= 2**30:
            raise LocalProtocolError(f"element_size must be in [0, 2^30] bytes, got "
                                     f"{element_size}")
        p.subscribed = True
        p.element_size = element_size
        self._send(C.OnSubscribe(subscriber_id, element_size))

    def on_next(self, subscriber_id: int, element: bytes) -> None:
        """Send one element (*onNext*), using one unit of demand (§1.1). With ``elementSize``
        0, an element longer than ``config.max_part_size`` is split into *onNextPart*
        messages and an *onNextLastPart* (draft §Split messaging).

        :raises LocalProtocolError: no such subscription, no onSubscribe sent yet, no demand
            left (Reactive Streams §1.1), an element not of the declared ``elementSize``, or
            the connection is closing or closed.
        """
        p = self._publication(subscriber_id)
        self._check_next(p, 1)
        size = p.element_size
        if size:
            if len(element) != size:
                raise LocalProtocolError(f"an element of {len(element)} bytes on subscription "
                                         f"{subscriber_id}, whose elementSize is {size}")
            p.demand.consume(1)
            self._outbox.append(C.encode(C.OnNext(subscriber_id, element), size))
            return
        p.demand.consume(1)
        part = self.config.max_part_size
        if len(element) <= part:
            self._send(C.OnNext(subscriber_id, element))
            return
        eid = p.next_element
        p.next_element = 0 if eid == MAX_ID else eid + 1
        view = memoryview(element)
        last = (len(element) - 1) // part * part
        for pos in range(0, last, part):
            self._send(C.OnNextPart(subscriber_id, eid, bytes(view[pos:pos + part])))
        self._send(C.OnNextLastPart(subscriber_id, eid, bytes(view[last:])))

    def on_next_packed(self, subscriber_id: int, elements: Sequence[bytes]) -> None:
        """Send several elements of the subscription's fixed ``elementSize`` in *onNextPacked*
        messages (at most ``config.max_part_size`` bytes of elements each, at least one
        element), using one unit of demand each.

        :raises LocalProtocolError: ``elementSize`` is 0, an element is not of that size, not
            enough demand (§1.1), no such subscription or onSubscribe not sent, or the
            connection is closing or closed.
        """
        p = self._publication(subscriber_id)
        size = p.element_size
        if not size:
            raise LocalProtocolError(f"onNextPacked needs a fixed elementSize; subscription "
                                     f"{subscriber_id} has none")
        count = len(elements)
        if count == 0:
            return
        self._check_next(p, count)
        for element in elements:
            if len(element) != size:
                raise LocalProtocolError(f"an element of {len(element)} bytes on subscription "
                                         f"{subscriber_id}, whose elementSize is {size}")
        p.demand.consume(count)
        per = max(1, self.config.max_part_size // size)
        for i in range(0, count, per):
            chunk = elements[i:i + per]
            self._outbox.append(C.encode(
                C.OnNextPacked(subscriber_id, len(chunk), b"".join(chunk)), size))

    def on_complete(self, subscriber_id: int) -> None:
        """End the subscription successfully (*onComplete*); the id is the peer's to reuse.
        Sends *onSubscribe* (``elementSize`` 0) first if it was not sent.

        :raises LocalProtocolError: no such subscription, or the connection is closing or
            closed.
        """
        p = self._publication(subscriber_id)
        if not p.subscribed:
            self._send(C.OnSubscribe(subscriber_id, 0))
        self._send(C.OnComplete(subscriber_id))
        self._end_publication(p)

    def on_error(self, subscriber_id: int, error: str) -> None:
        """End the subscription with an error (*onError*; cut to ``config.max_string_length``
        bytes). Sends *onSubscribe* (``elementSize`` 0) first if it was not sent: that is how a
        subscribe is refused (Reactive Streams §1.9).

        :raises LocalProtocolError: no such subscription, or the connection is closing or
            closed.
        """
        p = self._publication(subscriber_id)
        if not p.subscribed:
            self._send(C.OnSubscribe(subscriber_id, 0))
        self._send(C.OnError(subscriber_id, _truncate(error, self.config.max_string_length)))
        self._end_publication(p)

    # ---------------------------------------------------------------------------------------
    # application side: the connection

    def goodbye(self, reason: str = "", now: float | None = None) -> list[Event]:
        """Close the connection in order (*goodbye*, draft §Closing the connection): every
        subscription ends now, both directions; the connection then waits for the peer's
        *goodbyeAck* (or a crossing *goodbye*), ignoring anything else, and reports
        :class:`~rsocket_tx.rsnet.events.ConnectionClosed`. A no-op once closing or closed.

        :param reason: why (cut to ``config.max_string_length`` bytes).
        :param now: the time in seconds: starts ``config.goodbye_timeout`` (None: no timer).
        :returns: the subscriptions' ends (:class:`~rsocket_tx.rsnet.events.CancelReceived`,
            :class:`~rsocket_tx.rsnet.events.OnErrorReceived`, ``by_peer`` False).
        """
        if self.state is ConnectionState.CLOSING or self.state is ConnectionState.CLOSED:
            return []
        reason = _truncate(reason, self.config.max_string_length)
        self._send(C.Goodbye(reason))
        sizes = {sid: d.wire_size for sid, d in self._draining.items()}
        sizes.update((s.stream_id, s.wire_size) for s in self._subs)
        self._closing_sizes = sizes
        self.state = ConnectionState.CLOSING
        self._deadlines.cancel(_HELLO)
        if now is not None:
            self._deadlines.set(_GOODBYE, now + self.config.goodbye_timeout / 1000)
        why = f"goodbye: {reason}" if reason else "goodbye"
        return self._end_streams(why, by_peer=False)

    # ---------------------------------------------------------------------------------------
    # internals

    @property
    def _peer_name(self) -> str:
        return "server" if self._client else "client"

    def _send(self, message: C.Message) -> None:
        self._outbox.append(C.encode(message))

    def _check_sending(self) -> None:
        if self.state is ConnectionState.CLOSING or self.state is ConnectionState.CLOSED:
            raise LocalProtocolError(f"the connection is {self.state.value}: nothing more may "
                                     f"be sent")

    def _publication(self, subscriber_id: int) -> Publication:
        self._check_sending()
        p = self._pubs.get(subscriber_id)
        if p is None:
            raise LocalProtocolError(f"no open subscription {subscriber_id} to our publishers")
        return p

    def _check_next(self, p: Publication, n: int) -> None:
        if not p.subscribed:
            raise LocalProtocolError(f"onSubscribe must come first on subscription "
                                     f"{p.stream_id} (Reactive Streams §1.9)")
        if not p.demand.unlimited and p.demand.available < n:
            raise LocalProtocolError(
                f"{n} elements on subscription {p.stream_id} exceed its demand of "
                f"{p.demand.available} (Reactive Streams §1.1)")

    def _end_publication(self, p: Publication) -> None:
        self._pubs.remove(p.stream_id)
        self._peer_ids.release(p.stream_id)

    def _allocate_id(self) -> int:
        if self._free_ids:
            return heapq.heappop(self._free_ids)
        sid = self._next_id
        if sid > MAX_ID:
            raise LocalProtocolError(f"every subscriber id up to {MAX_ID} is in use")
        self._next_id = sid + 1
        return sid

    def _free_id(self, sid: int) -> None:
        heapq.heappush(self._free_ids, sid)

    def _element_size(self, sid: int) -> int:
        s = self._subs.get(sid)
        if s is not None:
            return s.wire_size
        d = self._draining.get(sid)
        if d is not None:
            return d.wire_size
        if self.state is ConnectionState.CLOSING:
            return self._closing_sizes.get(sid, 0)
        return 0

    def _violation(self, reason: str) -> list[Event]:
        """The peer broke the protocol: goodbye with the reason, close at once."""
        self._send(C.Goodbye(_truncate(reason, self.config.max_string_length)))
        return self._close(reason, by_peer=False, goodbye_sent=True)

    def _end_streams(self, why: str, by_peer: bool) -> list[Event]:
        events: list[Event] = []
        for p in self._pubs.clear():
            events.append(CancelReceived(p.stream_id, why, by_peer))
        self._peer_ids = PeerChosenIds(MAX_ID)
        for s in self._subs.clear():
            s.reassembler.discard()
            events.append(OnErrorReceived(s.stream_id, why, by_peer=False))
        self._draining.clear()
        return events

    def _close(self, reason: str, by_peer: bool, goodbye_sent: bool = False) -> list[Event]:
        events = self._end_streams(reason, by_peer)
        self.state = ConnectionState.CLOSED
        self.closed_reason = reason
        self._deadlines = Deadlines()
        self._closing_sizes = {}
        events.append(ConnectionClosed(reason, by_peer, goodbye_sent))
        return events

    # ---------------------------------------------------------------------------------------
    # internals: received messages

    def _dispatch(self, m: C.Message, events: list[Event]) -> None:
        state = self.state
        if state is ConnectionState.OPEN:
            handler = self._handlers.get(type(m))
            if handler is None:  # a hello, a goodbyeAck
                raise ProtocolError(self._unexpected(m))
            handler(self, m, events)
            return
        if isinstance(m, C.Goodbye):
            self._on_goodbye(m, events)
            return
        if state is ConnectionState.CLOSING:
            if isinstance(m, C.GoodbyeAck):
                events += self._close("goodbye acknowledged", by_peer=True)
            return  # anything else crossed our goodbye: ignored
        # HELLO
        expected = C.ServerHello if self._client else C.ClientHello
        if not isinstance(m, expected):
            raise ProtocolError(f"{type(m).__name__} before the {self._peer_name}'s hello "
                                f"(its first message must be its "
                                f"{'serverHello' if self._client else 'clientHello'})")
        self._deadlines.cancel(_HELLO)
        if m.version != C.VERSION:
            reason = (f"unsupported protocol version {m.version}: this side speaks version "
                      f"{C.VERSION}; the messages sent before this hello are discarded")
            events += self._violation(reason)
            return
        self.state = ConnectionState.OPEN
        self.peer_version = m.version
        self.extensions = frozenset(m.extensions) & frozenset(self.config.extensions)
        events.append(HelloReceived(m.version, m.extensions, self.extensions))

    def _unexpected(self, m: C.Message) -> str:
        if isinstance(m, C.GoodbyeAck):
            return "goodbyeAck without a goodbye"
        return f"a second hello ({type(m).__name__})"

    def _on_goodbye(self, m: C.Goodbye, events: list[Event]) -> None:
        self._send(C.GoodbyeAck())
        why = f"the {self._peer_name} said goodbye"
        events += self._close(f"{why}: {m.reason}" if m.reason else why, by_peer=True)

    # publisher side ------------------------------------------------------------------------

    def _on_subscribe(self, m: C.Subscribe, events: list[Event]) -> None:
        sid = m.subscriber
        if sid in self._pubs:
            raise ProtocolError(f"subscribe for subscriber {sid}, which is still open (an id "
                                f"may be reused only after cancel, onComplete or onError)")
        self._peer_ids.claim(sid)
        p = Publication(sid, m.publisher, _demand(m.initial_demand))
        try:
            self._pubs.add(p, remote=True)
        except StreamLimitExceeded as exc:
            # refused, the connection stays up (Reactive Streams §1.9: onSubscribe first)
            self._peer_ids.release(sid)
            self._send(C.OnSubscribe(sid, 0))
            self._send(C.OnError(sid, f"subscription refused: {exc.message} "
                                      f"(max_peer_subscriptions)"))
            return
        events.append(SubscribeReceived(sid, m.publisher, _outstanding(p.demand)))

    def _on_request(self, m: C.Request, events: list[Event]) -> None:
        p = self._pubs.get(m.subscriber)
        if p is None:
            return  # crossed our onComplete/onError
        if m.demand == 0:
            # Reactive Streams §3.9: the publisher signals onError; the subscription ends
            why = (f"request(0) on subscription {m.subscriber}: Reactive Streams §3.9 "
                   f"requires n > 0")
            if not p.subscribed:
                self._send(C.OnSubscribe(m.subscriber, 0))
            self._send(C.OnError(m.subscriber, why))
            self._end_publication(p)
            events.append(CancelReceived(m.subscriber, why, by_peer=True))
            return
        _grant(p.demand, m.demand)
        events.append(RequestReceived(m.subscriber, m.demand, _outstanding(p.demand)))

    def _on_cancel(self, m: C.Cancel, events: list[Event]) -> None:
        p = self._pubs.get(m.subscriber)
        if p is None:
            return  # crossed our onComplete/onError
        if not p.subscribed:
            # every subscribe is answered with exactly one onSubscribe, even once cancelled:
            # the subscriber counts them to tell a reused id's old messages from the new ones
            self._send(C.OnSubscribe(m.subscriber, 0))
        self._end_publication(p)
        events.append(CancelReceived(m.subscriber))

    # subscriber side -----------------------------------------------------------------------

    def _active(self, sid: int, m: C.Message) -> Subscription | None:
        """Our subscription a <-- message is for, once its onSubscribe arrived; None when the
        message is to be dropped (it belongs to an older subscription we cancelled)."""
        s = self._subs.get(sid)
        if s is None:
            d = self._draining.get(sid)
            if d is None:
                raise ProtocolError(f"{_name(m)} for subscriber {sid}, which has no "
                                    f"subscription")
            if isinstance(m, C.OnSubscribe):
                if not d.stale:
                    raise ProtocolError(f"onSubscribe for subscriber {sid}, which has no "
                                        f"subscription (and owes it no onSubscribe)")
                d.stale -= 1
                d.wire_size = m.element_size
            elif isinstance(m, C.OnComplete | C.OnError) and not d.stale:
                del self._draining[sid]  # the old subscription is over: nothing more comes
            return None
        if s.state is SubscriptionState.ACTIVE:
            return s
        if isinstance(m, C.OnSubscribe):
            if s.stale:  # owed to an older subscription with this id
                s.stale -= 1
                s.wire_size = m.element_size
                return None
            return s
        if s.stale or s.after_cancel:
            return None  # the older subscription's, sent before it saw our cancel
        raise ProtocolError(f"{_name(m)} for subscriber {sid} before its onSubscribe "
                            f"(Reactive Streams §1.9)")

    def _on_on_subscribe(self, m: C.OnSubscribe, events: list[Event]) -> None:
        s = self._active(m.subscriber, m)
        if s is None:
            return
        if s.state is SubscriptionState.ACTIVE:
            raise ProtocolError(f"a second onSubscribe for subscriber {m.subscriber}")
        s.state = SubscriptionState.ACTIVE
        s.element_size = s.wire_size = m.element_size
        s.after_cancel = False
        events.append(OnSubscribeReceived(m.subscriber, m.element_size))

    def _consume(self, s: Subscription, n: int, what: str) -> None:
        try:
            s.demand.consume(n)
        except CreditExceeded:
            raise ProtocolError(f"{what} on subscriber {s.stream_id} beyond its demand of "
                                f"{s.demand.available} (Reactive Streams §1.1)") from None

    def _check_no_part(self, s: Subscription, what: str) -> None:
        if s.part_element is not None:
            raise ProtocolError(f"{what} on subscriber {s.stream_id} while element "
                                f"{s.part_element} is split and its last part has not come")

    def _on_on_next(self, m: C.OnNext, events: list[Event]) -> None:
        s = self._active(m.subscriber, m)
        if s is None:
            return
        self._check_no_part(s, "onNext")
        self._consume(s, 1, "onNext")
        events.append(OnNextReceived(m.subscriber, m.element))

    def _on_on_next_packed(self, m: C.OnNextPacked, events: list[Event]) -> None:
        s = self._active(m.subscriber, m)
        if s is None:
            return
        self._check_no_part(s, "onNextPacked")
        self._consume(s, m.count, f"onNextPacked of {m.count} elements")
        sid = m.subscriber
        events.extend(OnNextReceived(sid, e) for e in C.split_packed(m))

    def _on_part(self, m: C.OnNextPart | C.OnNextLastPart, events: list[Event]) -> None:
        s = self._active(m.subscriber, m)
        if s is None:
            return
        last = isinstance(m, C.OnNextLastPart)
        if s.part_element is None:
            self._consume(s, 1, "a split element")
            if last:
                self._deliver_joined(s, m.data, events)
                return
            s.part_element = m.element
        elif s.part_element != m.element:
            raise ProtocolError(f"{_name(m)} of element {m.element} on subscriber "
                                f"{s.stream_id} while element {s.part_element} is not "
                                f"finished (one split element at a time)")
        try:
            s.reassembler.append(m.data)
        except ReassemblyLimitExceeded as exc:
            setting = ("max_reassembled_size" if exc.limit == s.reassembler.max_size
                       and exc.size > exc.limit else "reassembly_budget")
            raise ProtocolError(f"split element {m.element} on subscriber {s.stream_id}: "
                                f"{exc.message} ({setting})") from None
        if last:
            s.part_element = None
            self._deliver_joined(s, s.reassembler.finish(), events)

    def _deliver_joined(self, s: Subscription, element: bytes, events: list[Event]) -> None:
        if s.element_size and len(element) != s.element_size:
            raise ProtocolError(f"a split element of {len(element)} bytes on subscriber "
                                f"{s.stream_id}, whose elementSize is {s.element_size}")
        events.append(OnNextReceived(s.stream_id, element))

    def _on_terminal(self, m: C.OnComplete | C.OnError, events: list[Event]) -> None:
        s = self._active(m.subscriber, m)
        if s is None:
            return
        sid = m.subscriber
        if isinstance(m, C.OnComplete):
            self._check_no_part(s, "onComplete")
            events.append(OnCompleteReceived(sid))
        else:
            events.append(OnErrorReceived(sid, m.error))
        s.reassembler.discard()
        s.part_element = None
        self._subs.remove(sid)
        self._free_id(sid)


    _handlers: ClassVar[dict[type[C.Message], Callable[..., None]]] = {
        C.Subscribe: _on_subscribe,
        C.Request: _on_request,
        C.Cancel: _on_cancel,
        C.OnSubscribe: _on_on_subscribe,
        C.OnNext: _on_on_next,
        C.OnNextPacked: _on_on_next_packed,
        C.OnNextPart: _on_part,
        C.OnNextLastPart: _on_part,
        C.OnComplete: _on_terminal,
        C.OnError: _on_terminal,
        C.Goodbye: _on_goodbye,
    }


def _name(m: C.Message) -> str:
    name = type(m).__name__
    return name[0].lower() + name[1:]
