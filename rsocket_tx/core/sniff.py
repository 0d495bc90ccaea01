"""Is this the start of an RSocket 1.0 connection? (the one-port server:
:mod:`rsocket_tx.mux.sniff`)

RSocket 1.0 Protocol §Connection Establishment: a client's first frame is SETUP or RESUME, on
stream 0. Over a byte stream (TCP, TLS; §Framing Format) it follows a 3-byte frame length, so
the first 11 bytes of every RSocket 1.0 connection are::

     offset  0 1 2 | 3 4 5 6   | 7             8      | 9 10
            length | stream 0  | type<<2|I|M   flags  | major version = 1
                   | 00000000  | SETUP  0x04..0x07    | 00 01
                   |           | RESUME 0x34..0x37    |

``length`` must be at least the smallest frame of its type (SETUP: 20 bytes, §SETUP Frame;
RESUME: 28 bytes, §RESUME Frame). The minor version, the flags and the rest of the frame are
left to the connection, which answers a bad SETUP with ERROR[INVALID_SETUP] itself. A major
version other than 1 is not this protocol.

Over WebSocket a connection's protocol is chosen by the WebSocket subprotocol instead
(:data:`WEBSOCKET_SUBPROTOCOL`), so only the length-prefixed form is sniffed.
"""

from __future__ import annotations

from ..mux.sniff import Sniff
from .frames import FrameType

__all__ = ["MAJOR_VERSION", "SNIFF_SIZE", "WEBSOCKET_SUBPROTOCOL", "sniff"]

#: The major version a connection must announce in its SETUP or RESUME.
MAJOR_VERSION = 1
#: Bytes :func:`sniff` needs to decide (length, stream id, type and flags, major version).
SNIFF_SIZE = 11
#: The WebSocket subprotocol name of RSocket 1.0 (the one-port server chooses the protocol by
#: it; rsocket-js and rsocket-py offer none, which also means RSocket).
WEBSOCKET_SUBPROTOCOL = "rsocket"

#: The smallest frame (bytes, without the length prefix) of each first-frame type: SETUP is
#: header 6 + versions 4 + keepalive 4 + lifetime 4 + two MIME lengths 2; RESUME is header 6 +
#: versions 4 + token length 2 + two positions 16.
_MIN_FRAME = {FrameType.SETUP: 20, FrameType.RESUME: 28}
_TYPE_BYTE = {int(t) << 2: n for t, n in _MIN_FRAME.items()}
_STREAM_ZERO = b"\x00\x00\x00\x00"
_MAJOR = MAJOR_VERSION.to_bytes(2, "big")


def sniff(prefix: bytes) -> Sniff:
    """Could ``prefix`` begin an RSocket 1.0 connection over a byte stream?

    Implements RSocket 1.0 Protocol §Connection Establishment (the first frame is SETUP or
    RESUME with stream id 0) and §Framing Format (the 24-bit length before it).

    :param prefix: the first bytes the client sent (any length, possibly empty).
    :returns: :attr:`~rsocket_tx.mux.sniff.Sniff.MATCH` once the first :data:`SNIFF_SIZE`
        (11) bytes are a SETUP or RESUME header of major version 1;
        :attr:`~rsocket_tx.mux.sniff.Sniff.NO_MATCH` as soon as a byte rules that out;
        :attr:`~rsocket_tx.mux.sniff.Sniff.NEED_MORE` while every byte so far fits. Never
        raises.
    """
    head = prefix[3:7]  # the stream id: 0
    if head != _STREAM_ZERO[:len(head)]:
        return Sniff.NO_MATCH
    if len(prefix) < 8:
        return Sniff.NEED_MORE
    minimum = _TYPE_BYTE.get(prefix[7] & 0xFC)  # the frame type (I and M flags masked)
    if minimum is None or int.from_bytes(prefix[0:3], "big") < minimum:
        return Sniff.NO_MATCH
    major = prefix[9:11]
    if major != _MAJOR[:len(major)]:
        return Sniff.NO_MATCH
    return Sniff.MATCH if len(prefix) >= SNIFF_SIZE else Sniff.NEED_MORE
