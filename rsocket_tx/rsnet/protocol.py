"""The Twisted protocol of the Reactive Streams network protocol: :class:`RSNetProtocol` plugs
a sans-IO :class:`~rsocket_tx.rsnet.connection.RSNetConnection` into the shared bridge
(:class:`~rsocket_tx.bridge.MuxProtocol`: IPushProducer, batched writes, send-buffer guard,
half-close, ticks) and routes the events of each subscription to its object.

The protocol is symmetric (Reactive Streams network draft §The Reactive Streams core
protocol: "either party can act in the --> direction"): one class serves both ends of a
connection, the ``role`` saying only which hello it sends. On every connection

* our publishers (a :class:`~rsocket_tx.rsnet.publishers.Publisher`) serve the peer's
  *subscribe* messages, each through an :class:`~rsocket_tx.rsnet.publishers.ElementPump`;
* :meth:`RSNetProtocol.subscribe` subscribes to one of the peer's publishers and returns a
  :class:`~rsocket_tx.rsnet.publishers.Subscription` (an async iterator with a demand window).

Over WebSocket (an :class:`~rsocket_tx.interfaces.IFrameTransport`) each binary message
carries RS-network messages (ours: one per WebSocket message); the subprotocol name is
:data:`WEBSOCKET_SUBPROTOCOL`.
"""

from __future__ import annotations

import weakref
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import LogLevel
from twisted.python.failure import Failure

from ..bridge import MuxProtocol
from ..interfaces import IConnectionObserver
from .codec import WEBSOCKET_SUBPROTOCOL
from .config import RSNetConfig
from .connection import Role, RSNetConnection
from .errors import ConnectionClosedError, LocalProtocolError, RSNetError, SubscriptionError
from .events import (
    CancelReceived,
    ConnectionClosed,
    HelloReceived,
    OnCompleteReceived,
    OnErrorReceived,
    OnNextReceived,
    OnSubscribeReceived,
    RequestReceived,
    SubscribeReceived,
)
from .publishers import (
    DEFAULT_WINDOW,
    ElementPump,
    NoSuchPublisher,
    Publisher,
    SubscribeRequest,
    Subscription,
    as_publisher,
    error_string,
)

__all__ = ["RSNetProtocol", "WEBSOCKET_SUBPROTOCOL", "MAX_WINDOW", "SHUTDOWN_ERROR"]

#: The largest demand window (items): the protocol's Long demand, 2^63 - 1 (unbounded).
MAX_WINDOW = 2**63 - 1
#: The *onError* a draining server answers new subscriptions with.
SHUTDOWN_ERROR = "the server is shutting down"


def _truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 (on a character boundary)."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore")


