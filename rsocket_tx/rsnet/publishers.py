"""The Reactive Streams network protocol as an application sees it, over Twisted: named
publishers on one side, subscriptions as async iterators on the other (Reactive Streams network
draft §The Reactive Streams core protocol; the protocol is symmetric, so either side of a
connection may do both).

Publishing -- a side serves its publishers by name (the *publisher* string of *subscribe*):

* :class:`Publisher`: subclass it and implement :meth:`Publisher.subscribe`, which gets a
  :class:`SubscribeRequest` and returns the elements: an iterable or async iterable of
  ``bytes`` (or a Deferred or coroutine of one), or a :class:`Publication` saying a fixed
  element size too. Raising :class:`NoSuchPublisher` (the default) refuses the name;
* :class:`PublisherMap`: a mapping ``{name: factory}`` where ``factory(request)`` returns the
  elements the same way (``{"count": lambda request: (b"%d" % i for i in range(10))}``).
  :func:`as_publisher` turns a mapping (or a Publisher) into a Publisher.

Each subscription is served by an :class:`ElementPump`: it pulls the source only as the
subscriber's demand allows (the connection's outstanding demand, which *request* raises) and
while the transport is not paused, so a slow subscriber holds back nothing but its own
publisher. The end of the source is *onComplete*; an exception it raises is *onError* with
``"TypeName: message"``; an unknown name is *onError* ``"no such publisher: NAME"``.

Subscribing -- ``protocol.subscribe(name)`` returns a :class:`Subscription`, an async iterator
of ``bytes`` with a demand *window* (items, :data:`DEFAULT_WINDOW`): the window is requested
up front (*subscribe*'s initialDemand) and each time the application has consumed half of it,
a *request* for what it consumed goes out, so demand follows consumption and at most
``window`` elements ever wait in the subscription. Iteration ends at *onComplete*, raises
:class:`~rsocket_tx.rsnet.errors.SubscriptionError` at *onError* (its ``error`` is the peer's
string) and :class:`~rsocket_tx.rsnet.errors.ConnectionClosedError` (or the transport's error)
when the connection ends; :meth:`Subscription.cancel` / :meth:`Subscription.aclose` send
*cancel* and stop the iteration.

Both halves talk to their protocol through :class:`SubscriptionHost`, a documented interface
(implemented by :class:`~rsocket_tx.rsnet.protocol.RSNetProtocol`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet.defer import CancelledError, Deferred, succeed

from ..inbound import InboundItems
from ..pump import SourcePump

__all__ = [
    "DEFAULT_WINDOW",
    "ElementPump",
    "NoSuchPublisher",
    "Publication",
    "Publisher",
    "PublisherMap",
    "SubscribeRequest",
    "Subscription",
    "SubscriptionHost",
    "as_publisher",
    "error_string",
]

#: Elements a :class:`Subscription` requests up front, and at most holds unconsumed (items);
#: half of it is requested again each time half has been consumed.
DEFAULT_WINDOW = 256


class NoSuchPublisher(LookupError):
    """Raised by :meth:`Publisher.subscribe` for a name it does not publish; the subscriber
    gets *onError* ``"no such publisher: NAME"``.

    :param name: the publisher name asked for.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"no such publisher: {name}")
        self.name = name


def error_string(exc: BaseException) -> str:
    """The *onError* string for an exception raised by a publisher:
    ``"TypeName: message"`` (``"TypeName"`` alone when the message is empty;
    ``"no such publisher: NAME"`` for :class:`NoSuchPublisher`)."""
    if isinstance(exc, NoSuchPublisher):
        return str(exc)
    message = str(exc)
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


@dataclass(frozen=True, slots=True)
class SubscribeRequest:
    """A peer's *subscribe* to one of our publishers, as a :class:`Publisher` sees it.

    :ivar publisher: the publisher name (the *subscribe* message's ``publisher`` string).
    :ivar subscriber_id: the id the subscriber chose (Id, unique among its open
        subscriptions on this connection).
    :ivar initial_demand: elements requested with the *subscribe* (items; 0: none yet).
    :ivar connection: the connection it came on (a
        :class:`~rsocket_tx.rsnet.protocol.RSNetProtocol`): its ``subscribe`` reaches the
        peer's publishers, its ``transport.getPeer()`` says who the peer is.
    """

    publisher: str
    subscriber_id: int
    initial_demand: int
    connection: Any


