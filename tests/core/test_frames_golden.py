"""Golden byte vectors for the frame codec, written by hand from the spec text.

Spec: ``shared/specs/rsocket-1.0/Protocol.md`` §Frame Header Format, §Metadata Optional Header and
each frame type's section.  Every vector is spelled out field by field in hex; nothing here is
computed with our own encoder.  The 16-bit word after the stream id is ``type << 10 | flags`` with
the flag bits I=0x200, M=0x100, F/R=0x080, C/L=0x040, N=0x020.

The vectors do NOT include the 24-bit length prefix (that is ``framing.py``'s job).
"""

from __future__ import annotations

import pytest

from rsocket_tx.core import frames as F
from rsocket_tx.core.errors import FrameDecodeError, ProtocolError, UnknownFrameTypeError


def h(*fields: str) -> bytes:
    """Concatenate hex fields (whitespace allowed) into bytes."""
    return bytes.fromhex("".join(fields))


# ---------------------------------------------------------------------------------------------
# Constants from the spec tables
# ---------------------------------------------------------------------------------------------


def test_frame_type_values() -> None:
    # spec §Frame Types
    assert F.FrameType.RESERVED == 0x00
    assert F.FrameType.SETUP == 0x01
    assert F.FrameType.LEASE == 0x02
    assert F.FrameType.KEEPALIVE == 0x03
    assert F.FrameType.REQUEST_RESPONSE == 0x04
    assert F.FrameType.REQUEST_FNF == 0x05
    assert F.FrameType.REQUEST_STREAM == 0x06
    assert F.FrameType.REQUEST_CHANNEL == 0x07
    assert F.FrameType.REQUEST_N == 0x08
    assert F.FrameType.CANCEL == 0x09
    assert F.FrameType.PAYLOAD == 0x0A
    assert F.FrameType.ERROR == 0x0B
    assert F.FrameType.METADATA_PUSH == 0x0C
    assert F.FrameType.RESUME == 0x0D
    assert F.FrameType.RESUME_OK == 0x0E
    assert F.FrameType.EXT == 0x3F


def test_flag_values() -> None:
    # Frame header: |Frame Type (6)|I|M|Flags (8)| -> I is bit 9, M bit 8 of the 16-bit word.
    assert F.FLAG_IGNORE == 0x200
    assert F.FLAG_METADATA == 0x100
    assert F.FLAG_FOLLOWS == 0x80
    assert F.FLAG_COMPLETE == 0x40
    assert F.FLAG_NEXT == 0x20
    assert F.FLAG_RESUME_ENABLE == 0x80
    assert F.FLAG_LEASE == 0x40
    assert F.FLAG_RESPOND == 0x80


@pytest.mark.parametrize(
    ("cls", "frame_type"),
    [
        (F.SetupFrame, F.FrameType.SETUP),
        (F.LeaseFrame, F.FrameType.LEASE),
        (F.KeepaliveFrame, F.FrameType.KEEPALIVE),
        (F.RequestResponseFrame, F.FrameType.REQUEST_RESPONSE),
        (F.RequestFnfFrame, F.FrameType.REQUEST_FNF),
        (F.RequestStreamFrame, F.FrameType.REQUEST_STREAM),
        (F.RequestChannelFrame, F.FrameType.REQUEST_CHANNEL),
        (F.RequestNFrame, F.FrameType.REQUEST_N),
        (F.CancelFrame, F.FrameType.CANCEL),
        (F.PayloadFrame, F.FrameType.PAYLOAD),
        (F.ErrorFrame, F.FrameType.ERROR),
        (F.MetadataPushFrame, F.FrameType.METADATA_PUSH),
        (F.ResumeFrame, F.FrameType.RESUME),
        (F.ResumeOkFrame, F.FrameType.RESUME_OK),
        (F.ExtFrame, F.FrameType.EXT),
    ],
)
def test_frame_type_class_attribute(cls: type, frame_type: F.FrameType) -> None:
    assert cls.frame_type == frame_type


def test_frame_decode_error_is_protocol_error() -> None:
    assert issubclass(FrameDecodeError, ProtocolError)
    assert issubclass(UnknownFrameTypeError, FrameDecodeError)


# ---------------------------------------------------------------------------------------------
# Golden vectors: (id, frame, bytes)
# ---------------------------------------------------------------------------------------------

