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


class FrameReader:
    """Incremental splitter of a byte stream into frames.

    :param max_frame_size: the largest inbound frame accepted, in bytes, excluding the length
        prefix; at most (and by default) 16,777,215.
    :raises ValueError: ``max_frame_size`` is outside [6, 16,777,215].
    """

    __slots__ = ("_parts", "_have", "_need", "max_frame_size")

    def __init__(self, max_frame_size: int = MAX_FRAME_LENGTH) -> None:
        if not 6 <= max_frame_size <= MAX_FRAME_LENGTH:
            raise ValueError(
                f"max_frame_size must be in [6, {MAX_FRAME_LENGTH}] bytes, got {max_frame_size!r}")
        self.max_frame_size = max_frame_size
        self._parts: list[bytes] = []  # received bytes not yet returned as frames
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
            ``max_frame_size``; raised as soon as the 3 prefix bytes are seen.
        """
        frames = []
        if self._parts:
            self._have += len(data)
            self._parts.append(data)
            need = self._need
            if self._have < need:
                return []
            parts = self._parts
            self._parts = []
            if need:
                # the head frame's length is known: join its pieces once, leaving out the
                # prefix, and carry on with whatever follows it in the last piece
                extra = self._have - need
                last = parts[-1]
                if extra:
                    parts[-1] = last[:len(last) - extra]
                    buf = last[len(last) - extra:]
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
        while end - pos >= 3:
            n = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
            if n > limit:
                self._parts = []
                self._have = self._need = 0
                raise FrameTooLargeError(
                    f"frame length {n} exceeds the max frame size of {limit} bytes")
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
            self._parts = [rest]
            self._have = len(rest)
        else:
            self._have = 0
        return frames
