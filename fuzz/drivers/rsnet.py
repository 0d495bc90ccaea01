"""Drive one sans-IO :class:`~rsocket_tx.rsnet.connection.RSNetConnection` with a fuzz input.

The variant byte picks the configuration (bits below); feed records go to ``receive_data``;
call records use the API (subscribe, request, cancel, onSubscribe, onNext (packed, split),
onComplete, onError, goodbye, ticks).

Expected, and so not a crash: :class:`~rsocket_tx.rsnet.errors.LocalProtocolError` from an
API call the current state forbids, with nothing queued. Everything else is a crash, and so is
a broken invariant:

* ``receive_data`` never raises; a violation by the peer ends in
  :class:`~rsocket_tx.rsnet.events.ConnectionClosed`, reported once, as the last event of its
  list; a closed connection returns no events;
* everything it queues decodes, as the peer would decode it (the element size of each
  subscription taken from our own *onSubscribe*), starting with our hello.
"""

from __future__ import annotations

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.connection import Role, RSNetConnection
from rsocket_tx.rsnet.errors import LocalProtocolError, ProtocolError
from rsocket_tx.rsnet.events import ConnectionClosed, Event, SubscribeReceived

from ..harness import FEED, Records, check

__all__ = ["CLIENT", "PRESET", "SMALL", "EXTENSIONS", "run"]

#: variant bits
CLIENT = 0x01  # the connection is the client (else the server)
PRESET = 0x02  # the peer's valid hello arrives before the input
SMALL = 0x04  # small limits: strings, elements, packed, reassembly, subscriptions, parts
EXTENSIONS = 0x08  # we announce extensions 1 and 300


def _config(variant: int) -> RSNetConfig:
    extensions = (1, 300) if variant & EXTENSIONS else ()
    if not variant & SMALL:
        return RSNetConfig(extensions=extensions)
    return RSNetConfig(extensions=extensions, max_string_length=16, max_element_size=8,
                       max_packed_size=32, max_reassembled_size=32, reassembly_budget=48,
                       max_peer_subscriptions=2, max_extensions=2, max_part_size=4,
                       hello_timeout=1000, goodbye_timeout=1000)


class _Driver:
    __slots__ = ("conn", "client", "now", "closed", "pubs", "subs", "reader", "sizes")

    def __init__(self, variant: int) -> None:
        self.client = bool(variant & CLIENT)
        config = _config(variant)
        self.conn = RSNetConnection(Role.CLIENT if self.client else Role.SERVER, config)
        self.now = 0.0
        self.closed = False
        self.pubs: list[int] = []  # the peer's subscriptions to our publishers
        self.subs: list[int] = []  # ours
        # decodes what we send as the peer would: element sizes from our own onSubscribe
        self.reader = C.MessageDecoder(RSNetConfig(max_element_size=2**30, max_packed_size=2**30,
                                                   max_buffered_input=2**31))
        self.sizes: dict[int, int] = {}

    def events(self, events: list[Event]) -> None:
        check(isinstance(events, list), "events is not a list: %r", events)
        for i, e in enumerate(events):
            check(isinstance(e, Event), "not an Event: %r", e)
            if isinstance(e, ConnectionClosed):
                check(not self.closed, "a second ConnectionClosed")
                check(i == len(events) - 1, "ConnectionClosed is not the last event: %r",
                      events)
                self.closed = True
            elif isinstance(e, SubscribeReceived):
                self.pubs.append(e.subscriber_id)
        conn = self.conn
        check(conn.is_open != self.closed, "is_open %s, ConnectionClosed reported: %s",
              conn.is_open, self.closed)
        conn.next_deadline()

    def drain(self) -> None:
        data = self.conn.data_to_send()
        if not data:
            return
        reader = self.reader
        reader.receive_data(data)
        sizes = self.sizes
        try:
            while (m := reader.next_message(lambda sid: sizes.get(sid, 0))) is not None:
                if isinstance(m, C.OnSubscribe):
                    sizes[m.subscriber] = m.element_size
        except ProtocolError as exc:
            check(False, "we queued bytes the peer cannot decode: %s", exc)
        check(reader.buffered == 0, "data_to_send ended inside a message")

    def feed(self, chunk: bytes) -> None:
        events = self.conn.receive_data(chunk, self.now)
        if self.closed:
            check(events == [], "a closed connection returned %r", events)
        self.events(events)

    def pick(self, ids: list[int], arg: int) -> int:
        """An id: one in use when ``arg``'s top bit is set, else ``arg & 0x7F``."""
        if arg & 0x80 and ids:
            return ids[arg % len(ids)]
        return arg & 0x7F

    def call(self, op: int, arg: int) -> None:
        events: list[Event] = []
        try:
            events = _CALLS[op % len(_CALLS)](self, self.conn, arg)
        except LocalProtocolError:
            # documented: the API used in a state that forbids it; nothing is sent
            check(self.conn.bytes_to_send == 0, "LocalProtocolError, yet %d bytes were queued",
                  self.conn.bytes_to_send)
        self.events(events or [])


