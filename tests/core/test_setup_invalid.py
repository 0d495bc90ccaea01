"""RSocketConnection, server side: what a SETUP must be (spec §SETUP Frame, §Connection
Establishment, §Error Codes) and how large the first frame may be (``max_setup_frame_size``).

"If the server does NOT accept the contents of the SETUP frame, the server MUST send back an
ERROR[INVALID_SETUP|UNSUPPORTED_SETUP] and then close the connection." A SETUP that breaks a
rule of §SETUP Frame (keepalive interval or max lifetime 0, a reserved bit, a length past the
frame, a version the server does not speak, an empty resume token, a MIME type that is not
US-ASCII or is null-terminated) gets INVALID_SETUP, never CONNECTION_ERROR; a max lifetime
above the server's ``max_lifetime_limit`` gets UNSUPPORTED_SETUP.

The SETUP frames here are built by hand from the layout drawn in §SETUP Frame (no codec).
"""

from __future__ import annotations

import struct

import pytest

from rsocket_tx.core import frames as F
from rsocket_tx.core.config import (
    DEFAULT_MAX_LIFETIME_LIMIT,
    DEFAULT_MAX_SETUP_FRAME_SIZE,
    ConnectionConfig,
)
from rsocket_tx.core.errors import ErrorCode, InvalidSetupError, UnsupportedSetupError
from rsocket_tx.core.events import (
    ConnectionClosed,
    PayloadReceived,
    RequestReceived,
    SetupReceived,
)
from rsocket_tx.core.payload import Payload

from .conn_helpers import make_client, make_server, sent, setup_frame, wire

SETUP = 0x01
FLAG_M, FLAG_R, FLAG_L = 0x100, 0x080, 0x040


def setup_bytes(*, flags: int = 0, version: bytes = b"\x00\x01\x00\x00",
                keepalive: bytes = b"\x00\x00\x03\xe8", lifetime: bytes = b"\x00\x00\x13\x88",
                token: bytes | None = None, token_length: int | None = None,
                metadata_mime: bytes = b"application/json", data_mime: bytes = b"text/plain",
                rest: bytes = b"") -> bytes:
    """A length-prefixed SETUP: stream id 0, type 0x01 with ``flags``, major/minor version,
    keepalive interval, max lifetime (31-bit, ms), [token length, token,] MIME length,
    metadata MIME, MIME length, data MIME, then ``rest`` (metadata and data)."""
    if token is not None:
        flags |= FLAG_R
    body = b"\x00\x00\x00\x00" + struct.pack(">H", (SETUP << 10) | flags) + version
    body += keepalive + lifetime
    if token is not None:
        body += struct.pack(">H", len(token) if token_length is None else token_length) + token
    body += bytes([len(metadata_mime)]) + metadata_mime + bytes([len(data_mime)]) + data_mime
    body += rest
    return len(body).to_bytes(3, "big") + body


def refused(server, data: bytes, code: int = ErrorCode.INVALID_SETUP) -> F.ErrorFrame:
    """Feed ``data`` to ``server``: it must close after one ERROR[code] on stream 0."""
    events = server.receive_data(data)
    assert [type(e) for e in events] == [ConnectionClosed], events
    assert not server.is_open
    (error,) = sent(server)
    assert isinstance(error, F.ErrorFrame)
    assert (error.stream_id, error.error_code) == (0, code)
    assert error.data  # a reason
    return error


def test_a_hand_built_setup_is_accepted() -> None:
    server = make_server()
    [event] = server.receive_data(setup_bytes(flags=FLAG_M, rest=b"\x00\x00\x02mdD"))
    assert isinstance(event, SetupReceived)
    assert event.setup.metadata == b"md" and event.setup.data == b"D"
    assert event.setup.metadata_mime_type == b"application/json"


@pytest.mark.parametrize(("fields", "reason"), [
    ({"keepalive": b"\x00\x00\x00\x00"}, b"keepalive interval"),
    ({"lifetime": b"\x00\x00\x00\x00"}, b"max lifetime"),
    ({"keepalive": b"\x80\x00\x03\xe8"}, b"reserved bit"),
    ({"lifetime": b"\x80\x00\x13\x88"}, b"reserved bit"),
    ({"version": b"\x00\x02\x00\x00"}, b"version 2.0"),
    ({"version": b"\x00\x00\x00\x01"}, b"version 0.1"),
    ({"token": b""}, b"empty resume"),
    ({"token": b"tok", "token_length": 200}, b"too short"),
    ({"metadata_mime": b"application/json\x00"}, b"metadata encoding MIME"),
    ({"data_mime": "text/pl\u00e4in".encode()}, b"data encoding MIME"),
    ({"data_mime": b"text\nplain"}, b"data encoding MIME"),
    ({"flags": FLAG_M, "rest": b"\x00\x01\x00"}, b"metadata length"),
    ({"metadata_mime": b"x" * 10, "rest": b""}, None),  # (a valid one: the control case)
], ids=["keepalive-0", "lifetime-0", "keepalive-reserved-bit", "lifetime-reserved-bit",
        "version-2.0", "version-0.1", "empty-token", "token-past-frame", "null-terminated-mime",
        "non-ascii-mime", "control-char-mime", "metadata-past-frame", "valid"])