SETUP_VECTORS = [
    pytest.param(
        F.SetupFrame(
            keepalive_interval=30_000,
            max_lifetime=90_000,
            metadata_mime_type=b"text/plain",
            data_mime_type=b"application/json",
            data=b"hi",
        ),
        h(
            "00000000",  # stream id 0
            "0400",  # type 0x01 << 10, no flags
            "0001",  # major version 1
            "0000",  # minor version 0
            "00007530",  # keepalive interval 30,000 ms
            "00015f90",  # max lifetime 90,000 ms
            "0a",  # metadata MIME length 10
        )
        + b"text/plain"
        + h("10")  # data MIME length 16
        + b"application/json"
        + b"hi",  # setup data (no metadata, no metadata length field)
        id="setup-plain",
    ),
    pytest.param(
        F.SetupFrame(
            keepalive_interval=500,
            max_lifetime=2_000,
            metadata_mime_type=b"m/x",
            data_mime_type=b"d/y",
            data=b"DATA",
            metadata=b"abc",
        ),
        h(
            "00000000",  # stream id 0
            "0500",  # type 0x01 << 10 | M
            "0001 0000",  # version 1.0
            "000001f4",  # keepalive 500 ms
            "000007d0",  # max lifetime 2,000 ms
            "03",  # metadata MIME length 3
        )
        + b"m/x"
        + h("03")  # data MIME length 3
        + b"d/y"
        + h("000003")  # metadata length 3 (24 bits)
        + b"abc"
        + b"DATA",
        id="setup-metadata",
    ),
    pytest.param(
        F.SetupFrame(
            keepalive_interval=1,
            max_lifetime=1,
            metadata_mime_type=b"m",
            data_mime_type=b"d",
            metadata=b"",
        ),
        h(
            "00000000",  # stream id 0
            "0500",  # type 0x01 << 10 | M  (empty metadata is still metadata)
            "0001 0000",  # version 1.0
            "00000001",  # keepalive 1 ms
            "00000001",  # max lifetime 1 ms
            "01",  # metadata MIME length 1
        )
        + b"m"
        + h("01")
        + b"d"
        + h("000000"),  # metadata length 0, no metadata, no data
        id="setup-empty-metadata",
    ),
    pytest.param(
        F.SetupFrame(
            keepalive_interval=20_000,
            max_lifetime=60_000,
            metadata_mime_type=b"m",
            data_mime_type=b"d",
            resume_token=b"\x01\x02\x03\x04",
            lease=True,
        ),
        h(
            "00000000",  # stream id 0
            "04c0",  # type 0x01 << 10 | R (0x80) | L (0x40)
            "0001 0000",  # version 1.0
            "00004e20",  # keepalive 20,000 ms
            "0000ea60",  # max lifetime 60,000 ms
            "0004",  # resume token length 4 (16 bits)
            "01020304",  # resume token
            "01",  # metadata MIME length
        )
        + b"m"
        + h("01")
        + b"d",
        id="setup-resume-lease",
    ),
    pytest.param(
        F.SetupFrame(
            keepalive_interval=20_000,
            max_lifetime=60_000,
            metadata_mime_type=b"m",
            data_mime_type=b"d",
            resume_token=b"",
        ),
        h(
            "00000000",  # stream id 0
            "0480",  # type 0x01 << 10 | R: token present even though empty
            "0001 0000",  # version 1.0
            "00004e20",  # keepalive 20,000 ms
            "0000ea60",  # max lifetime 60,000 ms
            "0000",  # resume token length 0
            "01",
        )
        + b"m"
        + h("01")
        + b"d",
        id="setup-resume-empty-token",
    ),
    pytest.param(
        F.SetupFrame(
            major_version=2,
            minor_version=7,
            keepalive_interval=0x7FFFFFFF,
            max_lifetime=0x7FFFFFFF,
            metadata_mime_type=b"m",
            data_mime_type=b"d",
            data=b"x",
            metadata=b"yz",
            resume_token=b"T",
            lease=True,
        ),
        h(
            "00000000",  # stream id 0
            "05c0",  # type 0x01 << 10 | M | R | L
            "0002",  # major version 2
            "0007",  # minor version 7
            "7fffffff",  # keepalive max 31-bit
            "7fffffff",  # max lifetime max 31-bit
            "0001",  # token length 1
        )
        + b"T"
        + h("01")
        + b"m"
        + h("01")
        + b"d"
        + h("000002")  # metadata length 2
        + b"yz"
        + b"x",
        id="setup-all-flags",
    ),
]

LEASE_VECTORS = [
    pytest.param(
        F.LeaseFrame(ttl=60_000, number_of_requests=100),
        h(
            "00000000",  # stream id 0
            "0800",  # type 0x02 << 10
            "0000ea60",  # TTL 60,000 ms
            "00000064",  # number of requests 100
        ),
        id="lease-plain",
    ),
    pytest.param(
        F.LeaseFrame(ttl=1, number_of_requests=0x7FFFFFFF, metadata=b"meta"),
        h(
            "00000000",  # stream id 0
            "0900",  # type 0x02 << 10 | M
            "00000001",  # TTL 1 ms
            "7fffffff",  # number of requests max
        )
        + b"meta",  # metadata: NO metadata length field (spec §LEASE)
        id="lease-metadata",
    ),
    pytest.param(
        F.LeaseFrame(ttl=5, number_of_requests=6, metadata=b""),
        h(
            "00000000",  # stream id 0
            "0900",  # type 0x02 << 10 | M, zero bytes of metadata
            "00000005",  # TTL
            "00000006",  # number of requests
        ),
        id="lease-empty-metadata",
    ),
]

KEEPALIVE_VECTORS = [
    pytest.param(
        F.KeepaliveFrame(respond=True),
        h(
            "00000000",  # stream id 0
            "0c80",  # type 0x03 << 10 | R
            "0000000000000000",  # last received position 0 (not supported)
        ),
        id="keepalive-respond",
    ),
    pytest.param(
        F.KeepaliveFrame(respond=False, last_received_position=0x1234, data=b"ping"),
        h(
            "00000000",  # stream id 0
            "0c00",  # type 0x03 << 10, R not set
            "0000000000001234",  # last received position
        )
        + b"ping",  # data
        id="keepalive-position-data",
    ),
    pytest.param(
        F.KeepaliveFrame(respond=True, last_received_position=(1 << 63) - 1, data=b"\x00"),
        h(
            "00000000",  # stream id 0
            "0c80",  # type 0x03 << 10 | R
            "7fffffffffffffff",  # max 63-bit position
            "00",  # data
        ),
        id="keepalive-max-position",
    ),
]