def _subscribe(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    d.subs.append(conn.subscribe("ticks" * (arg & 7), (arg >> 3) ** 9))
    return []


def _request(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    conn.request(d.pick(d.subs, arg), 1 + (arg & 0x7F) ** 9)
    return []


def _cancel(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    conn.cancel(d.pick(d.subs, arg))
    return []


def _on_subscribe(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    conn.on_subscribe(d.pick(d.pubs, arg), (0, 0, 1, 4)[arg & 3])
    return []


def _on_next(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    conn.on_next(d.pick(d.pubs, arg), b"e" * ((arg >> 2) & 0x1F))
    return []


def _on_next_packed(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    sid = d.pick(d.pubs, arg)
    p = conn.publication(sid)
    size = p.element_size if p is not None and p.element_size else 1 + (arg & 3)
    conn.on_next_packed(sid, [b"p" * size] * (arg & 0x0F))
    return []


def _on_complete(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    conn.on_complete(d.pick(d.pubs, arg))
    return []


def _on_error(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    conn.on_error(d.pick(d.pubs, arg), "boom" * (arg & 0x0F))
    return []


def _goodbye(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    return conn.goodbye("bye" * (arg & 7), d.now if arg & 0x80 else None)


def _tick(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    d.now += arg / 4.0  # up to ~64 s: past the hello and goodbye timeouts
    return conn.tick(d.now)


def _tick_deadline(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    deadline = conn.next_deadline()
    if deadline is not None and deadline > d.now:
        d.now = deadline
    return conn.tick(d.now)


def _connection_lost(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    return conn.connection_lost()


def _initiate(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    conn.initiate_connection(d.now)
    return []


def _demand(d: _Driver, conn: RSNetConnection, arg: int) -> list[Event]:
    demand = conn.demand(d.pick(d.pubs, arg))
    check(0 <= demand <= C.MAX_LONG, "demand %r", demand)
    return []


_CALLS = [
    _subscribe, _request, _cancel, _on_subscribe, _on_next, _on_next_packed, _on_complete,
    _on_error, _goodbye, _tick, _tick_deadline, _connection_lost, _initiate, _demand,
]


def run(data: bytes, role_bit: int) -> None:
    """Run one input against a new connection; ``role_bit`` is :data:`CLIENT` or 0 (the
    variant byte's own role bit is replaced)."""
    records = Records(data)
    variant = (records.variant & ~CLIENT) | role_bit
    d = _Driver(variant)
    if variant & PRESET:
        hello = C.ServerHello if d.client else C.ClientHello
        d.feed(C.encode(hello(C.VERSION, (1,) if variant & 0x40 else ())))
    d.drain()
    for op, value in records:
        if op == FEED:
            d.feed(value)  # type: ignore[arg-type]
        else:
            d.call(op, value)  # type: ignore[arg-type]
        d.drain()
