"""Errors of the mux layer: one stream table, id space, credit or reassembly rule broken.

Every error here is a :class:`MuxError`. Each says what was broken and the limit that applies;
the protocol above decides what it means on its wire (RSocket 1.0 answers a stream past
``max_concurrent_streams`` with ERROR[REJECTED]; the Jini ERI multiplexing protocol treats a
Data past the ration or a ration overflow as a protocol violation: Error and close). The mux
layer itself never chooses an error code.
"""

from __future__ import annotations

__all__ = [
    "MuxError",
    "StreamLimitExceeded",
    "StreamIdInUse",
    "StreamIdOutOfRange",
    "IdsExhausted",
    "CreditExceeded",
    "CreditOverflow",
    "ReassemblyLimitExceeded",
]


class MuxError(Exception):
    """Base of every mux-layer error.

    :param message: what happened, in the field's words, with the limit that applies.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StreamLimitExceeded(MuxError):
    """A stream was added to a :class:`~rsocket_tx.mux.streams.StreamTable` that is full.

    :param open_streams: streams counted against the limit that are open now.
    :param limit: the most such streams the table holds.
    """

    def __init__(self, open_streams: int, limit: int) -> None:
        super().__init__(f"too many concurrent streams: {open_streams} open, the limit is {limit}")
        self.open_streams = open_streams
        self.limit = limit


class StreamIdInUse(MuxError):
    """A stream (session, subscriber) id that is already in use was opened again.

    :param stream_id: the id.
    """

    def __init__(self, stream_id: int) -> None:
        super().__init__(f"stream id {stream_id} is already in use")
        self.stream_id = stream_id


class StreamIdOutOfRange(MuxError):
    """A peer-chosen id lies outside the id space (e.g. a Jini session id above 127).

    :param stream_id: the id received.
    :param maximum: the largest valid id.
    """

    def __init__(self, stream_id: int, maximum: int) -> None:
        super().__init__(f"stream id {stream_id} is outside the id space [0, {maximum}]")
        self.stream_id = stream_id
        self.maximum = maximum


class IdsExhausted(MuxError):
    """No id is left to open a stream with.

    :param maximum: the largest id of the id space.
    :param reusable: whether ids come back when streams end (then waiting for one to end helps;
        otherwise only a new connection does).
    """

    def __init__(self, maximum: int, reusable: bool) -> None:
        if reusable:
            message = (f"every stream id up to {maximum} is in use; wait for a stream to end "
                       f"or open another connection")
        else:
            message = (f"every stream id of this side up to {maximum} has been used (ids are "
                       f"never reused); open a new connection")
        super().__init__(message)
        self.maximum = maximum
        self.reusable = reusable


class CreditExceeded(MuxError):
    """More was consumed than the credit allows (e.g. a Jini Data past the session's ration,
    an RSocket PAYLOAD with no request-n left).

    :param requested: the amount consumed, in the credit's unit.
    :param available: the credit left, in the same unit.
    :param unit: the unit's name (``"items"`` or ``"bytes"``).
    """

    def __init__(self, requested: int, available: int, unit: str) -> None:
        super().__init__(f"{requested} {unit} exceed the credit of {available} {unit}")
        self.requested = requested
        self.available = available
        self.unit = unit


class CreditOverflow(MuxError):
    """A grant took the credit past its maximum (the Jini ERI mux: a ration overflow is a
    protocol violation).

    :param granted: the amount granted, in the credit's unit.
    :param available: the credit before the grant.
    :param maximum: the largest credit allowed.
    :param unit: the unit's name (``"items"`` or ``"bytes"``).
    """

    def __init__(self, granted: int, available: int, maximum: int, unit: str) -> None:
        super().__init__(f"a grant of {granted} {unit} on a credit of {available} {unit} "
                         f"overflows the maximum of {maximum} {unit}")
        self.granted = granted
        self.available = available
        self.maximum = maximum
        self.unit = unit


class ReassemblyLimitExceeded(MuxError):
    """A message being reassembled from fragments (parts, Data messages) grew past its limit.

    :param size: the size it would reach, in bytes.
    :param limit: the most bytes allowed (per message, or held across one connection).
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"reassembled message of {size} bytes exceeds the limit of "
                         f"{limit} bytes")
        self.size = size
        self.limit = limit