@dataclass(frozen=True, slots=True)
class Publication:
    """What :meth:`Publisher.subscribe` returns to say more than the elements.

    :ivar source: the elements: an iterable or async iterable of ``bytes`` (or a Deferred or
        coroutine of one).
    :ivar element_size: 0, or the fixed size of every element in bytes (*subscribed*'s
        ``elementSize``: elements then travel without a length, several in one
        *onNextPacked* when demand allows; an element of another size fails the publication
        with *onError*).
    """

    source: Any
    element_size: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.element_size, int) or self.element_size < 0:
            raise ValueError(f"element_size must be an int >= 0 (bytes), got "
                             f"{self.element_size!r}")


class Publisher:
    """The publishers one side of a connection serves, by name. Subclass it and implement
    :meth:`subscribe` (or use :class:`PublisherMap`).

    One instance may serve every connection (the server factory shares the one it is given):
    per-subscription state belongs in the source :meth:`subscribe` returns (a generator).
    """

    def subscribe(self, request: SubscribeRequest) -> Any:
        """Serve one subscription.

        :param request: the :class:`SubscribeRequest` (the name, the connection).
        :returns: the elements -- an iterable or async iterable of ``bytes`` (``bytearray``
            and ``memoryview`` too), a :class:`Publication`, or a Deferred or coroutine of
            either. It is pulled only as demand allows; closing it (``close()`` /
            ``aclose()``) follows a *cancel*.
        :raises NoSuchPublisher: the name is not published here (the default). Any other
            exception becomes *onError* ``"TypeName: message"``.
        """
        raise NoSuchPublisher(request.publisher)

    def names(self) -> list[str]:
        """The names published, for listings (``[]`` when they cannot be listed)."""
        return []


class PublisherMap(Publisher):
    """A :class:`Publisher` from a mapping ``{name: factory}``.

    :param publishers: ``factory(request)`` returns the elements of one subscription, as
        :meth:`Publisher.subscribe` does (an iterable, async iterable, :class:`Publication`,
        Deferred or coroutine).
    :raises TypeError: a name is not a ``str`` or a factory is not callable.
    """

    def __init__(self, publishers: Mapping[str, Callable[[SubscribeRequest], Any]]) -> None:
        for name, factory in publishers.items():
            if not isinstance(name, str):
                raise TypeError(f"publisher names must be str, not {type(name).__name__}")
            if not callable(factory):
                raise TypeError(f"the publisher {name!r} must be a callable(request) returning"
                                f" its elements, not {type(factory).__name__}")
        self.publishers = dict(publishers)

    def subscribe(self, request: SubscribeRequest) -> Any:
        factory = self.publishers.get(request.publisher)
        if factory is None:
            raise NoSuchPublisher(request.publisher)
        return factory(request)

    def names(self) -> list[str]:
        return sorted(self.publishers)


def as_publisher(publishers: Publisher | Mapping[str, Any] | None) -> Publisher:
    """A :class:`Publisher` from what an application gives: a Publisher (returned as is), a
    mapping (:class:`PublisherMap`), or None (publishes nothing).

    :raises TypeError: anything else.
    """
    if publishers is None:
        return Publisher()
    if isinstance(publishers, Publisher):
        return publishers
    if isinstance(publishers, type) and issubclass(publishers, Publisher):
        return publishers()
    if isinstance(publishers, Mapping):
        return PublisherMap(publishers)
    raise TypeError("publishers must be a rsocket_tx.rsnet.publishers.Publisher or a mapping"
                    f" from name to factory, not {type(publishers).__name__}")


class SubscriptionHost(Protocol):
    """What a :class:`Subscription` and an :class:`ElementPump` need from their protocol
    (implemented by :class:`~rsocket_tx.rsnet.protocol.RSNetProtocol`).

    Calls name the object (``token``): an id is reused once its subscription has ended, so a
    call for an object whose subscription is over does nothing (``demand`` returns 0).
    """

    #: the ``IReactorTime`` provider
    reactor: Any
    #: the transport asked us to stop producing (its buffer is full)
    paused: bool

    def request_more(self, token: Subscription, n: int) -> None:
        """*request* ``n`` (>= 1) more elements for ``token``."""
        ...

    def cancel_subscription(self, token: Subscription) -> None:
        """*cancel* ``token``'s subscription (nothing more is delivered to it)."""
        ...

    def wake_later(self, token: Subscription) -> bool:
        """While a read is being dispatched: wake ``token`` (its ``wake()``) once every event
        of the read is delivered, and return True; otherwise return False."""
        ...

    def demand(self, pump: ElementPump) -> int:
        """The subscriber's outstanding demand for ``pump``'s elements (items; 0 when none or
        the subscription is over; ``2**63 - 1``: unbounded)."""
        ...

    def send_elements(self, pump: ElementPump, elements: list[bytes]) -> None:
        """Send ``elements`` (within the demand): one *onNext* each, or *onNextPacked* when
        the publication has a fixed element size."""
        ...

    def pump_subscribed(self, pump: ElementPump, element_size: int) -> None:
        """``pump``'s source is ready: *subscribed* (with ``element_size``, bytes)."""
        ...

    def pump_complete(self, pump: ElementPump) -> None:
        """``pump``'s source ended: *onComplete*."""
        ...

    def pump_failed(self, pump: ElementPump, error: str) -> None:
        """``pump``'s source failed: *onError* ``error``."""
        ...

    def flush(self, force: bool = False) -> None:
        """Write what is queued (``force``: even inside a dispatch)."""
        ...


