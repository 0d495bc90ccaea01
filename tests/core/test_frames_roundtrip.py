"""Property tests for the frame codec: round trips, decode fuzzing, encode range checks.

Spec: ``shared/specs/rsocket-1.0/Protocol.md`` §Frame Header Format and each frame type's section
(field widths: 31-bit stream ids, request-n, intervals; 63-bit positions; 24-bit metadata length;
16-bit versions and token length; 8-bit MIME length; 32-bit error code).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rsocket_tx.core import frames as F
from rsocket_tx.core.errors import FrameDecodeError

MAX31 = 2**31 - 1
MAX63 = 2**63 - 1
MAX24 = 2**24 - 1

# No timing assertions: hypothesis' per-example deadline is disabled.
COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

stream_ids = st.integers(min_value=0, max_value=MAX31)
request_stream_ids = st.integers(min_value=1, max_value=MAX31)
positive31 = st.integers(min_value=1, max_value=MAX31)
any31 = st.integers(min_value=0, max_value=MAX31)
positions = st.integers(min_value=0, max_value=MAX63)
u16 = st.integers(min_value=0, max_value=0xFFFF)
u32 = st.integers(min_value=0, max_value=0xFFFFFFFF)
blobs = st.binary(max_size=64)
maybe_metadata = st.none() | st.binary(max_size=64)
mime_types = st.binary(max_size=255) | st.sampled_from(
    [b"", b"application/octet-stream", b"message/x.rsocket.composite-metadata.v0"]
)


setup_frames = st.builds(
    F.SetupFrame,
    major_version=u16,
    minor_version=u16,
    keepalive_interval=positive31,
    max_lifetime=positive31,
    metadata_mime_type=st.binary(max_size=255),
    data_mime_type=mime_types,
    data=blobs,
    metadata=maybe_metadata,
    resume_token=st.none() | st.binary(max_size=300),
    lease=st.booleans(),
)
lease_frames = st.builds(F.LeaseFrame, ttl=any31, number_of_requests=any31, metadata=maybe_metadata)
keepalive_frames = st.builds(
    F.KeepaliveFrame, respond=st.booleans(), last_received_position=positions, data=blobs
)
request_response_frames = st.builds(
    F.RequestResponseFrame,
    stream_id=request_stream_ids,
    data=blobs,
    metadata=maybe_metadata,
    follows=st.booleans(),
)
request_fnf_frames = st.builds(
    F.RequestFnfFrame,
    stream_id=request_stream_ids,
    data=blobs,
    metadata=maybe_metadata,
    follows=st.booleans(),
)
request_stream_frames = st.builds(
    F.RequestStreamFrame,
    stream_id=request_stream_ids,
    initial_request_n=positive31,
    data=blobs,
    metadata=maybe_metadata,
    follows=st.booleans(),
)
request_channel_frames = st.builds(
    F.RequestChannelFrame,
    stream_id=request_stream_ids,
    initial_request_n=positive31,
    data=blobs,
    metadata=maybe_metadata,
    follows=st.booleans(),
    complete=st.booleans(),
)
request_n_frames = st.builds(F.RequestNFrame, stream_id=stream_ids, request_n=positive31)
cancel_frames = st.builds(F.CancelFrame, stream_id=stream_ids)


@st.composite
def payload_frames(draw: st.DrawFn) -> F.PayloadFrame:
    # spec §PAYLOAD: "A PAYLOAD MUST NOT have both (C)complete and (N)ext empty (false)."
    complete, nxt = draw(st.sampled_from([(True, False), (False, True), (True, True)]))
    return F.PayloadFrame(
        stream_id=draw(stream_ids),
        data=draw(blobs),
        metadata=draw(maybe_metadata),
        follows=draw(st.booleans()),
        complete=complete,
        next=nxt,
    )


error_frames = st.builds(F.ErrorFrame, stream_id=stream_ids, error_code=u32, data=blobs)
metadata_push_frames = st.builds(F.MetadataPushFrame, metadata=blobs)
resume_frames = st.builds(
    F.ResumeFrame,
    major_version=u16,
    minor_version=u16,
    token=st.binary(max_size=300),
    last_received_server_position=positions,
    first_available_client_position=positions,
)
resume_ok_frames = st.builds(F.ResumeOkFrame, last_received_client_position=positions)
ext_frames = st.builds(
    F.ExtFrame,
    stream_id=stream_ids,
    extended_type=positive31,
    ignore=st.booleans(),
    has_metadata=st.booleans(),
    body=blobs,
)

STRATEGIES = {
    "setup": setup_frames,
    "lease": lease_frames,
    "keepalive": keepalive_frames,
    "request_response": request_response_frames,
    "request_fnf": request_fnf_frames,
    "request_stream": request_stream_frames,
    "request_channel": request_channel_frames,
    "request_n": request_n_frames,
    "cancel": cancel_frames,
    "payload": payload_frames(),
    "error": error_frames,
    "metadata_push": metadata_push_frames,
    "resume": resume_frames,
    "resume_ok": resume_ok_frames,
    "ext": ext_frames,
}

any_frame = st.one_of(*STRATEGIES.values())


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_roundtrip(name: str) -> None:
    @COMMON
    @given(STRATEGIES[name])
    def check(frame: object) -> None:
        encoded = F.encode(frame)
        assert isinstance(encoded, bytes)
        decoded = F.decode(encoded)
        assert type(decoded) is type(frame)
        assert decoded == frame
        # and it is stable: re-encoding gives the same bytes
        assert F.encode(decoded) == encoded

    check()


@COMMON
@given(any_frame)
def test_header_layout(frame: object) -> None:
    # spec §Frame Header Format: |0| stream id (31) | frame type (6) | I | M | flags (8) |
    encoded = F.encode(frame)
    assert len(encoded) >= 6
    assert int.from_bytes(encoded[0:4], "big") == frame.stream_id
    word = int.from_bytes(encoded[4:6], "big")
    assert word >> 10 == frame.frame_type
    has_m = bool(word & 0x100)
    if isinstance(frame, F.MetadataPushFrame):
        assert has_m  # METADATA_PUSH always carries M (spec diagram: |0|1|)
    elif isinstance(frame, F.ExtFrame):
        assert has_m is frame.has_metadata
        assert bool(word & 0x200) is frame.ignore
    elif hasattr(frame, "metadata"):
        assert has_m is (frame.metadata is not None)
    if not isinstance(frame, F.ExtFrame):
        assert not word & 0x200  # we never set I on frames we define


@COMMON
@given(any_frame, st.integers(min_value=0, max_value=7), st.binary(max_size=3))
def test_decode_of_memoryview_slice(frame: object, lead: int, tail: bytes) -> None:
    encoded = F.encode(frame)
    buf = b"\x00" * lead + encoded + tail
    assert F.decode(memoryview(buf)[lead : lead + len(encoded)]) == frame


# ---------------------------------------------------------------------------------------------
# Decode fuzzing: a frame or FrameDecodeError, never anything else
# ---------------------------------------------------------------------------------------------


def _decode_or_decode_error(buf: bytes) -> None:
    try:
        frame = F.decode(buf)
    except FrameDecodeError:
        return
    # Anything that decodes must be a frame the codec can encode again.
    assert isinstance(frame.frame_type, F.FrameType)
    assert 0 <= frame.stream_id <= MAX31


@settings(COMMON, max_examples=500)
@given(st.binary(max_size=80))
def test_fuzz_arbitrary_bytes(buf: bytes) -> None:
    _decode_or_decode_error(buf)


known_types = st.sampled_from([int(t) for t in F.FrameType] + [0x10, 0x20, 0x3E])


@settings(COMMON, max_examples=1000)
@given(
    st.integers(min_value=0, max_value=0xFFFFFFFF),
    known_types,
    st.integers(min_value=0, max_value=0x3FF),
    st.binary(max_size=64),
)
def test_fuzz_structured(stream_id: int, frame_type: int, flags: int, body: bytes) -> None:
    # Well-formed headers with arbitrary flags and bodies reach every per-type decoder.
    buf = stream_id.to_bytes(4, "big") + ((frame_type << 10) | flags).to_bytes(2, "big") + body
    _decode_or_decode_error(buf)


@settings(COMMON, max_examples=300)
@given(any_frame, st.data())
def test_fuzz_mutated_valid_frames(frame: object, data: st.DataObject) -> None:
    encoded = bytearray(F.encode(frame))
    # truncate, flip a byte, or append garbage
    op = data.draw(st.sampled_from(["truncate", "flip", "append"]))
    if op == "truncate":
        cut = data.draw(st.integers(min_value=0, max_value=len(encoded)))
        mutated = bytes(encoded[:cut])
    elif op == "flip":
        i = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
        encoded[i] ^= data.draw(st.integers(min_value=1, max_value=255))
        mutated = bytes(encoded)
    else:
        mutated = bytes(encoded) + data.draw(st.binary(min_size=1, max_size=8))
    _decode_or_decode_error(mutated)


# ---------------------------------------------------------------------------------------------
# encode raises ValueError for out-of-range fields
# ---------------------------------------------------------------------------------------------

BIG_METADATA = b"\x00" * (MAX24 + 1)  # 16,777,216 bytes: does not fit the 24-bit length


def _setup(**kw: object) -> F.SetupFrame:
    base: dict[str, object] = dict(
        keepalive_interval=1000, max_lifetime=2000, metadata_mime_type=b"m", data_mime_type=b"d"
    )
    base.update(kw)
    return F.SetupFrame(**base)


def _resume(**kw: object) -> F.ResumeFrame:
    base: dict[str, object] = dict(
        token=b"t", last_received_server_position=0, first_available_client_position=0
    )
    base.update(kw)
    return F.ResumeFrame(**base)


OUT_OF_RANGE: list[tuple[str, Callable[[], object]]] = [
    # stream ids: 31 bits
    ("stream-id-negative", lambda: F.CancelFrame(stream_id=-1)),
    ("stream-id-2^31", lambda: F.CancelFrame(stream_id=MAX31 + 1)),
    ("payload-stream-id-2^31", lambda: F.PayloadFrame(stream_id=MAX31 + 1, next=True)),
    ("rr-stream-id-negative", lambda: F.RequestResponseFrame(stream_id=-1)),
    ("ext-stream-id-2^31", lambda: F.ExtFrame(stream_id=MAX31 + 1, extended_type=1)),
    ("error-stream-id-2^32", lambda: F.ErrorFrame(stream_id=2**32, error_code=0x201)),
    # request n: 31 bits
    ("request-n-negative", lambda: F.RequestNFrame(stream_id=1, request_n=-1)),
    ("request-n-2^31", lambda: F.RequestNFrame(stream_id=1, request_n=MAX31 + 1)),
    (
        "initial-n-stream-2^31",
        lambda: F.RequestStreamFrame(stream_id=1, initial_request_n=MAX31 + 1),
    ),
    (
        "initial-n-channel-negative",
        lambda: F.RequestChannelFrame(stream_id=1, initial_request_n=-5),
    ),
    # SETUP 31-bit / 16-bit / 8-bit fields
    ("setup-keepalive-2^31", lambda: _setup(keepalive_interval=MAX31 + 1)),
    ("setup-keepalive-negative", lambda: _setup(keepalive_interval=-1)),
    ("setup-lifetime-2^31", lambda: _setup(max_lifetime=MAX31 + 1)),
    ("setup-major-65536", lambda: _setup(major_version=0x10000)),
    ("setup-minor-negative", lambda: _setup(minor_version=-1)),
    ("setup-metadata-mime-256", lambda: _setup(metadata_mime_type=b"x" * 256)),
    ("setup-data-mime-256", lambda: _setup(data_mime_type=b"x" * 256)),
    ("setup-token-65536", lambda: _setup(resume_token=b"t" * 0x10000)),
    ("setup-metadata-2^24", lambda: _setup(metadata=BIG_METADATA)),
    # LEASE 31-bit
    ("lease-ttl-2^31", lambda: F.LeaseFrame(ttl=MAX31 + 1, number_of_requests=1)),
    ("lease-requests-negative", lambda: F.LeaseFrame(ttl=1, number_of_requests=-1)),
    # positions: 63 bits
    (
        "keepalive-position-2^63",
        lambda: F.KeepaliveFrame(respond=True, last_received_position=MAX63 + 1),
    ),
    (
        "keepalive-position-negative",
        lambda: F.KeepaliveFrame(respond=True, last_received_position=-1),
    ),
    ("resume-server-position-2^63", lambda: _resume(last_received_server_position=MAX63 + 1)),
    ("resume-client-position-negative", lambda: _resume(first_available_client_position=-1)),
    ("resume-token-65536", lambda: _resume(token=b"t" * 0x10000)),
    ("resume-major-65536", lambda: _resume(major_version=0x10000)),
    ("resume-ok-position-2^63", lambda: F.ResumeOkFrame(last_received_client_position=MAX63 + 1)),
    ("resume-ok-position-negative", lambda: F.ResumeOkFrame(last_received_client_position=-1)),
    # error code: 32 bits
    ("error-code-2^32", lambda: F.ErrorFrame(stream_id=1, error_code=2**32)),
    ("error-code-negative", lambda: F.ErrorFrame(stream_id=1, error_code=-1)),
    # EXT extended type: 31 bits
    ("ext-type-2^31", lambda: F.ExtFrame(stream_id=1, extended_type=MAX31 + 1)),
    ("ext-type-negative", lambda: F.ExtFrame(stream_id=1, extended_type=-1)),
    # metadata length: 24 bits
    (
        "payload-metadata-2^24",
        lambda: F.PayloadFrame(stream_id=1, metadata=BIG_METADATA, next=True),
    ),
    ("rr-metadata-2^24", lambda: F.RequestResponseFrame(stream_id=1, metadata=BIG_METADATA)),
    ("fnf-metadata-2^24", lambda: F.RequestFnfFrame(stream_id=1, metadata=BIG_METADATA)),
    (
        "stream-metadata-2^24",
        lambda: F.RequestStreamFrame(stream_id=1, initial_request_n=1, metadata=BIG_METADATA),
    ),
    (
        "channel-metadata-2^24",
        lambda: F.RequestChannelFrame(stream_id=1, initial_request_n=1, metadata=BIG_METADATA),
    ),
]


@pytest.mark.parametrize(("name", "make"), OUT_OF_RANGE, ids=[n for n, _ in OUT_OF_RANGE])
def test_encode_out_of_range_raises_value_error(name: str, make: Callable[[], object]) -> None:
    # The constructor may validate eagerly, or encode may: either way a ValueError, never a
    # silently truncated field.
    with pytest.raises(ValueError):
        F.encode(make())


@pytest.mark.parametrize(
    "frame",
    [
        F.PayloadFrame(stream_id=1, metadata=b"\x00" * MAX24, next=True),
        F.RequestResponseFrame(stream_id=MAX31, metadata=b"\x00" * MAX24),
    ],
    ids=["payload", "request-response"],
)
def test_encode_metadata_of_exactly_max24_is_allowed(frame: object) -> None:
    encoded = F.encode(frame)
    # metadata length field sits right after the 6-byte header
    assert encoded[6:9] == b"\xff\xff\xff"
    assert F.decode(encoded) == frame
