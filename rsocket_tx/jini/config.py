"""Settings of a Jini ERI mux connection: one validated object, units on every field."""

from __future__ import annotations

from dataclasses import dataclass

from .codec import MAX_LENGTH, MAX_SESSIONS, RATION_UNIT

__all__ = [
    "JiniMuxConfig",
    "DEFAULT_INITIAL_RATION",
    "DEFAULT_FRAGMENT_SIZE",
    "DEFAULT_MAX_SESSION_BUFFER",
    "DEFAULT_MAX_CONNECTION_BUFFER",
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_PING_TIMEOUT",
    "DEFAULT_MAX_SEND_BUFFER_SIZE",
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "MAX_INITIAL_RATION",
    "RIVER_INITIAL_RATION",
    "RIVER_FRAGMENT_SIZE",
]

#: Our initial inbound ration (both roles), in bytes: 128 KiB, four times Apache River's
#: (:data:`RIVER_INITIAL_RATION`). A body flows at most one ration per round trip of an
#: IncrementRation: River's 32 KiB held a 10 MiB echo between two rsocket_tx processes to
#: about 15 MiB/s, 128 KiB let it reach about 40 (``benchmarks/jini_bench.py``). With the
#: default ``max_sessions`` (128) a connection's sessions can hold 128 x 128 KiB = 16 MiB
#: unread, the default ``max_connection_buffer``: a peer that keeps to its rations never
#: passes it.
DEFAULT_INITIAL_RATION = 131_072
#: Our largest Data body, in bytes: 16 KiB (River sends 1 KiB, :data:`RIVER_FRAGMENT_SIZE`,
#: and receives any length up to 65,535). Each Data costs its receiver the same whatever
#: its length: 16 times fewer messages for the same bytes.
DEFAULT_FRAGMENT_SIZE = 16_384
#: Apache River's initial ration, in bytes (``initial_ration=RIVER_INITIAL_RATION`` makes our
#: connection header River's: ``4A 6D 75 78 01 00 80 00``).
RIVER_INITIAL_RATION = 32_768
#: Apache River's largest Data body, in bytes.
RIVER_FRAGMENT_SIZE = 1_024
#: The largest ration a connection header can announce, in bytes (0xFFFF * 256).
MAX_INITIAL_RATION = MAX_LENGTH * RATION_UNIT
DEFAULT_MAX_SESSION_BUFFER = 1024 * 1024  # bytes
DEFAULT_MAX_CONNECTION_BUFFER = 16 * 1024 * 1024  # bytes
#: River's client waits 15 s for the server's connection header.
DEFAULT_HANDSHAKE_TIMEOUT = 15_000  # ms
DEFAULT_PING_TIMEOUT = 30_000  # ms
DEFAULT_MAX_SEND_BUFFER_SIZE = 16 * 1024 * 1024  # bytes
DEFAULT_DRAIN_TIMEOUT = 10_000  # ms
#: A server closes a connection on which no session has been in progress for 5 minutes
#: (River's client closes its own idle connections after 15 s).
DEFAULT_IDLE_TIMEOUT = 300_000  # ms


