"""The pure pieces of resumption (spec §Resuming Operation): positions, the resume buffer, the
server's RESUME decision, tokens, reconnect backoff and the server's session store.

Nothing here does I/O or reads a clock: time comes in as arguments (seconds), randomness from
:mod:`secrets` (tokens) or an injected ``random.Random`` (backoff jitter).

Positions (spec §Implied Position)
    Every frame that belongs to a stream (stream id > 0: REQUEST_*, REQUEST_N, CANCEL, ERROR
    on a stream, PAYLOAD, and EXT on a stream) has a position in its direction: the number of
    bytes of such frames sent before it, counting each frame without the 24-bit length prefix
    of TCP, after fragmentation. Frames on stream 0 (SETUP, LEASE, KEEPALIVE, METADATA_PUSH,
    RESUME, RESUME_OK, ERROR on stream 0) have none. rsocket-java and rsocket-js 1.0 use the
    same rule (they test ``stream id != 0``), which is why the rule is written on the stream id
    rather than on the frame type list of the spec: the two are the same for every valid frame.

The resume buffer
    The sender keeps each positioned frame it sent until the peer acknowledges it (the Last
    Received Position of a KEEPALIVE, or the position in RESUME / RESUME_OK), so that after a
    transport failure it can send again exactly what the peer missed. The buffer is bounded in
    bytes: past the bound the oldest frames are dropped, and a resume that would need them is
    refused (the session cannot resume; the connection then ends with a clear error).
"""

from __future__ import annotations

import random as _random
import secrets
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from .config import (
    DEFAULT_RECONNECT_INITIAL_DELAY,
    DEFAULT_RECONNECT_JITTER,
    DEFAULT_RECONNECT_MAX_DELAY,
    SUPPORTED_VERSIONS,
    check_milliseconds,
)

__all__ = [
    "DEFAULT_TOKEN_SIZE",
    "MAX_POSITION",
    "RESUME_VERSIONS",
    "Backoff",
    "BackoffAttempts",
    "ResumeBuffer",
    "ResumePositionError",
    "SessionStore",
    "check_resume",
    "is_positioned",
    "new_token",
    "positioned_size",
    "resume_version_supported",
]

#: Bytes of a token made by :func:`new_token` when no size is given.
DEFAULT_TOKEN_SIZE = 16
#: The largest position a RESUME, RESUME_OK or KEEPALIVE can carry (63 bits).
MAX_POSITION = 0x7FFFFFFFFFFFFFFF
#: (major, minor) versions accepted in RESUME: those accepted in SETUP, plus 0.1, which is 1.0
#: with the two fields swapped, as rsocket-js 1.0.0-alpha.3 writes it.
RESUME_VERSIONS = frozenset(SUPPORTED_VERSIONS | {(0, 1)})

_STREAM_ZERO = b"\x00\x00\x00\x00"


def new_token(size: int = DEFAULT_TOKEN_SIZE) -> bytes:
    """A new resume identification token: ``size`` bytes from the OS's CSPRNG.

    The spec (§Identification Token Handling) asks that tokens not be predictable by a third
    party; 16 random bytes (128 bits) meet that.

    :param size: token length in bytes, 1..65535 (the SETUP token length field is 16 bits).
    :raises ValueError: ``size`` out of range.
    """
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= 0xFFFF:
        raise ValueError(f"a resume token must be 1..65535 bytes, got {size!r}")
    return secrets.token_bytes(size)


def is_positioned(frame: bytes) -> bool:
    """True if ``frame`` (encoded, without length prefix) has an implied position: its stream
    id is not 0."""
    return frame[:4] != _STREAM_ZERO


def positioned_size(frames: Iterable[bytes]) -> int:
    """The bytes that ``frames`` (encoded, without length prefixes) add to a position: the sum
    of the lengths of those whose stream id is not 0."""
    n = 0
    for f in frames:
        if f[:4] != _STREAM_ZERO:
            n += len(f)
    return n