def test_an_invalid_setup_field_is_invalid_setup_never_connection_error(fields, reason) -> None:
    server = make_server(resume=True)
    if reason is None:
        assert [type(e) for e in server.receive_data(setup_bytes(**fields))] == [SetupReceived]
        return
    error = refused(server, setup_bytes(**fields))
    assert reason in error.data, error.data


def test_setup_cut_short_is_invalid_setup() -> None:
    whole = setup_bytes()
    body = whole[3:-4]  # the data MIME type cut off
    refused(make_server(), len(body).to_bytes(3, "big") + body)


@pytest.mark.parametrize("first", [
    b"\x00\x00\x06\x00\x00\x00\x00\xfe\x00",  # unknown type 0x3F with the (I)gnore flag
    b"\x00\x00\x04\x00\x00\x00\x00",  # shorter than a frame header
], ids=["unknown-type-ignore-flag", "short-frame"])
def test_a_first_frame_that_is_no_setup_is_invalid_setup(first) -> None:
    # "Any other frame received that is NOT a SETUP|RESUME frame ... MUST cause the server to
    # send an ERROR[INVALID_SETUP] and close the connection" (the I flag does not excuse it)
    refused(make_server(), first)


def test_the_events_report_an_invalid_setup_error() -> None:
    server = make_server()
    [closed] = server.receive_data(setup_bytes(keepalive=b"\x00\x00\x00\x00"))
    assert isinstance(closed.error, InvalidSetupError)


# -- max lifetime limit --------------------------------------------------------------------------


def test_the_default_max_lifetime_limit_is_ten_minutes() -> None:
    assert ConnectionConfig().max_lifetime_limit == DEFAULT_MAX_LIFETIME_LIMIT == 600_000
    server = make_server()
    [event] = server.receive_data(wire(setup_frame(max_lifetime=600_000)))
    assert isinstance(event, SetupReceived)


def test_a_max_lifetime_above_the_limit_is_unsupported_setup() -> None:
    # the probe: a client declaring 2^31-1 ms (24.9 days) of silence
    server = make_server()
    error = refused(server, wire(setup_frame(max_lifetime=2**31 - 1)),
                    ErrorCode.UNSUPPORTED_SETUP)
    assert b"max lifetime 2147483647 ms is above" in error.data
    assert b"600000 ms" in error.data


def test_max_lifetime_limit_0_is_no_limit() -> None:
    server = make_server(max_lifetime_limit=0)
    [event] = server.receive_data(wire(setup_frame(max_lifetime=2**31 - 1)))
    assert isinstance(event, SetupReceived)


def test_the_max_lifetime_limit_event_carries_unsupported_setup() -> None:
    server = make_server(max_lifetime_limit=10_000)
    [closed] = server.receive_data(wire(setup_frame(max_lifetime=10_001)))
    assert isinstance(closed.error, UnsupportedSetupError)


# -- the first frame's size ----------------------------------------------------------------------


def test_the_default_max_setup_frame_size_holds_any_resume() -> None:
    # a RESUME with the longest token: header 6, versions 4, token length 2, token 65,535,
    # two positions 16 (spec §RESUME Frame)
    assert DEFAULT_MAX_SETUP_FRAME_SIZE == 131_072 >= 6 + 4 + 2 + 65_535 + 16
    resume = F.ResumeFrame(token=b"t" * 65_535, last_received_server_position=0,
                           first_available_client_position=0)
    server = make_server(resume=True)
    [event] = server.receive_data(wire(resume))
    assert type(event).__name__ == "ResumeReceived"


def test_a_first_frame_past_max_setup_frame_size_is_refused_on_its_prefix() -> None:
    # the attack: a prefix announcing 16,777,215 bytes, then all but the last byte;
    # refused as soon as the 3 prefix bytes are in, with nothing of the body held
    server = make_server()
    error = refused(server, b"\xff\xff\xff" + b"\x00" * 1000)
    assert b"first frame length 16777215 exceeds the max setup frame size of 131072" in \
        error.data
    assert server.inbound_buffered == 0
    assert server.receive_data(b"\x00" * 1000) == []  # the rest is not even looked at
    assert server.inbound_buffered == 0


def test_the_prefix_is_checked_when_its_third_byte_arrives() -> None:
    server = make_server(max_setup_frame_size=1024)
    assert server.receive_data(b"\x00") == []
    assert server.receive_data(b"\x04") == []
    refused(server, b"\x01")  # 0x000401 = 1025 > 1024