REQUEST_VECTORS = [
    pytest.param(
        F.RequestResponseFrame(stream_id=1, data=b"hello"),
        h("00000001", "1000") + b"hello",  # stream 1; type 0x04 << 10; data
        id="request-response",
    ),
    pytest.param(
        F.RequestResponseFrame(stream_id=1, data=b"hello", metadata=b"abc"),
        h(
            "00000001",  # stream 1
            "1100",  # type 0x04 << 10 | M
            "000003",  # metadata length 3
        )
        + b"abc"
        + b"hello",
        id="request-response-metadata",
    ),
    pytest.param(
        F.RequestResponseFrame(stream_id=3, metadata=b""),
        h(
            "00000003",  # stream 3
            "1100",  # type 0x04 << 10 | M
            "000000",  # metadata length 0; no data
        ),
        id="request-response-empty-metadata-empty-data",
    ),
    pytest.param(
        F.RequestResponseFrame(stream_id=3),
        h("00000003", "1000"),  # stream 3; type 0x04 << 10; nothing else
        id="request-response-empty",
    ),
    pytest.param(
        F.RequestResponseFrame(stream_id=0x7FFFFFFF, data=b"z", metadata=b"m", follows=True),
        h(
            "7fffffff",  # max stream id
            "1180",  # type 0x04 << 10 | M | F
            "000001",  # metadata length 1
        )
        + b"m"
        + b"z",
        id="request-response-follows",
    ),
    pytest.param(
        F.RequestFnfFrame(stream_id=3, data=b"fire"),
        h("00000003", "1400") + b"fire",  # stream 3; type 0x05 << 10
        id="request-fnf",
    ),
    pytest.param(
        F.RequestFnfFrame(stream_id=5, data=b"x", metadata=b"md", follows=True),
        h(
            "00000005",  # stream 5
            "1580",  # type 0x05 << 10 | M | F
            "000002",  # metadata length 2
        )
        + b"md"
        + b"x",
        id="request-fnf-metadata-follows",
    ),
    pytest.param(
        F.RequestStreamFrame(stream_id=5, initial_request_n=256, data=b"10"),
        h(
            "00000005",  # stream 5
            "1800",  # type 0x06 << 10
            "00000100",  # initial request n 256
        )
        + b"10",
        id="request-stream",
    ),
    pytest.param(
        F.RequestStreamFrame(
            stream_id=2, initial_request_n=0x7FFFFFFF, data=b"d", metadata=b"mm", follows=True
        ),
        h(
            "00000002",  # stream 2
            "1980",  # type 0x06 << 10 | M | F
            "7fffffff",  # initial request n max (= "unbounded" by convention)
            "000002",  # metadata length 2 (after initial request n)
        )
        + b"mm"
        + b"d",
        id="request-stream-metadata-follows",
    ),
    pytest.param(
        F.RequestChannelFrame(stream_id=7, initial_request_n=1, data=b"c"),
        h(
            "00000007",  # stream 7
            "1c00",  # type 0x07 << 10
            "00000001",  # initial request n 1
        )
        + b"c",
        id="request-channel",
    ),
    pytest.param(
        F.RequestChannelFrame(stream_id=7, initial_request_n=8, complete=True),
        h(
            "00000007",  # stream 7
            "1c40",  # type 0x07 << 10 | C
            "00000008",  # initial request n 8
        ),
        id="request-channel-complete",
    ),
    pytest.param(
        F.RequestChannelFrame(stream_id=9, initial_request_n=2, data=b"x", follows=True),
        h(
            "00000009",  # stream 9
            "1c80",  # type 0x07 << 10 | F
            "00000002",  # initial request n 2
        )
        + b"x",
        id="request-channel-follows",
    ),
    pytest.param(
        F.RequestChannelFrame(
            stream_id=11,
            initial_request_n=3,
            data=b"d",
            metadata=b"m",
            follows=True,
            complete=True,
        ),
        h(
            "0000000b",  # stream 11
            "1dc0",  # type 0x07 << 10 | M | F | C
            "00000003",  # initial request n 3
            "000001",  # metadata length 1
        )
        + b"m"
        + b"d",
        id="request-channel-all-flags",
    ),
]

STREAM_CONTROL_VECTORS = [
    pytest.param(
        F.RequestNFrame(stream_id=5, request_n=10),
        h(
            "00000005",  # stream 5
            "2000",  # type 0x08 << 10
            "0000000a",  # request n 10
        ),
        id="request-n",
    ),
    pytest.param(
        F.RequestNFrame(stream_id=0x7FFFFFFF, request_n=0x7FFFFFFF),
        h("7fffffff", "2000", "7fffffff"),  # max stream id; type; max request n
        id="request-n-max",
    ),
    pytest.param(
        F.CancelFrame(stream_id=5),
        h("00000005", "2400"),  # stream 5; type 0x09 << 10
        id="cancel",
    ),
]

PAYLOAD_VECTORS = [
    pytest.param(
        F.PayloadFrame(stream_id=1, data=b"x", next=True),
        h("00000001", "2820") + b"x",  # stream 1; type 0x0A << 10 | N; data
        id="payload-next",
    ),
    pytest.param(
        F.PayloadFrame(stream_id=1, complete=True),
        h("00000001", "2840"),  # stream 1; type 0x0A << 10 | C
        id="payload-complete",
    ),
    pytest.param(
        F.PayloadFrame(stream_id=1, data=b"y", next=True, complete=True),
        h("00000001", "2860") + b"y",  # stream 1; type 0x0A << 10 | C | N
        id="payload-next-complete",
    ),
    pytest.param(
        F.PayloadFrame(stream_id=2, data=b"part", follows=True, next=True),
        h("00000002", "28a0") + b"part",  # stream 2; type 0x0A << 10 | F | N
        id="payload-follows",
    ),
    pytest.param(
        F.PayloadFrame(stream_id=1, next=True),
        h("00000001", "2820"),  # N with zero-length data is a valid onNext (spec §PAYLOAD)
        id="payload-next-empty-data",
    ),
    pytest.param(
        F.PayloadFrame(stream_id=1, data=b"d", metadata=b"md", next=True),
        h(
            "00000001",  # stream 1
            "2920",  # type 0x0A << 10 | M | N
            "000002",  # metadata length 2
        )
        + b"md"
        + b"d",
        id="payload-metadata",
    ),
    pytest.param(
        F.PayloadFrame(stream_id=1, data=b"d", metadata=b"", next=True),
        h(
            "00000001",  # stream 1
            "2920",  # type 0x0A << 10 | M | N
            "000000",  # metadata length 0 (empty metadata != no metadata)
        )
        + b"d",
        id="payload-empty-metadata",
    ),
    pytest.param(
        F.PayloadFrame(stream_id=1, metadata=b"only", next=True, complete=True),
        h(
            "00000001",  # stream 1
            "2960",  # type 0x0A << 10 | M | C | N
            "000004",  # metadata length 4; data length 0
        )
        + b"only",
        id="payload-metadata-only",
    ),
]