def resume_version_supported(major: int, minor: int) -> bool:
    """Whether a RESUME frame's version is one we resume: 1.0 (or 0.2 of the drafts), and 0.1,
    the swapped 1.0 that rsocket-js 1.0.0-alpha.3 writes."""
    return (major, minor) in RESUME_VERSIONS


class ResumePositionError(Exception):
    """A position from the peer cannot be honoured; ``str()`` says why (for the ERROR frame)."""


class ResumeBuffer:
    """The frames we sent that the peer may not have received yet, in order, by position.

    :param max_size: the most bytes of frames kept (frame bytes without length prefixes).
        When an append goes past it, the oldest frames are dropped: a later resume that needs
        them fails with :class:`ResumePositionError`.
    :raises ValueError: ``max_size`` is not a positive integer.

    :ivar position: the position after the last frame appended: bytes of positioned frames
        sent so far (the sender's position, spec §Implied Position).
    :ivar first_position: the position of the oldest frame still kept (== ``position`` when
        empty): the "First Available Client Position" of a client's RESUME.
    :ivar size: bytes currently kept (``position - first_position``).
    :ivar dropped: bytes dropped by the bound before the peer acknowledged them.
    """

    __slots__ = ("_frames", "position", "first_position", "size", "max_size", "dropped")

    def __init__(self, max_size: int) -> None:
        if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 1:
            raise ValueError(f"max_size must be a positive number of bytes, got {max_size!r}")
        self._frames: deque[bytes] = deque()
        self.position = 0
        self.first_position = 0
        self.size = 0
        self.max_size = max_size
        self.dropped = 0

    def __len__(self) -> int:
        """Frames kept."""
        return len(self._frames)

    def append(self, frame: bytes) -> None:
        """Keep ``frame`` (encoded, no length prefix, stream id > 0); advance :attr:`position`.

        The caller checks :func:`is_positioned` first; frames on stream 0 are never kept.
        """
        n = len(frame)
        self._frames.append(frame)
        self.position += n
        size = self.size + n
        if size > self.max_size:
            frames = self._frames
            first = self.first_position
            dropped = 0
            while size > self.max_size:
                m = len(frames.popleft())
                first += m
                size -= m
                dropped += m
            self.first_position = first
            self.dropped += dropped
        self.size = size

    def acknowledge(self, position: int) -> None:
        """The peer has received everything before ``position``: drop the frames that end at
        or before it (a position inside a frame keeps that frame). Positions behind
        :attr:`first_position` change nothing.

        :raises ResumePositionError: ``position`` is past :attr:`position` (the peer claims
            bytes we never sent).
        """
        if position > self.position:
            raise ResumePositionError(
                f"the peer acknowledged position {position}, but only {self.position} bytes "
                "of stream frames were sent")
        frames = self._frames
        first = self.first_position
        size = self.size
        while frames:
            n = len(frames[0])
            if first + n > position:
                break
            frames.popleft()
            first += n
            size -= n
        self.first_position = first
        self.size = size

    def replay_from(self, position: int) -> list[bytes]:
        """Forget the frames before ``position`` and return those from it on, to send again
        after a resume (spec §Resume Operation: retransmit starting at the peer's last received
        position).

        :param position: the peer's last received position.
        :returns: the frames, oldest first (possibly none).
        :raises ResumePositionError: ``position`` is past :attr:`position`, before
            :attr:`first_position` (those frames were dropped by the bound or never kept), or
            inside a frame. The buffer is unchanged then.
        """
        if position > self.position:
            raise ResumePositionError(
                f"the peer's last received position {position} is past the {self.position} "
                "bytes of stream frames sent")
        if position < self.first_position:
            dropped = f" ({self.dropped} bytes were dropped past the resume buffer limit of " \
                f"{self.max_size} bytes)" if self.dropped else ""
            raise ResumePositionError(
                f"frames from position {position} are no longer kept: the resume buffer starts "
                f"at position {self.first_position}{dropped}")
        frames = self._frames
        at = self.first_position
        skip = 0
        for f in frames:
            if at == position:
                break
            at += len(f)
            skip += 1
            if at > position:
                raise ResumePositionError(
                    f"position {position} is inside a frame, not at a frame boundary")
        for _ in range(skip):
            self.size -= len(frames.popleft())
        self.first_position = position
        return list(frames)


