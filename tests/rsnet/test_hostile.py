"""Hostile input: whatever a peer sends, the connection answers with goodbye (with a reason) and
closes, or carries on; it never raises. Each case is written byte by byte."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.connection import ConnectionState, Role, RSNetConnection
from rsocket_tx.rsnet.errors import ProtocolError
from rsocket_tx.rsnet.events import ConnectionClosed

from .conn_helpers import CLIENT_HELLO, SERVER_HELLO, assert_violation, make


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# bytes sent to an established server (after the clientHello), and the reason's words
SERVER_CASES = [
    ("unknown-type", "0d", "unknown message type 0x0D"),
    ("unknown-type-high", "80 00", "unknown message type 0x80"),
    ("overlong-id", "03 8000", "overlong"),
    ("id-over-2^32-1", "03 8080808010", "over its limit of 4294967295"),
    ("id-six-bytes", "03 8080808080", "longer than 5 bytes"),
    ("long-ten-bytes", "02 00 ffffffffffffffffff01", "longer than 9 bytes"),
    ("long-over-2^63-1", "01 00 00 808080808080808080", "longer than 9 bytes"),
    ("publisher-over-limit", "01 fdff03", "max_string_length"),  # 65,533 ... over 16
    ("publisher-bad-utf8", "01 02 c328 00 00", "not valid UTF-8"),
    ("goodbye-reason-over-limit", "0b 8080808001", "max_string_length"),
    ("second-hello", "f1 52534e 00 00", "a second hello"),
    ("server-hello-from-client", "f2 52534e 00 00", "a second hello"),
    ("goodbyeack-unsolicited", "0c", "goodbyeAck without a goodbye"),
    ("onnext-without-subscribe", "05 00 01 61", "onNext for subscriber 0, which has no"),
    ("onsubscribe-without-subscribe", "04 07 00", "onSubscribe for subscriber 7, which has no"),
    ("oncomplete-without-subscribe", "09 03", "onComplete for subscriber 3, which has no"),
    ("onerror-without-subscribe", "0a 03 01 78", "onError for subscriber 3, which has no"),
    ("packed-without-subscribe", "06 02 01 00", "elementSize is 0"),
    ("part-without-subscribe", "07 02 00 01 61", "onNextPart for subscriber 2, which has no"),
    ("element-over-limit", "05 00 818040", "max_element_size"),  # 1 MiB + 1
    ("element-shortest-form", "05 00 8180c000", "overlong"),
    ("subscribe-twice", "01 01 61 05 00 01 01 62 05 00", "which is still open"),
]


@pytest.mark.parametrize("name,hexa,match", SERVER_CASES, ids=[c[0] for c in SERVER_CASES])
def test_hostile_bytes_to_a_server(name: str, hexa: str, match: str) -> None:
    server = make(Role.SERVER, max_string_length=16)
    events = server.receive_data(h(hexa))
    assert_violation(events, server, match)
    # nothing more is processed or sent
    assert server.receive_data(h("01 01 61 09 00")) == []
    assert server.data_to_send() == b""


def client_with_subscription() -> tuple[RSNetConnection, int]:
    client = make(Role.CLIENT, max_element_size=8, max_packed_size=8)
    sid = client.subscribe("x", 2)
    client.receive_data(C.encode(C.OnSubscribe(sid, 0)))
    client.data_to_send()
    return client, sid


CLIENT_CASES = [
    ("onnext-beyond-demand", "05 00 01 61 05 00 01 62 05 00 01 63", "beyond its demand"),
    ("second-onsubscribe", "04 00 00", "a second onSubscribe"),
    ("packed-on-variable-size", "06 00 01 61", "elementSize is 0"),
    ("part-of-two-elements", "07 00 00 01 61 07 00 01 01 62", "while element 0 is not finished"),
    ("onnext-inside-a-split", "07 00 00 01 61 05 00 01 62", "while element 0 is split"),
    ("oncomplete-inside-a-split", "07 00 00 01 61 09 00", "while element 0 is split"),
    ("onsubscribe-size-over-limit", "04 01 09", "max_element_size"),
    ("part-over-element-limit", "07 00 00 09", "max_element_size"),
    ("onnext-for-another-id", "05 05 01 61", "subscriber 5, which has no subscription"),
    ("subscribe-id-over-range", "01 01 61 8080808010 00", "over its limit of 4294967295"),
    ("hello-without-mark", "f2 000000 00 00", "without the mark"),
    ("truncated-then-unknown", "05 00 01", None),  # incomplete: no verdict yet
]


@pytest.mark.parametrize("name,hexa,match", CLIENT_CASES, ids=[c[0] for c in CLIENT_CASES])
def test_hostile_bytes_to_a_client(name: str, hexa: str, match: str | None) -> None:
    client, sid = client_with_subscription()
    events = client.receive_data(h(hexa))
    if match is None:
        assert events == [] and client.is_open
        return
    assert_violation(events, client, match)


def test_an_onerror_inside_a_split_discards_the_partial_element() -> None:
    client, sid = client_with_subscription()
    events = client.receive_data(h("07 00 00 02 6162 0a 00 01 78"))
    assert [type(e).__name__ for e in events] == ["OnErrorReceived"]
    assert client.is_open


def test_messages_before_hello() -> None:
    for role, hello in ((Role.SERVER, CLIENT_HELLO), (Role.CLIENT, SERVER_HELLO)):
        conn = make(role, handshake=False)
        conn.data_to_send()
        events = conn.receive_data(h("02 00 01") + hello)
        assert_violation(events, conn, "before the")


def test_a_huge_incomplete_message_is_refused_at_its_length() -> None:
    # a 1 GiB element is refused as soon as its length arrives, not after buffering it
    server = make(Role.SERVER)
    assert_violation(server.receive_data(h("05 00 8080808004")), server, "max_element_size")


@given(st.binary(max_size=64), st.sampled_from([Role.CLIENT, Role.SERVER]),
       st.booleans())
@settings(max_examples=400)
def test_random_bytes_never_raise(data: bytes, role: Role, handshake: bool) -> None:
    conn = make(role, handshake=handshake, max_string_length=8, max_element_size=8,
                max_packed_size=8, max_extensions=2, max_buffered_input=64)
    if role is Role.CLIENT:
        conn.subscribe("x", 3)
    conn.data_to_send()
    events = conn.receive_data(data)
    if events and isinstance(events[-1], ConnectionClosed):
        assert conn.state is ConnectionState.CLOSED
        assert events[-1].reason
    else:
        assert conn.is_open
        assert not any(isinstance(e, ConnectionClosed) for e in events)


@given(st.lists(st.binary(max_size=16), max_size=8))
def test_random_bytes_after_valid_messages_in_pieces_never_raise(pieces: list[bytes]) -> None:
    client, sid = client_with_subscription()
    client.receive_data(C.encode(C.OnNext(sid, b"ok")))
    for piece in pieces:
        client.receive_data(piece)
    assert client.state in (ConnectionState.OPEN, ConnectionState.CLOSED)


def test_an_onsubscribe_nobody_is_owed_after_a_cancel_is_a_violation() -> None:
    client, sid = client_with_subscription()  # its onSubscribe arrived
    client.cancel(sid)
    events = client.receive_data(C.encode(C.OnNext(sid, b"inflight")))
    assert events == []  # sent before the publisher saw the cancel: dropped
    events = client.receive_data(C.encode(C.OnSubscribe(sid, 0)))
    assert_violation(events, client, "owes it no onSubscribe")


def test_max_buffered_input_bounds_an_incomplete_message() -> None:
    # the other limits keep every message under max_buffered_input (the config checks it);
    # the decoder still refuses to hold more, should they ever allow it
    decoder = C.MessageDecoder(RSNetConfig())
    decoder.config.max_buffered_input = 10
    decoder.receive_data(bytes.fromhex("05 00 20") + b"x" * 10)
    with pytest.raises(ProtocolError, match="max_buffered_input"):
        decoder.next_message()


def test_the_config_keeps_max_buffered_input_above_the_largest_message() -> None:
    with pytest.raises(ValueError, match="max_buffered_input"):
        RSNetConfig(max_element_size=4096, max_buffered_input=4096)
    assert RSNetConfig(max_element_size=4096, max_packed_size=16, max_string_length=16,
                       max_buffered_input=4096 + 24).largest_message == 4096 + 24
