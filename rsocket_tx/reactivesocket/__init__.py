"""The 2015 ReactiveSocket draft (seed 001): a wire format of its own on rsocket_tx's
multiplexing framework, served by the RSocket :class:`~rsocket_tx.responder.Responder` API.

==========================  ===============================================================
:mod:`.frames`              the frames, codec, TCP length framing and :func:`sniff`
:mod:`.errors`              the draft's errors <-> rsocket_tx exceptions
:mod:`.connection`          :class:`ReactiveSocketConnection`, sans-IO
:mod:`.protocol`            the Twisted protocol and factories, :data:`WEBSOCKET_SUBPROTOCOL`
:mod:`.client`              :func:`connect`, :func:`make_setup`
==========================  ===============================================================

The names the one-port server needs: :func:`sniff` (first bytes -> ``Sniff``),
:class:`ReactiveSocketServerFactory` (an ``IProtocolFactory``) and
:data:`WEBSOCKET_SUBPROTOCOL`. Docs: ``docs/reactivesocket.rst``.
"""

from __future__ import annotations

from .connection import ReactiveSocketConnection
from .frames import sniff

__all__ = [
    "WEBSOCKET_SUBPROTOCOL",
    "ReactiveSocket",
    "ReactiveSocketClientFactory",
    "ReactiveSocketConnection",
    "ReactiveSocketProtocol",
    "ReactiveSocketServerFactory",
    "connect",
    "make_setup",
    "sniff",
]

_TWISTED = {"WEBSOCKET_SUBPROTOCOL", "ReactiveSocket", "ReactiveSocketClientFactory",
            "ReactiveSocketProtocol", "ReactiveSocketServerFactory"}


def __getattr__(name: str):
    # the Twisted side is imported on first use: the sans-IO modules stay Twisted-free
    if name in _TWISTED:
        from . import protocol
        return getattr(protocol, name)
    if name in ("connect", "make_setup"):
        from . import client
        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
