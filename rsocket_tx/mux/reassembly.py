"""Bounded reassembly: joining a message sent in pieces, with a cap per message and per
connection.

RSocket 1.0 (§Fragmentation And Reassembly) splits a payload over frames with the F(ollows)
flag; the Jini ERI multiplexing protocol carries a request or response body as many Data
messages up to eof; the Reactive Streams network draft splits a large element into onNextPart
messages closed by onNextLastPart. A :class:`Reassembler` collects one message's pieces and
refuses to grow past ``max_size``; a :class:`ReassemblyBudget`, shared by the reassemblers of
one connection, caps the bytes held across all its streams, so a peer cannot make a
connection hold ``streams x max_size`` bytes.
"""

from __future__ import annotations

from .errors import ReassemblyLimitExceeded

__all__ = ["ReassemblyBudget", "Reassembler"]


class ReassemblyBudget:
    """Bytes held by unfinished reassemblies across all streams of one connection.

    :param limit: the most bytes held at once; at least 0.
    :raises ValueError: ``limit`` < 0.
    """

    __slots__ = ("limit", "held")

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"the reassembly budget must be at least 0 bytes, got {limit}")
        self.limit = limit
        #: bytes reserved now
        self.held = 0

    @property
    def available(self) -> int:
        """Bytes that may still be reserved."""
        return self.limit - self.held

    def reserve(self, n: int) -> None:
        """Hold ``n`` more bytes.

        :raises ReassemblyLimitExceeded: the total would pass :attr:`limit` (nothing reserved).
        """
        total = self.held + n
        if total > self.limit:
            raise ReassemblyLimitExceeded(total, self.limit)
        self.held = total

    def release(self, n: int) -> None:
        """Give back ``n`` bytes reserved before.

        :raises ValueError: more than is held.
        """
        if n > self.held:
            raise ValueError(f"releasing {n} bytes, only {self.held} are held")
        self.held -= n


class Reassembler:
    """One message being reassembled from its pieces.

    :param max_size: the largest message, in bytes.
    :param budget: the connection's :class:`ReassemblyBudget` the pieces are also counted
        against, or None.
    """

    __slots__ = ("max_size", "budget", "_parts", "size")

    def __init__(self, max_size: int, budget: ReassemblyBudget | None = None) -> None:
        self.max_size = max_size
        self.budget = budget
        self._parts: list[bytes] = []
        #: bytes collected so far
        self.size = 0

    def append(self, chunk: bytes) -> None:
        """Add the next piece.

        :raises ReassemblyLimitExceeded: the message would pass ``max_size``, or the budget
            would pass its limit (the piece is not added; the caller usually
            :meth:`discard`\\ s).
        """
        n = len(chunk)
        size = self.size + n
        if size > self.max_size:
            raise ReassemblyLimitExceeded(size, self.max_size)
        if self.budget is not None:
            self.budget.reserve(n)
        if n:
            self._parts.append(chunk)
        self.size = size

    def finish(self) -> bytes:
        """The whole message; the reassembler is empty afterwards (its bytes are released
        from the budget)."""
        parts = self._parts
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        self.discard()
        return data

    def discard(self) -> None:
        """Drop what was collected (the stream was cancelled or aborted) and release it from
        the budget."""
        if self.budget is not None and self.size:
            self.budget.release(self.size)
        self._parts = []
        self.size = 0
