"""Events returned by :class:`~rsocket_tx.rsnet.connection.RSNetConnection`.

Each event is a slotted dataclass; the Twisted layer dispatches on ``type(event)``. The
*publisher side* events concern subscriptions the peer made to our publishers (ids chosen by
the peer); the *subscriber side* events concern subscriptions we made (ids chosen by us). The
two id spaces are separate: the same number may name one subscription of each.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Event",
    "HelloReceived",
    "SubscribeReceived",
    "RequestReceived",
    "CancelReceived",
    "OnSubscribeReceived",
    "OnNextReceived",
    "OnCompleteReceived",
    "OnErrorReceived",
    "ConnectionClosed",
]


class Event:
    """Base class of every event."""

    __slots__ = ()


@dataclass(slots=True)
class HelloReceived(Event):
    """The peer's hello arrived with a version we speak (draft §Protocol negotiation).

    :ivar version: the peer's version (0).
    :ivar extensions: the extension ids the peer announced, in its order.
    :ivar common: the extensions both sides support (the only ones that may be used).
    """

    version: int
    extensions: tuple[int, ...]
    common: frozenset[int]


@dataclass(slots=True)
class SubscribeReceived(Event):
    """Publisher side: the peer subscribed to our publisher ``publisher`` under
    ``subscriber_id``. Answer with
    :meth:`~rsocket_tx.rsnet.connection.RSNetConnection.on_subscribe` (then *onNext* within
    the demand, and one terminal signal), or refuse with
    :meth:`~rsocket_tx.rsnet.connection.RSNetConnection.on_error`.

    :ivar initial_demand: elements the peer requested at once (0 or more).
    """

    subscriber_id: int
    publisher: str
    initial_demand: int


@dataclass(slots=True)
class RequestReceived(Event):
    """Publisher side: the peer requested ``n`` more elements (Reactive Streams §3.17:
    cumulative).

    :ivar n: the elements requested by this *request* (at least 1).
    :ivar demand: the outstanding demand now; 2^63-1 means unbounded.
    """

    subscriber_id: int
    n: int
    demand: int


@dataclass(slots=True)
class CancelReceived(Event):
    """Publisher side: the subscription is over before our publisher ended it; stop producing
    (nothing more may be sent for it).

    :ivar reason: ``""`` for the peer's *cancel*; otherwise why: the peer's ``request(0)``
        (we answered *onError*, Reactive Streams §3.9), a goodbye, the connection's end.
    :ivar by_peer: the peer ended it (its *cancel*, *request(0)* or *goodbye*, a lost
        transport); False: we did (our goodbye, a violation we detected).
    """

    subscriber_id: int
    reason: str = ""
    by_peer: bool = True


@dataclass(slots=True)
class OnSubscribeReceived(Event):
    """Subscriber side: the publisher accepted our subscribe (*onSubscribe*).

    :ivar element_size: the fixed size of every element in bytes, or 0 (sizes vary).
    """

    subscriber_id: int
    element_size: int


@dataclass(slots=True)
class OnNextReceived(Event):
    """Subscriber side: one element (from an *onNext*, one of an *onNextPacked*, or joined
    from *onNextPart* messages). Each uses one unit of the demand we requested."""

    subscriber_id: int
    element: bytes


@dataclass(slots=True)
class OnCompleteReceived(Event):
    """Subscriber side: the publisher completed the subscription (its id is free again)."""

    subscriber_id: int


@dataclass(slots=True)
class OnErrorReceived(Event):
    """Subscriber side: the subscription failed (its id is free again).

    :ivar error: the publisher's error text, or why the connection ended it.
    :ivar by_peer: the publisher sent *onError*; False: a goodbye (either side's), a
        version mismatch, a violation or the transport's loss ended it (draft §Closing the
        connection: "equivalently to receiving ... onError").
    """

    subscriber_id: int
    error: str
    by_peer: bool = True


@dataclass(slots=True)
class ConnectionClosed(Event):
    """The connection is over: the last event. Subscriptions still open were ended just
    before (:class:`CancelReceived`, :class:`OnErrorReceived`). The caller writes what is
    queued, then closes the transport.

    :ivar reason: the goodbye's reason, or what happened.
    :ivar by_peer: the peer ended it (its goodbye, its goodbyeAck answering ours, a lost
        transport); False: we did (a violation we detected, a timeout).
    :ivar goodbye_sent: we queued a *goodbye* because the peer broke the protocol (or its
        hello timed out, or its version is not ours).
    """

    reason: str
    by_peer: bool
    goodbye_sent: bool = False