ERROR_CODES = [
    (0, 0x00000001, "INVALID_SETUP"),
    (0, 0x00000002, "UNSUPPORTED_SETUP"),
    (0, 0x00000003, "REJECTED_SETUP"),
    (0, 0x00000004, "REJECTED_RESUME"),
    (0, 0x00000101, "CONNECTION_ERROR"),
    (0, 0x00000102, "CONNECTION_CLOSE"),
    (1, 0x00000201, "APPLICATION_ERROR"),
    (1, 0x00000202, "REJECTED"),
    (1, 0x00000203, "CANCELED"),
    (1, 0x00000204, "INVALID"),
    (1, 0x00000301, "first application-defined"),
    (1, 0x7FFFFFFF, "31-bit max"),
    (1, 0x80000000, "high bit set: the code is a full 32-bit field, no reserved bit"),
    (1, 0xFFFFFFFE, "last application-defined"),
    (1, 0xFFFFFFFF, "RESERVED for extension use"),
]

# Error vectors are spelled out per code below rather than generated, so a wrong shift or byte
# order in the implementation cannot be mirrored by the test.
ERROR_VECTORS = [
    pytest.param(
        F.ErrorFrame(stream_id=0, error_code=0x00000001, data=b"bad"),
        h("00000000", "2c00", "00000001") + b"bad",  # stream 0; type 0x0B << 10; INVALID_SETUP
        id="error-INVALID_SETUP",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=0, error_code=0x00000002, data=b"bad"),
        h("00000000", "2c00", "00000002") + b"bad",  # UNSUPPORTED_SETUP
        id="error-UNSUPPORTED_SETUP",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=0, error_code=0x00000003, data=b"bad"),
        h("00000000", "2c00", "00000003") + b"bad",  # REJECTED_SETUP
        id="error-REJECTED_SETUP",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=0, error_code=0x00000004, data=b"bad"),
        h("00000000", "2c00", "00000004") + b"bad",  # REJECTED_RESUME
        id="error-REJECTED_RESUME",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=0, error_code=0x00000101, data=b"bye"),
        h("00000000", "2c00", "00000101") + b"bye",  # CONNECTION_ERROR
        id="error-CONNECTION_ERROR",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=0, error_code=0x00000102),
        h("00000000", "2c00", "00000102"),  # CONNECTION_CLOSE, empty data
        id="error-CONNECTION_CLOSE",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=1, error_code=0x00000201, data="boom \u2603".encode()),
        h("00000001", "2c00", "00000201", "626f6f6d20e29883"),  # APPLICATION_ERROR, UTF-8 data
        id="error-APPLICATION_ERROR",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=3, error_code=0x00000202, data=b"no"),
        h("00000003", "2c00", "00000202") + b"no",  # REJECTED
        id="error-REJECTED",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=5, error_code=0x00000203, data=b"c"),
        h("00000005", "2c00", "00000203") + b"c",  # CANCELED
        id="error-CANCELED",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=7, error_code=0x00000204, data=b"i"),
        h("00000007", "2c00", "00000204") + b"i",  # INVALID
        id="error-INVALID",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=1, error_code=0x00000301, data=b"app"),
        h("00000001", "2c00", "00000301") + b"app",  # first application-defined code
        id="error-application-0x301",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=1, error_code=0x80000000),
        h("00000001", "2c00", "80000000"),  # 32-bit code: high bit is NOT reserved
        id="error-code-high-bit",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=1, error_code=0xFFFFFFFE, data=b"e"),
        h("00000001", "2c00", "fffffffe") + b"e",  # last application-defined code
        id="error-application-max",
    ),
    pytest.param(
        F.ErrorFrame(stream_id=1, error_code=0xFFFFFFFF, data=b"x"),
        h("00000001", "2c00", "ffffffff") + b"x",  # reserved for extension use
        id="error-reserved-extension",
    ),
]

