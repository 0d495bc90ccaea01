"""The outbound queue: bytes a sans-IO connection has produced and its caller has not yet
written.

Every protocol of the framework queues here what it encodes: RSocket frames (with their
length prefixes on a byte-stream transport), Jini ERI mux messages, Reactive Streams network
messages. The Twisted bridge drains the queue once per read or tick and writes everything in
one transport write (``writeSequence``: large chunks are never copied into one buffer);
:attr:`Outbox.nbytes` lets it guard the send buffer.

An :class:`Outbox` is a ``list`` of byte strings: ``append``, ``extend``, ``clear``,
``len()`` and truth are the list's own (queueing a frame on the hot path costs one C call);
:meth:`Outbox.drain` takes everything.
"""

from __future__ import annotations

__all__ = ["Outbox"]


class Outbox(list[bytes]):
    """A FIFO of byte strings to write (a list: ``append(data)``, ``extend(chunks)``,
    ``clear()``, ``len(outbox)`` = how many byte strings are queued, true when any is)."""

    __slots__ = ()

    @property
    def nbytes(self) -> int:
        """Total bytes queued (computed: one pass over the queued byte strings)."""
        return sum(map(len, self))

    def drain(self) -> list[bytes]:
        """Take everything queued, in order; the outbox is empty afterwards.

        :returns: the queued byte strings, as a new plain list.
        """
        if not self:
            return []
        chunks = self.copy()
        self.clear()
        return chunks

    def __repr__(self) -> str:
        return f"<Outbox {len(self)} chunks, {self.nbytes} bytes>"
