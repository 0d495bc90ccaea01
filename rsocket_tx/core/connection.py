"""The sans-IO RSocket connection (spec §Connection Establishment, §Stream Sequences and
Lifetimes, §Flow Control, §Handling the Unexpected).

:class:`RSocketConnection` is a state machine with no I/O: feed it the bytes (or frames) the
transport received, get back a list of :mod:`events <rsocket_tx.core.events>`, and drain the
bytes it wants sent. Time comes in through :meth:`RSocketConnection.tick`; nothing here reads
a clock or imports Twisted. One connection holds both the requester and the responder side:
either end may open streams (client ids odd from 1, server ids even from 2).

Per-stream rules are a table: for each (interaction, role) the half-streams that exist and
whether our sending needs credit; every received frame is dispatched by frame type through a
dict, and a frame that the current state does not account for is ignored as spec §Handling the
Unexpected requires.

What RSocket shares with the other multiplexed protocols comes from the mux layer
(:mod:`rsocket_tx.mux`): the streams live in a :class:`~rsocket_tx.mux.streams.StreamTable`
(per-direction half-close, ``max_concurrent_streams`` counted on the streams the peer opened),
stream ids come from :class:`~rsocket_tx.mux.ids.ParityIds` (odd for the client, even for the
server, never reused), each stream's request-n is a :class:`~rsocket_tx.mux.credit.Credit` in
items, fragments are reassembled in :class:`~rsocket_tx.mux.reassembly.Reassembler` objects, and
output queues in an :class:`~rsocket_tx.mux.outbox.Outbox`. Timers stay named fields here
(SETUP timeout, KEEPALIVE, max lifetime, drain, lease expiry, resume session): each is checked
in its own state and order, and max lifetime moves with every read.

Resumption (spec §Resuming Operation) is off unless the client's SETUP carries a resume token
(and, on a server, ``config.resume`` accepts it). A resumable connection counts the positions
of the stream frames it receives (one addition per read) and keeps the stream frames it sends
in a :class:`~rsocket_tx.core.resume.ResumeBuffer`; it outlives its transport (``detach()``)
and continues on a new one (client ``start_resume()``, server ``resume_session()``). With
resumption off none of this runs: the send path is the plain one, the receive path checks one
attribute per read.

Leases (spec §Lease Semantics) are off unless the client's SETUP carries the L flag; then they
run both ways: :attr:`RSocketConnection.requester_lease` counts what we may send (a request
past it raises :class:`~rsocket_tx.core.errors.LeaseError`), and
:attr:`RSocketConnection.responder_lease` what we granted (a request past it is answered with
ERROR[REJECTED]). With leases off a request costs one ``is not None`` check more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from struct import Struct
from typing import Final, Literal

from ..mux.credit import Credit, CreditUnit
from ..mux.errors import IdsExhausted
from ..mux.ids import ParityIds
from ..mux.native import mypyc_attr
from ..mux.outbox import Outbox
from ..mux.reassembly import ReassemblyBudget
from ..mux.streams import MuxStream, StreamTable
from . import errors as E
from .config import SUPPORTED_VERSIONS, ConnectionConfig, check_drain_timeout
from .events import (
    CancelReceived,
    ConnectionClosed,
    ConnectionClosing,
    ConnectionDetached,
    ConnectionResumed,
    Event,
    LeaseReceived,
    MetadataPushReceived,
    PayloadReceived,
    PayloadsReceived,
    RequestNReceived,
    RequestReceived,
    RequestsReceived,
    ResponsesReceived,
    ResumeReceived,
    SetupReceived,
    StreamErrored,
)
from .fragmentation import Reassembly, encode_payload_bearing, fragment
from .frames import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_IGNORE,
    FLAG_METADATA,
    FLAG_NEXT,
    MAX_U31,
    ErrorFrame,
    Frame,
    FrameType,
    KeepaliveFrame,
    LeaseFrame,
    MetadataPushFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
    decode,
    encode,
)
from .framing import FrameReader
from .lease import Lease, LeaseStats, RequesterLease, ResponderLease
from .payload import Payload
from .resume import (
    ResumeBuffer,
    ResumePositionError,
    check_resume,
    positioned_size,
    resume_version_supported,
)

__all__ = ["RSocketConnection", "Role"]

_HEADER = Struct(">IH")
_U32 = Struct(">I")
_REQUEST_N_HEAD = Struct(">IHI")
_PAYLOAD = int(FrameType.PAYLOAD)
_PREFIXED_HEADER = Struct(">BHIH")  # 24-bit length prefix (as 8 + 16 bits), stream id, type+flags
_U24 = Struct(">BH")
_FCN = FLAG_FOLLOWS | FLAG_COMPLETE | FLAG_NEXT
_FOLLOWS_OR_METADATA = FLAG_FOLLOWS | FLAG_METADATA
_NEXT_COMPLETE = FLAG_NEXT | FLAG_COMPLETE
_NO_COPY_SIZE = 16384  # bytes of data above which a frame's header and data are queued apart
_STREAM_ZERO = b"\x00\x00\x00\x00"

RESPONSE = FrameType.REQUEST_RESPONSE
FNF = FrameType.REQUEST_FNF
STREAM = FrameType.REQUEST_STREAM
CHANNEL = FrameType.REQUEST_CHANNEL
# the type bits of REQUEST_RESPONSE and REQUEST_FNF, no flags (their hot paths)
_RESPONSE_TYPE = int(RESPONSE) << 10
_FNF_TYPE = int(FNF) << 10
# a request-response's answer: PAYLOAD with N|C
_RESPONSE_PAYLOAD_TYPE = (_PAYLOAD << 10) | FLAG_NEXT | FLAG_COMPLETE
_SETUP_ERROR_CODES = frozenset({E.ErrorCode.INVALID_SETUP, E.ErrorCode.UNSUPPORTED_SETUP,
                                E.ErrorCode.REJECTED_SETUP, E.ErrorCode.REJECTED_RESUME})


_KINDS = {4: RESPONSE, 5: FNF, 6: STREAM, 7: CHANNEL}
_ITEMS = CreditUnit.ITEMS


def _split(buf: bytes, offset: int, tf: int) -> tuple[bytes, bytes | None] | None:
    """Split [metadata length, metadata,] data at ``offset``; None if the length is bad."""
    if not tf & FLAG_METADATA:
        return buf[offset:], None
    start = offset + 3
    if len(buf) < start:
        return None
    end = start + ((buf[offset] << 16) | (buf[offset + 1] << 8) | buf[offset + 2])
    if end > len(buf):
        return None
    return buf[end:], buf[start:end]


def _invalid_setup(f: SetupFrame) -> str | None:
    """Why a decoded SETUP is invalid (RSocket 1.0 Protocol §SETUP Frame), or None.

    The decoder already refused keepalive interval and max lifetime 0, reserved bits and
    lengths past the frame. Checked here: stream id 0; a version this server speaks; a resume
    token that is not empty when the R flag is set; MIME types of printable US-ASCII, not
    null-terminated (the spec: "SHOULD be a US-ASCII string", "MUST NOT be null terminated";
    their meaning is the application's).
    """
    if f.stream_id != 0:
        return "SETUP must use stream id 0"
    if (f.major_version, f.minor_version) not in SUPPORTED_VERSIONS:
        return (f"unsupported version {f.major_version}.{f.minor_version}; "
                "this server speaks 1.0")
    if f.resume_token is not None and not f.resume_token:
        return "SETUP has the R flag with an empty resume identification token"
    for name, mime in (("metadata", f.metadata_mime_type), ("data", f.data_mime_type)):
        if mime.translate(None, _PRINTABLE_ASCII):
            return (f"the {name} encoding MIME type {mime[:64]!r} is not printable US-ASCII"
                    " (or is null-terminated)")
    return None


_PRINTABLE_ASCII = bytes(range(0x20, 0x7F))


class Role:
    CLIENT: Final = "client"
    SERVER: Final = "server"


# state: connection lifecycle
_AWAIT_SETUP = 0   # server before SETUP
_OPEN = 1
_CLOSED = 2
_DETACHED = 3   # resumable: no transport, the session waits
_RESUMING = 4   # resumable client: RESUME sent on a new transport, waiting for RESUME_OK
_RESUME_PENDING = 5   # server: a new connection began with RESUME; the caller decides


class _Stream(MuxStream):
    """One stream's state as seen from this end (a :class:`~rsocket_tx.mux.streams.MuxStream`).

    ``send_open``/``recv_open``: whether our outbound half / the peer's outbound half is still
    live. ``kind``: the interaction (its REQUEST_* frame type). ``requester``: we opened it.
    ``credit``: the PAYLOADs we may still send, in items (None: our sending needs no credit).
    ``reassembly``: the fragments of a payload or request arriving, or None.
    """

    __slots__ = ("kind", "requester", "credit", "reassembly")

    def __init__(self, stream_id: int, kind: int, requester: bool, send_open: bool,
                 recv_open: bool, credit: Credit | None) -> None:
        # (the MuxStream slots are set here directly: one call less per stream; ``remote`` is
        # set by StreamTable.add)
        self.stream_id = stream_id
        self.send_open = send_open
        self.recv_open = recv_open
        self.kind = kind
        self.requester = requester
        self.credit = credit
        self.reassembly: Reassembly | None = None


# (interaction, we are requester) -> (send_open, recv_open, our sending needs credit)
# after the request frame has been sent / received.
_STREAM_TABLE = {
    (RESPONSE, True): (False, True, False),
    (RESPONSE, False): (True, False, False),
    (STREAM, True): (False, True, False),
    (STREAM, False): (True, False, True),
    (CHANNEL, True): (True, True, True),
    (CHANNEL, False): (True, True, True),
}


@mypyc_attr(allow_interpreted_subclasses=True)
class RSocketConnection:
    """One RSocket connection, client or server side, with no I/O.

    :param role: :attr:`Role.CLIENT` or :attr:`Role.SERVER`.
    :param config: limits and timers (:class:`~rsocket_tx.core.config.ConnectionConfig`).
    :param setup: client only: the SETUP frame to send; it is queued at once and written by the
        caller's first drain, as a single transport write.
    :param now: the current time in seconds (any epoch; the same clock as :meth:`tick`).
    :param frame_logger: optional ``callable(direction, frame)`` called with ``"send"`` or
        ``"recv"`` and the decoded frame, for debug logs (slows the hot path).
    :raises ValueError: a client without ``setup``.

    A client whose ``setup`` carries ``resume_token`` is resumable (spec §Resuming Operation);
    a server becomes resumable when it accepts such a SETUP (``config.resume``). A client
    whose ``setup`` has ``lease`` set, and a server that accepts such a SETUP, use leases
    (spec §Lease Semantics): see :attr:`requester_lease`, :attr:`responder_lease` and
    :meth:`send_lease`.
    """

    def __init__(self, role: str, config: ConnectionConfig | None = None, *,
                 setup: SetupFrame | None = None, now: float = 0.0,
                 frame_logger: Callable[[str, Frame], None] | None = None) -> None:
        if role not in (Role.CLIENT, Role.SERVER):
            raise ValueError(f"role must be 'client' or 'server', got {role!r}")
        self.role = role
        self.config = config = config or ConnectionConfig()
        self.is_client = role == Role.CLIENT
        # a server's first frame (SETUP or RESUME) is bounded by max_setup_frame_size
        self._reader = FrameReader(
            config.max_frame_size,
            None if role == Role.CLIENT else config.setup_frame_limit,
        ) if config.length_prefixed else None
        self._max_frame_size = config.max_frame_size
        self._limit = config.outbound_frame_limit
        self._out = Outbox()
        # bytes held by unfinished reassemblies across all streams (max_reassembly_buffer_size)
        self._reassembly_budget = ReassemblyBudget(config.reassembly_budget)
        self._prefixed = config.length_prefixed
        # RSocket 1.0 §Stream Identifiers: client ids odd from 1, server ids even from 2,
        # never reused
        self._ids = ParityIds(1 if self.is_client else 2, MAX_U31)
        # the open streams; the limit counts the streams the peer opened (ours are bounded by
        # our application): a request past it is rejected. A graceful close sets it to -1.
        self._streams: StreamTable[_Stream] = StreamTable(config.max_concurrent_streams,
                                                          is_local=self._ids.is_local)
        self._frame_logger = frame_logger
        # the request-responses we sent on the hot path whose answer has not come: bare ids,
        # no _Stream, as long as nothing but their answer happens to them (_stream turns one
        # into a full stream on demand: a fragment, an ERROR, a cancel, a graceful close)
        self._awaiting: set[int] = set()
        # likewise the requests for a response the peer sent us that our responder has still to
        # answer (they count against max_concurrent_streams as remote streams)
        self._serving: set[int] = set()
        self.setup: SetupFrame | None = None
        self.closed_error: E.RSocketError | None = None
        self._now = now
        self._last_alive = now
        self._alive_since_tick = False
        self._next_keepalive: float | None = None
        self._setup_deadline = 0.0  # server: when SETUP must have arrived
        self._setup_confirmed = False
        self._closing = False  # a graceful close is under way
        self._closing_error: E.ConnectionCloseError | None = None  # the peer's, if it asked
        self._close_message = ""
        self._drain_timeout = 0
        self._drain_deadline: float | None = None
        self._pending: list[Event] = []  # events of a close completed outside receive/tick
        #: an oversize length prefix that followed complete frames in one read: the
        #: connection fails once the caller has handled their events (:meth:`pending_events`)
        self.read_failure: E.FrameTooLargeError | None = None
        #: return the whole items of a stream that arrive in one read as one
        #: :class:`PayloadsReceived` instead of a :class:`PayloadReceived` each (the caller's
        #: batch path; default False)
        self.batch_payloads = False
        #: return the whole (unfragmented) fire-and-forgets and request-responses that
        #: arrive one after another in one read as one :class:`RequestsReceived`, and the
        #: answers to our request-responses as one :class:`ResponsesReceived`, instead of an
        #: event each (the caller's batch path; default False)
        self.batch_requests = False
        # resumption (None/0 unless the SETUP carried a resume token)
        self.resume_buffer: ResumeBuffer | None = None
        # the resumable send path (_queue_resumable ...) once resume is enabled, until closed
        self._resumable_send = False
        self._received = 0  # implied position of the stream frames received
        self.resume_token: bytes | None = None
        self._detached_at = 0.0
        # leases (None unless the client's SETUP had the L flag): what the peer granted us,
        # and what we granted the peer
        self._lease: RequesterLease | None = None
        self._granted: ResponderLease | None = None
        # the largest request frame (bytes) the request hot path builds itself, -1 for none:
        # recomputed by _update_fast whenever one of its inputs changes (see there)
        self._fast_size = -1
        self._state = _AWAIT_SETUP
        #: False once the connection has closed (locally or by the peer); kept with the
        #: state (a plain attribute: read on every request)
        self.is_open = True
        # the frame-type table holds functions, not methods bound to this connection: no
        # reference cycle, so a closed connection is freed by reference counting alone
        cls = type(self)
        self._dispatch = {
            FrameType.SETUP: cls._on_setup,
            FrameType.LEASE: cls._on_lease,
            FrameType.KEEPALIVE: cls._on_keepalive,
            FrameType.REQUEST_RESPONSE: cls._on_request,
            FrameType.REQUEST_FNF: cls._on_request,
            FrameType.REQUEST_STREAM: cls._on_request,
            FrameType.REQUEST_CHANNEL: cls._on_request,
            FrameType.REQUEST_N: cls._on_request_n,
            FrameType.CANCEL: cls._on_cancel,
            FrameType.PAYLOAD: cls._on_payload,
            FrameType.ERROR: cls._on_error,
            FrameType.METADATA_PUSH: cls._on_metadata_push,
            FrameType.RESUME: cls._on_resume,
            FrameType.RESUME_OK: cls._on_resume_ok,
            FrameType.EXT: cls._on_ext,
        }
        if self.is_client:
            if setup is None:
                raise ValueError("a client connection needs the SETUP frame to send")
            self.setup = setup
            if setup.lease:
                self._enable_lease()
            if setup.resume_token is not None:
                self._enable_resume(setup.resume_token)
            self.state = _OPEN
            self._next_keepalive = now + setup.keepalive_interval / 1000.0
            self._queue_frame(setup)
        else:
            self.state = _AWAIT_SETUP
            self._setup_deadline = now + config.setup_timeout / 1000.0

    # ---------------------------------------------------------------------------- properties

    @property
    def state(self) -> int:
        """The connection's lifecycle state (a module-level constant; internal)."""
        return self._state

    @state.setter
    def state(self, state: int) -> None:
        self._state = state
        self.is_open = state != _CLOSED
        self._update_fast()

    def _update_fast(self) -> None:
        """Recompute when the request hot paths (:meth:`request_response`,
        :meth:`fire_and_forget`) may build a frame themselves: an open connection that is not
        closing, over a byte stream, with no lease, no resumption and no frame logger; then
        for a request of up to ``_fast_size`` bytes (the frame limit, and no more than the
        size above which data is queued uncopied) without metadata. Called whenever the
        state, the graceful close, the lease or the resumption changes (the transport kind
        and the frame logger are fixed at construction)."""
        if self._state == _OPEN and not self._closing and self._lease is None and \
                self._prefixed and self._frame_logger is None and self.resume_buffer is None:
            self._fast_size = min(self._limit, _NO_COPY_SIZE)
        else:
            self._fast_size = -1

    @property
    def is_established(self) -> bool:
        """True while the connection is set up (or resumed) and carries streams: not waiting
        for SETUP or RESUME_OK, not detached, not closed."""
        return self._state == _OPEN

    @property
    def is_resumable(self) -> bool:
        """True when this connection resumes after a transport failure (its SETUP carried a
        resume token, accepted by the server)."""
        return self.resume_buffer is not None

    @property
    def is_detached(self) -> bool:
        """True while a resumable connection has no working transport: detached, or (client)
        waiting for RESUME_OK on a new one."""
        return self._state == _DETACHED or self._state == _RESUMING

    @property
    def sent_position(self) -> int:
        """Resumable: bytes of stream frames sent so far (spec §Implied Position); else 0."""
        buffer = self.resume_buffer
        return 0 if buffer is None else buffer.position

    @property
    def received_position(self) -> int:
        """Resumable: the implied position of the stream frames received; else 0."""
        return self._received

    @property
    def is_closing(self) -> bool:
        """True while a graceful close waits for open streams (see :meth:`begin_close`)."""
        return self._closing and self._state != _CLOSED

    @property
    def inbound_buffered(self) -> int:
        """Bytes received and held for a frame not yet complete (byte-stream transports;
        bounded by ``max_setup_frame_size`` before SETUP, ``max_frame_size`` after it)."""
        reader = self._reader
        return 0 if reader is None else reader.buffered

    @property
    def reassembly_held(self) -> int:
        """Bytes held by unfinished reassemblies across all streams (bounded by
        ``max_reassembly_buffer_size``)."""
        return self._reassembly_budget.held

    @property
    def stream_count(self) -> int:
        """Streams currently open on this connection."""
        return len(self._streams) + len(self._awaiting) + len(self._serving)

    @property
    def peer_stream_count(self) -> int:
        """Streams the peer opened that are still open (what ``max_concurrent_streams``
        bounds)."""
        return self._streams.remote + len(self._serving)

    @property
    def lease_enabled(self) -> bool:
        """True when this connection uses leases (the client's SETUP had the L flag)."""
        return self._lease is not None

    @property
    def requester_lease(self) -> RequesterLease | None:
        """The lease the peer granted us (:class:`~rsocket_tx.core.lease.RequesterLease`), or
        None without leases."""
        return self._lease

    @property
    def responder_lease(self) -> ResponderLease | None:
        """What we granted the peer (:class:`~rsocket_tx.core.lease.ResponderLease`), or None
        without leases."""
        return self._granted

    def lease_available(self) -> int | None:
        """Requests we may send now under the peer's lease (0: none); None without leases.
        "Now" is the time of the last :meth:`tick` or timed receive (``next_deadline`` asks
        for a tick when the lease expires)."""
        lease = self._lease
        return None if lease is None else lease.available(self._now)

    def lease_stats(self) -> LeaseStats | None:
        """What our responder granted and saw
        (:class:`~rsocket_tx.core.lease.LeaseStats`, ``active_streams`` = the streams the
        peer has open towards us), or None without leases."""
        granted = self._granted
        return None if granted is None else granted.stats(self._now, self.peer_stream_count)

    def is_requester(self, stream_id: int) -> bool:
        """Whether this side opened (requested) ``stream_id``: RSocket 1.0 Protocol §Stream
        Identifiers gives each side its parity (the client's odd, the server's even ids)."""
        return self._ids.is_local(stream_id)

    def has_stream(self, stream_id: int) -> bool:
        """True while ``stream_id`` is an open stream."""
        # (the dict's get and the set's membership: no Python call)
        return self._streams.get(stream_id) is not None or stream_id in self._awaiting or \
            stream_id in self._serving

    def _stream(self, stream_id: int) -> _Stream | None:
        """The open stream ``stream_id``, or None: a request-response held as a bare id
        (awaiting its answer, or being served) becomes a full stream here (for every path but
        the answer's)."""
        s = self._streams.get(stream_id)
        if s is None:
            if stream_id in self._awaiting:
                self._awaiting.remove(stream_id)
                s = _Stream(stream_id, RESPONSE, True, False, True, None)
                self._streams.add(s, remote=False)
            elif stream_id in self._serving:
                self._serving.remove(stream_id)
                s = _Stream(stream_id, RESPONSE, False, True, False, None)
                self._streams.add(s, remote=True)
        return s

    def _promote_awaiting(self) -> None:
        """Make every request-response held as a bare id a full stream (a graceful close
        counts and drains the stream table)."""
        for stream_id in sorted(self._awaiting | self._serving):
            self._stream(stream_id)

    def credit(self, stream_id: int) -> int:
        """PAYLOADs we may send on ``stream_id`` now (0 for an unknown stream).

        Streams whose sending needs no credit (request-response answers) report 1.
        """
        s = self._stream(stream_id)
        if s is None or not s.send_open:
            return 0
        return 1 if s.credit is None else s.credit.available

    # ---------------------------------------------------------------------------- output

    def data_to_send(self) -> bytes:
        """Drain queued output for a byte-stream transport (length-prefixed frames)."""
        out = self._out  # (an Outbox is a list: joined and cleared with no Python call)
        if not out:
            return b""
        data = b"".join(out) if len(out) > 1 else out[0]
        out.clear()
        return data

    def chunks_to_send(self) -> list[bytes]:
        """Drain queued output for a byte-stream transport as a list of chunks whose
        concatenation is what :meth:`data_to_send` would return (for ``writeSequence``: large
        payloads are not copied into one buffer)."""
        return self._out.drain()

    def frames_to_send(self) -> list[bytes]:
        """Drain queued output for a message transport: one frame per list item, no prefix."""
        return self._out.drain()

    def _queue_now(self, frame_bytes: bytes) -> None:
        """Queue one frame for the transport now (a resumable session's ``_queue`` also keeps
        it for replay, and holds it while detached)."""
        if self._prefixed:
            self._out.append(len(frame_bytes).to_bytes(3, "big"))
        self._out.append(frame_bytes)
        if self._frame_logger is not None:
            self._frame_logger("send", decode(frame_bytes))

    def _queue(self, frame_bytes: bytes) -> None:
        """Queue one frame: :meth:`_queue_resumable` on a resumable session, else
        :meth:`_queue_now`."""
        if self._resumable_send:
            self._queue_resumable(frame_bytes)
        else:
            self._queue_now(frame_bytes)

    def _queue_payload_bearing(self, frame_type: int, sid: int, flags: int, fixed: bytes,
                               data: bytes, metadata: bytes | None) -> None:
        """Queue a REQUEST_* or PAYLOAD frame, fragmenting it when it exceeds the limit.

        The hot path of sending: the length prefix is packed with the header, so one unfragmented
        frame costs one header pack and one concatenation.
        """
        if self._resumable_send:
            self._queue_payload_bearing_resumable(frame_type, sid, flags, fixed, data, metadata)
            return
        n = 6 + len(fixed) + len(data) + (0 if metadata is None else len(metadata) + 3)
        if n > self._limit:
            for f in fragment(frame_type, sid, fixed, data, metadata, flags & FLAG_COMPLETE != 0,
                              flags & FLAG_NEXT != 0, self._limit):
                self._queue(f)
            return
        tf = (frame_type << 10) | flags
        if metadata is not None:
            tf |= FLAG_METADATA
        if not self._prefixed or self._frame_logger is not None:
            self._queue(encode_payload_bearing(frame_type, sid, flags, fixed, data, metadata))
            return
        if metadata is None:
            head = _PREFIXED_HEADER.pack(n >> 16, n & 0xFFFF, sid, tf)
            if len(data) > _NO_COPY_SIZE:
                self._out.extend((head + fixed, data))  # large data is not copied
            else:
                self._out.append(head + fixed + data if fixed else head + data)
        else:
            mlen = len(metadata)
            self._out.append(b"".join((_PREFIXED_HEADER.pack(n >> 16, n & 0xFFFF, sid, tf), fixed,
                                       _U24.pack(mlen >> 16, mlen & 0xFFFF), metadata, data)))

    def _queue_frame(self, frame: Frame) -> None:
        self._queue(encode(frame))

    # ---------------------------------------------------------------------------- input

    def receive_data(self, data: bytes, now: float | None = None) -> list[Event]:
        """Feed bytes from a byte-stream transport; return the events they complete.

        :param now: the current time in seconds (the clock of :meth:`tick`); it marks the peer
            alive (max lifetime). When None, the peer counts as alive at the next tick.

        A malformed frame or a frame over ``max_frame_size`` is answered with
        ERROR[CONNECTION_ERROR] and a :class:`ConnectionClosed` event; never an exception.
        Before SETUP (server) a first frame that is no valid SETUP or RESUME, or one over
        ``max_setup_frame_size``, is answered with ERROR[INVALID_SETUP] (spec §Connection
        Establishment). When complete frames came before an oversize length prefix in
        ``data``, their events are returned and the failure waits in
        :attr:`read_failure` until the caller has handled them: :meth:`pending_events`
        returns it (so does the next ``receive_data`` or ``tick``). The outcome does not
        depend on how TCP cut the bytes.

        :raises LocalProtocolError: the connection is configured for a message transport
            (``config.length_prefixed`` false: use :meth:`receive_frame`).
        """
        state = self._state
        if state == _CLOSED or state == _DETACHED:
            return []  # (detached: bytes of a transport already given up)
        if self.read_failure is not None:
            return self.pending_events()  # (the bytes after an oversize prefix: moot)
        reader = self._reader
        if reader is None:
            raise E.LocalProtocolError("receive_data needs a length-prefixed transport "
                                       "(config.length_prefixed); use receive_frame")
        too_large = None
        try:
            frames = reader.feed(data)
        except E.FrameTooLargeError as exc:
            # the complete frames before the oversize prefix count as if they came alone
            frames = exc.frames
            # (kept as a value: its traceback would hold this frame, and so this connection,
            # in a reference cycle)
            too_large = exc.with_traceback(None)
        return self._receive_frames(frames, too_large, now)

    def receive_frames(self, frames: list[bytes], now: float | None = None) -> list[Event]:
        """Feed the whole frames of one read of a message transport (WebSocket: the messages
        cut out of one read); return their events: what :meth:`receive_frame` returns for
        each, in one batch, through the same path as the frames of :meth:`receive_data`.
        A frame over ``max_frame_size`` is answered as in :meth:`receive_data`: the frames
        before it first, then the failure (:attr:`read_failure`).

        :param now: as in :meth:`receive_data`.
        """
        state = self._state
        if state == _CLOSED or state == _DETACHED:
            return []
        if self.read_failure is not None:
            return self.pending_events()
        if state != _OPEN:  # (SETUP, RESUME: with their own limits, one at a time)
            events: list[Event] = []
            for frame in frames:
                events += self.receive_frame(frame, now)
            return events
        too_large = None
        limit = self._max_frame_size
        if max(map(len, frames)) > limit:
            k = next(k for k, frame in enumerate(frames) if len(frame) > limit)
            too_large = E.FrameTooLargeError(
                f"frame length {len(frames[k])} exceeds the max frame size of {limit} bytes",
                frames[:k])
            frames = too_large.frames
        return self._receive_frames(frames, too_large, now)

    def _receive_frames(self, frames: list[bytes], too_large: E.FrameTooLargeError | None,
                        now: float | None) -> list[Event]:
        state = self._state
        events: list[Event] = []
        if frames:
            self._mark_alive(now)
            if state != _OPEN:
                frames = self._receive_handshake(frames, events)
            if self.resume_buffer is not None and frames:
                self._received += positioned_size(frames)
        fast = self._frame_logger is None
        get_stream = self._streams.get
        awaiting = self._awaiting
        serving = self._serving
        peer_parity = 0 if self.is_client else 1  # (the ids the peer opens: not 0)
        append = events.append
        batching = self.batch_payloads
        batch: list[Payload] = []
        batch_sid = batch_at = -1  # the batch open at the end of ``events``, if any
        # (batch_requests: the batch of requests, or of answers, open at the end of events)
        batching_requests = self.batch_requests
        req_ids: list[int] = []
        req_payloads: list[Payload] = []
        req_kind = RESPONSE
        req_at = answers_at = -1
        answer_ids: list[int] = []
        answers: list[Payload] = []
        for buf in frames:
            # fast path for the frequent frames (PAYLOAD and the four requests) on an open
            # connection: parsed here with no frame object; anything unusual or malformed takes
            # the full decoder, which reports it.
            if fast and self._state == _OPEN and len(buf) >= 6:
                sid, tf = _HEADER.unpack_from(buf, 0)
                ft = tf >> 10
                if ft == _PAYLOAD and sid <= MAX_U31:
                    fcn = tf & _FCN
                    if fcn == FLAG_NEXT or fcn == _NEXT_COMPLETE:
                        # the commonest frames: one whole item in the middle of a stream, or
                        # a whole last item (a request-response's answer)
                        s = get_stream(sid)
                        if s is None and sid in awaiting:
                            # the answer of a request-response we sent on the hot path
                            parts = _split(buf, 6, tf) if tf & FLAG_METADATA else (buf[6:], None)
                            if parts is not None:
                                awaiting.remove(sid)
                                self._setup_confirmed = True
                                if not batching_requests:
                                    append(PayloadReceived(sid, Payload(parts[0], parts[1]),
                                                           True))
                                elif answers_at == len(events):
                                    answer_ids.append(sid)
                                    answers.append(Payload(parts[0], parts[1]))
                                else:  # a new batch (events between)
                                    answer_ids = [sid]
                                    answers = [Payload(parts[0], parts[1])]
                                    append(ResponsesReceived(answer_ids, answers))
                                    answers_at = len(events)
                                continue
                        elif s is not None and s.recv_open and s.reassembly is None:
                            parts = _split(buf, 6, tf) if tf & FLAG_METADATA else (buf[6:], None)
                            if parts is not None:
                                if s.requester:
                                    self._setup_confirmed = True
                                if fcn == FLAG_NEXT and s.kind != RESPONSE:
                                    if not batching:
                                        append(PayloadReceived(sid, Payload(parts[0], parts[1]),
                                                               False))
                                    elif sid == batch_sid and len(events) == batch_at:
                                        batch.append(Payload(parts[0], parts[1]))
                                    else:  # a new batch (another stream, or events between)
                                        batch = [Payload(parts[0], parts[1])]
                                        append(PayloadsReceived(sid, batch))
                                        batch_sid, batch_at = sid, len(events)
                                    continue
                                # complete (a request-response answer is, with or without C):
                                # our half of a request-response is closed already, so the
                                # stream ends (one table call)
                                if s.kind == RESPONSE:
                                    self._streams.remove(sid)
                                    if self._closing and not self._streams:
                                        self._drained()
                                elif self._streams.close_recv(s) and self._closing and \
                                        not self._streams:
                                    self._drained()
                                append(PayloadReceived(sid, Payload(parts[0], parts[1]), True))
                                continue
                    parts = _split(buf, 6, tf)
                    if parts is not None:
                        self._payload(sid, tf & FLAG_FOLLOWS != 0, tf & FLAG_COMPLETE != 0,
                                      tf & FLAG_NEXT != 0, parts[0], parts[1], events)
                        continue
                elif ft == 5 and not tf & _FOLLOWS_OR_METADATA and sid & 1 == peer_parity and \
                        0 < sid <= MAX_U31 and get_stream(sid) is None and sid not in serving and \
                        self._granted is None and not self._closing:
                    # a whole fire-and-forget without metadata, as _request takes it when no
                    # lease or graceful close applies: no stream, one event
                    self._setup_confirmed = True
                    if not batching_requests:
                        append(RequestReceived(sid, FNF, Payload(buf[6:], None), 0, False))
                    elif req_at == len(events) and req_kind == FNF:
                        req_ids.append(sid)
                        req_payloads.append(Payload(buf[6:], None))
                    else:  # a new batch (another kind, or events between)
                        req_ids = [sid]
                        req_payloads = [Payload(buf[6:], None)]
                        req_kind = FNF
                        append(RequestsReceived(FNF, req_ids, req_payloads))
                        req_at = len(events)
                    continue
                elif ft == 4 and batching_requests and not tf & FLAG_FOLLOWS and \
                        sid & 1 == peer_parity and 0 < sid <= MAX_U31 and \
                        get_stream(sid) is None and sid not in serving and \
                        self._granted is None and not self._closing and \
                        self._fast_size >= 0 and \
                        self._streams.remote + len(serving) < self._streams.limit:
                    # a whole request-response, as _request takes it when no lease, graceful
                    # close or stream limit applies: a bare id in _serving, one batch entry
                    parts = _split(buf, 6, tf) if tf & FLAG_METADATA else (buf[6:], None)
                    if parts is not None:
                        self._setup_confirmed = True
                        serving.add(sid)
                        if req_at == len(events) and req_kind == RESPONSE:
                            req_ids.append(sid)
                            req_payloads.append(Payload(parts[0], parts[1]))
                        else:  # a new batch (another kind, or events between)
                            req_ids = [sid]
                            req_payloads = [Payload(parts[0], parts[1])]
                            req_kind = RESPONSE
                            append(RequestsReceived(RESPONSE, req_ids, req_payloads))
                            req_at = len(events)
                        continue
                elif 4 <= ft <= 7 and sid <= MAX_U31:
                    if ft < 6:
                        n = 0
                        parts = _split(buf, 6, tf) if tf & FLAG_METADATA else (buf[6:], None)
                    elif len(buf) >= 10:
                        n = _U32.unpack_from(buf, 6)[0]
                        parts = _split(buf, 10, tf) if 0 < n <= MAX_U31 else None
                    else:
                        parts = None
                    if parts is not None:
                        self._request(sid, _KINDS[ft], tf & FLAG_FOLLOWS != 0,
                                      ft == 7 and tf & FLAG_COMPLETE != 0, n, parts[0],
                                      parts[1], events)
                        continue
            if self._state == _CLOSED:
                break
            self._receive_one(buf, events)
        if too_large is not None and not too_large.frames:
            events += self._frame_too_large(too_large)
        if self._pending:
            events += self.pending_events()
        if too_large is not None and too_large.frames and self._state != _CLOSED:
            # the frames before the oversize prefix count as if they had come alone: their
            # events first, handled by the caller (who may answer them), then the failure
            self.read_failure = too_large
        return events

    def _frame_too_large(self, exc: E.FrameTooLargeError) -> list[Event]:
        """A length prefix past the limit: before SETUP (or RESUME) ERROR[INVALID_SETUP] (spec
        §Connection Establishment), after it ERROR[CONNECTION_ERROR]; the connection closes."""
        if self._state == _AWAIT_SETUP:
            return self._close_with(E.InvalidSetupError(exc.message), True)
        return self._fail_connection(exc)

    def receive_frame(self, frame: bytes, now: float | None = None) -> list[Event]:
        """Feed one whole frame from a message transport (WebSocket); return its events.

        :param now: as in :meth:`receive_data`.
        """
        if self._state == _CLOSED or self._state == _DETACHED:
            return []
        if self._state == _AWAIT_SETUP and len(frame) > self.config.setup_frame_limit:
            return self._frame_too_large(E.FrameTooLargeError(
                f"first frame length {len(frame)} exceeds the max setup frame size of "
                f"{self.config.setup_frame_limit} bytes"))
        if len(frame) > self._max_frame_size:
            return self._fail_connection(E.FrameTooLargeError(
                f"frame length {len(frame)} exceeds the max frame size of "
                f"{self._max_frame_size} bytes"))
        events: list[Event] = []
        self._mark_alive(now)
        if self.resume_buffer is not None and self._state == _OPEN and \
                frame[:4] != _STREAM_ZERO:
            self._received += len(frame)
        self._receive_one(frame, events)
        if self._pending:
            events += self.pending_events()
        return events

    def _receive_handshake(self, frames: list[bytes], events: list[Event]) -> list[bytes]:
        """Handle frames one by one until the connection is open (a server's SETUP, a client's
        RESUME_OK); return the frames after that, for the normal path (and position count)."""
        for i, buf in enumerate(frames):
            state = self._state
            if state == _OPEN:
                return frames[i:]
            if state != _AWAIT_SETUP and state != _RESUMING:
                return []  # closed, or a RESUME waiting for the caller: the rest is moot
            self._receive_one(buf, events)
        return []

    def pending_events(self) -> list[Event]:
        """Take the events produced outside :meth:`receive_data`, :meth:`receive_frame` and
        :meth:`tick`: during a graceful close, the :class:`ConnectionClosed` that follows when
        a ``send_*`` call ends the last open stream; after a read whose complete frames were
        followed by a length prefix past the limit (:attr:`read_failure`), the
        ERROR[CONNECTION_ERROR] and :class:`ConnectionClosed` of that prefix, once the
        frames' events have been handled (as if the frames had arrived alone). Call after
        such calls and reads (``receive_data`` and ``tick`` return these events themselves
        when called next)."""
        failure = self.read_failure
        if failure is not None:
            self.read_failure = None
            self._pending += self._frame_too_large(failure)
        pending, self._pending = self._pending, []
        return pending

    def _mark_alive(self, now: float | None) -> None:
        if now is None:
            self._alive_since_tick = True
        else:
            self._now = now
            self._last_alive = now

    def _receive_one(self, buf: bytes, events: list[Event]) -> None:
        try:
            frame = decode(buf)
        except E.FrameDecodeError as exc:
            if self._state == _AWAIT_SETUP:
                # spec §Connection Establishment: a first frame that is no valid SETUP or
                # RESUME (a field out of range, a length past the frame, an unknown type) is
                # answered with ERROR[INVALID_SETUP]
                events.extend(self._close_with(E.InvalidSetupError(
                    f"invalid first frame: {exc.message}"), True))
                return
            self._decode_failed(buf, exc, events)
            return
        self._receive_frame(frame, events)

    def _decode_failed(self, buf: bytes, exc: E.FrameDecodeError, events: list[Event]) -> None:
        if isinstance(exc, E.UnknownFrameTypeError):
            if exc.ignore:
                return
            events.extend(self._fail_connection(exc))
            return
        # spec §Metadata Optional Header: an invalid frame is a CONNECTION_ERROR unless its
        # IGNORE flag is set.
        if len(buf) >= 6 and buf[4] & (FLAG_IGNORE >> 8):
            return
        events.extend(self._fail_connection(exc))

    def _receive_frame(self, frame: Frame, events: list[Event]) -> None:
        if self._frame_logger is not None:
            self._frame_logger("recv", frame)
        state = self._state
        if state != _OPEN:
            if state == _AWAIT_SETUP and frame.frame_type != FrameType.SETUP:
                if isinstance(frame, ResumeFrame):
                    self._resume_requested(frame, events)
                else:
                    events.extend(self._close_with(E.InvalidSetupError(
                        f"first frame must be SETUP, got {frame.frame_type.name}"), True))
                return
            if state == _RESUMING:
                self._receive_while_resuming(frame, events)
                return
            if state == _RESUME_PENDING or state == _DETACHED:
                return
        self._dispatch[frame.frame_type](self, frame, events)

    # ---------------------------------------------------------------------------- time

    def tick(self, now: float) -> list[Event]:
        """Advance time: send KEEPALIVE when due, enforce max lifetime and setup timeout.

        :param now: current time in seconds, same clock as the constructor's ``now``.
        :returns: events (a :class:`ConnectionClosed` when the peer was silent too long).
        """
        self._now = now
        if self._state == _CLOSED:
            return []
        if self.read_failure is not None:
            return self.pending_events()
        if self._alive_since_tick:
            self._alive_since_tick = False
            self._last_alive = now
        state = self._state
        if state != _OPEN:
            if state == _AWAIT_SETUP:
                if now >= self._setup_deadline:
                    return self._close_with(E.InvalidSetupError(
                        f"no SETUP received within {self.config.setup_timeout} ms"), True)
                return []
            if state == _RESUME_PENDING:
                return []
            # detached or resuming: the session expires
            if now >= self._detached_at + self.config.resume_session_timeout / 1000.0:
                return self._close_with(E.ConnectionLostError(
                    f"the session was not resumed within {self.config.resume_session_timeout}"
                    " ms of losing its transport (resume session timeout)"), True, send=False)
            if state == _DETACHED:
                return []
        if self._drain_deadline is not None and now >= self._drain_deadline:
            return self._drain_expired()
        lifetime = self._max_lifetime_seconds()
        if now - self._last_alive >= lifetime:
            if state == _RESUMING:
                return self.detach(now, f"no RESUME_OK within {int(lifetime * 1000)} ms "
                                        "(max lifetime)")
            error = E.ConnectionLostError(
                f"no frame from the peer for {int(lifetime * 1000)} ms (max lifetime)")
            if self.resume_buffer is not None:
                return self.detach(now, error=error)
            return self._close_with(error, True)
        keepalive = self._next_keepalive
        if state == _OPEN and keepalive is not None and now >= keepalive:
            self._queue_frame(KeepaliveFrame(respond=True, last_received_position=self._received))
            interval = self._setup_frame().keepalive_interval / 1000.0
            nxt = keepalive + interval
            # a late tick sends one KEEPALIVE, not a burst catching up on missed ones
            self._next_keepalive = nxt if nxt > now else now + interval
        return []

    def next_deadline(self) -> float | None:
        """When :meth:`tick` must next be called (seconds), or None when closed."""
        state = self._state
        if state != _OPEN:
            if state == _CLOSED or state == _RESUME_PENDING:
                return None
            if state == _AWAIT_SETUP:
                return self._setup_deadline
            expiry = self._detached_at + self.config.resume_session_timeout / 1000.0
            if state == _DETACHED:
                return expiry
            lifetime = self._last_alive + self._max_lifetime_seconds()
            return lifetime if lifetime < expiry else expiry
        # if something arrived since the last tick the true deadline is later: ticking at this
        # one moves it on
        deadline = self._last_alive + self._max_lifetime_seconds()
        # the client ticks for each KEEPALIVE it sends; the server checks once per keepalive
        # interval, so a frame counted alive only at a tick is late by one interval at most
        keepalive = self._next_keepalive
        check = (self._now + self._setup_frame().keepalive_interval / 1000.0
                 if keepalive is None else keepalive)
        if check > deadline:
            check = deadline
        lease = self._lease
        if lease is not None:
            # a tick when the peer's lease expires: requests after it see the expired lease
            lease_expiry = lease.expires_at
            if lease_expiry is not None and self._now < lease_expiry < check:
                check = lease_expiry
        drain = self._drain_deadline
        return drain if drain is not None and drain < check else check

    def _max_lifetime_seconds(self) -> float:
        return self._setup_frame().max_lifetime / 1000.0

    def _setup_frame(self) -> SetupFrame:
        """The SETUP in force (sent or accepted): set in every state that has timers."""
        setup = self.setup
        assert setup is not None, "no SETUP yet"
        return setup

    # ---------------------------------------------------------------------------- requester

    def _check_can_request(self) -> None:
        """Raise why no request may be sent now (called when not plainly open)."""
        if self._state == _CLOSED:
            raise E.LocalProtocolError("the connection is closed")
        if self._state == _AWAIT_SETUP or self._state == _RESUME_PENDING:
            raise E.LocalProtocolError("the connection is not established (no SETUP yet)")
        if self._closing:
            raise E.LocalProtocolError(
                "the connection is closing (graceful close): it accepts no new requests")

    @staticmethod
    def _ids_exhausted() -> E.StreamIdsExhaustedError:
        return E.StreamIdsExhaustedError(
            "every stream id of this side has been used (2^31-1); open a new connection")

    # tests jump to the last stream ids (tests/core/test_connection_streams.py)
    @property
    def _next_stream_id(self) -> int:
        return self._ids.next_id

    @_next_stream_id.setter
    def _next_stream_id(self, stream_id: int) -> None:
        self._ids.next_id = stream_id

    def _send_request(self, kind: FrameType, payload: Payload, initial_n: int,
                      complete: bool = False) -> int:
        fixed = b""
        if kind == STREAM or kind == CHANNEL:
            if not 1 <= initial_n <= MAX_U31:
                raise ValueError(f"initial request n must be in [1, {MAX_U31}], got {initial_n}")
            fixed = _U32.pack(initial_n)
        state = self._state
        if state != _OPEN or self._closing:
            self._check_can_request()
        # a new stream id (RSocket 1.0 §Stream Identifiers)
        ids = self._ids
        lease = self._lease
        if lease is not None:
            if ids.exhausted:
                raise self._ids_exhausted()
            lease.use(self._now)  # raises LeaseError: nothing sent, no stream id used
        try:
            sid = ids.allocate()
        except IdsExhausted:
            raise self._ids_exhausted() from None
        self._queue_payload_bearing(kind, sid, FLAG_COMPLETE if complete else 0, fixed,
                                    payload.data, payload.metadata)
        if kind != FNF:
            send_open, recv_open, needs_credit = _STREAM_TABLE[kind, True]
            if kind == CHANNEL and complete:
                send_open = False
            self._streams.add(_Stream(sid, kind, True, send_open, recv_open,
                                      Credit(_ITEMS) if needs_credit else None), remote=False)
        return sid

    def request_response(self, payload: Payload) -> int:
        """Send REQUEST_RESPONSE; return the new stream id.

        :raises LocalProtocolError: the connection is closed or not established.
        :raises StreamIdsExhaustedError: no stream id is left.
        :raises LeaseError: the connection uses leases and the peer's lease does not allow a
            request now (none yet, expired or used up; spec §Lease Semantics). The same holds
            for the other request methods.
        """
        # the per-request hot path: the frame built here when nothing unusual applies (an
        # open connection over a byte stream, no lease, no resume, no frame logging: the
        # precomputed _fast_size, see _update_fast; no metadata, a small payload); anything
        # else takes _send_request
        data = payload.data
        size = 6 + len(data)
        if size > self._fast_size or payload.metadata is not None:
            return self._send_request(RESPONSE, payload, 0)
        try:
            sid = self._ids.allocate()
        except IdsExhausted:
            raise self._ids_exhausted() from None
        self._out.append(_PREFIXED_HEADER.pack(size >> 16, size & 0xFFFF, sid, _RESPONSE_TYPE) +
                         data)
        self._awaiting.add(sid)  # (a bare id until its answer: see _stream)
        return sid

    def fire_and_forget(self, payload: Payload) -> int:
        """Send REQUEST_FNF; return the stream id it used (the stream ends at once)."""
        # (the hot path of request_response, without the stream)
        data = payload.data
        size = 6 + len(data)
        if size > self._fast_size or payload.metadata is not None:
            return self._send_request(FNF, payload, 0)
        try:
            sid = self._ids.allocate()
        except IdsExhausted:
            raise self._ids_exhausted() from None
        self._out.append(_PREFIXED_HEADER.pack(size >> 16, size & 0xFFFF, sid, _FNF_TYPE) +
                         data)
        return sid

    def fire_and_forget_many(self, payloads: Iterable[Payload]) -> int:
        """Send a REQUEST_FNF for each of ``payloads``, in order (what
        :meth:`fire_and_forget` does for each, with its checks made once per batch where they
        cannot change: the bulk path).

        :returns: how many were sent.
        :raises: what :meth:`fire_and_forget` raises, at the first payload that cannot be
            sent; those before it are sent (queued).
        """
        if type(self).fire_and_forget is not RSocketConnection.fire_and_forget:
            # (a subclass observes each request it sends: one by one)
            n = 0
            for payload in payloads:
                self.fire_and_forget(payload)
                n += 1
            return n
        allocate = self._ids.allocate
        append = self._out.append
        pack = _PREFIXED_HEADER.pack
        n = 0
        for payload in payloads:
            data = payload.data
            size = 6 + len(data)
            if size > self._fast_size or payload.metadata is not None:
                self._send_request(FNF, payload, 0)
            else:
                try:
                    sid = allocate()
                except IdsExhausted:
                    raise self._ids_exhausted() from None
                append(pack(size >> 16, size & 0xFFFF, sid, _FNF_TYPE) + data)
            n += 1
        return n

    def request_stream(self, payload: Payload, initial_request_n: int) -> int:
        """Send REQUEST_STREAM granting ``initial_request_n`` (1..2^31-1) items."""
        return self._send_request(STREAM, payload, initial_request_n)

    def request_channel(self, payload: Payload, initial_request_n: int,
                        complete: bool = False) -> int:
        """Send REQUEST_CHANNEL; ``complete`` ends our outbound half at once (C flag)."""
        return self._send_request(CHANNEL, payload, initial_request_n, complete)

    def metadata_push(self, metadata: bytes) -> None:
        """Send METADATA_PUSH (stream 0).

        :raises LocalProtocolError: the connection is not open, or (resumable) its transport is
            down: a METADATA_PUSH has no position, so it cannot wait for a resume.
        """
        if self._state != _OPEN:
            if self._state == _DETACHED or self._state == _RESUMING:
                raise E.LocalProtocolError("the connection's transport is down (waiting to "
                                           "resume): METADATA_PUSH cannot be sent now")
            raise E.LocalProtocolError("the connection is not open")
        if len(metadata) + 6 > self._limit:
            raise ValueError(f"METADATA_PUSH of {len(metadata)} bytes does not fit one frame "
                             f"of {self._limit} bytes (it cannot be fragmented)")
        self._queue_frame(MetadataPushFrame(metadata=metadata))

    # ---------------------------------------------------------------------------- both roles

    def _sending_stream(self, stream_id: int) -> _Stream:
        s = self._stream(stream_id)
        if s is None:
            raise E.LocalProtocolError(f"stream {stream_id} is not open")
        if not s.send_open:
            raise E.LocalProtocolError(f"stream {stream_id}: our side is already complete")
        return s

    def send_payload(self, stream_id: int, payload: Payload, complete: bool = False) -> None:
        """Send one item (onNext), with ``complete`` also ending our side (N|C).

        Needs one credit on streams and channels (spec §Flow Control); fragments as needed.

        :raises LocalProtocolError: the stream is not open for sending, or has no credit.
        """
        s = self._streams.get(stream_id)
        if s is None or not s.send_open:
            s = self._sending_stream(stream_id)  # (raises LocalProtocolError)
        credit = s.credit
        if credit is not None:
            # Credit.consume(1), inlined: one call less per item on the hot path
            if credit.available <= 0:
                raise E.LocalProtocolError(
                    f"stream {stream_id}: no credit (the peer has not sent REQUEST_N)")
            credit.available -= 1
        if s.kind == RESPONSE:
            complete = True  # a request-response answer is always complete
        self._queue_payload_bearing(_PAYLOAD, stream_id,
                                    FLAG_NEXT | FLAG_COMPLETE if complete else FLAG_NEXT, b"",
                                    payload.data, payload.metadata)
        # (the table removes the stream when both halves are closed)
        if complete and self._streams.close_send(s) and self._closing and not self._streams:
            self._drained()

    def send_response(self, stream_id: int, payload: Payload) -> bool:
        """Answer the request-response ``stream_id`` with ``payload`` (N|C), unless the
        stream is gone meanwhile (canceled, failed, the connection closed): what
        :meth:`send_payload` with ``complete`` does, as the responder's hot path.

        :returns: False when ``stream_id`` is not open (nothing is sent).
        :raises LocalProtocolError: the stream is open but our side is already complete.
        """
        if stream_id in self._serving:
            data = payload.data
            size = 6 + len(data)
            if size <= self._fast_size and payload.metadata is None and \
                    type(self).send_payload is RSocketConnection.send_payload:
                # the hot path: the stream is a bare id, the frame built here
                self._serving.remove(stream_id)
                self._out.append(_PREFIXED_HEADER.pack(size >> 16, size & 0xFFFF, stream_id,
                                                       _RESPONSE_PAYLOAD_TYPE) + data)
                return True
        elif self._streams.get(stream_id) is None and stream_id not in self._awaiting:
            return False
        # (large, metadata, a subclass that observes each item sent, no hot path now, or a
        # full stream: the general path)
        self.send_payload(stream_id, payload, True)
        return True

    def send_payloads(self, stream_id: int, payloads: list[Payload]) -> None:
        """Send several items (onNext) on one stream: what :meth:`send_payload` does for each,
        with the stream and its credit checked once (the batch path of a stream's pump).

        :raises LocalProtocolError: the stream is not open for sending, or has fewer credits
            than ``len(payloads)`` (nothing is sent then).
        """
        cls = type(self)
        if cls.send_payload is not RSocketConnection.send_payload and \
                cls.send_payloads is RSocketConnection.send_payloads:
            # (a subclass observes each item it sends, and not batches: one by one)
            for payload in payloads:
                self.send_payload(stream_id, payload)
            return
        s = self._sending_stream(stream_id)
        credit = s.credit
        if credit is None:  # (no credit to count: a request-response answer, one item)
            for payload in payloads:
                self.send_payload(stream_id, payload)
            return
        n = len(payloads)
        if credit.available < n:
            raise E.LocalProtocolError(
                f"stream {stream_id}: {n} items, {credit.available} credit (REQUEST_N) left")
        credit.available -= n
        queue = self._queue_payload_bearing
        if not self._prefixed or self._frame_logger is not None or \
                self.resume_buffer is not None:
            # (a message transport, frame logging, a resumable session: the general path)
            for payload in payloads:
                queue(_PAYLOAD, stream_id, FLAG_NEXT, b"", payload.data, payload.metadata)
            return
        # _queue_payload_bearing inlined for small items without metadata: one header pack
        # and one concatenation each
        append = self._out.append
        pack = _PREFIXED_HEADER.pack
        limit = min(self._limit, _NO_COPY_SIZE)
        tf = (_PAYLOAD << 10) | FLAG_NEXT
        for payload in payloads:
            data = payload.data
            size = 6 + len(data)
            if size <= limit and payload.metadata is None:
                append(pack(size >> 16, size & 0xFFFF, stream_id, tf) + data)
            else:
                queue(_PAYLOAD, stream_id, FLAG_NEXT, b"", data, payload.metadata)

    def send_complete(self, stream_id: int) -> None:
        """End our outbound half with a PAYLOAD carrying only C (onComplete)."""
        s = self._sending_stream(stream_id)
        self._queue(_HEADER.pack(stream_id, (FrameType.PAYLOAD << 10) | FLAG_COMPLETE))
        self._half_close_send(stream_id, s)

    def send_error(self, stream_id: int, error: E.RSocketError) -> None:
        """Send ERROR on a stream; it ends the stream both ways (spec §Request Channel).

        :param error: a stream-level error (APPLICATION_ERROR, REJECTED, CANCELED, INVALID or an
            application-defined code).
        :raises LocalProtocolError: the stream is not open.
        """
        s = self._stream(stream_id)
        if s is None:
            raise E.LocalProtocolError(f"stream {stream_id} is not open")
        self._queue(self._error_bytes(stream_id, error.error_code, error.message))
        self._drop(stream_id, s)

    def send_cancel(self, stream_id: int) -> None:
        """Send CANCEL: we want nothing more on this stream; it ends here (spec §CANCEL).

        Unknown or finished streams are ignored (a cancel can race the stream's end).
        """
        s = self._stream(stream_id)
        if s is None:
            return
        self._queue(_HEADER.pack(stream_id, FrameType.CANCEL << 10))
        if s.requester:
            self._drop(stream_id, s)
        else:
            # responder of a channel canceling its inbound half: stop receiving
            self._end_reassembly(s)
            self._half_close_recv(stream_id, s)

    def send_request_n(self, stream_id: int, n: int) -> None:
        """Grant the peer ``n`` more items on ``stream_id`` (spec §REQUEST_N Frame).

        :param n: 1..2^31-1.
        :raises ValueError: ``n`` out of range. Ignored when the stream's inbound half is over.
        """
        if not 1 <= n <= MAX_U31:
            raise ValueError(f"request n must be in [1, {MAX_U31}], got {n}")
        s = self._stream(stream_id)
        if s is None or not s.recv_open:
            return
        self._queue(_REQUEST_N_HEAD.pack(stream_id, FrameType.REQUEST_N << 10, n))

    # the last stream to end during a graceful close closes the connection
    def _half_close_send(self, stream_id: int, s: _Stream) -> None:
        if self._streams.close_send(s) and self._closing and not self._streams:
            self._drained()

    def _half_close_recv(self, stream_id: int, s: _Stream) -> None:
        if self._streams.close_recv(s) and self._closing and not self._streams:
            self._drained()

    def _end_reassembly(self, s: _Stream) -> None:
        """Drop the fragments ``s`` holds, releasing them from the reassembly budget."""
        r = s.reassembly
        if r is not None:
            s.reassembly = None
            r.discard()

    def _drop(self, stream_id: int, s: _Stream) -> None:
        """Forget an ended stream (both halves, whatever their state)."""
        if s.reassembly is not None:
            self._end_reassembly(s)
        self._streams.remove(stream_id)
        if self._closing and not self._streams:
            self._drained()

    # ---------------------------------------------------------------------------- setup

    def reject_setup(self, error: E.SetupError) -> list[Event]:
        """Server: answer the SETUP with ``error`` (REJECTED_SETUP etc.) and close.

        A SETUP counts as accepted from :class:`SetupReceived` on, until this is called.
        """
        return self._close_with(error, False)

    def close(self, error: E.RSocketError | None = None) -> list[Event]:
        """Close the connection locally and end every stream. Idempotent.

        :param error: when given, sent as ERROR on stream 0 (e.g. CONNECTION_ERROR or
            CONNECTION_CLOSE with a reason) before the caller closes the transport; when None,
            nothing is sent.
        :returns: the :class:`ConnectionClosed` event (empty list when already closed).
        """
        if self._state == _CLOSED:
            return []
        if error is None:
            return self._close_with(E.ConnectionCloseError("closed locally"), False,
                                    report=None, send=False)
        return self._close_with(error, False)

    def begin_close(self, now: float | None = None, drain_timeout: int | None = None,
                    reason: str = "the connection is closing") -> list[Event]:
        """Close gracefully (spec §Error Codes, CONNECTION_CLOSE): refuse new requests, let the
        open streams finish, then send ERROR[CONNECTION_CLOSE] and close.

        From now on our new requests raise
        :class:`~rsocket_tx.core.errors.LocalProtocolError` and the peer's are answered with
        ERROR[REJECTED] "connection closing". The ERROR[CONNECTION_CLOSE] goes out only once
        the streams are done: peers such as rsocket-java end every stream at once when any
        ERROR arrives on stream 0, which would cut short the streams this close lets finish.

        :param now: the current time in seconds (the clock of :meth:`tick`); None: the last
            time this connection was given.
        :param drain_timeout: milliseconds the open streams get (0 .. 2^31-1); None: the
            configured ``drain_timeout``. 0 closes at once. When it passes, :meth:`tick` sends
            ERROR[CONNECTION_CLOSE] and closes; the streams still open fail with
            :class:`~rsocket_tx.core.errors.ConnectionCloseError`.
        :param reason: the ERROR[CONNECTION_CLOSE] message.
        :returns: :class:`~rsocket_tx.core.events.ConnectionClosing`, then
            :class:`~rsocket_tx.core.events.ConnectionClosed` at once if no stream is open (or
            the timeout is 0); ``[]`` if the connection is closed already. When a later
            ``send_*`` call ends the last stream, its ConnectionClosed comes from
            :meth:`pending_events`; ``receive_*`` and ``tick`` return theirs.
        :raises ValueError: ``drain_timeout`` out of range.
        """
        if drain_timeout is None:
            drain_timeout = self.config.drain_timeout
        check_drain_timeout(drain_timeout)
        if self._state == _CLOSED:
            return []
        if now is not None:
            self._now = now
        deadline = self._now + drain_timeout / 1000.0
        if self._closing:  # already closing: a shorter timeout still applies
            current = self._drain_deadline
            if current is None or deadline < current:
                self._drain_deadline = deadline
                self._drain_timeout = drain_timeout
            return []
        self._start_closing(None, drain_timeout, reason)
        events: list[Event] = [ConnectionClosing(None, False, len(self._streams))]
        if not self._streams:
            self._drained()
        elif drain_timeout == 0:
            events += self._drain_expired()
        events += self.pending_events()
        return events

    def _start_closing(self, peer_error: E.ConnectionCloseError | None, drain_timeout: int,
                       message: str) -> None:
        self._closing = True
        self._update_fast()
        self._promote_awaiting()  # (the drain counts and waits for them)
        self._streams.limit = -1  # every new request from the peer is refused
        self._closing_error = peer_error
        self._close_message = message
        self._drain_timeout = drain_timeout
        self._drain_deadline = self._now + drain_timeout / 1000.0

    def _drained(self) -> None:
        """The last stream of a graceful close ended: close (ERROR[CONNECTION_CLOSE] first
        when the close is ours; the peer that asked for it needs no answer)."""
        peer_error = self._closing_error
        if peer_error is None:
            self._pending += self._close_with(E.ConnectionCloseError(self._close_message),
                                              False, report=None)
        else:
            self._pending += self._close_with(peer_error, True, send=False)

    def _drain_expired(self) -> list[Event]:
        n = len(self._streams)
        error = E.ConnectionCloseError(
            f"{n} stream{'' if n == 1 else 's'} still open after the drain timeout of "
            f"{self._drain_timeout} ms")
        return self._close_with(error, self._closing_error is not None)

    def _error_bytes(self, stream_id: int, code: int, message: str) -> bytes:
        data = message.encode("utf-8", "replace")
        room = self._limit - 10  # an ERROR frame cannot be fragmented: cut a long message
        if len(data) > room:
            data = data[:room - 3].decode("utf-8", "ignore").encode("utf-8") + b"..."
        return encode(ErrorFrame(stream_id=stream_id, error_code=code, data=data))

    def _fail_connection(self, exc: E.RSocketError) -> list[Event]:
        return self._close_with(E.ConnectionError(str(exc.message)), True, report=exc)

    def _close_with(self, error: E.RSocketError, by_peer: bool, *,
                    report: E.RSocketError | None | Literal[True] = True,
                    send: bool = True) -> list[Event]:
        """Queue ERROR on stream 0 (if ``send``), drop all streams, report ConnectionClosed."""
        if self._state == _CLOSED:
            return []
        if send:
            self._queue(self._error_bytes(0, error.error_code, error.message))
        self.state = _CLOSED
        # a closed connection sends nothing more: the plain send path
        self._resumable_send = False
        self._awaiting.clear()
        self._serving.clear()
        for stream in self._streams.clear():
            if stream.reassembly is not None:
                self._end_reassembly(stream)  # (frees the budget: nothing outlives the close)
        self._drain_deadline = None
        reported = error if report is True else report
        if reported is not None:
            # reported, never raised to the caller: a traceback (the error was raised and
            # caught here) would hold this connection's frames, and so this connection, in
            # a reference cycle through closed_error
            reported.__traceback__ = None
        self.closed_error = reported
        return [ConnectionClosed(reported, by_peer)]

    def connection_lost(self, reason: str = "the transport closed", *,
                        error: E.ConnectionLostError | None = None) -> list[Event]:
        """The transport is gone (or is being aborted): end everything without sending.

        :param error: the error to report instead of a ConnectionLostError made from
            ``reason`` (e.g. :class:`~rsocket_tx.core.errors.ExcessiveBufferingError`).
        :returns: a :class:`ConnectionClosed` carrying a
            :class:`~rsocket_tx.core.errors.ConnectionLostError`, or ``[]`` if already closed.
            During a graceful close the peer asked for, it carries the peer's
            :class:`~rsocket_tx.core.errors.ConnectionCloseError` instead: the peer closed
            after its ERROR[CONNECTION_CLOSE] (its drain timeout passed), which says why.
        """
        if self._state == _CLOSED:
            return []
        reported: E.RSocketError
        if error is not None:
            reported = error
        else:
            reported = self._closing_error or E.ConnectionLostError(reason)
        return self._close_with(reported, True, send=False)

    # ---------------------------------------------------------------------------- leases

    def _enable_lease(self) -> None:
        self._lease = RequesterLease()
        self._granted = ResponderLease(self.config.lease_grace)
        self._update_fast()

    def send_lease(self, lease: Lease, now: float | None = None) -> None:
        """Grant the peer ``lease``: queue a LEASE frame and enforce it on the requests that
        arrive from now on (spec §LEASE Frame; it replaces what the peer had, while what the
        peer may still have in flight is honoured).

        :param lease: a :class:`~rsocket_tx.core.lease.Lease` (ttl in ms, number of requests,
            optional metadata).
        :param now: the current time in seconds (the clock of :meth:`tick`); None: the last
            time the connection was given.
        :raises LocalProtocolError: the connection does not use leases, or is closed.
        """
        if self._state == _CLOSED:
            raise E.LocalProtocolError("the connection is closed")
        granted = self._granted
        if granted is None:
            raise E.LocalProtocolError(
                "this connection does not use leases (the client's SETUP had no L flag)")
        if now is not None:
            self._now = now
        granted.grant(lease, self._now)
        self._queue_frame(LeaseFrame(ttl=lease.ttl, number_of_requests=lease.number_of_requests,
                                     metadata=lease.metadata))

    # ---------------------------------------------------------------------------- resumption

    def _enable_resume(self, token: bytes) -> None:
        """Make this connection resumable: keep sent stream frames, count received ones."""
        self.resume_token = token
        self.resume_buffer = ResumeBuffer(self.config.max_resume_buffer_size)
        self._update_fast()
        # the resumable send path from now on (one flag test on the plain one)
        self._resumable_send = True

    def _resume_state(self) -> ResumeBuffer:
        """The resume buffer of a resumable connection (set by :meth:`_enable_resume`)."""
        buffer = self.resume_buffer
        assert buffer is not None, "not resumable"
        return buffer

    def _queue_resumable(self, frame_bytes: bytes) -> None:
        if frame_bytes[:4] != _STREAM_ZERO:
            self._resume_state().append(frame_bytes)
            if self._state != _OPEN:
                return  # no transport: it goes out from the buffer when the session resumes
        self._queue_now(frame_bytes)

    def _queue_payload_bearing_resumable(self, frame_type: int, sid: int, flags: int,
                                         fixed: bytes, data: bytes,
                                         metadata: bytes | None) -> None:
        n = 6 + len(fixed) + len(data) + (0 if metadata is None else len(metadata) + 3)
        if n > self._limit:
            for f in fragment(frame_type, sid, fixed, data, metadata, flags & FLAG_COMPLETE != 0,
                              flags & FLAG_NEXT != 0, self._limit):
                self._queue_resumable(f)
            return
        frame = encode_payload_bearing(frame_type, sid, flags, fixed, data, metadata)
        self._resume_state().append(frame)  # (a request or PAYLOAD: never on stream 0)
        if self._state != _OPEN:
            return
        if self._prefixed and self._frame_logger is None:
            self._out.extend((_U24.pack(n >> 16, n & 0xFFFF), frame))
        else:
            self._queue_now(frame)

    def _new_transport(self, now: float) -> None:
        self._now = now
        self._last_alive = now
        self._alive_since_tick = False
        self._out.clear()
        if self._reader is not None:
            self._reader = FrameReader(self.config.max_frame_size)

    def detach(self, now: float, reason: str = "the transport closed", *,
               error: E.ConnectionLostError | None = None) -> list[Event]:
        """The transport is gone (or presumed dead); keep the session for a resume.

        A resumable connection keeps its streams and stops writing: what is queued and not
        yet drained is dropped (the resume buffer has it), and whatever is sent from now on
        waits in the buffer. The session expires ``config.resume_session_timeout``
        milliseconds after it first lost its transport (:meth:`tick` reports it). A
        connection that is not resumable (or not established) ends as with
        :meth:`connection_lost`.

        :param now: the current time in seconds.
        :param reason: why, for the :class:`~rsocket_tx.core.errors.ConnectionLostError`.
        :param error: the error to report instead.
        :returns: ``[ConnectionDetached]`` (``[]`` when already detached), or the events of
            :meth:`connection_lost`.
        """
        state = self._state
        if self.resume_buffer is None or state == _CLOSED or state == _AWAIT_SETUP or \
                state == _RESUME_PENDING:
            return self.connection_lost(reason, error=error)
        if state == _DETACHED:
            return []
        if state == _OPEN:
            self._detached_at = now  # a failed resume attempt does not restart the clock
        self._new_transport(now)
        self.state = _DETACHED
        return [ConnectionDetached(error or E.ConnectionLostError(reason))]

    def start_resume(self, now: float) -> None:
        """Client: a new transport is up; queue RESUME (spec §Resume Operation) as its first
        frame (drain it in one write). Nothing else is sent until RESUME_OK arrives: then the
        frames the server missed go out again and a
        :class:`~rsocket_tx.core.events.ConnectionResumed` is reported. An ERROR
        (REJECTED_RESUME or CONNECTION_ERROR) ends the connection; silence past max lifetime
        detaches it again.

        :param now: the current time in seconds.
        :raises LocalProtocolError: not a detached resumable client connection.
        """
        if not self.is_client or self._state != _DETACHED:
            raise E.LocalProtocolError("only a detached resumable client connection resumes")
        token = self.resume_token
        assert token is not None  # (set with the resume buffer)
        self._new_transport(now)
        self.state = _RESUMING
        self._queue_now(encode(ResumeFrame(
            token=token, last_received_server_position=self._received,
            first_available_client_position=self._resume_state().first_position)))

    def resume_session(self, frame: ResumeFrame, now: float) -> list[Event]:
        """Server: continue this session on a new transport, as the client's ``frame`` asks.

        Call it on the session's connection (detached, or still attached to a transport the
        client has given up: that transport is dropped) with the RESUME that began the new
        connection. Resumption is possible when the server still keeps every frame from the
        client's last received position and the client still keeps every frame from the
        server's (spec §Resume Operation); then RESUME_OK and those frames are queued, to be
        written to the new transport. Otherwise ERROR[REJECTED_RESUME] saying why is queued and
        the session ends.

        :param frame: the :class:`~rsocket_tx.core.frames.ResumeFrame` (already checked by
            the new connection: version, stream id).
        :param now: the current time in seconds.
        :returns: ``[ConnectionResumed]``, or ``[ConnectionClosed]`` carrying a
            :class:`~rsocket_tx.core.errors.RejectedResumeError`; ``[]`` if already closed.
        """
        if self._state == _CLOSED:
            return []
        if self.is_client or self.resume_buffer is None:
            raise E.LocalProtocolError("only a resumable server connection resumes a session")
        events: list[Event] = []
        if self._state == _OPEN:
            events += self.detach(now, "the client resumed on a new connection")
        self._new_transport(now)
        try:
            replay = check_resume(self.resume_buffer, self._received,
                                  frame.last_received_server_position,
                                  frame.first_available_client_position)
        except ResumePositionError as exc:
            return events + self._close_with(E.RejectedResumeError(str(exc)), True)
        self.state = _OPEN
        queue = self._queue_now
        queue(encode(ResumeOkFrame(last_received_client_position=self._received)))
        for f in replay:
            queue(f)
        events.append(ConnectionResumed(frame.last_received_server_position, len(replay)))
        return events

    def reject_resume(self, reason: str) -> list[Event]:
        """Server: answer the RESUME that began this connection with ERROR[REJECTED_RESUME]
        (e.g. no session has its token) and close.

        :returns: the :class:`~rsocket_tx.core.events.ConnectionClosed` event.
        """
        return self._close_with(E.RejectedResumeError(reason), True)

    def _resume_requested(self, f: ResumeFrame, events: list[Event]) -> None:
        """A server's first frame is RESUME."""
        if not self.config.resume:
            events.extend(self._close_with(
                E.RejectedResumeError("resume is not supported by this server"), True))
        elif f.stream_id != 0:
            events.extend(self._close_with(
                E.InvalidSetupError("RESUME must use stream id 0"), True))
        elif not resume_version_supported(f.major_version, f.minor_version):
            events.extend(self._close_with(E.RejectedResumeError(
                f"unsupported version {f.major_version}.{f.minor_version} in RESUME; this "
                "server resumes 1.0"), True))
        else:
            self.state = _RESUME_PENDING
            events.append(ResumeReceived(f))

    def _receive_while_resuming(self, frame: Frame, events: list[Event]) -> None:
        """Client, RESUME sent: only RESUME_OK or an ERROR may come (spec §Resume Operation)."""
        ft = frame.frame_type
        if isinstance(frame, ResumeOkFrame):
            self._resumed(frame, events)
        elif isinstance(frame, ErrorFrame) and frame.stream_id == 0:
            events.extend(self._close_with(
                E.error_from_code(frame.error_code, frame.data.decode("utf-8", "replace")),
                True, send=False))
        elif frame.stream_id != 0:
            events.extend(self._fail_connection(E.ProtocolError(
                f"{ft.name} received before RESUME_OK")))
        # other connection frames (KEEPALIVE, LEASE, METADATA_PUSH): ignored until resumed

    def _resumed(self, f: ResumeOkFrame, events: list[Event]) -> None:
        position = f.last_received_client_position
        try:
            replay = self._resume_state().replay_from(position)
        except ResumePositionError as exc:
            events.extend(self._close_with(E.ConnectionError(f"cannot resume: {exc}"), True))
            return
        self.state = _OPEN
        self._setup_confirmed = True
        self._detached_at = self._now
        queue = self._queue_now
        for frame_bytes in replay:
            queue(frame_bytes)
        self._next_keepalive = self._now + self._setup_frame().keepalive_interval / 1000.0
        events.append(ConnectionResumed(position, len(replay)))

    # ---------------------------------------------------------------------------- handlers

    def _on_setup(self, f: SetupFrame, events: list[Event]) -> None:
        if self.is_client or self._state != _AWAIT_SETUP:
            return  # a client ignores SETUP; a server ignores a second one
        invalid = _invalid_setup(f)
        if invalid is not None:
            # spec §Connection Establishment: a SETUP the server does not accept gets
            # ERROR[INVALID_SETUP] (a field the spec forbids, or a version it does not speak:
            # §Error Codes, "the client is too recent for the old server")
            events.extend(self._close_with(E.InvalidSetupError(invalid), True))
            return
        limit = self.config.max_lifetime_limit
        if limit and f.max_lifetime > limit:
            events.extend(self._close_with(E.UnsupportedSetupError(
                f"max lifetime {f.max_lifetime} ms is above this server's limit of {limit} ms"
                " (max_lifetime_limit)"), True))
            return
        if f.resume_token is not None and not self.config.resume:
            events.extend(self._close_with(
                E.RejectedSetupError("resume is not supported by this server"), True))
            return
        self.setup = f
        self.state = _OPEN
        self._last_alive = self._now
        if f.resume_token is not None:
            self._enable_resume(f.resume_token)
        if f.lease:
            self._enable_lease()
        events.append(SetupReceived(f))

    def _on_lease(self, f, events: list[Event]) -> None:
        if f.stream_id == 0:
            self._setup_confirmed = True
            lease = self._lease
            if lease is not None:  # without the L flag a LEASE means nothing: ignored
                lease.receive(Lease(f.ttl, f.number_of_requests, f.metadata), self._now)
            events.append(LeaseReceived(f))

    def _on_keepalive(self, f: KeepaliveFrame, events: list[Event]) -> None:
        if f.stream_id != 0:
            return
        buffer = self.resume_buffer
        if buffer is not None and f.last_received_position:
            # spec §Keepalive Position Field: what the peer has received needs no resending
            try:
                buffer.acknowledge(f.last_received_position)
            except ResumePositionError as exc:
                events.extend(self._fail_connection(E.ProtocolError(str(exc))))
                return
        if f.respond:
            self._queue_frame(KeepaliveFrame(respond=False, data=f.data,
                                             last_received_position=self._received))

    def _on_request(self, f, events: list[Event]) -> None:
        kind = f.frame_type
        self._request(f.stream_id, kind, f.follows, kind == CHANNEL and f.complete,
                      f.initial_request_n if kind == STREAM or kind == CHANNEL else 0,
                      f.data, f.metadata, events)

    def _request(self, sid: int, kind: FrameType, follows: bool, complete: bool, n: int,
                 data: bytes, metadata: bytes | None, events: list[Event]) -> None:
        streams = self._streams
        serving = self._serving
        if sid == 0 or streams.get(sid) is not None or sid in serving:
            return  # spec: a request on a stream id in use MUST be ignored
        if (sid & 1) == (1 if self.is_client else 0):
            return  # the peer used our parity: not a stream it may open; ignore
        self._setup_confirmed = True
        granted = self._granted
        if granted is not None:
            # spec §Lease Semantics: a request past our lease is answered ERROR[REJECTED]; it
            # counts (once, at its first fragment) whatever happens to it next
            reason = granted.accept(self._now)
            if reason is not None:
                self._queue(self._error_bytes(sid, E.ErrorCode.REJECTED, reason))
                return
        if streams.remote + len(serving) >= streams.limit and \
                (kind != FNF or follows or self._closing):
            # (a whole fire-and-forget holds no stream: only a graceful close refuses it)
            self._refuse(sid)
            return
        if follows:
            s = _Stream(sid, kind, False, False, True, None)
            s.reassembly = r = Reassembly(kind, n, self.config.max_reassembled_size,
                                          self._reassembly_budget)
            r.complete = complete
            try:
                r.add(data, metadata)
            except E.PayloadTooLargeError as exc:
                # past max_reassembled_size ERROR[INVALID]; past the connection's budget
                # ERROR[REJECTED] (a ReassemblyBudgetError: the request was not processed)
                self._queue(self._error_bytes(sid, exc.error_code, exc.message))
                return
            streams.add(s, remote=True)
            return
        if kind == RESPONSE and self._fast_size >= 0:
            serving.add(sid)  # (a bare id until answered: see _stream)
        elif kind != FNF:  # a fire-and-forget has no stream state
            send_open, recv_open, needs_credit = _STREAM_TABLE[kind, False]
            if kind == CHANNEL and complete:
                recv_open = False
            streams.add(_Stream(sid, kind, False, send_open, recv_open,
                                Credit(_ITEMS, n) if needs_credit else None), remote=True)
        events.append(RequestReceived(sid, kind, Payload(data, metadata), n, complete))

    def _refuse(self, sid: int) -> None:
        """Answer a request we will not serve with ERROR[REJECTED] (the peer may retry it)."""
        if self._closing:
            message = "connection closing"
        else:
            message = (f"too many concurrent streams: {self.peer_stream_count} open, the limit "
                       f"is {self._streams.limit} (max_concurrent_streams)")
        self._queue(self._error_bytes(sid, E.ErrorCode.REJECTED, message))

    def _on_request_n(self, f, events: list[Event]) -> None:
        s = self._streams.get(f.stream_id)
        if s is None or s.credit is None or not s.send_open:
            return
        s.credit.grant_saturating(f.request_n)  # spec §Flow Control: saturates at 2^31-1
        events.append(RequestNReceived(f.stream_id, f.request_n))

    def _on_cancel(self, f, events: list[Event]) -> None:
        sid = f.stream_id
        s = self._stream(sid)
        if s is None:
            return  # unknown stream (including 0): ignore
        r = s.reassembly
        if r is not None:
            if r.frame_type != FrameType.PAYLOAD:
                # canceled while its request was still arriving in fragments: forget it silently
                self._drop(sid, s)
                return
            # spec §Fragmentation: a sender may CANCEL a fragment sequence it started; the
            # fragments received so far are dropped, never delivered
            self._end_reassembly(s)
        if s.requester:
            # the responder of a channel canceled our outbound half
            if s.send_open:
                self._half_close_send(sid, s)
                events.append(CancelReceived(sid, False))
            return
        self._drop(sid, s)
        events.append(CancelReceived(sid))

    def _on_payload(self, f, events: list[Event]) -> None:
        self._payload(f.stream_id, f.follows, f.complete, f.next, f.data, f.metadata, events)

    def _payload(self, sid: int, follows: bool, complete: bool, next_: bool, data: bytes,
                 metadata: bytes | None, events: list[Event]) -> None:
        s = self._stream(sid)
        if s is None or not s.recv_open:
            return  # unknown stream (including 0) or finished half: ignore
        if s.requester:
            self._setup_confirmed = True
        r = s.reassembly
        if r is not None or (follows and not complete):
            if r is None:
                s.reassembly = r = Reassembly(FrameType.PAYLOAD, 0,
                                              self.config.max_reassembled_size,
                                              self._reassembly_budget)
            try:
                r.add(data, metadata)
            except E.PayloadTooLargeError as exc:
                self._reassembly_overflow(sid, s, exc, events)
                return
            if follows and not complete:
                return
            s.reassembly = None
            kind = r.frame_type
            if kind != FrameType.PAYLOAD:
                # the last fragment of a request we are responding to: the stream takes the
                # state of its interaction (a request that began arriving before a graceful
                # close is served)
                complete = r.complete or complete
                if kind == FNF:
                    self._streams.remove(sid)  # a fire-and-forget holds no stream
                else:
                    s.kind = kind
                    s.send_open, s.recv_open, needs_credit = _STREAM_TABLE[kind, False]
                    if kind == CHANNEL and complete:
                        s.recv_open = False
                    if needs_credit:
                        s.credit = Credit(_ITEMS, r.initial_request_n)
                events.append(RequestReceived(sid, kind, r.payload(), r.initial_request_n,
                                              complete))
                if self._closing and not self._streams:
                    self._drained()
                return
            payload = r.payload()
        elif next_:
            payload = Payload(data, metadata)
        elif complete:
            payload = None
        else:
            return  # neither N nor C: nothing to deliver (spec: MUST NOT be sent); ignore
        if s.kind == RESPONSE:
            complete = True  # spec: a PAYLOAD for REQUEST_RESPONSE is complete regardless of C
        if complete and self._streams.close_recv(s) and self._closing and not self._streams:
            self._drained()
        events.append(PayloadReceived(sid, payload, complete))

    def _reassembly_overflow(self, sid: int, s: _Stream, exc: E.PayloadTooLargeError,
                             events: list[Event]) -> None:
        r = s.reassembly
        request = r is not None and r.frame_type != FrameType.PAYLOAD
        if s.requester:
            # a requester can only CANCEL the response it no longer wants
            self._queue(_HEADER.pack(sid, FrameType.CANCEL << 10))
        elif not isinstance(exc, E.ReassemblyBudgetError):
            self._queue(self._error_bytes(sid, E.ErrorCode.INVALID, exc.message))
        else:
            # past the connection's budget: a request still arriving was not processed
            # (REJECTED, the requester may retry); the inbound half of a channel we serve
            # was (CANCELED)
            code = E.ErrorCode.REJECTED if request else E.ErrorCode.CANCELED
            self._queue(self._error_bytes(sid, code, exc.message))
        self._drop(sid, s)  # (releases what the stream held)
        if s.requester or (s.kind == CHANNEL and not request):
            events.append(StreamErrored(sid, exc))

    def _on_error(self, f: ErrorFrame, events: list[Event]) -> None:
        sid = f.stream_id
        message = f.data.decode("utf-8", "replace")
        if sid == 0:
            self._promote_awaiting()  # (a CONNECTION_CLOSE drains them)
            code = f.error_code
            if code in _SETUP_ERROR_CODES:
                if not self.is_client or self._setup_confirmed:
                    return  # spec: a server ignores these; a client after establishment too
            error = E.error_from_code(code, message)
            if isinstance(error, E.ConnectionCloseError) and self._streams:
                # spec: the receiver MUST wait for outstanding streams to terminate before
                # closing; new requests are refused meanwhile
                if not self._closing:
                    self._start_closing(error, self.config.drain_timeout, message)
                    events.append(ConnectionClosing(error, True, len(self._streams)))
                return
            events.extend(self._close_with(error, True, send=False))
            return
        s = self._stream(sid)
        if s is None:
            return  # unknown stream: ignore
        if s.requester:
            self._setup_confirmed = True
        self._drop(sid, s)
        events.append(StreamErrored(sid, E.error_from_code(f.error_code, message)))

    def _on_metadata_push(self, f: MetadataPushFrame, events: list[Event]) -> None:
        if f.stream_id == 0:
            events.append(MetadataPushReceived(f.metadata))

    def _on_resume(self, f, events: list[Event]) -> None:
        if not self.is_client:
            # spec §Resume Operation: RESUME after SETUP -> CONNECTION_ERROR
            events.extend(self._fail_connection(E.ProtocolError("RESUME after SETUP")))

    def _on_resume_ok(self, f, events: list[Event]) -> None:
        return  # RESUME_OK outside a resume handshake (see _receive_while_resuming): ignore

    def _on_ext(self, f, events: list[Event]) -> None:
        if not f.ignore:
            events.extend(self._fail_connection(E.ProtocolError(
                f"unsupported EXT frame (extended type {f.extended_type}) without the I flag")))