CONNECTION_VECTORS = [
    pytest.param(
        F.MetadataPushFrame(metadata=b"meta"),
        h("00000000", "3100") + b"meta",  # stream 0; type 0x0C << 10 | M; NO length field
        id="metadata-push",
    ),
    pytest.param(
        F.MetadataPushFrame(metadata=b""),
        h("00000000", "3100"),  # stream 0; type 0x0C << 10 | M; empty metadata
        id="metadata-push-empty",
    ),
    pytest.param(
        F.ResumeFrame(
            token=b"\x01\x02\x03\x04",
            last_received_server_position=0x10,
            first_available_client_position=0x05,
        ),
        h(
            "00000000",  # stream 0
            "3400",  # type 0x0D << 10
            "0001",  # major version 1
            "0000",  # minor version 0
            "0004",  # token length 4
            "01020304",  # token
            "0000000000000010",  # last received server position
            "0000000000000005",  # first available client position
        ),
        id="resume",
    ),
    pytest.param(
        F.ResumeFrame(
            major_version=3,
            minor_version=65535,
            token=b"",
            last_received_server_position=(1 << 63) - 1,
            first_available_client_position=0,
        ),
        h(
            "00000000",  # stream 0
            "3400",  # type 0x0D << 10
            "0003",  # major version 3
            "ffff",  # minor version 65535
            "0000",  # token length 0
            "7fffffffffffffff",  # last received server position (max 63-bit)
            "0000000000000000",  # first available client position 0
        ),
        id="resume-edges",
    ),
    pytest.param(
        F.ResumeOkFrame(last_received_client_position=0x42),
        h(
            "00000000",  # stream 0
            "3800",  # type 0x0E << 10
            "0000000000000042",  # last received client position
        ),
        id="resume-ok",
    ),
    pytest.param(
        F.ExtFrame(stream_id=1, extended_type=1, body=b"xyz"),
        h(
            "00000001",  # stream 1
            "fc00",  # type 0x3F << 10
            "00000001",  # extended type 1
        )
        + b"xyz",
        id="ext",
    ),
    pytest.param(
        F.ExtFrame(stream_id=0, extended_type=0x7FFFFFFF, ignore=True),
        h(
            "00000000",  # stream 0
            "fe00",  # type 0x3F << 10 | I
            "7fffffff",  # extended type max
        ),
        id="ext-ignore",
    ),
    pytest.param(
        F.ExtFrame(stream_id=4, extended_type=0x10, ignore=True, has_metadata=True, body=b"b"),
        h(
            "00000004",  # stream 4
            "ff00",  # type 0x3F << 10 | I | M
            "00000010",  # extended type 16
            "62",  # body "b" (layout depends on the extended type: opaque here)
        ),
        id="ext-ignore-metadata",
    ),
]

ALL_VECTORS = (
    SETUP_VECTORS
    + LEASE_VECTORS
    + KEEPALIVE_VECTORS
    + REQUEST_VECTORS
    + STREAM_CONTROL_VECTORS
    + PAYLOAD_VECTORS
    + ERROR_VECTORS
    + CONNECTION_VECTORS
)


@pytest.mark.parametrize(("frame", "vector"), ALL_VECTORS)
def test_encode_golden(frame: object, vector: bytes) -> None:
    assert encode_bytes(frame) == vector


@pytest.mark.parametrize(("frame", "vector"), ALL_VECTORS)
def test_decode_golden(frame: object, vector: bytes) -> None:
    decoded = F.decode(vector)
    assert type(decoded) is type(frame)
    assert decoded == frame


@pytest.mark.parametrize(("frame", "vector"), ALL_VECTORS)
def test_decode_golden_from_memoryview(frame: object, vector: bytes) -> None:
    # decode accepts bytes | memoryview (e.g. a slice of a larger read buffer)
    buf = b"\xaa\xbb" + vector + b"\xcc"
    assert F.decode(memoryview(buf)[2 : 2 + len(vector)]) == frame


def encode_bytes(frame: object) -> bytes:
    out = F.encode(frame)
    assert isinstance(out, bytes)
    return out


def test_error_code_table_covered() -> None:
    # every code of the §Error Codes table (except RESERVED 0) has a golden vector above
    codes = {p.values[0].error_code for p in ERROR_VECTORS}
    assert {c for _, c, _ in ERROR_CODES} <= codes | {0x7FFFFFFF}


@pytest.mark.parametrize(("stream_id", "code", "name"), ERROR_CODES)
def test_error_code_any_32bit_decodes(stream_id: int, code: int, name: str) -> None:
    # "Error Code: (32 bits ...)"; "Values in the range of 0x00301 to 0xFFFFFFFE are reserved for
    # application layer errors"; 0xFFFFFFFF is reserved for extension use.  All must decode.
    vector = h("00000001", "2c00") + code.to_bytes(4, "big") + b"msg"
    frame = F.decode(vector)
    assert isinstance(frame, F.ErrorFrame)
    assert frame.error_code == code, name
    assert frame.data == b"msg"
    assert frame.stream_id == 1


# ---------------------------------------------------------------------------------------------
# Connection frames: stream id property, equality semantics
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        F.SetupFrame(
            keepalive_interval=1, max_lifetime=1, metadata_mime_type=b"", data_mime_type=b""
        ),
        F.LeaseFrame(ttl=1, number_of_requests=1),
        F.KeepaliveFrame(respond=True),
        F.MetadataPushFrame(metadata=b"m"),
        F.ResumeFrame(
            token=b"t", last_received_server_position=0, first_available_client_position=0
        ),
        F.ResumeOkFrame(last_received_client_position=0),
    ],
)
def test_connection_frames_have_stream_id_zero(frame: object) -> None:
    assert frame.stream_id == 0
    assert encode_bytes(frame)[:4] == h("00000000")


def test_no_metadata_differs_from_empty_metadata() -> None:
    # spec §Metadata Optional Header: the M flag says whether metadata is present; a present
    # metadata may have length 0.  The two are distinct on the wire and in the frame.
    absent = F.PayloadFrame(stream_id=1, data=b"d", next=True)
    empty = F.PayloadFrame(stream_id=1, data=b"d", metadata=b"", next=True)
    assert absent != empty
    assert absent.metadata is None
    assert empty.metadata == b""
    assert encode_bytes(absent) == h("00000001", "2820", "64")  # no M, no length field
    assert encode_bytes(empty) == h("00000001", "2920", "000000", "64")  # M, length 0
    assert F.decode(h("00000001", "2820", "64")).metadata is None
    assert F.decode(h("00000001", "2920", "000000", "64")).metadata == b""


def test_lease_no_metadata_differs_from_empty_metadata() -> None:
    assert F.decode(h("00000000", "0800", "00000001", "00000001")).metadata is None
    assert F.decode(h("00000000", "0900", "00000001", "00000001")).metadata == b""


