"""The input format every fuzz target reads, and the failure a target raises.

A fuzz input is one *variant* byte (which configuration to build: role, options, limits),
then *records*. A record starts with one header byte ``h``:

* ``h <= FEED_MAX`` (0xDF): the next ``h`` bytes are one chunk to feed (to a decoder, or to a
  connection's ``receive_data``/``receive_frame``); the input is cut anywhere, so frames
  arrive split and joined in every way;
* ``h >= CALL_BASE`` (0xE0): an API call, number ``h - CALL_BASE`` (0..31), with the next
  byte as its argument.

An input that ends early ends its last record short (a feed of fewer bytes, an argument of
0). Everything is a valid input: the fuzzer mutates bytes and lengths freely.

A target treats only the protocol's documented errors as expected; any other exception, and
:class:`Crash` (a broken invariant), is a bug.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["FEED_MAX", "CALL_BASE", "FEED", "Crash", "check", "Records", "seed_input"]

#: The largest header byte that means "feed this many bytes".
FEED_MAX = 0xDF
#: Header bytes from this one up are API calls (``h - CALL_BASE`` is the call's number).
CALL_BASE = 0xE0
#: The op of a feed record in :meth:`Records.__iter__`.
FEED = -1


class Crash(AssertionError):
    """An invariant of the code under test broke (not an exception the code raised)."""


def check(condition: object, message: str, *args: object) -> None:
    """Raise :class:`Crash` with ``message % args`` unless ``condition`` holds (the message is
    formatted only then: the checks run for every input)."""
    if not condition:
        raise Crash(message % args if args else message)


class Records:
    """Reader of one fuzz input.

    :param data: the input.
    :ivar variant: the first byte (0 for an empty input).
    """

    __slots__ = ("data", "pos", "variant")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.variant = data[0] if data else 0
        self.pos = 1

    def __iter__(self) -> Iterator[tuple[int, bytes | int]]:
        """Yield ``(FEED, chunk)`` for a feed, ``(number, argument)`` for an API call."""
        data = self.data
        end = len(data)
        pos = self.pos
        while pos < end:
            h = data[pos]
            pos += 1
            if h <= FEED_MAX:
                chunk = data[pos:pos + h]
                pos += h
                yield FEED, chunk
            else:
                arg = data[pos] if pos < end else 0
                pos += 1
                yield h - CALL_BASE, arg
        self.pos = pos

    def feeds(self) -> Iterator[bytes]:
        """The feed chunks only (API call records are skipped), for codec targets."""
        for op, value in self:
            if op == FEED:
                yield value  # type: ignore[misc]


def seed_input(variant: int, items: Iterable[bytes | tuple[int, int]]) -> bytes:
    """Build an input: ``variant``, then one feed per bytes item (split into records of at
    most ``FEED_MAX`` bytes) and one call per ``(number, argument)`` item.

    :raises ValueError: a call number outside 0..31 or an argument outside 0..255.
    """
    out = bytearray([variant])
    for item in items:
        if isinstance(item, tuple):
            number, arg = item
            if not (0 <= number < 0x100 - CALL_BASE and 0 <= arg <= 0xFF):
                raise ValueError(f"bad call record {item!r}")
            out += bytes((CALL_BASE + number, arg))
            continue
        data = bytes(item)
        if not data:
            out.append(0)
        for i in range(0, len(data), FEED_MAX):
            piece = data[i:i + FEED_MAX]
            out.append(len(piece))
            out += piece
    return bytes(out)
