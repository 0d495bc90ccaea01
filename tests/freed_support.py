"""Helpers of the tests that a closed connection is freed by reference counting alone
(``tests/test_freed.py``, ``tests/jini/test_freed.py``): the cyclic garbage collector is
switched off, a scenario runs and ends, the test drops its own references, and weak
references to the protocol, the connection and their buffers must then be dead. When one is
not, the failure says whether only the cyclic collector would have freed it (a reference
cycle) and lists what that cycle is made of."""

from __future__ import annotations

import collections
import gc
import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from twisted.internet import defer, reactor, task

__all__ = ["cyclic_gc_off", "IdRef", "refs", "assert_freed", "cyclic_garbage", "referrer_chain",
           "live_count", "turns", "Watching"]


@contextmanager
def cyclic_gc_off() -> Iterator[None]:
    """Collect once, then run the block with the cyclic garbage collector disabled
    (re-enabled after, even on failure)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class IdRef:
    """A weak-reference stand-in for an object that takes no weak reference (a class of the
    compiled build: mypyc's native classes have no ``__weakref__`` slot): called, it returns
    the object while the cyclic collector still tracks an object of that type at that
    address, else None. It holds no reference to the object."""

    def __init__(self, obj: Any) -> None:
        self.address = id(obj)
        self.kind = type(obj)

    def __call__(self) -> Any:
        for candidate in gc.get_objects():
            if id(candidate) == self.address and type(candidate) is self.kind:
                return candidate
        return None


def refs(**objects: Any) -> dict[str, Any]:
    """Weak references to ``objects``, by name (an :class:`IdRef` for an object of a
    compiled class, which takes no weak reference)."""
    weak: dict[str, Any] = {}
    for name, obj in objects.items():
        try:
            weak[name] = weakref.ref(obj)
        except TypeError:
            if not gc.is_tracked(obj):
                raise
            weak[name] = IdRef(obj)
    return weak


def assert_freed(weak: dict[str, Any]) -> None:
    """Fail unless every object of ``weak`` is gone (with the cyclic collector off, only
    reference counting can have freed it). The failure names the objects still alive, and
    for those in a reference cycle, the types the cyclic garbage is made of."""
    alive = sorted(name for name, ref in weak.items() if ref() is not None)
    if not alive:
        return
    alive_ids = {name: id(weak[name]()) for name in alive}
    garbage = cyclic_garbage()
    ids = {id(o) for o in garbage}
    cyclic = [name for name in alive if alive_ids[name] in ids]
    kinds = collections.Counter(type(o).__qualname__ for o in garbage).most_common(25)
    frames = collections.Counter(o.f_code.co_qualname for o in garbage
                                 if type(o) is types.FrameType).most_common(10)
    chains = {name: referrer_chain(o, garbage) for name in cyclic for o in garbage
              if id(o) == alive_ids[name]}
    del garbage
    for name in alive:
        if name not in cyclic and weak[name]() is not None:
            chains[name] = referrer_chain(weak[name](), gc.get_objects(), 12)
    pytest.fail(f"still alive after the connection closed: {alive}; in reference cycles "
                f"(freed only by the cyclic collector): {cyclic}; the cyclic garbage: {kinds}; "
                f"its frames: {frames}; what holds each (up from it): {chains}",
                pytrace=False)


def cyclic_garbage() -> list[Any]:
    """What the cyclic collector would free now (it is collected, and returned instead of
    freed)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        garbage = list(gc.garbage)
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
    return garbage


def live_count(*types: type) -> int:
    """How many objects of exactly these types the garbage collector tracks now."""
    return sum(1 for o in gc.get_objects() if type(o) in types)


async def turns(n: int = 3) -> None:
    """Let the reactor run ``n`` turns (what was scheduled with ``callLater(0)`` runs)."""
    for _ in range(n):
        await task.deferLater(reactor, 0, lambda: None)


def _describe(o: Any) -> str:
    if type(o) is types.FrameType:
        return f"frame {o.f_code.co_qualname}:{o.f_lineno}"
    if isinstance(o, dict):
        return "dict keys " + ",".join(map(str, list(o)[:8]))
    text = repr(o) if not isinstance(o, (list, tuple)) else f"{type(o).__name__} len {len(o)}"
    return f"{type(o).__qualname__}: {text[:100]}"


def referrer_chain(target: Any, garbage: list[Any], depth: int = 30) -> list[str]:
    """Who (in ``garbage``) refers to ``target``, then who refers to that, ``depth`` levels
    up (following the first referrer each time): the way into the cycle."""
    ids = {id(o) for o in garbage}
    out = []
    o = target
    seen = {id(o)}
    for _ in range(depth):
        refs_ = [r for r in gc.get_referrers(o) if id(r) in ids and id(r) not in seen]
        if not refs_:
            break
        out.append(" | ".join(_describe(r) for r in refs_[:4]))
        o = refs_[0]
        seen.add(id(o))
    return out


class Watching:
    """Mixed into a server factory that observes its connections (``connection_lost``):
    tells when each connection is over (:meth:`lost`) and remembers, weakly (only the test's
    :func:`refs`), the protocols it built (``built``: weak references, oldest first)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.built: list[Any] = []  # weak references
        self.lost_count = 0
        self._lost: list[defer.Deferred] = []

    def buildProtocol(self, addr: Any) -> Any:  # noqa: N802 - Twisted's name
        protocol = super().buildProtocol(addr)  # type: ignore[misc]
        self.built.append(refs(server=protocol)["server"])
        return protocol

    def connection_lost(self, protocol: Any) -> None:
        super().connection_lost(protocol)  # type: ignore[misc]
        self.lost_count += 1
        waiters, self._lost = self._lost, []
        for d in waiters:
            d.callback(None)

    def lost(self, count: int, timeout: float = 30) -> defer.Deferred:
        """A Deferred firing once ``count`` connections have been lost in all (failing with
        TimeoutError after ``timeout`` seconds)."""
        if self.lost_count >= count:
            return defer.succeed(None)
        d: defer.Deferred = defer.Deferred()
        self._lost.append(d)
        return d.addCallback(lambda _: self.lost(count, timeout)).addTimeout(timeout, reactor)