def test_lease_metadata_has_no_length_field() -> None:
    # spec §LEASE: "the Metadata Length header MUST NOT be included, even if the (M)etadata flag
    # is set true" -> bytes that look like a length are metadata.
    frame = F.decode(h("00000000", "0900", "00000001", "00000002", "000003616263"))
    assert frame.metadata == h("000003616263")


def test_metadata_push_metadata_has_no_length_field() -> None:
    # spec §METADATA_PUSH: "the Metadata Length header MUST NOT be included."
    frame = F.decode(h("00000000", "3100", "000001ff"))
    assert isinstance(frame, F.MetadataPushFrame)
    assert frame.metadata == h("000001ff")


def test_frames_compare_by_value_and_have_repr() -> None:
    a = F.RequestNFrame(stream_id=1, request_n=5)
    assert a == F.RequestNFrame(stream_id=1, request_n=5)
    assert a != F.RequestNFrame(stream_id=1, request_n=6)
    assert a != F.CancelFrame(stream_id=1)
    assert "RequestNFrame" in repr(a)


# ---------------------------------------------------------------------------------------------
# Decode-side leniency: unknown flags, I flag on known frames, connection frames on stream != 0
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vector", "expected"),
    [
        pytest.param(
            h("00000005", "2040", "00000001"),  # REQUEST_N with stray 0x040
            F.RequestNFrame(stream_id=5, request_n=1),
            id="request-n-stray-flag",
        ),
        pytest.param(
            h("00000005", "20ff", "00000001"),  # REQUEST_N with all low 8 flag bits
            F.RequestNFrame(stream_id=5, request_n=1),
            id="request-n-all-low-flags",
        ),
        pytest.param(
            h("00000005", "241f"),  # CANCEL with stray low bits
            F.CancelFrame(stream_id=5),
            id="cancel-stray-flags",
        ),
        pytest.param(
            h("00000005", "2600"),  # CANCEL with I flag: understood, so processed
            F.CancelFrame(stream_id=5),
            id="cancel-ignore-flag",
        ),
        pytest.param(
            h("00000001", "2c1f", "00000201") + b"e",  # ERROR with stray flags
            F.ErrorFrame(stream_id=1, error_code=0x201, data=b"e"),
            id="error-stray-flags",
        ),
        pytest.param(
            h("00000000", "0cc0", "0000000000000000"),  # KEEPALIVE R + stray 0x040
            F.KeepaliveFrame(respond=True),
            id="keepalive-stray-flag",
        ),
        pytest.param(
            h("00000001", "2821") + b"x",  # PAYLOAD N + stray 0x001
            F.PayloadFrame(stream_id=1, data=b"x", next=True),
            id="payload-stray-flag",
        ),
        pytest.param(
            h("00000001", "1040") + b"x",  # REQUEST_RESPONSE with C-position bit (not defined)
            F.RequestResponseFrame(stream_id=1, data=b"x"),
            id="request-response-stray-c",
        ),
        pytest.param(
            h("00000001", "1820", "00000001"),  # REQUEST_STREAM with N-position bit
            F.RequestStreamFrame(stream_id=1, initial_request_n=1),
            id="request-stream-stray-n",
        ),
        pytest.param(
            h("00000000", "3801", "0000000000000001"),  # RESUME_OK with stray bit
            F.ResumeOkFrame(last_received_client_position=1),
            id="resume-ok-stray-flag",
        ),
        pytest.param(
            h("00000000", "0820", "00000001", "00000001"),  # LEASE with stray bit
            F.LeaseFrame(ttl=1, number_of_requests=1),
            id="lease-stray-flag",
        ),
        pytest.param(
            h("00000000", "0410", "0001 0000", "00000001", "00000001", "00", "00"),  # SETUP
            F.SetupFrame(
                keepalive_interval=1, max_lifetime=1, metadata_mime_type=b"", data_mime_type=b""
            ),
            id="setup-stray-flag",
        ),
    ],
)
def test_unknown_flag_bits_are_ignored(vector: bytes, expected: object) -> None:
    # spec §Handling the Unexpected: "Flag bits not specified for a particular frame MUST be
    # ignored."
    assert F.decode(vector) == expected


@pytest.mark.parametrize(
    ("vector", "cls"),
    [
        pytest.param(
            h("00000001", "0400", "0001 0000", "00000001", "00000001", "00", "00"),
            F.SetupFrame,
            id="setup",
        ),
        pytest.param(h("00000003", "0800", "00000001", "00000001"), F.LeaseFrame, id="lease"),
        pytest.param(h("00000001", "0c80", "0000000000000000"), F.KeepaliveFrame, id="keepalive"),
        pytest.param(h("00000001", "3100", "6d"), F.MetadataPushFrame, id="metadata-push"),
        pytest.param(
            h("00000001", "3400", "0001 0000", "0000", "0000000000000000", "0000000000000000"),
            F.ResumeFrame,
            id="resume",
        ),
        pytest.param(h("00000001", "3800", "0000000000000000"), F.ResumeOkFrame, id="resume-ok"),
    ],
)
def test_connection_frame_on_nonzero_stream_is_not_decode_error(vector: bytes, cls: type) -> None:
    # Contract: SETUP/LEASE/KEEPALIVE/METADATA_PUSH/RESUME/RESUME_OK with stream id != 0 decode
    # (spec §Handling the Unexpected: "Receiving a METADATA_PUSH with a non-0 Stream ID MUST be
    # ignored" is the connection's job, not the codec's).
    assert isinstance(F.decode(vector), cls)


