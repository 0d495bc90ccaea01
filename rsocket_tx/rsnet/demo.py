"""The demo publishers of ``twistd rsnet`` and ``rsocket-tx rsnet`` (the faces' default, never
a factory's): :class:`DemoPublisher`.

========================  ==============================================================
name                      elements
========================  ==============================================================
``count``                 ``1``, ``2``, ``3`` ... (ASCII decimal), without end: cancel it
``count/N``               ``1`` .. ``N``, then *onComplete*
``ints/N``                ``0`` .. ``N-1`` as 4-byte big-endian integers, a fixed element
                          size of 4 bytes (*onNextPacked* when demand allows)
``echo/NAME``             subscribes back to the peer's publisher ``NAME`` on the same
                          connection and relays its elements, its end and its error
                          (what ``rsocket-tx rsnet publish`` uses)
``error``                 one element ``1``, then *onError*
                          ``"ValueError: the demo publisher failed"``
========================  ==============================================================

Any other name: *onError* ``"no such publisher: NAME"``.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

from .publishers import NoSuchPublisher, Publication, Publisher, SubscribeRequest

__all__ = ["DemoPublisher", "RELAY_WINDOW", "MAX_COUNT"]

#: The demand window (items) ``echo/NAME`` subscribes back with.
RELAY_WINDOW = 32
#: The largest ``N`` of ``count/N`` and ``ints/N`` (``ints`` are 32-bit).
MAX_COUNT = 2**32 - 1


def _count(n: int | None) -> Iterator[bytes]:
    numbers = itertools.count(1) if n is None else range(1, n + 1)
    for i in numbers:
        yield b"%d" % i


def _ints(n: int) -> Iterator[bytes]:
    for i in range(n):
        yield i.to_bytes(4, "big")


def _failing() -> Iterator[bytes]:
    yield b"1"
    raise ValueError("the demo publisher failed")


async def _relay(request: SubscribeRequest, name: str) -> AsyncIterator[bytes]:
    subscription = request.connection.subscribe(name, window=RELAY_WINDOW)
    try:
        async for element in subscription:
            yield element
    finally:
        subscription.cancel()


def _number(name: str, text: str) -> int:
    if not text.isdigit() or int(text) > MAX_COUNT:
        raise NoSuchPublisher(name)
    return int(text)


class DemoPublisher(Publisher):
    """The demo publishers (see the module docstring)."""

    def subscribe(self, request: SubscribeRequest) -> object:
        name = request.publisher
        kind, slash, arg = name.partition("/")
        if kind == "count" and not slash:
            return _count(None)
        if kind == "count":
            return _count(_number(name, arg))
        if kind == "ints" and slash:
            return Publication(_ints(_number(name, arg)), element_size=4)
        if kind == "echo" and arg:
            return _relay(request, arg)
        if name == "error":
            return _failing()
        raise NoSuchPublisher(name)

    def names(self) -> list[str]:
        return ["count", "count/N", "ints/N", "echo/NAME", "error"]