def test_a_setup_of_exactly_max_setup_frame_size_is_accepted() -> None:
    size = 1024
    probe = wire(setup_frame(data=b""))
    setup = setup_frame(data=b"d" * (size - (len(probe) - 3)))
    assert len(wire(setup)) == size + 3
    server = make_server(max_setup_frame_size=size)
    assert [type(e) for e in server.receive_data(wire(setup))] == [SetupReceived]


def test_after_setup_max_frame_size_applies_even_in_the_same_read() -> None:
    server = make_server(max_setup_frame_size=1024)
    big = F.RequestResponseFrame(stream_id=1, data=b"x" * 5000)
    events = server.receive_data(wire(setup_frame()) + wire(big))
    assert [type(e) for e in events] == [SetupReceived, RequestReceived]
    assert events[1].payload.data == big.data


def test_the_setup_frame_limit_is_never_above_max_frame_size() -> None:
    config = ConnectionConfig(max_frame_size=512)
    assert config.setup_frame_limit == 512
    server = make_server(max_frame_size=512)
    refused(server, (513).to_bytes(3, "big"))


def test_a_client_has_no_first_frame_limit() -> None:
    client = make_client(max_setup_frame_size=64)
    client.data_to_send()
    frame = F.PayloadFrame(stream_id=1, data=b"x" * 1000, next=True, complete=True)
    sid = client.request_response(Payload(b"q"))
    assert sid == 1
    [event] = client.receive_data(wire(frame))
    assert isinstance(event, PayloadReceived)


def test_a_message_transport_checks_the_first_frame_too() -> None:
    server = make_server(length_prefixed=False, max_setup_frame_size=256)
    events = server.receive_frame(F.encode(setup_frame(data=b"d" * 300)))
    assert [type(e) for e in events] == [ConnectionClosed]
    (error,) = [F.decode(f) for f in server.frames_to_send()]
    assert error.error_code == ErrorCode.INVALID_SETUP


@pytest.mark.parametrize(("value", "message"), [
    (63, "max_setup_frame_size must be an integer in [64, 16777215] bytes"),
    (2**24, "max_setup_frame_size must be an integer in [64, 16777215] bytes"),
])
def test_max_setup_frame_size_is_checked(value, message) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ConnectionConfig(max_setup_frame_size=value)


# -- frames before an oversize prefix ------------------------------------------------------------


def test_frames_before_an_oversize_prefix_in_one_read_are_handled_then_the_connection_closes():
    # with a max frame size below the default, what arrived complete before the bad prefix
    # must not depend on TCP segmentation: handled as if it had come alone, answers included
    server = make_server(max_frame_size=1024)
    request = F.RequestResponseFrame(stream_id=1, data=b"hello")
    events = server.receive_data(wire(setup_frame()) + wire(request) + b"\x00\x04\x01" + b"z")
    assert [type(e) for e in events] == [SetupReceived, RequestReceived]
    assert events[1].payload.data == b"hello"
    assert server.read_failure is not None and server.is_open
    server.send_payload(1, Payload(b"answer"))  # the application answers the request
    [closed] = server.pending_events()
    assert isinstance(closed, ConnectionClosed) and not server.is_open
    answer, error = sent(server)
    assert isinstance(answer, F.PayloadFrame) and answer.data == b"answer"
    assert (error.stream_id, error.error_code) == (0, ErrorCode.CONNECTION_ERROR)
    assert b"frame length 1025 exceeds the max frame size of 1024" in error.data
    assert server.read_failure is None


@pytest.mark.parametrize("then", ["receive_data", "tick"])
def test_the_pending_failure_comes_with_the_next_call_too(then) -> None:
    server = make_server(max_frame_size=1024)
    events = server.receive_data(wire(setup_frame()) + b"\x00\x04\x01")
    assert [type(e) for e in events] == [SetupReceived]
    later = server.receive_data(b"more") if then == "receive_data" else server.tick(1.0)
    assert [type(e) for e in later] == [ConnectionClosed]
    (error,) = sent(server)
    assert error.error_code == ErrorCode.CONNECTION_ERROR


def test_the_same_bytes_cut_anywhere_give_the_same_outcome() -> None:
    request = F.RequestResponseFrame(stream_id=1, data=b"hello")
    data = wire(setup_frame()) + wire(request) + b"\x00\x04\x01"
    outcomes = set()
    for cut in range(len(data) + 1):
        server = make_server(max_frame_size=1024)
        kinds = []
        for part in (data[:cut], data[cut:]):
            for event in server.receive_data(part):
                kinds.append(type(event).__name__)
                if isinstance(event, RequestReceived):
                    server.send_payload(1, Payload(b"answer"))
            kinds += [type(e).__name__ for e in server.pending_events()]
        outcomes.add((tuple(kinds), tuple(type(f).__name__ for f in sent(server))))
    assert outcomes == {(("SetupReceived", "RequestReceived", "ConnectionClosed"),
                         ("PayloadFrame", "ErrorFrame"))}