def test_lease_zero_values_decode() -> None:
    # spec §LEASE: "A Responder implementation MAY stop all further requests by sending a LEASE
    # with a value of 0 for Number of Requests or Time-To-Live."  Not in the contract's list of
    # zero-is-an-error fields.
    frame = F.decode(h("00000000", "0800", "00000000", "00000000"))
    assert frame == F.LeaseFrame(ttl=0, number_of_requests=0)


def test_keepalive_zero_position_decodes() -> None:
    # spec §KEEPALIVE: position "Set to all 0s when not supported."
    assert F.decode(h("00000000", "0c00", "0000000000000000")) == F.KeepaliveFrame(respond=False)


# ---------------------------------------------------------------------------------------------
# Decode-side validation -> FrameDecodeError
# ---------------------------------------------------------------------------------------------

TOO_SHORT = [
    pytest.param(b"", id="empty"),
    pytest.param(h("00000001"), id="stream-id-only"),
    pytest.param(h("0000000120"), id="five-bytes"),
    pytest.param(h("00000001", "20"), id="header-half-type-word"),
    # SETUP: fixed fields cut at every boundary
    pytest.param(h("00000000", "0400"), id="setup-header-only"),
    pytest.param(h("00000000", "0400", "0001"), id="setup-minor-missing"),
    pytest.param(h("00000000", "0400", "0001 0000", "000075"), id="setup-keepalive-cut"),
    pytest.param(h("00000000", "0400", "0001 0000", "00007530"), id="setup-lifetime-missing"),
    # 16 and 17 bytes: the fixed part of SETUP is 6 + 2 + 2 + 4 + 4 = 18 bytes
    pytest.param(h("00000000", "0400", "0001 0000", "00007530", "0001"), id="setup-lifetime-16"),
    pytest.param(h("00000000", "0400", "0001 0000", "00007530", "00015f"), id="setup-lifetime-17"),
    pytest.param(
        h("00000000", "0400", "0001 0000", "00007530", "00015f90"), id="setup-mime-len-missing"
    ),
    pytest.param(
        h("00000000", "0400", "0001 0000", "00007530", "00015f90", "05", "6d"),
        id="setup-metadata-mime-cut",
    ),
    pytest.param(
        h("00000000", "0400", "0001 0000", "00007530", "00015f90", "01", "6d"),
        id="setup-data-mime-len-missing",
    ),
    pytest.param(
        h("00000000", "0400", "0001 0000", "00007530", "00015f90", "01", "6d", "04", "64"),
        id="setup-data-mime-cut",
    ),
    pytest.param(
        h("00000000", "0480", "0001 0000", "00007530", "00015f90", "00"),
        id="setup-token-length-cut",
    ),
    pytest.param(
        h("00000000", "0480", "0001 0000", "00007530", "00015f90", "0008", "0102", "01", "6d"),
        id="setup-token-longer-than-frame",
    ),
    pytest.param(
        h("00000000", "0500", "0001 0000", "00007530", "00015f90", "01", "6d", "01", "64", "00"),
        id="setup-metadata-length-cut",
    ),
    # LEASE
    pytest.param(h("00000000", "0800", "00000001"), id="lease-requests-missing"),
    pytest.param(h("00000000", "0800", "00000001", "000000"), id="lease-requests-cut"),
    # KEEPALIVE
    pytest.param(h("00000000", "0c80"), id="keepalive-position-missing"),
    pytest.param(h("00000000", "0c80", "00000000000000"), id="keepalive-position-cut"),
    # REQUEST_STREAM / REQUEST_CHANNEL / REQUEST_N
    pytest.param(h("00000001", "1800"), id="request-stream-n-missing"),
    pytest.param(h("00000001", "1800", "000001"), id="request-stream-n-cut"),
    pytest.param(h("00000001", "1c00", "00"), id="request-channel-n-cut"),
    pytest.param(h("00000001", "2000"), id="request-n-missing"),
    pytest.param(h("00000001", "2000", "000000"), id="request-n-cut"),
    # metadata length header itself cut
    pytest.param(h("00000001", "1100", "0000"), id="request-response-md-length-cut"),
    pytest.param(h("00000001", "2920"), id="payload-md-length-missing"),
    pytest.param(h("00000001", "1900", "00000001", "00"), id="request-stream-md-length-cut"),
    # ERROR
    pytest.param(h("00000001", "2c00"), id="error-code-missing"),
    pytest.param(h("00000001", "2c00", "000002"), id="error-code-cut"),
    # RESUME
    pytest.param(h("00000000", "3400", "0001"), id="resume-minor-missing"),
    pytest.param(h("00000000", "3400", "0001 0000"), id="resume-token-length-missing"),
    pytest.param(
        h("00000000", "3400", "0001 0000", "0004", "0102"), id="resume-token-longer-than-frame"
    ),
    pytest.param(
        h("00000000", "3400", "0001 0000", "0000", "0000000000000001"),
        id="resume-client-position-missing",
    ),
    pytest.param(
        h("00000000", "3400", "0001 0000", "0000", "0000000000000001", "00000000"),
        id="resume-client-position-cut",
    ),
    # RESUME_OK
    pytest.param(h("00000000", "3800"), id="resume-ok-position-missing"),
    pytest.param(h("00000000", "3800", "000000000000"), id="resume-ok-position-cut"),
    # EXT
    pytest.param(h("00000001", "fc00"), id="ext-type-missing"),
    pytest.param(h("00000001", "fe00", "0000"), id="ext-type-cut-even-with-ignore"),
]

METADATA_TOO_LONG = [
    pytest.param(h("00000001", "1100", "000004", "616263"), id="request-response"),
    pytest.param(h("00000001", "1500", "000002", "61"), id="request-fnf"),
    pytest.param(h("00000001", "1900", "00000001", "000001"), id="request-stream"),
    pytest.param(h("00000001", "1d00", "00000001", "ffffff", "00"), id="request-channel"),
    pytest.param(h("00000001", "2920", "000003", "6162"), id="payload"),
    pytest.param(h("00000001", "2960", "000001"), id="payload-complete"),
    pytest.param(
        h("00000000", "0500", "0001 0000", "00000001", "00000001", "00", "00", "000002", "61"),
        id="setup",
    ),
]