# -- subscribing -------------------------------------------------------------------------------


class Subscription(InboundItems):
    """Our subscription to one of the peer's publishers: ``async for element in
    subscription`` (elements are ``bytes``).

    Demand follows consumption: ``window`` elements are requested with the *subscribe*; each
    time the application has consumed ``max(1, window // 2)`` of them, a *request* for that
    many goes out (at once), so the publisher refills while the rest is consumed and at most
    ``window`` elements wait here.

    Iteration stops at *onComplete* (``StopAsyncIteration``) or after :meth:`cancel`; it
    raises :class:`~rsocket_tx.rsnet.errors.SubscriptionError` for an *onError* (``error``:
    the publisher's string, e.g. ``"no such publisher: NAME"`` or ``"ValueError: bad"``) and
    :class:`~rsocket_tx.rsnet.errors.ConnectionClosedError` (or the transport's
    :class:`~rsocket_tx.transports.tls.TLSError`) when the connection ends first. Elements
    that arrived before the end are delivered first.

    :param host: the :class:`SubscriptionHost` (the protocol).
    :param subscriber_id: the id on the connection.
    :param publisher: the name subscribed to.
    :param window: the demand window (items, >= 1).

    :ivar subscriber_id: the id (reused by a later subscription once this one has ended).
    :ivar publisher: the name.
    :ivar window: the demand window (items).
    :ivar element_size: the publisher's fixed element size in bytes (0: varying), None until
        *subscribed* arrives.
    :ivar requested: elements requested so far, the initial demand included (items).
    """

    kind = "subscription"

    def __init__(self, host: SubscriptionHost, subscriber_id: int, publisher: str,
                 window: int) -> None:
        super().__init__(window)
        self.host = host
        self.subscriber_id = subscriber_id
        self.publisher = publisher
        self.window = window
        self.element_size: int | None = None
        self.requested = window
        self.batch = -1  # (the protocol's: which read's events are not ours)
        self._subscribed: list[Deferred[int]] = []

    def __repr__(self) -> str:
        return (f"<Subscription {self.subscriber_id} to {self.publisher!r} "
                f"{'ended' if self._done else 'open'} queued={len(self._queue)}>")

    # -- application side --------------------------------------------------------------------

    def collect(self, take: int | None = None) -> Deferred[list[bytes]]:
        """Gather the elements into a list.

        :param take: stop after this many and cancel the subscription; None: until
            *onComplete*.
        :returns: a Deferred firing with ``list[bytes]``, or failing as iteration does.
        :raises ValueError: ``take`` < 0.
        """
        if take is not None and take < 0:
            raise ValueError(f"take must be >= 0, got {take}")

        async def gather() -> list[bytes]:
            items: list[bytes] = []
            if take == 0:
                self.cancel()
                return items
            async for item in self:
                items.append(item)
                if take is not None and len(items) >= take:
                    self.cancel()
                    break
            return items

        return Deferred.fromCoroutine(gather())

    def when_subscribed(self) -> Deferred[int]:
        """A Deferred firing with the element size (bytes; 0: varying) once the publisher's
        *subscribed* arrives, or failing as iteration would if the subscription ends first
        (an unknown name: *onError* without a *subscribed* that counts)."""
        if self.element_size is not None:
            return succeed(self.element_size)
        if self._done:
            d: Deferred[int] = Deferred()
            d.errback(self._error or CancelledError("the subscription was cancelled"))
            return d
        d = Deferred()
        self._subscribed.append(d)
        return d

    async def aclose(self) -> None:
        """:meth:`cancel` (the async-iterator way: ``contextlib.aclosing``)."""
        self.cancel()

    @property
    def queued(self) -> int:
        """Elements received and not yet consumed (at most ``window``)."""
        return len(self._queue)

    # -- the protocol (InboundItems) ---------------------------------------------------------

    def request(self, n: int) -> None:
        self.requested += n
        self.host.request_more(self, n)

    def send_cancel(self) -> None:
        self.host.cancel_subscription(self)

    def wake_later(self) -> bool:
        return self.host.wake_later(self)

    # -- protocol side -----------------------------------------------------------------------

    def on_subscribe(self, element_size: int) -> None:
        """*subscribed* arrived."""
        self.element_size = element_size
        waiters, self._subscribed = self._subscribed, []
        for d in waiters:
            d.callback(element_size)

    def ended_with(self, error: BaseException | None) -> bool:
        waiters, self._subscribed = self._subscribed, []
        for d in waiters:
            d.errback(error or CancelledError("the subscription was cancelled"))
        return False


