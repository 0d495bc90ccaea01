"""The id policy interface: how one side of a connection gets ids for the streams it opens.

:class:`IdPolicy` is a runtime-checkable protocol (``isinstance(policy, IdPolicy)``); its
implementations are in :mod:`rsocket_tx.mux.ids`, which re-exports it. It is a module of its
own because the compiled build (mypyc, :mod:`rsocket_tx.build`) compiles :mod:`.ids` and builds
no runtime-checkable protocol: this module stays Python in both builds.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["IdPolicy"]


@runtime_checkable
class IdPolicy(Protocol):
    """How one side of a connection gets ids for the streams it opens."""

    def allocate(self) -> int:
        """Take an id for a new stream.

        :raises IdsExhausted: no id is left.
        """
        ...

    def release(self, stream_id: int) -> None:
        """Give back the id of a stream that ended (a no-op where ids are never reused)."""
        ...

    def is_local(self, stream_id: int) -> bool:
        """Whether ``stream_id`` belongs to the streams this side opens."""
        ...
