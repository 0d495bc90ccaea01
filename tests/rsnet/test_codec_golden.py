"""Golden vectors of the Reactive Streams network wire format, written by hand from the table in
``docs/rsnet.rst`` (type byte, fields in the draft's order, unsigned LEB128 varints, String and
Bytes as varint length + bytes, Array[Id] as varint count + Ids). Not copied from our output:
each hex string below was worked out from the table."""

from __future__ import annotations

import pytest

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.errors import ProtocolError


def h(text: str) -> bytes:
    return bytes.fromhex(text)


FIXED = {1: 4}  # subscriber 1 has elementSize 4 in these vectors


def size_of(sid: int) -> int:
    return FIXED.get(sid, 0)


# (message, elementSize to encode with, hex)
VECTORS = [
    (C.ClientHello(0, ()), 0, "f1 52534e 00 00"),
    # extension 300 = 0b10_0101100: low seven bits 0x2c | 0x80, then 0x02
    (C.ServerHello(0, (1, 300)), 0, "f2 52534e 00 02 01 ac02"),
    (C.ClientHello(1, (0,)), 0, "f1 52534e 01 01 00"),
    (C.Subscribe("ticks", 1, 10), 0, "01 05 7469636b73 01 0a"),
    # "é" is c3 a9 in UTF-8; 2^63-1 is eight ff and a 7f
    (C.Subscribe("\u00e9", 0, 2**63 - 1), 0, "01 02 c3a9 00 ffffffffffffffff7f"),
    (C.Subscribe("", 127, 0), 0, "01 00 7f 00"),
    (C.Request(1, 128), 0, "02 01 8001"),
    (C.Request(2**32 - 1, 1), 0, "02 ffffffff0f 01"),
    (C.Request(3, 16384), 0, "02 03 808001"),
    (C.Cancel(0), 0, "03 00"),
    (C.Cancel(2**32 - 1), 0, "03 ffffffff0f"),
    (C.OnSubscribe(1, 4), 0, "04 01 04"),
    (C.OnSubscribe(2, 0), 0, "04 02 00"),
    (C.OnNext(2, b"hi"), 0, "05 02 02 6869"),
    (C.OnNext(2, b""), 0, "05 02 00"),
    # fixed elementSize 4: no length
    (C.OnNext(1, h("0000002a")), 4, "05 01 0000002a"),
    (C.OnNextPacked(1, 3, h("00000001 00000002 00000003")), 4,
     "06 01 03 00000001 00000002 00000003"),
    (C.OnNextPart(2, 7, b"ab"), 0, "07 02 07 02 6162"),
    (C.OnNextLastPart(2, 7, b"c"), 0, "08 02 07 01 63"),
    (C.OnNextPart(2, 2**32 - 1, b""), 0, "07 02 ffffffff0f 00"),
    (C.OnComplete(5), 0, "09 05"),
    (C.OnError(5, "boom"), 0, "0a 05 04 626f6f6d"),
    (C.Goodbye(""), 0, "0b 00"),
    (C.Goodbye("bye"), 0, "0b 03 627965"),
    (C.GoodbyeAck(), 0, "0c"),
]


@pytest.mark.parametrize("message,size,hexa", VECTORS, ids=lambda v: repr(v)[:40])
def test_encode_golden(message: C.Message, size: int, hexa: str) -> None:
    assert C.encode(message, size) == h(hexa)


@pytest.mark.parametrize("message,size,hexa", VECTORS, ids=lambda v: repr(v)[:40])
def test_decode_golden(message: C.Message, size: int, hexa: str) -> None:
    messages, rest = C.decode(h(hexa), element_size=lambda sid: size)
    assert messages == [message] and rest == b""


@pytest.mark.parametrize("message,size,hexa", VECTORS, ids=lambda v: repr(v)[:40])
def test_every_proper_prefix_needs_more(message: C.Message, size: int, hexa: str) -> None:
    data = h(hexa)
    for n in range(len(data)):
        assert C.decode(data[:n], element_size=lambda sid: size) == ([], data[:n])


def test_a_200_byte_element_has_a_two_byte_length() -> None:
    # 200 = 0b1_1001000: 0xc8, 0x01
    element = bytes(range(200))
    assert C.encode(C.OnNext(3, element)) == h("05 03 c801") + element


def test_message_types_are_single_bytes_of_the_table() -> None:
    assert {t.name: t.value for t in C.MessageType} == {
        "SUBSCRIBE": 0x01, "REQUEST": 0x02, "CANCEL": 0x03, "ON_SUBSCRIBE": 0x04,
        "ON_NEXT": 0x05, "ON_NEXT_PACKED": 0x06, "ON_NEXT_PART": 0x07,
        "ON_NEXT_LAST_PART": 0x08, "ON_COMPLETE": 0x09, "ON_ERROR": 0x0A, "GOODBYE": 0x0B,
        "GOODBYE_ACK": 0x0C, "CLIENT_HELLO": 0xF1, "SERVER_HELLO": 0xF2}


