"""Telling protocols apart by a connection's first bytes (the one-port server).

A server that serves several protocols on one port reads a connection's first bytes and asks each
protocol whether they could begin one of its connections. Each protocol answers with a pure
function ``sniff(prefix: bytes) -> Sniff`` that lives beside its codec (no I/O, no clock):

- :attr:`Sniff.MATCH`: these bytes begin a connection of this protocol and of no other protocol
  that rsocket_tx serves (the function decides as soon as the bytes it has are enough to say so);
- :attr:`Sniff.NO_MATCH`: no connection of this protocol begins with these bytes;
- :attr:`Sniff.NEED_MORE`: ``prefix`` is a proper prefix of a possible first message, and the
  function needs more bytes to decide.

A ``sniff`` function never raises for any input, including ``b""`` (which is always
:attr:`Sniff.NEED_MORE`), and never needs more bytes than the protocol's first message holds: a
client that sends its first message and waits for the server's must still be recognised.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

__all__ = ["Sniff", "Sniffer"]


class Sniff(enum.Enum):
    """A protocol's verdict on a connection's first bytes."""

    MATCH = "match"
    NO_MATCH = "no-match"
    NEED_MORE = "need-more"


#: The shape of a protocol's sniff function: the bytes received so far -> the verdict.
Sniffer = Callable[[bytes], Sniff]
