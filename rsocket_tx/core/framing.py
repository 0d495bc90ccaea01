"""Length-prefixed framing for stream transports (spec §Framing Protocol Usage).

TCP (and any byte-stream transport) carries each RSocket frame behind a 24-bit big-endian
length that counts the frame's bytes, excluding the length field itself. Message transports
(WebSocket) carry one frame per message and use no prefix.
"""

from __future__ import annotations

from .errors import FrameTooLargeError

__all__ = ["MAX_FRAME_LENGTH", "frame_with_length", "FrameReader"]

#: The largest frame the 24-bit length can describe, in bytes (spec §Max Frame Size).
MAX_FRAME_LENGTH = 0xFFFFFF


def frame_with_length(frame_bytes: bytes) -> bytes:
    """Prefix one encoded frame with its 3-byte big-endian length.

    :param frame_bytes: the frame, as returned by :func:`rsocket_tx.core.frames.encode`.
    :returns: length prefix + frame.
    :raises ValueError: the frame is longer than 16,777,215 bytes.
    """
    n = len(frame_bytes)
    if n > MAX_FRAME_LENGTH:
        raise ValueError(f"frame of {n} bytes does not fit the 24-bit length prefix")
    return n.to_bytes(3, "big") + frame_bytes


#: Pieces of a frame smaller than this (bytes) are gathered in one bytearray rather than kept
#: as separate bytes objects: a peer sending a frame a byte at a time must not make us hold
#: some 40 bytes of object overhead per byte received.
_SMALL_PIECE = 4096


class FrameReader:
    """Incremental splitter of a byte stream into frames.

    The bytes held for an incomplete frame are bounded by the limit its length prefix was
    checked against, plus less than 13% (a bytearray's slack): pieces smaller than 4 KiB are
    gathered into one bytearray, so a frame arriving a byte at a time costs no per-piece
    object overhead.

    :param max_frame_size: the largest inbound frame accepted, in bytes, excluding the length
        prefix; at most (and by default) 16,777,215.
    :param first_frame_size: the largest *first* frame accepted, in bytes (a server's limit on
        SETUP and RESUME, spec §Connection Establishment; at most ``max_frame_size``); None:
        ``max_frame_size``. Frames after the first are checked against ``max_frame_size``.
    :raises ValueError: ``max_frame_size`` or ``first_frame_size`` is outside
        [6, 16,777,215].
    """

    __slots__ = ("_parts", "_have", "_need", "max_frame_size", "first_frame_size")

    def __init__(self, max_frame_size: int = MAX_FRAME_LENGTH,
                 first_frame_size: int | None = None) -> None:
        for name, value in (("max_frame_size", max_frame_size),
                            ("first_frame_size", first_frame_size)):
            if value is not None and not 6 <= value <= MAX_FRAME_LENGTH:
                raise ValueError(
                    f"{name} must be in [6, {MAX_FRAME_LENGTH}] bytes, got {value!r}")
        self.max_frame_size = max_frame_size
        #: the limit of the first length prefix (at most ``max_frame_size``), until that
        #: prefix has been checked; then None
        self.first_frame_size = (None if first_frame_size is None
                                 else min(first_frame_size, max_frame_size))
        self._parts: list[bytes | bytearray] = []  # received bytes not yet returned as frames
        self._have = 0  # total length of _parts
        self._need = 0  # bytes needed to complete the frame at the head of _parts (0: unknown)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return self._have

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every frame now complete (without prefixes).

        A large frame arriving in many reads is collected without re-copying what came before:
        its pieces are joined once, when the last one arrives.

        :param data: bytes from the transport, cut anywhere.
        :returns: complete frames, in order (possibly none).
        :raises FrameTooLargeError: a length prefix announces a frame larger than
            ``max_frame_size`` (the first one: ``first_frame_size``); raised as soon as the 3
            prefix bytes are seen, nothing of the frame's body buffered. Its ``frames`` are the
            complete frames that came before the prefix, in order; the reader is empty
            afterwards.
        """
        frames = []
        parts = self._parts
        if parts:
            n = len(data)
            self._have += n
            if n < _SMALL_PIECE:
                last = parts[-1]
                if last.__class__ is bytearray:
                    last += data
                else:
                    parts.append(bytearray(data))
            else:
                parts.append(data)
            need = self._need
            if self._have < need:
                return []
            self._parts = []
            if need:
                # the head frame's length is known: join its pieces once, leaving out the
                # prefix, and carry on with whatever follows it in the last piece
                extra = self._have - need
                last = parts[-1]
                if extra:
                    parts[-1] = last[:len(last) - extra]
                    buf = bytes(last[len(last) - extra:])
                else:
                    buf = b""
                parts[0] = parts[0][3:]
                frames.append(b"".join(parts))
                self._need = 0
            else:
                buf = b"".join(parts)
        else:
            buf = data
        end = len(buf)
        pos = 0
        limit = self.max_frame_size
        first = self.first_frame_size
        if first is not None and end >= 3:
            # the first length prefix is complete (at the head of buf: nothing came before)
            self.first_frame_size = None
            n = (buf[0] << 16) | (buf[1] << 8) | buf[2]
            if n > first:
                self._reset()
                raise FrameTooLargeError(
                    f"first frame length {n} exceeds the max setup frame size of {first} bytes")
        while end - pos >= 3:
            n = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
            if n > limit:
                self._reset()
                raise FrameTooLargeError(
                    f"frame length {n} exceeds the max frame size of {limit} bytes", frames)
            stop = pos + 3 + n
            if stop > end:
                self._need = stop - pos
                break
            frames.append(buf[pos + 3:stop])
            pos = stop
        else:
            self._need = 0
        if pos < end:
            rest = buf[pos:] if pos else buf
            self._parts = [rest if end - pos >= _SMALL_PIECE else bytearray(rest)]
            self._have = end - pos
        else:
            self._have = 0
        return frames

    def _reset(self) -> None:
        self._parts = []
        self._have = self._need = 0
