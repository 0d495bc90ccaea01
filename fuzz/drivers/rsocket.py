"""Drive one sans-IO :class:`~rsocket_tx.core.connection.RSocketConnection` with a fuzz input.

The variant byte picks the configuration (bits below); feed records go to ``receive_data``
(TCP framing) or, one record per frame, to ``receive_frame`` (message transports); call
records use the API (requests, ``send_*``, ticks, graceful close, leases, detach/resume).

Expected, and so not a crash: :class:`~rsocket_tx.core.errors.LocalProtocolError` (and its
subclasses) from an API call the current state forbids, with nothing queued. Everything else
is a crash, and so is a broken invariant:

* ``receive_*`` never raise; they return :class:`~rsocket_tx.core.events.Event` objects;
* a connection reports :class:`~rsocket_tx.core.events.ConnectionClosed` once, as the last
  event of its list, and is closed from then on; a closed connection returns no events;
* everything it queues for the peer is well-formed frames (they decode), the stream frames
  within the outbound frame limit (``fragment_size``);
* the streams the peer opened stay within ``max_concurrent_streams``;
* ``next_deadline()`` answers in every state.

The 2015 ReactiveSocket draft's connection speaks the same API and events
(:mod:`fuzz.drivers.reactivesocket` runs this driver with its own :class:`Flavour`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rsocket_tx.core import errors as E
from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.core.connection import Role, RSocketConnection
from rsocket_tx.core.events import (
    ConnectionClosed,
    Event,
    RequestReceived,
    ResumeReceived,
    SetupReceived,
)
from rsocket_tx.core.frames import FrameType, ResumeFrame, SetupFrame, decode, encode
from rsocket_tx.core.framing import FrameReader, frame_with_length
from rsocket_tx.core.lease import Lease
from rsocket_tx.core.payload import Payload

from ..harness import FEED, Records, check

__all__ = ["CLIENT", "RESUME", "LEASE", "MESSAGES", "SMALL", "PRESET", "TOKEN", "setup_frame",
           "Flavour", "RSOCKET", "run"]

#: variant bits
CLIENT = 0x01  # the connection is the client (else the server)
RESUME = 0x02  # resumable (the client's SETUP carries a token; the server accepts resume)
LEASE = 0x04  # the SETUP has the L flag
MESSAGES = 0x08  # a message transport (receive_frame, no length prefix)
SMALL = 0x10  # small limits: frame size, fragment size, reassembly, streams, buffers
PRESET = 0x20  # server: a valid SETUP (matching RESUME and LEASE) arrives before the input

TOKEN = b"fuzz-token"
#: the frames we write within the outbound frame limit (fragmented, or an ERROR cut short);
#: the others carry what the caller or the peer gave (SETUP, a KEEPALIVE's echo, LEASE)
_LIMITED = frozenset({FrameType.REQUEST_RESPONSE, FrameType.REQUEST_FNF, FrameType.REQUEST_STREAM,
                      FrameType.REQUEST_CHANNEL, FrameType.PAYLOAD, FrameType.ERROR,
                      FrameType.REQUEST_N, FrameType.CANCEL})
METADATA_MIME = b"message/x.rsocket.composite-metadata.v0"
DATA_MIME = b"application/octet-stream"


def setup_frame(variant: int) -> SetupFrame:
    """The SETUP of ``variant``: keepalive 1 s, max lifetime 5 s."""
    return SetupFrame(keepalive_interval=1000, max_lifetime=5000,
                      metadata_mime_type=METADATA_MIME, data_mime_type=DATA_MIME,
                      resume_token=TOKEN if variant & RESUME else None,
                      lease=bool(variant & LEASE))


@dataclass(frozen=True, slots=True)
class Flavour:
    """What differs between the protocols this driver runs.

    :ivar connection: the connection class (``role, config, setup=..., now=...``).
    :ivar decode: the frame decoder (raises ``FrameDecodeError`` for a malformed frame).
    :ivar reader: builds the TCP frame splitter (``reader()``; ``feed(bytes) -> frames``).
    :ivar frame_with_length: prefixes one encoded frame for TCP.
    :ivar encode_setup: the bytes of the client's SETUP for ``variant``.
    :ivar limited: the frame types written within the outbound frame limit.
    :ivar resume: the protocol resumes sessions.
    """

    connection: Callable[..., Any]
    decode: Callable[[bytes], Any]
    reader: Callable[[], Any]
    frame_with_length: Callable[[bytes], bytes]
    encode_setup: Callable[[int], bytes]
    limited: frozenset[int]
    resume: bool


RSOCKET = Flavour(RSocketConnection, decode, FrameReader, frame_with_length,
                  lambda variant: encode(setup_frame(variant)), _LIMITED, True)


#: the settings of the SMALL variant: every limit a peer can reach in a few hundred bytes
_SMALL = dict(max_frame_size=128, fragment_size=64, max_reassembled_size=100,
              max_setup_frame_size=96, max_reassembly_buffer_size=150,
              max_concurrent_streams=2, max_resume_buffer_size=256, drain_timeout=50,
              setup_timeout=1000, resume_session_timeout=2000)


def _config(variant: int) -> ConnectionConfig:
    small = _SMALL if variant & SMALL else {}
    return ConnectionConfig(resume=bool(variant & RESUME),
                            length_prefixed=not variant & MESSAGES, **small)  # type: ignore[arg-type]


class _Driver:
    __slots__ = ("conn", "now", "closed", "ids", "prefixed", "reader", "limit", "resume",
                 "variant", "flavour")

    def __init__(self, variant: int, flavour: Flavour) -> None:
        if not flavour.resume:
            variant &= ~RESUME
        config = _config(variant)
        self.variant = variant
        self.flavour = flavour
        if variant & CLIENT:
            self.conn = flavour.connection(Role.CLIENT, config, setup=setup_frame(variant))
        else:
            self.conn = flavour.connection(Role.SERVER, config)
        self.now = 0.0
        self.closed = False
        self.ids: list[int] = []  # stream ids we opened or the peer opened
        self.prefixed = config.length_prefixed
        self.reader = flavour.reader()  # splits what we send
        self.limit = config.outbound_frame_limit
        self.resume: ResumeFrame | None = None

    # ------------------------------------------------------------------------ checks

    def events(self, events: list[Event]) -> None:
        check(isinstance(events, list), "events is not a list: %r", events)
        for i, e in enumerate(events):
            check(isinstance(e, Event), "not an Event: %r", e)
            if isinstance(e, ConnectionClosed):
                check(not self.closed, "a second ConnectionClosed")
                check(i == len(events) - 1, "ConnectionClosed is not the last event: %r",
                      events)
                self.closed = True
            elif isinstance(e, RequestReceived):
                self.ids.append(e.stream_id)
            elif isinstance(e, ResumeReceived):
                self.resume = e.frame
            elif isinstance(e, SetupReceived):
                check(not self.conn.is_client, "a client reported SETUP")
        conn = self.conn
        if self.closed:
            check(not conn.is_open, "ConnectionClosed reported, the connection is open")
        else:
            check(conn.is_open, "the connection closed without ConnectionClosed")
        peer_streams = getattr(conn, "peer_stream_count", 0)  # (not in the 2015 draft's)
        check(peer_streams <= conn.config.max_concurrent_streams,
              "%d streams opened by the peer, over max_concurrent_streams", peer_streams)
        conn.next_deadline()

    def drain(self) -> None:
        conn = self.conn
        if self.prefixed:
            data = conn.data_to_send()
            if not data:
                return
            frames = self.reader.feed(data)
            check(self.reader.buffered == 0, "data_to_send ended inside a frame")
        else:
            frames = conn.frames_to_send()
        decode_frame = self.flavour.decode
        limited = self.flavour.limited
        for frame in frames:
            try:
                f = decode_frame(frame)
            except E.FrameDecodeError as exc:
                check(False, "we queued a malformed frame %s: %s", bytes(frame[:40]).hex(), exc)
            if f.frame_type in limited:
                check(len(frame) <= self.limit, "a %s frame of %d bytes, over the outbound limit "
                      "of %d", f.frame_type.name, len(frame), self.limit)

    # ------------------------------------------------------------------------ input

    def feed(self, chunk: bytes) -> None:
        conn = self.conn
        if self.prefixed:
            events = conn.receive_data(chunk, self.now)
        else:
            events = conn.receive_frame(chunk, self.now)
        if self.closed:
            check(events == [], "a closed connection returned %r", events)
        self.events(events)

    def pick(self, arg: int) -> int:
        """A stream id: one in use when ``arg``'s top bit is set, else ``arg`` itself."""
        ids = self.ids
        if arg & 0x80 and ids:
            return ids[arg % len(ids)]
        return arg

    def call(self, op: int, arg: int) -> None:
        conn = self.conn
        events: list[Event] = []
        try:
            events = _CALLS[op % len(_CALLS)](self, conn, arg)
        except E.LocalProtocolError:
            # documented: the API used in a state that forbids it; nothing is sent
            out = conn.data_to_send() if self.prefixed else conn.frames_to_send()
            check(not out, "LocalProtocolError, yet %r was queued", out)
        self.events(events or [])