@dataclass(slots=True, kw_only=True)
class JiniMuxConfig:
    """Settings of one :class:`~rsocket_tx.jini.connection.JiniMuxConnection` and of the Twisted
    layer above it. The defaults match Apache River 2.2, except the ration and the fragment
    size, which are larger for throughput (River's: :data:`RIVER_INITIAL_RATION`,
    :data:`RIVER_FRAGMENT_SIZE`).

    :param initial_ration: the ration, in bytes, we announce in our connection header: how many
        bytes of Data the peer may send on a new session before we grant more (Jini ERI
        Multiplexing Protocol §Flow Control). A multiple of 256 in [256, 16,776,960]; 0 or None
        means unlimited (header value 0). Default 131,072 (River's is 32,768). A session
        holds at most this much received and unread.
    :param fragment_size: the largest Data body we send, in bytes; [1, 65,535]. Default
        16,384 (River's is 1,024).
    :param max_sessions: client: sessions we establish at once on one connection (the Twisted
        client opens another connection past it); server: sessions the client may have
        established at once (past it a new session is refused with an *Abort* without the
        partial flag, so the client may retry it). [1, 128]; default 128.
    :param max_session_buffer: bytes of one session's received data handed to the application
        and not yet acknowledged as read
        (:meth:`~rsocket_tx.jini.connection.JiniMuxConnection.acknowledge_received_data`).
        The ration keeps a well-behaved peer under ``initial_ration``; with an unlimited
        ration, past it the session is aborted (the seed's deadlock rule: abort rather than
        block the connection). At least ``initial_ration``; default 1 MiB.
    :param max_connection_buffer: the same, summed over every session of the connection; past
        it the session whose data arrived is aborted. At least ``initial_ration``; default
        16 MiB.
    :param handshake_timeout: milliseconds to wait for the peer's connection header; then the
        connection is closed. On a server it bounds how long a connection that sends
        nothing, or only part of its *ClientConnectionHeader*, is kept (and the 8 bytes it
        may hold meanwhile). [1, 2^31-1]; default 15,000 (River's client).
    :param ping_timeout: milliseconds to wait for the *PingAck* answering our *Ping*; then the
        peer is taken to be down and the connection is closed (§Ping Message). [1, 2^31-1];
        default 30,000.
    :param max_send_buffer_size: Twisted layer: bytes that may wait in the transport for the
        peer to read; past it the peer is taken not to read and the connection is aborted.
        At least 1; default 16 MiB.
    :param drain_timeout: Twisted layer: on a graceful close, milliseconds established
        sessions get to end before the connection is closed anyway. [0, 2^31-1]; default
        10,000.
    :param idle_timeout: Twisted layer, server: milliseconds a connection may stay open with
        no session in progress (after its header, or after its last session ended) before
        the server shuts it down (*Shutdown*, §Shutdown Message: the client opens a new
        connection for its next request). Bounds how long a client that opens no session
        holds a connection. [0, 2^31-1]; 0: never; default 300,000 (5 minutes).
    :raises ValueError: a setting is out of range (naming it, its value and the range).
    """

    initial_ration: int | None = DEFAULT_INITIAL_RATION
    fragment_size: int = DEFAULT_FRAGMENT_SIZE
    max_sessions: int = MAX_SESSIONS
    max_session_buffer: int = DEFAULT_MAX_SESSION_BUFFER
    max_connection_buffer: int = DEFAULT_MAX_CONNECTION_BUFFER
    handshake_timeout: int = DEFAULT_HANDSHAKE_TIMEOUT
    ping_timeout: int = DEFAULT_PING_TIMEOUT
    max_send_buffer_size: int = DEFAULT_MAX_SEND_BUFFER_SIZE
    drain_timeout: int = DEFAULT_DRAIN_TIMEOUT
    idle_timeout: int = DEFAULT_IDLE_TIMEOUT

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every setting.

        :raises ValueError: with the name of the setting, its value and the allowed range.
        """
        ration = self.initial_ration
        if ration is not None and not (
                isinstance(ration, int) and not isinstance(ration, bool) and (
                    ration == 0 or (ration % RATION_UNIT == 0
                                    and RATION_UNIT <= ration <= MAX_INITIAL_RATION))):
            raise ValueError(
                f"initial_ration must be a multiple of {RATION_UNIT} in [{RATION_UNIT}, "
                f"{MAX_INITIAL_RATION}] bytes, or 0/None for unlimited, got {ration!r}")
        _check_range("fragment_size", self.fragment_size, 1, MAX_LENGTH, "bytes")
        _check_range("max_sessions", self.max_sessions, 1, MAX_SESSIONS, "sessions")
        low = self.ration or 1
        _check_range("max_session_buffer", self.max_session_buffer, low, 2**62, "bytes")
        _check_range("max_connection_buffer", self.max_connection_buffer, low, 2**62, "bytes")
        _check_range("handshake_timeout", self.handshake_timeout, 1, 2**31 - 1, "ms")
        _check_range("ping_timeout", self.ping_timeout, 1, 2**31 - 1, "ms")
        _check_range("max_send_buffer_size", self.max_send_buffer_size, 1, 2**62, "bytes")
        _check_range("drain_timeout", self.drain_timeout, 0, 2**31 - 1, "ms")
        _check_range("idle_timeout", self.idle_timeout, 0, 2**31 - 1, "ms")

    @property
    def ration(self) -> int | None:
        """The initial ration in bytes, or None when unlimited."""
        return self.initial_ration or None


def _check_range(name: str, value: object, low: int, high: int, unit: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}] {unit}, got {value!r}")
