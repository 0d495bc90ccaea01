"""The stream table: the streams (RSocket), sessions (Jini ERI mux) or subscriptions
(Reactive Streams network draft) open on one connection, each with per-direction state.

Every one of those protocols multiplexes independent, bidirectional conversations over one
transport and closes each direction separately: RSocket's ``send_open``/``recv_open`` after
COMPLETE, CANCEL and ERROR (RSocket 1.0 Protocol §Stream Lifecycle), Jini's eof in each
direction and the session states established, finished and terminated (Jini ERI multiplexing
protocol, "Session lifecycle"), and the RS-network subscription that ends with cancel or
onComplete/onError. A :class:`MuxStream` holds the half-close state; a protocol subclasses it
and adds its own slots (kind, credit, reassembly). A :class:`StreamTable` maps ids to streams,
enforces how many the peer may have open at once, and removes an entry once both directions
are closed.

The limit counts the *remote* streams, those the peer opened: RSocket limits only those
(``max_concurrent_streams``; our own are bounded by our application), and so does the
RS-network draft (the subscriptions the peer made); a Jini server's sessions are all opened by
the client (at most 128), a Jini client's are all its own (bounded by its id policy). Each
:meth:`StreamTable.add` says whether the stream is remote, or the table asks its
``is_local`` (an id policy's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from .errors import StreamIdInUse, StreamLimitExceeded
from .native import mypyc_attr

__all__ = ["MuxStream", "StreamTable"]


@mypyc_attr(allow_interpreted_subclasses=True)
class MuxStream:
    """One stream's per-direction state, as seen from this end.

    :param stream_id: the stream (session, subscriber) id.
    :param send_open: whether our outbound half is still live.
    :param recv_open: whether the peer's outbound half is still live.
    :ivar remote: whether the peer opened it (set by :meth:`StreamTable.add`).

    Subclasses add their protocol's state as more ``__slots__``.
    """

    __slots__ = ("stream_id", "send_open", "recv_open", "remote")

    def __init__(self, stream_id: int, send_open: bool = True, recv_open: bool = True) -> None:
        self.stream_id = stream_id
        self.send_open = send_open
        self.recv_open = recv_open
        self.remote = False

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.stream_id} send_open={self.send_open} "
                f"recv_open={self.recv_open}>")


S = TypeVar("S", bound=MuxStream)


class StreamTable(Generic[S]):
    """The open streams of one connection, by id.

    :param limit: the most *remote* streams (those the peer opened) that may be open at once;
        a negative limit refuses every remote stream (a graceful close). May be changed at any
        time through :attr:`limit`.
    :param is_local: ``is_local(stream_id)`` tells a stream we opened, which does not count
        against ``limit`` (e.g. :meth:`~rsocket_tx.mux.ids.ParityIds.is_local`), for the
        :meth:`add` calls that do not say; None: such streams are all remote.

    The hot path pays no extra call: :meth:`get` is the dict's own ``get``, and
    :attr:`remote` is a plain attribute.
    """

    __slots__ = ("limit", "remote", "_streams", "_is_local", "get")

    def __init__(self, limit: int, *, is_local: Callable[[int], bool] | None = None) -> None:
        self.limit = limit
        #: how many remote streams are open (read-only: counted against :attr:`limit`)
        self.remote = 0
        self._streams: dict[int, S] = {}
        self._is_local = is_local
        #: ``get(stream_id)`` -> the stream, or None.
        self.get: Callable[[int], S | None] = self._streams.get

    def would_accept(self) -> bool:
        """Whether one more remote stream fits under :attr:`limit` now."""
        return self.remote < self.limit

    def add(self, stream: S, *, remote: bool | None = None) -> None:
        """Add a newly opened stream.

        :param remote: whether the peer opened it (it then counts against :attr:`limit`);
            None: not ``is_local(stream_id)``. Recorded as the stream's ``remote``.
        :raises StreamIdInUse: a stream with its id is open.
        :raises StreamLimitExceeded: it is remote, and :attr:`limit` remote streams are open
            already.
        """
        sid = stream.stream_id
        streams = self._streams
        if sid in streams:
            raise StreamIdInUse(sid)
        if remote is None:
            is_local = self._is_local
            remote = is_local is None or not is_local(sid)
        if remote:
            if self.remote >= self.limit:
                raise StreamLimitExceeded(self.remote, self.limit)
            self.remote += 1
        stream.remote = remote
        streams[sid] = stream

    def __contains__(self, stream_id: object) -> bool:
        return stream_id in self._streams

    def __len__(self) -> int:
        return len(self._streams)

    def __bool__(self) -> bool:
        return bool(self._streams)

    def __iter__(self) -> Iterator[S]:
        """The open streams, in the order they were added (a snapshot: the table may change
        while iterating)."""
        return iter(list(self._streams.values()))

    def values(self) -> list[S]:
        """The open streams, in the order they were added (a new list)."""
        return list(self._streams.values())

    def ids(self) -> list[int]:
        """The open streams' ids, in the order they were added (a new list)."""
        return list(self._streams)

    def is_remote(self, stream_id: int) -> bool:
        """Whether ``stream_id`` is an open stream the peer opened."""
        stream = self._streams.get(stream_id)
        return stream is not None and stream.remote

    def close_send(self, stream: S) -> bool:
        """Close our outbound half of ``stream``.

        :returns: True when both halves are now closed and the entry was removed.
        """
        stream.send_open = False
        if stream.recv_open:
            return False
        self._drop(stream)
        return True

    def close_recv(self, stream: S) -> bool:
        """Close the peer's outbound half of ``stream``.

        :returns: True when both halves are now closed and the entry was removed.
        """
        stream.recv_open = False
        if stream.send_open:
            return False
        self._drop(stream)
        return True

    def _drop(self, stream: S) -> None:
        """Remove ``stream`` (both halves closed), counting it off the peer's streams."""
        if self._streams.pop(stream.stream_id, None) is not None and stream.remote:
            self.remote -= 1

    def remove(self, stream_id: int) -> S | None:
        """Remove a stream whatever its state (cancelled, aborted, errored).

        :returns: the stream removed, or None when no stream had that id.
        """
        stream = self._streams.pop(stream_id, None)
        if stream is not None and stream.remote:
            self.remote -= 1
        return stream

    def clear(self) -> list[S]:
        """Remove every stream (the connection ended).

        :returns: the streams removed, in the order they were added.
        """
        streams = list(self._streams.values())
        self._streams.clear()
        self.remote = 0
        return streams
