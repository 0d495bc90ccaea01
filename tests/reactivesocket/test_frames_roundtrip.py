"""Property tests of the 2015 draft's codec: every frame survives encode/decode, any split of
a TCP byte stream gives back the same frames, and the decoder is total: any bytes give a
frame, need more, or a FrameDecodeError / FrameTooLargeError -- never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.core.errors import FrameDecodeError, FrameTooLargeError
from rsocket_tx.reactivesocket import frames as F

u64 = st.integers(0, F.MAX_U64)
sid = st.integers(0, F.MAX_U64)
small = st.binary(max_size=40)
meta = st.none() | st.binary(max_size=40)
mtype = st.integers(0, 255)
mime = st.binary(max_size=30)


def _with_metadata(builder):
    """Frames whose metadata_type only means something with metadata."""
    def fix(frame):
        if frame.metadata is None:
            frame.metadata_type = 0
        return frame
    return builder.map(fix)


frames = st.one_of(
    _with_metadata(st.builds(F.SetupFrame, metadata_mime_type=mime, data_mime_type=mime,
                             lease=st.booleans(), data=small, metadata=meta,
                             metadata_type=mtype)),
    _with_metadata(st.builds(F.SetupErrorFrame, error_code=st.integers(0, 0xFFFFFFFF),
                             data=small, metadata=meta, metadata_type=mtype)),
    _with_metadata(st.builds(F.LeaseFrame, time=u64, number_of_requests=u64, metadata=meta,
                             metadata_type=mtype)),
    _with_metadata(st.builds(F.RequestResponseFrame, stream_id=sid, data=small, metadata=meta,
                             metadata_type=mtype)),
    _with_metadata(st.builds(F.RequestFnfFrame, stream_id=sid, data=small, metadata=meta,
                             metadata_type=mtype)),
    _with_metadata(st.builds(F.RequestStreamFrame, stream_id=sid, initial_request_n=u64,
                             data=small, metadata=meta, metadata_type=mtype)),
    _with_metadata(st.builds(F.RequestSubFrame, stream_id=sid, initial_request_n=u64,
                             data=small, metadata=meta, metadata_type=mtype)),
    _with_metadata(st.builds(F.RequestNFrame, stream_id=sid, request_n=u64, metadata=meta,
                             metadata_type=mtype)),
    _with_metadata(st.builds(F.CancelFrame, stream_id=sid, metadata=meta, metadata_type=mtype)),
    _with_metadata(st.builds(F.ResponseFrame, stream_id=sid, data=small, metadata=meta,
                             metadata_type=mtype, follows=st.booleans(),
                             complete=st.booleans())),
    _with_metadata(st.builds(F.ErrorFrame, stream_id=sid, data=small, metadata=meta,
                             metadata_type=mtype)),
    st.builds(F.MetadataPushFrame, stream_id=sid, metadata=small, metadata_type=mtype),
    st.builds(F.ExtFrame, stream_id=sid, extended_type=st.integers(0, 0xFFFFFFFF),
              flags=st.integers(0, 255), body=small),
)


@given(frames)
def test_round_trip(frame):
    assert F.decode(F.encode(frame)) == frame


@given(st.lists(frames, max_size=8), st.lists(st.integers(0, 400), max_size=8))
def test_any_split_of_a_stream(batch, cuts):
    wire = b"".join(F.frame_with_length(F.encode(f)) for f in batch)
    reader = F.FrameReader(1 << 16)
    got = []
    o = 0
    for cut in sorted(min(c, len(wire)) for c in cuts):
        got += reader.feed(wire[o:cut] if cut > o else b"")
        o = max(o, cut)
    got += reader.feed(wire[o:])
    assert [F.decode(b) for b in got] == batch
    assert reader.buffered == 0


@settings(max_examples=500)
@given(st.binary(max_size=80))
def test_decode_is_total(data):
    try:
        frame = F.decode(data)
    except FrameDecodeError:
        return
    assert isinstance(frame, F.Frame)


@settings(max_examples=500)
@given(st.lists(st.binary(max_size=60), max_size=6))
def test_reader_is_total(chunks):
    reader = F.FrameReader(64)
    try:
        for chunk in chunks:
            for buf in reader.feed(chunk):
                try:
                    F.decode(buf)
                except FrameDecodeError:
                    pass
    except (FrameDecodeError, FrameTooLargeError):
        pass


@given(frames, sid)
def test_with_stream_id_is_the_frame_encoded_on_that_stream(frame, stream_id):
    encoded = F.encode(frame)
    frame.stream_id = stream_id
    assert F.with_stream_id(encoded, stream_id) == F.encode(frame)


def test_with_stream_id_refuses_what_is_not_a_stream_id_or_a_frame():
    encoded = F.encode(F.RequestFnfFrame(stream_id=0, data=b"x"))
    for bad in (-1, F.MAX_U64 + 1):
        with pytest.raises(ValueError, match="stream_id"):
            F.with_stream_id(encoded, bad)
    with pytest.raises(ValueError, match="at least 12 bytes"):
        F.with_stream_id(encoded[:11], 1)
