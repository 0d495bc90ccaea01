"""The Jini ERI multiplexing protocol ("Jmux", seed 004): Apache River's wire format for
request/response sessions multiplexed over one byte-stream connection.

Layers: :mod:`.codec` (messages and their bit patterns) and :mod:`.connection` (the sans-IO
connection: sessions, rations, rules), both free of Twisted; the Twisted API on top:
:mod:`.client` (:class:`JiniMuxClient`, :class:`OutboundRequest`), :mod:`.server`
(:class:`Dispatcher`, :class:`InboundRequest`, :func:`serve`), :mod:`.protocol` and
:mod:`.streams`; :mod:`.echo` is a demo dispatcher.

The Twisted names are imported on first use (``rsocket_tx.jini.JiniMuxClient``), so that
importing the sans-IO modules never imports Twisted.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import errors
from .config import JiniMuxConfig
from .errors import *  # noqa: F403 - every error class, as listed in errors.__all__

#: the Twisted names, imported on first use: name -> module
_LAZY = {
    "JiniMuxConnection": ".connection",
    "Role": ".connection",
    "JiniMuxClient": ".client",
    "OutboundRequest": ".client",
    "Dispatcher": ".server",
    "InboundRequest": ".server",
    "JiniMuxServerFactory": ".server",
    "serve": ".server",
    "EchoDispatcher": ".echo",
}

__all__ = ["JiniMuxConfig", *errors.__all__, *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
