"""Drive one sans-IO :class:`~rsocket_tx.reactivesocket.connection.ReactiveSocketConnection`
(the 2015 ReactiveSocket draft) with a fuzz input: the RSocket driver
(:mod:`fuzz.drivers.rsocket`: same API, same events, same invariants) with this protocol's
frames, TCP length word and frame types. No resume (the draft has none: the RESUME bit of
the variant is ignored, and so are the resume calls)."""

from __future__ import annotations

from rsocket_tx.reactivesocket import frames as F
from rsocket_tx.reactivesocket.connection import ReactiveSocketConnection

from . import rsocket as R

__all__ = ["REACTIVESOCKET", "run"]


def _encode_setup(variant: int) -> bytes:
    return F.encode(F.SetupFrame(metadata_mime_type=R.METADATA_MIME, data_mime_type=R.DATA_MIME,
                                 lease=bool(variant & R.LEASE)))


REACTIVESOCKET = R.Flavour(
    ReactiveSocketConnection, F.decode,
    lambda: F.FrameReader(F.MAX_FRAME_LENGTH - F.LENGTH_SIZE), F.frame_with_length,
    _encode_setup,
    # RESPONSE is fragmented, ERROR cut short; the requests are refused past the limit
    frozenset({F.FrameType.RESPONSE, F.FrameType.ERROR, F.FrameType.REQUEST_N,
               F.FrameType.CANCEL}),
    False)


def run(data: bytes, role_bit: int) -> None:
    """Run one input against a new connection (see :func:`fuzz.drivers.rsocket.run`)."""
    R.run(data, role_bit, REACTIVESOCKET)
