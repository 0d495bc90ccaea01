"""Fragmentation and reassembly of payload-bearing frames (spec §Fragmentation And Reassembly).

A fragment size counts whole frames: the 6-byte RSocket frame header and every field of the
frame, *excluding* the 3-byte length prefix of stream transports. Metadata is sent completely
before data. A fragmented request is its REQUEST_* frame with (F)ollows set, then PAYLOAD
frames; every fragment but the last has F set; the last carries the C flag of the whole.
"""

from __future__ import annotations

from struct import Struct

from ..mux.errors import ReassemblyLimitExceeded
from ..mux.reassembly import Reassembler, ReassemblyBudget
from .errors import PayloadTooLargeError, ReassemblyBudgetError
from .frames import FLAG_COMPLETE, FLAG_FOLLOWS, FLAG_METADATA, FLAG_NEXT, FrameType
from .payload import Payload

__all__ = ["fragment", "encode_payload_bearing", "Reassembly"]

_HEADER = Struct(">IH")
_PAYLOAD_SHIFTED = FrameType.PAYLOAD << 10


def encode_payload_bearing(frame_type: int, stream_id: int, flags: int, fixed: bytes,
                           data: bytes, metadata: bytes | None) -> bytes:
    """Encode one REQUEST_* or PAYLOAD frame from its parts (the hot path of sending).

    :param flags: the flags other than M (F, C, N as the frame needs).
    :param fixed: the bytes between header and metadata (initial request-n, or b"").
    """
    if metadata is None:
        return _HEADER.pack(stream_id, (frame_type << 10) | flags) + fixed + data
    return b"".join((_HEADER.pack(stream_id, (frame_type << 10) | flags | FLAG_METADATA), fixed,
                     len(metadata).to_bytes(3, "big"), metadata, data))


def fragment(frame_type: int, stream_id: int, fixed: bytes, data: bytes,
             metadata: bytes | None, complete: bool, next_: bool, limit: int) -> list[bytes]:
    """Encode a payload-bearing frame as one or more frames of at most ``limit`` bytes.

    :param frame_type: REQUEST_RESPONSE, REQUEST_FNF, REQUEST_STREAM, REQUEST_CHANNEL or PAYLOAD.
    :param fixed: fixed fields after the header of the first frame (initial request-n).
    :param complete: the C flag of the whole (PAYLOAD, REQUEST_CHANNEL); it goes on the last
        fragment.
    :param next_: the N flag (PAYLOAD); every PAYLOAD fragment carries N.
    :param limit: the largest frame in bytes, header included, length prefix excluded (>= 64).
    :returns: encoded frames, in sending order.
    """
    mlen = -1 if metadata is None else len(metadata)
    meta = b"" if metadata is None else metadata
    size = 6 + len(fixed) + (mlen + 3 if mlen >= 0 else 0) + len(data)
    term = (FLAG_COMPLETE if complete else 0)
    first_next = FLAG_NEXT if next_ and frame_type == FrameType.PAYLOAD else 0
    if size <= limit:
        return [encode_payload_bearing(frame_type, stream_id, term | first_next, fixed, data,
                                       metadata)]
    frames = []
    mpos = 0
    dpos = 0
    dlen = len(data)
    first = True
    while True:
        ftype = frame_type if first else FrameType.PAYLOAD
        room = limit - 6 - (len(fixed) if first else 0)
        chunk_meta = None
        if mlen >= 0 and (mpos < mlen or (first and mlen == 0)):
            room -= 3
            take = min(room, mlen - mpos)
            chunk_meta = meta[mpos:mpos + take]
            mpos += take
            room -= take
        take = min(room, dlen - dpos)
        chunk_data = data[dpos:dpos + take]
        dpos += take
        last = mpos >= max(mlen, 0) and dpos >= dlen
        flags = 0 if last else FLAG_FOLLOWS
        if last:
            flags |= term
        if ftype == FrameType.PAYLOAD and (next_ or not first):
            flags |= FLAG_NEXT
        frames.append(encode_payload_bearing(ftype, stream_id, flags, fixed if first else b"",
                                             chunk_data, chunk_meta))
        first = False
        if last:
            return frames


class Reassembly:
    """Collects the fragments of one payload on one stream, bounded by ``limit`` bytes of data
    and metadata together (``max_reassembled_size``) and, with a ``budget``, by the bytes the
    whole connection holds in reassembly (``max_reassembly_buffer_size``).

    The data and the metadata are each a :class:`~rsocket_tx.mux.reassembly.Reassembler`,
    both counted against the connection's :class:`~rsocket_tx.mux.reassembly.ReassemblyBudget`
    (or, without one, a budget of ``limit`` bytes of their own).

    :param frame_type: type of the first fragment (a REQUEST_* type, or PAYLOAD).
    :param initial_request_n: from a first REQUEST_STREAM / REQUEST_CHANNEL fragment, else 0.
    :param limit: the largest payload, in bytes (data + metadata).
    :param budget: the connection's budget, shared by all its reassemblies; None: none.
    :ivar complete: C flag seen on the first fragment (REQUEST_CHANNEL) or the last.
    """

    __slots__ = ("frame_type", "initial_request_n", "complete", "_data", "_meta",
                 "_has_meta", "limit", "budget")

    def __init__(self, frame_type: FrameType, initial_request_n: int, limit: int,
                 budget: ReassemblyBudget | None = None) -> None:
        self.frame_type = frame_type
        self.initial_request_n = initial_request_n
        self.complete = False
        self.limit = limit
        if budget is None:
            budget = ReassemblyBudget(limit)
        self.budget = budget
        self._data = Reassembler(limit, budget)
        self._meta = Reassembler(limit, budget)
        self._has_meta = False

    @property
    def size(self) -> int:
        """Bytes of data and metadata collected so far."""
        return self._data.size + self._meta.size

    def add(self, data: bytes, metadata: bytes | None) -> None:
        """Append one fragment's data and metadata (all of it, or nothing).

        :raises PayloadTooLargeError: the payload would exceed ``limit``.
        :raises ReassemblyBudgetError: (a PayloadTooLargeError) the connection's reassemblies
            would exceed the budget.
        """
        n = len(data) if metadata is None else len(data) + len(metadata)
        size = self._data.size + self._meta.size + n
        if size > self.limit:
            raise PayloadTooLargeError(
                f"reassembled payload exceeds the limit of {self.limit} bytes")
        budget = self.budget
        if n > budget.limit - budget.held:
            raise ReassemblyBudgetError(
                f"fragments would hold {budget.held + n} bytes in reassembly on this "
                f"connection; the limit is {budget.limit} bytes (max_reassembly_buffer_size)")
        try:
            if metadata is not None:
                self._has_meta = True
                self._meta.append(metadata)
            self._data.append(data)
        except ReassemblyLimitExceeded:  # (checked above: not reached)
            raise PayloadTooLargeError(
                f"reassembled payload exceeds the limit of {self.limit} bytes") from None

    def discard(self) -> None:
        """Drop what was collected (the stream ended or was refused), releasing it from the
        budget."""
        self._data.discard()
        self._meta.discard()

    def payload(self) -> Payload:
        """The reassembled payload (its bytes are released from the budget)."""
        meta = self._meta.finish() if self._has_meta else None
        return Payload(self._data.finish(), meta)