def check_resume(buffer: ResumeBuffer, received: int, last_received_server_position: int,
                 first_available_client_position: int) -> list[bytes]:
    """Server: decide a client's RESUME (spec §Resume Operation) and return what to resend.

    Resumption is possible when the client's last received position is one the server can
    resend from (kept, at a frame boundary, not past what was sent), and the client still keeps
    every frame the server has not received (its first available position is not past the
    server's received position).

    :param buffer: the session's :class:`ResumeBuffer` (frames the server sent).
    :param received: the server's implied position of what it received from the client.
    :param last_received_server_position: from the RESUME frame.
    :param first_available_client_position: from the RESUME frame.
    :returns: the frames to send again after RESUME_OK (the buffer is trimmed to them).
    :raises ResumePositionError: resumption is impossible; the message is meant for the
        ERROR[REJECTED_RESUME] frame.
    """
    if first_available_client_position > received:
        raise ResumePositionError(
            f"the client keeps frames only from position {first_available_client_position}, "
            f"but the server received up to position {received}: frames would be lost")
    return buffer.replay_from(last_received_server_position)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays between reconnection attempts: exponential, capped, with optional jitter
    (reactor-core's ``Retry.backoff(maxAttempts, minBackoff).maxBackoff(...).jitter(...)``).
    A policy: it keeps no state; :class:`BackoffAttempts` counts attempts for a caller that
    wants it to. The one backoff of the package: the resumable client's reconnection
    (:class:`~rsocket_tx.protocol.RSocketClientFactory`, without jitter), the reconnecting
    client (:class:`~rsocket_tx.reconnect.ReconnectingRSocket`) and the load balancer.

    Attempt *n* (0-based, counted since the last success) waits
    ``min(max_delay, initial_delay * multiplier**n)`` milliseconds, moved at random by up to
    ``jitter`` times that delay, up or down, and kept within [``initial_delay``,
    ``max_delay``]. With ``initial_delay`` 0 the first attempt goes at once and the next ones
    wait 1, ``multiplier``, ``multiplier**2``, ... ms (never a loop of immediate retries).

    :param initial_delay: milliseconds before the first attempt (0..2^31-1; default
        :data:`~rsocket_tx.core.config.DEFAULT_RECONNECT_INITIAL_DELAY`, 100). Also the
        shortest delay.
    :param max_delay: milliseconds, the longest delay (>= ``initial_delay``; default
        :data:`~rsocket_tx.core.config.DEFAULT_RECONNECT_MAX_DELAY`, 10,000).
    :param max_attempts: failed attempts in a row after which the caller gives up; None
        (default): try forever.
    :param jitter: fraction (0..1) of each delay by which it is moved at random, up or down
        (default :data:`~rsocket_tx.core.config.DEFAULT_RECONNECT_JITTER`, 0.5; 0: exact).
    :param multiplier: factor between successive delays (>= 1; default 2).
    :raises ValueError: a value out of range.
    """

    initial_delay: int = DEFAULT_RECONNECT_INITIAL_DELAY
    max_delay: int = DEFAULT_RECONNECT_MAX_DELAY
    max_attempts: int | None = None
    jitter: float = DEFAULT_RECONNECT_JITTER
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        check_milliseconds("initial_delay", self.initial_delay)
        check_milliseconds("max_delay", self.max_delay)
        if self.max_delay < self.initial_delay:
            raise ValueError(f"max_delay ({self.max_delay} ms) must be >= initial_delay "
                             f"({self.initial_delay} ms)")
        if self.max_attempts is not None and (
                isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int)
                or self.max_attempts < 1):
            raise ValueError(f"max_attempts must be None or an integer >= 1, "
                             f"got {self.max_attempts!r}")
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, (int, float)) \
                or not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be a number in [0, 1], got {self.jitter!r}")
        if isinstance(self.multiplier, bool) or \
                not isinstance(self.multiplier, (int, float)) or not self.multiplier >= 1:
            raise ValueError(f"multiplier must be a number >= 1, got {self.multiplier!r}")

    def delay(self, attempt: int, rand: float = 0.5) -> float:
        """The delay before attempt number ``attempt``.

        :param attempt: 0 for the first attempt after a loss (or the first retry), 1 for the
            next, ... (counted since the last success).
        :param rand: a random number in [0, 1) choosing the jitter (0.5: none).
        :returns: milliseconds, within [``initial_delay``, ``max_delay``].
        """
        first = self.initial_delay
        if not first:
            if not attempt:
                return 0.0
            first, attempt = 1, attempt - 1
        try:
            base = min(float(self.max_delay), first * self.multiplier ** min(attempt, 1100))
        except OverflowError:
            base = float(self.max_delay)
        if not self.jitter:
            return base
        offset = base * self.jitter
        low = max(self.initial_delay - base, -offset)
        high = min(self.max_delay - base, offset)
        return base + low + (high - low) * rand

    def gives_up(self, failed: int) -> bool:
        """Whether ``failed`` failed attempts in a row exhaust ``max_attempts``."""
        return self.max_attempts is not None and failed >= self.max_attempts


class BackoffAttempts:
    """Attempts counted against a :class:`Backoff`, for a caller that does not count them.

    :param policy: the delays.
    :param rng: a ``random.Random`` for the jitter (seed it for reproducible runs); None uses
        a fresh unseeded one.

    :ivar attempts: attempts counted since the last :meth:`reset`.
    """

    __slots__ = ("policy", "attempts", "_rng")

    def __init__(self, policy: Backoff, rng: _random.Random | None = None) -> None:
        self.policy = policy
        self.attempts = 0
        self._rng = rng if rng is not None else _random.Random()

    def next_delay(self) -> float:
        """The delay before the next attempt, in **seconds** (for ``callLater``); counts the
        attempt."""
        policy = self.policy
        d = policy.delay(self.attempts, self._rng.random() if policy.jitter else 0.5)
        self.attempts += 1
        return d / 1000.0

    def reset(self) -> None:
        """Back to the initial delay (after a success)."""
        self.attempts = 0


S = TypeVar("S")


class SessionStore(Generic[S]):
    """The server's resumable sessions by token, attached or detached.

    :param max_sessions: most sessions kept at once (attached and detached); a SETUP that
        would go past it is refused, so a peer cannot make the server keep unbounded state.
    :raises ValueError: ``max_sessions`` is not a positive integer.
    """

    __slots__ = ("_sessions", "max_sessions")

    def __init__(self, max_sessions: int) -> None:
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or \
                max_sessions < 1:
            raise ValueError(f"max_sessions must be a positive integer, got {max_sessions!r}")
        self._sessions: dict[bytes, S] = {}
        self.max_sessions = max_sessions

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, token: bytes) -> bool:
        return token in self._sessions

    def get(self, token: bytes) -> S | None:
        """The session of ``token``, or None."""
        return self._sessions.get(token)

    def add(self, token: bytes, session: S) -> str | None:
        """Register a new session; None on success, else why not (for ERROR[REJECTED_SETUP]):
        the token is in use (spec §Identification Token Handling: a server should not accept a
        SETUP with a token already used) or the store is full."""
        if token in self._sessions:
            return "the resume token is already in use"
        if len(self._sessions) >= self.max_sessions:
            return f"too many resumable sessions (the limit is {self.max_sessions})"
        self._sessions[token] = session
        return None

    def remove(self, token: bytes, session: S | None = None) -> None:
        """Forget ``token`` (only if it still maps to ``session``, when given)."""
        if session is None or self._sessions.get(token) is session:
            self._sessions.pop(token, None)

    def values(self) -> list[S]:
        """A snapshot of the sessions."""
        return list(self._sessions.values())