RESERVED_BIT = [
    pytest.param(h("80000001", "2400"), id="cancel-stream-id"),
    pytest.param(h("80000001", "2820", "61"), id="payload-stream-id"),
    pytest.param(h("80000000", "0c80", "0000000000000000"), id="keepalive-stream-id-0-high"),
    pytest.param(h("ffffffff", "2000", "00000001"), id="request-n-stream-id-all-ones"),
    pytest.param(h("00000001", "2000", "80000001"), id="request-n"),
    pytest.param(h("00000001", "2000", "ffffffff"), id="request-n-all-ones"),
    pytest.param(h("00000001", "1800", "80000001"), id="request-stream-initial-n"),
    pytest.param(h("00000001", "1c00", "80000001"), id="request-channel-initial-n"),
    pytest.param(
        h("00000000", "0400", "0001 0000", "80007530", "00015f90", "00", "00"),
        id="setup-keepalive-interval",
    ),
    pytest.param(
        h("00000000", "0400", "0001 0000", "00007530", "80015f90", "00", "00"),
        id="setup-max-lifetime",
    ),
    pytest.param(h("00000000", "0800", "80000001", "00000001"), id="lease-ttl"),
    pytest.param(h("00000000", "0800", "00000001", "80000001"), id="lease-number-of-requests"),
    pytest.param(h("00000000", "0c80", "8000000000000001"), id="keepalive-position"),
    pytest.param(
        h("00000000", "3400", "0001 0000", "0000", "8000000000000000", "0000000000000000"),
        id="resume-server-position",
    ),
    pytest.param(
        h("00000000", "3400", "0001 0000", "0000", "0000000000000000", "8000000000000000"),
        id="resume-client-position",
    ),
    pytest.param(h("00000000", "3800", "ffffffffffffffff"), id="resume-ok-position"),
    pytest.param(h("00000001", "fc00", "80000001"), id="ext-extended-type"),
]

ZERO_MUST_BE_POSITIVE = [
    pytest.param(h("00000001", "2000", "00000000"), id="request-n"),
    pytest.param(h("00000001", "1800", "00000000"), id="request-stream-initial-n"),
    pytest.param(h("00000001", "1c00", "00000000"), id="request-channel-initial-n"),
    pytest.param(
        h("00000000", "0400", "0001 0000", "00000000", "00015f90", "00", "00"),
        id="setup-keepalive-interval",
    ),
    pytest.param(
        h("00000000", "0400", "0001 0000", "00007530", "00000000", "00", "00"),
        id="setup-max-lifetime",
    ),
    pytest.param(h("00000001", "fc00", "00000000"), id="ext-extended-type"),
    pytest.param(h("00000001", "fe00", "00000000"), id="ext-extended-type-with-ignore"),
]


@pytest.mark.parametrize("vector", TOO_SHORT)
def test_decode_too_short(vector: bytes) -> None:
    with pytest.raises(FrameDecodeError):
        F.decode(vector)


@pytest.mark.parametrize("vector", METADATA_TOO_LONG)
def test_decode_metadata_length_exceeds_frame(vector: bytes) -> None:
    # spec §Metadata Optional Header: a Metadata Length that does not fit makes the frame invalid.
    with pytest.raises(FrameDecodeError):
        F.decode(vector)


@pytest.mark.parametrize("vector", RESERVED_BIT)
def test_decode_reserved_bit_set(vector: bytes) -> None:
    # The leading |0| bit of the stream id and of every 31/63-bit field is reserved.
    with pytest.raises(FrameDecodeError):
        F.decode(vector)


@pytest.mark.parametrize("vector", ZERO_MUST_BE_POSITIVE)
def test_decode_zero_where_spec_says_positive(vector: bytes) -> None:
    # spec: "Value MUST be > 0" for keepalive interval, max lifetime, initial request n,
    # request n and EXT extended type.
    with pytest.raises(FrameDecodeError):
        F.decode(vector)


def test_decode_error_has_reason() -> None:
    with pytest.raises(FrameDecodeError) as info:
        F.decode(h("00000001", "2000", "00000000"))
    assert str(info.value.message)


# ---------------------------------------------------------------------------------------------
# Unknown frame types
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vector", "frame_type", "ignore"),
    [
        pytest.param(h("00000001", "8000"), 0x20, False, id="0x20"),
        pytest.param(h("00000001", "8200", "deadbeef"), 0x20, True, id="0x20-ignore"),
        pytest.param(h("00000000", "3c00"), 0x0F, False, id="0x0F"),
        pytest.param(h("00000000", "3e00"), 0x0F, True, id="0x0F-ignore"),
        pytest.param(h("00000005", "fbff", "00"), 0x3E, True, id="0x3E-ignore-all-flags"),
        pytest.param(h("00000005", "f9ff"), 0x3E, False, id="0x3E-all-flags-but-ignore"),
    ],
)
def test_unknown_frame_type(vector: bytes, frame_type: int, ignore: bool) -> None:
    with pytest.raises(UnknownFrameTypeError) as info:
        F.decode(vector)
    assert info.value.frame_type == frame_type
    assert info.value.ignore is ignore
    assert isinstance(info.value, FrameDecodeError)


def test_reserved_frame_type_zero_is_decode_error() -> None:
    # 0x00 is RESERVED in §Frame Types: no frame has it.
    with pytest.raises(FrameDecodeError):
        F.decode(h("00000001", "0000", "00000000"))