# -- publishing --------------------------------------------------------------------------------


class ElementPump(SourcePump):
    """Sends one publication's elements as the subscriber's demand allows (the shared
    :class:`~rsocket_tx.pump.SourcePump`).

    :param host: the :class:`SubscriptionHost` (the protocol): the pump reads ``demand`` and
        ``paused``, sends with ``send_elements`` and ends with ``pump_complete`` /
        ``pump_failed``.
    :param request: the :class:`SubscribeRequest` it serves.
    :param source: what :meth:`Publisher.subscribe` returned (an iterable, async iterable,
        :class:`Publication`, Deferred or coroutine of one). Nothing happens before
        :meth:`start` (the protocol registers the pump first).

    *subscribed* goes out once the source is known (after a Deferred source fires). The pump
    pulls only while there is demand and the transport is not paused; *onComplete* and
    *onError* need no demand (Reactive Streams §1.4, §1.5), so when the last element the
    demand allows has gone, the pump pulls ONE element ahead: if the source is over it
    completes at once, otherwise the element is held and sent first when *request* arrives.
    A *cancel* (:meth:`stop`) drops a held element unsent and closes the source.

    :ivar subscriber_id: the subscriber's id.
    :ivar element_size: the publication's fixed element size (bytes; 0: varying).
    :ivar batch: (the protocol's) which read's events are not this pump's.
    :ivar failure: the exception the source (or the publisher's result) failed with, for the
        protocol to log with its traceback in ``pump_failed`` (which drops it); else None.
    """

    source_error = "a publisher must return an iterable or async iterable of bytes, not {}"

    def __init__(self, host: SubscriptionHost, request: SubscribeRequest, source: Any) -> None:
        super().__init__(host)
        self.request = request
        self.subscriber_id = request.subscriber_id
        self.element_size = 0
        self.batch = -1
        self.failure: BaseException | None = None
        self._source = source

    def start(self) -> None:
        """Begin: wait for a Deferred source, then *subscribed* and the first elements."""
        source, self._source = self._source, None
        self.begin(source)

    def __repr__(self) -> str:
        return f"<ElementPump {self.subscriber_id} of {self.request.publisher!r}>"

    def stop(self) -> None:
        """Stop (a *cancel*, the connection's end): close the source; nothing more is sent."""
        source, self._source = self._source, None
        if inspect.iscoroutine(source):
            source.close()  # (never started)
        super().stop()

    def prepare(self, source: Any) -> Any:
        if isinstance(source, Publication):
            self.element_size = source.element_size
            source = source.source
        if isinstance(source, Deferred) or inspect.isawaitable(source):
            raise TypeError("a Publication's source must be an iterable or async iterable,"
                            " not an awaitable")
        if isinstance(source, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"a publisher must return an iterable of elements, not one "
                            f"{type(source).__name__}")
        return source

    def started(self) -> None:
        self.host.pump_subscribed(self, self.element_size)

    def credit(self) -> int:
        return int(self.host.demand(self))

    def accept(self, item: Any) -> bytes:
        """``item`` as bytes.

        :raises TypeError: it is not bytes-like.
        :raises ValueError: it is not ``element_size`` bytes long (a fixed size).
        """
        if isinstance(item, bytes):
            element = item
        elif isinstance(item, (bytearray, memoryview)):
            element = bytes(item)
        else:
            raise TypeError(f"elements must be bytes, not {type(item).__name__}")
        if self.element_size and len(element) != self.element_size:
            raise ValueError(f"an element of {len(element)} bytes; the publication's "
                             f"element size is {self.element_size} bytes")
        return element

    def size(self, item: Any) -> int:
        return len(item)

    def send(self, items: list[Any]) -> None:
        if items and not self._stopped:
            self.host.send_elements(self, items)

    def error_for(self, exc: BaseException) -> str:
        self.failure = exc
        return error_string(exc)