class RSNetProtocol(MuxProtocol):
    """One Reactive Streams network connection over a Twisted transport (TCP, TLS, WebSocket):
    publish and subscribe, both ways.

    :param reactor: the reactor.
    :param role: :attr:`~rsocket_tx.rsnet.connection.Role.CLIENT` (we opened the
        connection: clientHello) or ``SERVER`` (serverHello).
    :param config: the settings (:class:`~rsocket_tx.rsnet.config.RSNetConfig`; its
        ``max_send_buffer_size`` guards the transport's buffer, bytes).
    :param publishers: what we publish: a :class:`~rsocket_tx.rsnet.publishers.Publisher`, a
        mapping ``{name: factory(request)}``, or None (nothing: every *subscribe* gets
        *onError* ``"no such publisher: NAME"``).

    :ivar role: the role.
    :ivar config: the settings.
    :ivar publishers: the :class:`~rsocket_tx.rsnet.publishers.Publisher` serving the peer.
    :ivar subscriptions: ``{subscriber id: Subscription}``: ours, open.
    :ivar pumps: ``{subscriber id: ElementPump}``: the peer's subscriptions to our publishers,
        open (the two id spaces are separate).
    :ivar hello: the peer's :class:`~rsocket_tx.rsnet.events.HelloReceived`, None before.
    :ivar closed_error: why the connection ended (a
        :class:`~rsocket_tx.rsnet.errors.ConnectionClosedError`, or the transport's
        :class:`~rsocket_tx.transports.tls.TLSError`), None while open.
    :ivar draining: a graceful shutdown is waiting for our publications to end.
    """

    role: Role
    connection: Any

    def __init__(self, reactor: Any, role: Role, config: RSNetConfig | None = None,
                 publishers: Publisher | Any = None) -> None:
        config = config if config is not None else RSNetConfig()
        super().__init__(reactor, max_send_buffer_size=config.max_send_buffer_size)
        self.role = role
        self.config = config
        self.protocol_name = f"Reactive Streams network {role.value}"  # (MuxProtocol's log wording)
        # a server keeps a client's first bytes: one that is not an RS-network client is named
        self.watch_first_bytes = role is Role.SERVER
        self.publishers = as_publisher(publishers)
        self.subscriptions: dict[int, Subscription] = {}
        self.pumps: dict[int, ElementPump] = {}
        self.hello: HelloReceived | None = None
        self.closed_error: BaseException | None = None
        self.draining = False
        self._goodbye_sent = False
        self._transport_closing = False
        self._drain_reason = ""
        self._drain_call: Any = None
        self._ready: list[Deferred[RSNetProtocol]] = []
        self._lost: list[Deferred[None]] = []
        self._wakes: list[Subscription] = []
        # Application code runs while a read's events are dispatched and may subscribe with an
        # id the connection freed in that read (its onComplete/onError is still to come in the
        # batch): events of the batch never go to a subscription made during it (_retired
        # keeps the one it replaced).
        self._batch = 0
        self._retired: dict[int, Subscription] = {}
        self._dead: set[int] = set()  # id() of events of the batch not to dispatch
        # the connection's record of each subscription and publication object (see _live_pump)
        self._records: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.event_handlers = {
            HelloReceived: self.on_hello,
            SubscribeReceived: self.on_subscribe_received,
            RequestReceived: self.on_request_received,
            CancelReceived: self.on_cancel_received,
            OnSubscribeReceived: self.on_subscribed,
            OnNextReceived: self.on_next_received,
            OnCompleteReceived: self.on_complete_received,
            OnErrorReceived: self.on_error_received,
            ConnectionClosed: self.on_connection_closed,
        }

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return (f"<{type(self).__name__} {self.role.name.lower()} {state} "
                f"subscriptions={len(self.subscriptions)} publications={len(self.pumps)}>")

    # ------------------------------------------------------------------ bridge hooks

    def make_connection(self) -> RSNetConnection:
        return RSNetConnection(self.role, self.config)

    def connection_started(self) -> None:
        self.connection.initiate_connection(self.reactor.seconds())
        factory: Any = getattr(self, "factory", None)
        if IConnectionObserver.providedBy(factory):
            factory.connection_made(self)

    def producing_resumed(self) -> None:
        for pump in list(self.pumps.values()):
            pump.resume()

    def connection_ended(self) -> None:
        # (once: a message transport's loseConnection is not always idempotent)
        if not self._transport_closing:
            self._transport_closing = True
            super().connection_ended()

    def transport_lost(self, reason: Failure | None) -> None:
        self._cancel_drain()
        super().transport_lost(reason)
        if self.closed_error is None:  # (never connected, or no ConnectionClosed came)
            self.closed_error = self.tls_failure or ConnectionClosedError(
                "the transport closed", by_peer=True)
            self._end_everything(self.closed_error)
        factory: Any = getattr(self, "factory", None)
        if IConnectionObserver.providedBy(factory):
            factory.connection_lost(self)
        waiters, self._lost = self._lost, []
        for d in waiters:
            d.callback(None)

    def handle_events(self, events: list[Any]) -> None:
        if not self.dispatching and self.held is None:
            self._batch += 1
            self._retired.clear()
            self._mark_dead(events)
        super().handle_events(events)

    def _mark_dead(self, events: list[Any]) -> None:
        """Find the peer's subscriptions that end in the batch they began in (a *subscribe*
        and its *cancel* in one read; the connection has already forgotten them, and the id
        may already name the next one): neither event is dispatched."""
        self._dead.clear()
        opened: dict[int, Any] = {}
        for event in events:
            kind = event.__class__
            if kind is SubscribeReceived:
                opened[event.subscriber_id] = event
            elif kind is CancelReceived:
                begun = opened.pop(event.subscriber_id, None)
                if begun is not None:
                    self._dead.add(id(begun))
                    self._dead.add(id(event))

    def events_handled(self) -> None:
        wakes, self._wakes = self._wakes, []
        for subscription in wakes:
            subscription.wake()
        self.check_drained()

    # ------------------------------------------------------------------ public API

    @property
    def peer(self) -> Any:
        """The peer's address (``transport.getPeer()``), None without a transport."""
        transport: Any = self.transport
        return None if transport is None else transport.getPeer()

    def subscribe(self, publisher: str, window: int = DEFAULT_WINDOW) -> Subscription:
        """Subscribe to the peer's publisher ``publisher`` (*subscribe* with ``window`` as
        the initial demand).

        :param publisher: the name (UTF-8, at most ``config.max_string_length`` bytes).
        :param window: the demand window, items (1 .. 2^63-1): requested up front, topped up
            by half as the application consumes (see
            :class:`~rsocket_tx.rsnet.publishers.Subscription`).
        :returns: the :class:`~rsocket_tx.rsnet.publishers.Subscription` (an async iterator
            of ``bytes``). May be called before the peer's hello (the draft's optimistic
            sending).
        :raises ValueError: ``window`` out of range.
        :raises ConnectionClosedError: the connection has ended (or the transport's error).
        :raises LocalProtocolError: the name is too long, or the connection is closing.
        """
        if isinstance(window, bool) or not isinstance(window, int) or \
                not 1 <= window <= MAX_WINDOW:
            raise ValueError(f"window must be an int 1..2**63-1 (items), got {window!r}")
        if self.closed_error is not None:
            raise self.closed_error
        if self.connection is None:
            raise LocalProtocolError("the transport is not connected yet")
        sid = self.connection.subscribe(publisher, initial_demand=window)
        subscription = Subscription(self, sid, publisher, window)
        self._records[subscription] = self.connection.subscription(sid)
        old = self.subscriptions.get(sid)
        if old is not None and self.dispatching:
            self._retired[sid] = old
        subscription.batch = self._batch if self.dispatching else -1
        self.subscriptions[sid] = subscription
        self.flush_soon()
        return subscription

    def when_ready(self) -> Deferred[RSNetProtocol]:
        """A Deferred firing with this protocol once the peer's hello has arrived (its
        version accepted), or failing with :attr:`closed_error` if the connection ends
        first."""
        if self.hello is not None and self.closed_error is None:
            return succeed(self)
        if self.closed_error is not None:
            return fail(Failure(self.closed_error))
        d: Deferred[RSNetProtocol] = Deferred()
        self._ready.append(d)
        return d

    def when_closed(self) -> Deferred[None]:
        """A Deferred firing with None once the transport is gone."""
        if self.transport_gone:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._lost.append(d)
        return d

    def goodbye(self, reason: str = "") -> Deferred[None]:
        """Close the connection the orderly way (draft §Closing the connection): *goodbye*,
        which ends every stream at once (our subscriptions fail with
        :class:`~rsocket_tx.rsnet.errors.ConnectionClosedError`, our publications stop);
        the transport closes once the peer acknowledges it, or after
        ``config.goodbye_timeout`` milliseconds.

        :param reason: sent to the peer (cut to ``config.max_string_length`` bytes).
        :returns: a Deferred firing once the transport is gone.
        """
        d = self.when_closed()
        conn = self.connection
        if conn is None or self.transport_gone:
            return d
        if conn.is_open and not self._goodbye_sent:
            self._goodbye_sent = True
            try:
                events = conn.goodbye(_truncate(reason, self.config.max_string_length),
                                      self.reactor.seconds())
            except LocalProtocolError:  # (already closing)
                events = []
            self.handle_events_now(events)
            self.schedule_tick()
            self.flush_soon()
        elif not conn.is_open:
            self.close()
        return d

    def close(self) -> Deferred[None]:
        """Close the transport now (after what is queued), without a *goodbye*: every
        stream fails.

        :returns: a Deferred firing once the transport is gone.
        """
        d = self.when_closed()
        if self.transport is not None and not self.transport_gone:
            if self.connection is not None and self.connection.is_open:
                self.handle_events_now(self.connection.connection_lost(
                    "closed by the application"))
            if not self._transport_closing:
                self._transport_closing = True
                self.end_transport()
        return d

    def shutdown_gracefully(self, reason: str = "", drain_timeout: int | None = None
                            ) -> Deferred[None]:
        """End the connection gracefully: new subscriptions to our publishers get *onError*
        :data:`SHUTDOWN_ERROR`; once no publication of ours is in progress (or after
        ``drain_timeout`` milliseconds) :meth:`goodbye`.

        :param reason: the goodbye's reason.
        :param drain_timeout: milliseconds; None: ``config.drain_timeout``.
        :returns: a Deferred firing once the transport is gone.
        """
        d = self.when_closed()
        if self.transport_gone:
            return d
        self.draining = True
        self._drain_reason = reason
        if self.connection is None:
            self.close()
            return d
        self.check_drained()
        if self.is_open and self._drain_call is None and not self._goodbye_sent:
            timeout = self.config.drain_timeout if drain_timeout is None else drain_timeout
            self._drain_call = self.reactor.callLater(timeout / 1000, self._drain_expired)
        return d

    def check_drained(self) -> None:
        """While draining: *goodbye* once no publication of ours is in progress."""
        if self.draining and not self.pumps and self.is_open and not self._goodbye_sent:
            self._cancel_drain()
            self.goodbye(self._drain_reason)

    def _drain_expired(self) -> None:
        self._drain_call = None
        if self.is_open and not self._goodbye_sent:
            self.goodbye(self._drain_reason)

    def _cancel_drain(self) -> None:
        call, self._drain_call = self._drain_call, None
        if call is not None and call.active():
            call.cancel()

    # ------------------------------------------------------------------ SubscriptionHost

    # A token is live while it is the one mapped to its id here AND the connection's record
    # of the id is still the one it was made for: the connection may already have ended it
    # (and the id may name the next one) in a read whose events are still being dispatched.

    def _live_subscription(self, token: Subscription) -> int | None:
        sid = token.subscriber_id
        conn = self.connection
        if self.subscriptions.get(sid) is token and conn is not None and conn.is_open \
                and conn.subscription(sid) is self._records.get(token):
            return sid
        return None

    def _live_pump(self, pump: ElementPump) -> int | None:
        sid = pump.subscriber_id
        conn = self.connection
        if self.pumps.get(sid) is pump and conn is not None and conn.is_open \
                and conn.publication(sid) is self._records.get(pump):
            return sid
        return None

    def request_more(self, token: Subscription, n: int) -> None:
        """SubscriptionHost: *request* ``n`` more for ``token``."""
        sid = self._live_subscription(token)
        if sid is not None:
            self.connection.request(sid, n)
            self.flush_soon()

    def cancel_subscription(self, token: Subscription) -> None:
        """SubscriptionHost: *cancel* ``token``'s subscription."""
        sid = self._live_subscription(token)
        if sid is not None:
            del self.subscriptions[sid]
            self.connection.cancel(sid)
            self.flush_soon()

    def wake_later(self, token: Subscription) -> bool:
        """SubscriptionHost: wake ``token`` at the end of the dispatch in progress."""
        if not self.dispatching:
            return False
        self._wakes.append(token)
        return True

    def demand(self, pump: ElementPump) -> int:
        """SubscriptionHost: the outstanding demand for ``pump`` (items)."""
        sid = self._live_pump(pump)
        if sid is None:
            return 0
        return int(self.connection.demand(sid))

    def send_elements(self, pump: ElementPump, elements: list[bytes]) -> None:
        """SubscriptionHost: *onNext* each element (or *onNextPacked*, fixed size)."""
        sid = self._live_pump(pump)
        if sid is None:
            return
        conn = self.connection
        if pump.element_size:
            per = max(1, self.config.max_packed_size // pump.element_size)
            if len(elements) == 1:
                conn.on_next(sid, elements[0])
                return
            for i in range(0, len(elements), per):
                conn.on_next_packed(sid, elements[i:i + per])
        else:
            for element in elements:
                conn.on_next(sid, element)

    def pump_subscribed(self, pump: ElementPump, element_size: int) -> None:
        """SubscriptionHost: *subscribed*."""
        sid = self._live_pump(pump)
        if sid is not None:
            self.connection.on_subscribe(sid, element_size)
            self.flush_soon()

    def pump_complete(self, pump: ElementPump) -> None:
        """SubscriptionHost: *onComplete*."""
        sid = self._live_pump(pump)
        if sid is not None:
            del self.pumps[sid]
            self.connection.on_complete(sid)
            self.flush_soon()
            self.check_drained()

    def pump_failed(self, pump: ElementPump, error: str) -> None:
        """SubscriptionHost: *onError* ``error``."""
        cause = pump.failure
        pump.failure = None
        if cause is not None and not isinstance(cause, RSNetError):
            # the publication's source raised (not a relayed onError, not the connection's
            # end): a bug of the publisher, logged with its traceback
            self.log.failure("the source of publisher {name!r} failed for subscriber "
                             "{subscriber} (it gets onError)", Failure(cause),
                             level=LogLevel.error, name=pump.request.publisher,
                             subscriber=pump.subscriber_id)
        sid = self._live_pump(pump)
        if sid is not None:
            del self.pumps[sid]
            self.connection.on_error(sid, _truncate(error, self.config.max_string_length))
            self.flush_soon()
            self.check_drained()

    # ------------------------------------------------------------------ event handlers

    def _subscription_for(self, sid: int) -> Subscription | None:
        """The subscription an event of the batch being dispatched is about, or None."""
        subscription = self.subscriptions.get(sid)
        if subscription is not None and self.dispatching and subscription.batch == self._batch:
            return self._retired.get(sid)
        return subscription

    def _forget_subscription(self, sid: int, subscription: Subscription) -> None:
        if self._retired.get(sid) is subscription:
            del self._retired[sid]
        elif self.subscriptions.get(sid) is subscription:
            del self.subscriptions[sid]

    def on_hello(self, event: HelloReceived) -> None:
        self.hello = event
        if not self.connection.is_open:
            return  # ended in the same read: ConnectionClosed follows and fails the waiters
        waiters, self._ready = self._ready, []
        for d in waiters:
            d.callback(self)

    def on_subscribe_received(self, event: SubscribeReceived) -> None:
        if id(event) in self._dead:
            return  # cancelled in the same read: never served
        sid = event.subscriber_id
        conn = self.connection
        if self.draining:
            conn.on_error(sid, SHUTDOWN_ERROR)
            return
        request = SubscribeRequest(event.publisher, sid, event.initial_demand, self)
        try:
            source = self.publishers.subscribe(request)
        except Exception as exc:  # noqa: BLE001 - becomes onError
            if isinstance(exc, (NoSuchPublisher, RSNetError)):  # (deliberate, or relayed)
                self.log.debug("subscribe to {name!r} refused: {error}", name=event.publisher,
                               error=error_string(exc))
            else:  # a bug of the publisher: logged with its traceback
                self.log.failure("publisher refused subscribe to {name!r} of subscriber "
                                 "{subscriber} (it gets onError)", name=event.publisher,
                                 subscriber=sid, level=LogLevel.error)
            conn.on_error(sid, _truncate(error_string(exc), self.config.max_string_length))
            return
        old = self.pumps.get(sid)
        if old is not None:  # (the connection ended it; its CancelReceived came first)
            old.stop()
        pump = ElementPump(self, request, source)
        self.pumps[sid] = pump
        self._records[pump] = conn.publication(sid)
        pump.start()

    def on_request_received(self, event: RequestReceived) -> None:
        pump = self.pumps.get(event.subscriber_id)
        if pump is not None:
            pump.resume()

    def on_cancel_received(self, event: CancelReceived) -> None:
        if id(event) in self._dead:
            return
        pump = self.pumps.pop(event.subscriber_id, None)
        if pump is not None:
            pump.stop()

    def on_subscribed(self, event: OnSubscribeReceived) -> None:
        subscription = self._subscription_for(event.subscriber_id)
        if subscription is not None:
            subscription.on_subscribe(event.element_size)

    def on_next_received(self, event: OnNextReceived) -> None:
        subscription = self._subscription_for(event.subscriber_id)
        if subscription is not None:
            subscription.on_next(event.element)

    def on_complete_received(self, event: OnCompleteReceived) -> None:
        sid = event.subscriber_id
        subscription = self._subscription_for(sid)
        if subscription is not None:
            self._forget_subscription(sid, subscription)
            subscription.on_complete()

    def on_error_received(self, event: OnErrorReceived) -> None:
        sid = event.subscriber_id
        subscription = self._subscription_for(sid)
        if subscription is None:
            return
        self._forget_subscription(sid, subscription)
        error: BaseException
        if event.by_peer:
            error = SubscriptionError(event.error, by_peer=True)
        else:  # a goodbye (either side's) or the connection's end
            error = self.tls_failure or ConnectionClosedError(
                event.error, by_peer=not self._goodbye_sent)
        subscription.on_error(error)

    def on_connection_closed(self, event: ConnectionClosed) -> None:
        self.ended = True
        # (the words of the "closed" log line)
        self.end_reason = event.reason if event.by_peer else f"closed by this side: {event.reason}"
        if not event.by_peer and self.role is Role.SERVER and self.connection.peer_version is None:
            self.name_wrong_client("rsnet")  # (its clientHello was another protocol's bytes)
        error = self.tls_failure or ConnectionClosedError(event.reason, by_peer=event.by_peer)
        if self.closed_error is None:
            self.closed_error = error
        self._cancel_drain()
        self._end_everything(self.closed_error)

    def _end_everything(self, error: BaseException) -> None:
        subscriptions = list(self._retired.values()) + list(self.subscriptions.values())
        self._retired = {}
        self.subscriptions = {}
        for subscription in subscriptions:
            subscription.on_error(error)
        pumps, self.pumps = self.pumps, {}
        for pump in pumps.values():
            pump.stop()
        waiters, self._ready = self._ready, []
        for d in waiters:
            d.errback(Failure(error))