def _payload(arg: int, scale: int = 1) -> Payload:
    return Payload(bytes([arg]) * ((arg & 15) * scale), None if arg & 16 else b"md" * scale)


def _request(kind: str):
    def call(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
        if kind == "response":
            sid = conn.request_response(_payload(arg))
        elif kind == "fnf":
            conn.fire_and_forget(_payload(arg))
            return []
        elif kind == "stream":
            sid = conn.request_stream(_payload(arg), arg + 1)
        else:
            sid = conn.request_channel(_payload(arg, 1 + (arg >> 5) * 8), arg + 1,
                                       complete=bool(arg & 32))
        d.ids.append(sid)
        return []
    return call


def _send_payload(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    conn.send_payload(d.pick(arg), _payload(arg, 1 + (arg & 0x60)), complete=bool(arg & 1))
    return conn.pending_events()


def _send_complete(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    conn.send_complete(d.pick(arg))
    return conn.pending_events()


def _send_error(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    conn.send_error(d.pick(arg), E.ApplicationError("fuzz" * (arg & 7)))
    return conn.pending_events()


def _send_cancel(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    conn.send_cancel(d.pick(arg))
    return conn.pending_events()


def _send_request_n(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    conn.send_request_n(d.pick(arg), 1 + (arg & 0x7F) * 0x1000000)
    return conn.pending_events()


def _tick(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    d.now += arg / 16.0  # up to ~16 s: past keepalive (1 s) and max lifetime (5 s)
    return conn.tick(d.now)


def _tick_deadline(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    deadline = conn.next_deadline()
    if deadline is not None and deadline > d.now:
        d.now = deadline
    return conn.tick(d.now)


def _begin_close(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    return conn.begin_close(d.now, drain_timeout=arg * 4)


def _metadata_push(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    conn.metadata_push(b"m" * (arg % (d.limit - 20)))  # (fits one frame of either flavour)
    return []


def _send_lease(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    conn.send_lease(Lease(arg * 20, arg & 7, b"lm" if arg & 8 else None), d.now)
    return []


def _detach(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    return conn.detach(d.now)


def _resume(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    if not d.flavour.resume:
        return []
    if conn.is_client:
        conn.start_resume(d.now)
        return []
    sent = conn.sent_position
    position = (0, sent, max(0, sent - arg), sent + 1)[arg & 3]
    first = conn.received_position if arg & 4 else 0
    frame = ResumeFrame(token=TOKEN, last_received_server_position=position,
                        first_available_client_position=first)
    return conn.resume_session(frame, d.now)


def _close(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    return conn.close(E.ConnectionError("fuzz") if arg & 1 else None)


def _connection_lost(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    return conn.connection_lost()


def _reject(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    if d.resume is not None and arg & 1:
        return conn.reject_resume("no such session")
    return conn.reject_setup(E.RejectedSetupError("fuzz"))


def _pending(d: _Driver, conn: RSocketConnection, arg: int) -> list[Event]:
    return conn.pending_events()


_CALLS = [
    _request("response"), _request("fnf"), _request("stream"), _request("channel"),
    _send_payload, _send_complete, _send_error, _send_cancel, _send_request_n, _tick,
    _tick_deadline, _begin_close, _metadata_push, _send_lease, _detach, _resume, _close,
    _connection_lost, _reject, _pending,
]


def run(data: bytes, role_bit: int, flavour: Flavour = RSOCKET) -> None:
    """Run one input against a new connection; ``role_bit`` is :data:`CLIENT` or 0 (the
    variant byte's own role bit is replaced)."""
    records = Records(data)
    variant = (records.variant & ~CLIENT) | role_bit
    d = _Driver(variant, flavour)
    if not variant & CLIENT and variant & PRESET:
        setup = flavour.encode_setup(d.variant)
        d.feed(flavour.frame_with_length(setup) if d.prefixed else setup)
    d.drain()
    for op, value in records:
        if op == FEED:
            d.feed(value)  # type: ignore[arg-type]
        else:
            d.call(op, value)  # type: ignore[arg-type]
        d.drain()