def test_a_stream_of_messages_in_one_buffer() -> None:
    data = h("f2 52534e 00 00" "04 01 04" "05 01 0000002a" "05 02 02 6869" "09 01" "0c")
    messages, rest = C.decode(data, element_size=size_of)
    assert messages == [C.ServerHello(), C.OnSubscribe(1, 4), C.OnNext(1, h("0000002a")),
                        C.OnNext(2, b"hi"), C.OnComplete(1), C.GoodbyeAck()]
    assert rest == b""


def test_decoder_cut_anywhere() -> None:
    data = h("01 05 7469636b73 01 0a" "02 01 8001" "0a 05 04 626f6f6d")
    for cut in range(len(data) + 1):
        decoder = C.MessageDecoder()
        got = []
        for piece in (data[:cut], data[cut:]):
            decoder.receive_data(piece)
            while (m := decoder.next_message()) is not None:
                got.append(m)
        assert got == [C.Subscribe("ticks", 1, 10), C.Request(1, 128), C.OnError(5, "boom")]
        assert decoder.buffered == 0


# --- malformed input: each a ProtocolError naming what is wrong -------------------------------

BAD = [
    ("00", "unknown message type 0x00"),
    ("0d", "unknown message type 0x0D"),
    ("7f", "unknown message type 0x7F"),
    ("f0 52534e 00 00", "unknown message type 0xF0"),
    ("f3", "unknown message type 0xF3"),
    ("ff", "unknown message type 0xFF"),
    # cancel(0) written in two bytes: not the shortest form
    ("03 8000", "overlong"),
    ("02 01 ff00", "overlong"),
    # an Id of 2^32 (five bytes, top bits 0x10)
    ("03 8080808010", "over its limit of 4294967295"),
    ("03 ffffffff1f", "over its limit"),
    # six bytes for an Id: longer than 5 bytes, refused before the sixth arrives
    ("03 8080808080", "longer than 5 bytes"),
    # a Long of 2^63 needs 10 bytes: refused at the ninth continuation byte
    ("02 01 808080808080808080", "longer than 9 bytes"),
    ("0b 01 ff", "not valid UTF-8"),
    ("0a 01 02 c328", "not valid UTF-8"),
    ("f1 52534e", None),  # truncated, not an error: see below
    ("f1 525358 00 00", "without the mark"),
    ("f2 000000 00 00", "without the mark"),
    ("06 01 01 00", "elementSize is 0"),
]


@pytest.mark.parametrize("hexa,match", [b for b in BAD if b[1]], ids=lambda v: str(v))
def test_malformed_is_a_protocol_error(hexa: str, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        C.decode(h(hexa))


def test_packed_count_zero_is_an_error() -> None:
    with pytest.raises(ProtocolError, match="count 0"):
        C.decode(h("06 01 00"), element_size=size_of)


def test_lengths_over_the_limits() -> None:
    config = RSNetConfig(max_string_length=3, max_element_size=4, max_packed_size=8,
                         max_extensions=1)
    with pytest.raises(ProtocolError, match="max_string_length"):
        C.decode(h("0b 04"), config)  # a 4-byte reason: refused once its length is read
    C.decode(h("0b 03 616263"), config)
    with pytest.raises(ProtocolError, match="max_element_size"):
        C.decode(h("05 02 05"), config)
    with pytest.raises(ProtocolError, match="max_element_size"):
        C.decode(h("07 02 00 05"), config)
    with pytest.raises(ProtocolError, match="max_element_size"):
        C.decode(h("04 02 05"), config)  # elementSize 5
    with pytest.raises(ProtocolError, match="max_packed_size"):
        C.decode(h("06 01 03"), config, size_of)  # 3 * 4 = 12 bytes
    with pytest.raises(ProtocolError, match="max_extensions"):
        C.decode(h("f1 52534e 00 02"), config)


def test_a_message_after_an_error_is_not_reached() -> None:
    with pytest.raises(ProtocolError):
        C.decode(h("09 01 00 09 02"))


def test_encoder_refuses_out_of_range_fields() -> None:
    with pytest.raises(ValueError):
        C.encode(C.Cancel(2**32))
    with pytest.raises(ValueError):
        C.encode(C.Request(1, 2**63))
    with pytest.raises(ValueError):
        C.encode(C.Request(1, -1))
    with pytest.raises(ValueError):
        C.encode(C.OnNext(1, b"abc"), 4)
    with pytest.raises(ValueError):
        C.encode(C.OnNextPacked(1, 2, b"abc"), 4)


def test_encode_varint_limits() -> None:
    assert C.encode_varint(0) == h("00")
    assert C.encode_varint(127) == h("7f")
    assert C.encode_varint(2**63 - 1) == h("ffffffffffffffff7f")
    assert C.encode_varint(2**32 - 1, C.MAX_ID) == h("ffffffff0f")
