"""Golden byte vectors for the Jini ERI mux codec, written by hand from the seed text.

Seed ``004_*`` (River's ``mux.html``): §Message Structure (the table of first bytes),
§ClientConnectionHeader Message, §ServerConnectionHeader Message and each message's section.
Every vector is spelled out in binary or hex from the bit-pattern tables; nothing here is
computed with our own encoder. The observed River bytes come from ``MUX-PROTOCOLS.md``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.errors import JiniProtocolError, MessageDecodeError


def h(*fields: str) -> bytes:
    """Concatenate hex fields (whitespace allowed) into bytes."""
    return bytes.fromhex("".join(fields))


def b(bits: str) -> str:
    """One byte written as its 8-bit pattern, returned as 2 hex digits."""
    assert len(bits) == 8
    return f"{int(bits, 2):02x}"


# ---------------------------------------------------------------------------------------------
# §Message Structure: the table of first bytes
# ---------------------------------------------------------------------------------------------


def test_message_type_values() -> None:
    assert C.MessageType.NO_OPERATION == int("00000000", 2)
    assert C.MessageType.SHUTDOWN == int("00000010", 2)
    assert C.MessageType.PING == int("00000100", 2)
    assert C.MessageType.PING_ACK == int("00000110", 2)
    assert C.MessageType.ERROR == int("00001000", 2)
    assert C.MessageType.INCREMENT_RATION == int("00010000", 2)
    assert C.MessageType.ABORT == int("00100000", 2)
    assert C.MessageType.CLOSE == int("00110000", 2)
    assert C.MessageType.ACKNOWLEDGMENT == int("01000000", 2)
    assert C.MessageType.DATA == int("10000000", 2)


def _pattern_matches(byte: int, pattern: str) -> bool:
    bits = f"{byte:08b}"
    return all(p in ("x", c) for p, c in zip(pattern, bits))


# the seed's table, verbatim
SEED_TABLE = ["00000000", "00000010", "00000100", "00000110", "00001000", "0001xxx0",
              "001000x0", "00110000", "01000000", "100xxxx0"]


@pytest.mark.parametrize("first", range(256))
def test_every_first_byte_is_accepted_exactly_when_the_table_allows_it(first: int) -> None:
    """§Message Structure: "It is a protocol violation to send a message with a first byte that
    does not match one of the above bit patterns." Bytes 1-3 are chosen valid for each type
    (session 5 / reserved 0, length 0)."""
    allowed = any(_pattern_matches(first, p) for p in SEED_TABLE)
    if allowed and first & 0x80 and first & 0x0A and not first & 0x04:
        allowed = False  # Data: close/ackRequired only with eof (§Data Message)
    if first in (0x00, 0x02, 0x04, 0x06, 0x08):
        message = bytes([first, 0, 0, 0])
    else:
        message = bytes([first, 5, 0, 0])
    if allowed:
        C.decode(message)
    else:
        with pytest.raises(MessageDecodeError):
            C.decode(message)


# ---------------------------------------------------------------------------------------------
# §ClientConnectionHeader / §ServerConnectionHeader
# ---------------------------------------------------------------------------------------------

# magic "Jmux" = 01001010 01101101 01110101 01111000
MAGIC_HEX = b("01001010") + b("01101101") + b("01110101") + b("01111000")


def test_magic_is_ascii_jmux() -> None:
    assert h(MAGIC_HEX) == b"Jmux" == C.MAGIC


@pytest.mark.parametrize("kind", [C.ClientConnectionHeader, C.ServerConnectionHeader])
def test_connection_header_river_default(kind: type[C.ConnectionHeader]) -> None:
    # River's 32,768-byte ration: initialRation = 32768 / 256 = 128 = 0x0080
    wire = h(MAGIC_HEX, b("00000001"), "0080", b("00000000"))
    assert wire == h("4a6d7578 01 0080 00")  # observed from River (MUX-PROTOCOLS.md)
    header = kind.for_ration(32768)
    assert header.initial_ration == 0x80 and header.ration == 32768
    assert header.encode() == wire
    decoded = C.decode_connection_header(wire, kind)
    assert type(decoded) is kind and decoded.ration == 32768


def test_connection_header_zero_ration_is_unlimited() -> None:
    # "(initialRation * 256) if initialRation is non-zero, or infinity if initialRation is zero"
    wire = h(MAGIC_HEX, "01", "0000", "00")
    header = C.decode_connection_header(wire, C.ClientConnectionHeader)
    assert header.initial_ration == 0 and header.ration is None
    assert C.ClientConnectionHeader.for_ration(None).encode() == wire
    assert C.ClientConnectionHeader.for_ration(0).encode() == wire


def test_connection_header_ration_extremes() -> None:
    assert C.ServerConnectionHeader.for_ration(256).encode() == h(MAGIC_HEX, "01", "0001", "00")
    assert C.ServerConnectionHeader.for_ration(0xFFFF * 256).encode() == h(
        MAGIC_HEX, "01", "ffff", "00")
    assert C.decode_connection_header(h(MAGIC_HEX, "01", "ffff", "00"),
                                      C.ServerConnectionHeader).ration == 16_776_960
    for bad in (255, 257, 0xFFFF * 256 + 256, -256):
        with pytest.raises(ValueError):
            C.ServerConnectionHeader.for_ration(bad)


@pytest.mark.parametrize("wire, why", [
    (h("4a6d7579 01 0080 00"), "magic"),
    (h("4a6d7578 00 0080 00"), "version"),
    (h("4a6d7578 02 0080 00"), "version"),
    (h("4a6d7578 01 0080 01"), "reserved"),
    (h("4a6d7578 01 0080"), "8 bytes"),
])
def test_bad_connection_header(wire: bytes, why: str) -> None:
    with pytest.raises(MessageDecodeError, match=why):
        C.decode_connection_header(wire, C.ClientConnectionHeader)


def test_decoder_rejects_bad_magic_at_the_first_wrong_byte() -> None:
    decoder = C.MessageDecoder(C.ClientConnectionHeader)
    decoder.receive_data(b"Jm")
    assert decoder.next_message() is None
    decoder.receive_data(b"x")  # 'x' where 'u' belongs
    with pytest.raises(MessageDecodeError, match="magic"):
        decoder.next_message()
    with pytest.raises(MessageDecodeError):  # and stays failed
        decoder.next_message()


def test_http_request_is_not_a_connection_header() -> None:
    decoder = C.MessageDecoder(C.ClientConnectionHeader)
    with pytest.raises(MessageDecodeError, match="magic"):
        decoder.feed(b"GET / HTTP/1.1\r\n")


# ---------------------------------------------------------------------------------------------
# connection messages
# ---------------------------------------------------------------------------------------------


def test_no_operation() -> None:
    # 00000000, reserved 00000000, length, data
    assert C.NoOperation().encode() == h(b("00000000"), "00", "0000")
    assert C.NoOperation(b"abc").encode() == h("00 00 0003 616263")
    assert C.decode(h("00 00 0003 616263")) == C.NoOperation(b"abc")


def test_shutdown() -> None:
    # 00000010, reserved, length, detail (UTF-8)
    assert C.Shutdown().encode() == h(b("00000010"), "00", "0000")
    assert C.Shutdown(b"bye").encode() == h("02 00 0003 627965")
    assert C.decode(h("02 00 0003 627965")) == C.Shutdown(b"bye")


def test_ping_and_ping_ack() -> None:
    # 00000100 / 00000110, reserved, 16-bit cookie
    assert C.Ping(0xBEEF).encode() == h(b("00000100"), "00", "beef")
    assert C.PingAck(0xBEEF).encode() == h(b("00000110"), "00", "beef")
    assert C.decode(h("04 00 0001")) == C.Ping(1)
    assert C.decode(h("06 00 ffff")) == C.PingAck(0xFFFF)


def test_error() -> None:
    # 00001000, reserved, length, detail; UTF-8 text
    detail = "é!".encode()  # c3 a9 21
    assert C.Error(detail).encode() == h(b("00001000"), "00", "0003", "c3a921")
    assert C.decode(h("08 00 0003 c3a921")) == C.Error(detail)


@pytest.mark.parametrize("first", [0x00, 0x02, 0x04, 0x06, 0x08])
def test_connection_messages_reserved_byte_must_be_zero(first: int) -> None:
    with pytest.raises(MessageDecodeError, match="reserved byte 1"):
        C.decode(bytes([first, 0x01, 0, 0]))


# ---------------------------------------------------------------------------------------------
# session messages
# ---------------------------------------------------------------------------------------------


def test_increment_ration_shift_zero() -> None:
    # 0001 sss 0 | 0 sessionID | increment ; River tops up +16,384 with shift 0
    wire = h(b("00010000"), b("00000011"), "4000")
    assert C.IncrementRation(3, 0x4000).encode() == wire
    message = C.decode(wire)
    assert message == C.IncrementRation(3, 0x4000, 0) and message.amount == 16384


def test_increment_ration_shift_field() -> None:
    # shift 5 in bits ----xxx- : 0001 101 0 = 0x1a; value increment << (5 * 2)
    wire = h(b("00011010"), b("01111111"), "0003")
    message = C.decode(wire)
    assert message == C.IncrementRation(127, 3, 5)
    assert message.amount == 3 << 10
    assert C.IncrementRation(127, 3, 5).encode() == wire
    # shift 7: 0001 111 0 = 0x1e, the largest amount 0xffff << 14
    assert C.decode(h("1e 00 ffff")).amount == 0xFFFF << 14


def test_split_increment() -> None:
    assert C.split_increment(16384) == [(0, 16384)]
    assert C.split_increment(0xFFFF) == [(0, 0xFFFF)]
    for amount in (0x10000, 0x12345, 0x7FFFFFFF, 1 << 30, 65536 * 7 + 5):
        parts = C.split_increment(amount)
        assert sum(i << (2 * s) for s, i in parts) == amount
        assert all(0 <= s <= 7 and 1 <= i <= 0xFFFF for s, i in parts)
    with pytest.raises(ValueError):
        C.split_increment(0)
    with pytest.raises(ValueError):
        C.split_increment(0x80000000)


def test_abort() -> None:
    # 001000 p 0 | 0 sessionID | length | detail
    assert C.Abort(9).encode() == h(b("00100000"), "09", "0000")
    assert C.Abort(9, partial=True).encode() == h(b("00100010"), "09", "0000")
    assert C.Abort(9, partial=True, detail=b"no").encode() == h("22 09 0002 6e6f")
    assert C.decode(h("22 09 0002 6e6f")) == C.Abort(9, True, b"no")
    assert C.decode(h("20 7f 0000")) == C.Abort(127, False)


def test_close() -> None:
    # 00110000 | 0 sessionID | 00000000 00000000
    assert C.Close(1).encode() == h(b("00110000"), "01", "0000")
    assert C.decode(h("30 7f 0000")) == C.Close(127)
    with pytest.raises(MessageDecodeError, match="reserved bytes 2-3"):
        C.decode(h("30 01 0001"))
    with pytest.raises(MessageDecodeError, match="reserved bytes 2-3"):
        C.decode(h("30 01 8000"))


def test_acknowledgment() -> None:
    # 01000000 | 0 sessionID | 00000000 00000000
    assert C.Acknowledgment(2).encode() == h(b("01000000"), "02", "0000")
    assert C.decode(h("40 02 0000")) == C.Acknowledgment(2)
    with pytest.raises(MessageDecodeError, match="reserved bytes 2-3"):
        C.decode(h("40 02 0100"))


@pytest.mark.parametrize("flags, first", [
    (dict(), "10000000"),
    (dict(open=True), "10010000"),
    (dict(eof=True), "10000100"),
    (dict(open=True, eof=True), "10010100"),
    (dict(eof=True, close=True), "10001100"),
    (dict(eof=True, ack_required=True), "10000110"),
    (dict(eof=True, close=True, ack_required=True), "10001110"),
])
def test_data_flags(flags: dict[str, bool], first: str) -> None:
    # 100 o c e a 0 : open ---x----, close ----x---, eof -----x--, ackRequired ------x-
    wire = h(b(first), "05", "0002", "6869")
    assert C.Data(5, b"hi", **flags).encode() == wire
    assert C.decode(wire) == C.Data(5, b"hi", **flags)


def test_data_river_15_byte_echo() -> None:
    # MUX-PROTOCOLS.md: C->S 94 00 000f <15 bytes> (open+eof), S->C 8c 00 000f (eof+close)
    body = b"0123456789abcde"
    assert C.Data(0, body, open=True, eof=True).encode() == h("94 00 000f") + body
    assert C.Data(0, body, eof=True, close=True).encode() == h("8c 00 000f") + body
    stream = h("4a6d7578 01 0080 00", "94 00 000f") + body
    decoder = C.MessageDecoder(C.ClientConnectionHeader)
    assert decoder.feed(stream) == [C.ClientConnectionHeader(0x80),
                                    C.Data(0, body, open=True, eof=True)]


@pytest.mark.parametrize("first", ["10001000", "10000010", "10001010", "10011010"])
def test_data_close_or_ack_required_without_eof_is_rejected(first: str) -> None:
    with pytest.raises(MessageDecodeError, match="without eof"):
        C.decode(h(b(first), "00", "0000"))
    with pytest.raises(ValueError):
        C.Data(0, close=True).encode()
    with pytest.raises(ValueError):
        C.Data(0, ack_required=True).encode()


@pytest.mark.parametrize("first", [0x10, 0x20, 0x22, 0x30, 0x40, 0x80, 0x94])
def test_session_byte_reserved_top_bit(first: int) -> None:
    # "a session identifier is stored in a single byte with the most significant bit set to
    # zero (and reserved for future use)": 0x80 here is JGDMS's 256-session extension
    with pytest.raises(MessageDecodeError, match="reserved top bit"):
        C.decode(bytes([first, 0x80, 0, 0]))
    with pytest.raises(MessageDecodeError, match="reserved top bit"):
        C.decode(bytes([first, 0xFF, 0, 0]))


def test_decode_errors_are_protocol_errors() -> None:
    assert issubclass(MessageDecodeError, JiniProtocolError)


def test_encoder_rejects_out_of_range_fields() -> None:
    with pytest.raises(ValueError):
        C.Data(128).encode()
    with pytest.raises(ValueError):
        C.Data(0, bytes(0x10000)).encode()
    with pytest.raises(ValueError):
        C.Ping(0x10000).encode()
    with pytest.raises(ValueError):
        C.IncrementRation(0, 1, 8).encode()
    with pytest.raises(ValueError):
        C.IncrementRation(0, 0x10000).encode()
    assert len(C.Data(0, bytes(0xFFFF)).encode()) == 4 + 0xFFFF


def test_decode_length_mismatch() -> None:
    with pytest.raises(MessageDecodeError):
        C.decode(h("80 00 0002 68"))
    with pytest.raises(MessageDecodeError):
        C.decode(h("04 00"))
    with pytest.raises(MessageDecodeError):
        C.decode(h("04 00 0001 00"))  # Ping has no body


# ---------------------------------------------------------------------------------------------
# the incremental decoder
# ---------------------------------------------------------------------------------------------


def test_decoder_keeps_messages_before_a_bad_one() -> None:
    decoder = C.MessageDecoder(None)
    decoder.receive_data(h("04 00 0001", "06 00 0002", "01 00 0000"))
    assert decoder.next_message() == C.Ping(1)
    assert decoder.next_message() == C.PingAck(2)
    with pytest.raises(MessageDecodeError, match="0x01"):
        decoder.next_message()


def test_decoder_byte_by_byte() -> None:
    stream = h("4a6d7578 01 0000 00", "80 03 0003 414243", "10 03 0100", "30 03 0000")
    decoder = C.MessageDecoder(C.ServerConnectionHeader)
    out = []
    for i in range(len(stream)):
        out += decoder.feed(stream[i:i + 1])
    assert out == [C.ServerConnectionHeader(0), C.Data(3, b"ABC"), C.IncrementRation(3, 0x100),
                   C.Close(3)]
    assert decoder.buffered == 0


# ---------------------------------------------------------------------------------------------
# hypothesis round trips
# ---------------------------------------------------------------------------------------------

sids = st.integers(0, 127)
u16 = st.integers(0, 0xFFFF)
body = st.binary(max_size=300)


@st.composite
def data_messages(draw: st.DrawFn) -> C.Data:
    eof = draw(st.booleans())
    return C.Data(draw(sids), draw(body), open=draw(st.booleans()),
                  close=eof and draw(st.booleans()), eof=eof,
                  ack_required=eof and draw(st.booleans()))


messages = st.one_of(
    st.builds(C.NoOperation, body), st.builds(C.Shutdown, body), st.builds(C.Ping, u16),
    st.builds(C.PingAck, u16), st.builds(C.Error, body),
    st.builds(C.IncrementRation, sids, u16, st.integers(0, 7)),
    st.builds(C.Abort, sids, st.booleans(), body), st.builds(C.Close, sids),
    st.builds(C.Acknowledgment, sids), data_messages())


@given(messages)
def test_round_trip(message: C.Message) -> None:
    assert C.decode(C.encode(message)) == message


@given(st.lists(messages, max_size=20), st.integers(1, 50), st.integers(0, 0xFFFF))
def test_stream_round_trip_cut_anywhere(msgs: list[C.Message], cut: int, ration: int) -> None:
    stream = C.ClientConnectionHeader(ration).encode() + b"".join(m.encode() for m in msgs)
    decoder = C.MessageDecoder(C.ClientConnectionHeader)
    out: list[object] = []
    for i in range(0, len(stream), cut):
        out += decoder.feed(stream[i:i + cut])
    assert out == [C.ClientConnectionHeader(ration), *msgs]


@given(st.binary(min_size=4, max_size=64))
def test_decoder_is_total(data: bytes) -> None:
    """Any bytes give messages or a MessageDecodeError, never another exception."""
    decoder = C.MessageDecoder(None)
    try:
        decoder.feed(data)
    except MessageDecodeError:
        pass
