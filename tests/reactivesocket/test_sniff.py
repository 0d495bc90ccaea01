"""The 2015 draft's sniff function (the one-port server): a 2015 SETUP is recognised from its
first 16 bytes and told apart, byte by byte, from RSocket 1.0 SETUP/RESUME, the Jini "Jmux"
header, a TLS ClientHello and an HTTP request. Prefixes written by hand from the specs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from sniff_support import assert_monotonic

from rsocket_tx.mux.sniff import Sniff
from rsocket_tx.reactivesocket import sniff
from rsocket_tx.reactivesocket.frames import SNIFF_SIZE, SetupFrame, encode, frame_with_length

# a 2015 SETUP: length 40 (whole frame), version 0, L flag, SETUP, stream 0, two MIME types
# "text/plain", data "hi" (draft §Setup Frame)
SETUP_2015 = bytes.fromhex("00000028" "00" "20" "0001" "0000000000000000") + \
    b"\x0atext/plain" + b"\x0atext/plain" + b"hi"

# RSocket 1.0 SETUP (Protocol §Framing Format, §SETUP Frame): 24-bit length 40, stream id 0,
# type SETUP 0x01 << 10, version 1.0, keepalive 30000, lifetime 90000, MIME types
RSOCKET_SETUP = bytes.fromhex("000028" "00000000" "0400" "0001" "0000" "00007530"
                              "00015f90") + b"\x0atext/plain" + b"\x0atext/plain"
# ... with the M and L flags (0x100 | 0x40)
RSOCKET_SETUP_FLAGS = bytes.fromhex("000028" "00000000" "0540" "0001" "0000" "00007530"
                                    "00015f90") + b"\x0atext/plain" + b"\x0atext/plain"
# RSocket 1.0 RESUME: type 0x0D << 10 = 0x3400, version 1.0, token "tokn", positions
RSOCKET_RESUME = bytes.fromhex("000020" "00000000" "3400" "0001" "0000" "0004") + b"tokn" + \
    bytes(16)
# the Jini ERI mux client header: "Jmux", version 1, ration 0x0080, flags 0
JMUX = bytes.fromhex("4a6d7578" "01" "0080" "00")
# TLS 1.2/1.3 ClientHello record headers: handshake (0x16), version 03 01 / 03 03, length,
# ClientHello (0x01), 24-bit handshake length, client version 03 03
TLS = [bytes.fromhex("16030100c4" "010000c0" "0303") + bytes(32),
       bytes.fromhex("1603030200" "010001fc" "0303") + bytes(32),
       bytes.fromhex("1603020000" "01000100" "0303") + bytes(32)]
HTTP = b"GET /rs2015 HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\r\n"


def test_a_2015_setup_matches_after_16_bytes():
    assert SNIFF_SIZE == 16
    for n in range(16):
        assert sniff(SETUP_2015[:n]) is Sniff.NEED_MORE, n
    for n in range(16, len(SETUP_2015) + 1):
        assert sniff(SETUP_2015[:n]) is Sniff.MATCH, n


def test_our_own_setup_matches():
    assert sniff(frame_with_length(encode(SetupFrame(
        metadata_mime_type=b"", data_mime_type=b"")))) is Sniff.MATCH
    assert sniff(frame_with_length(encode(SetupFrame(
        metadata_mime_type=b"a", data_mime_type=b"b", metadata=b"m", data=b"d")))) is Sniff.MATCH


def first_verdict(data: bytes) -> tuple[int, Sniff]:
    """The first prefix length at which the verdict is not NEED_MORE, and the verdict."""
    for n in range(len(data) + 1):
        verdict = sniff(data[:n])
        if verdict is not Sniff.NEED_MORE:
            return n, verdict
    return len(data), Sniff.NEED_MORE


def test_rsocket_1_0_is_ruled_out_at_byte_7_at_the_latest():
    # bytes 0-6 of a 1.0 SETUP/RESUME are plausible here (a 31-bit length, version 0, flags
    # 0, type high byte 0); byte 7 is 0x04-0x07 / 0x34-0x37, where a 2015 SETUP has 0x01
    for frame in (RSOCKET_SETUP, RSOCKET_SETUP_FLAGS, RSOCKET_RESUME):
        n, verdict = first_verdict(frame)
        assert verdict is Sniff.NO_MATCH and n <= 8, (frame[:8].hex(), n)


def test_jmux_is_ruled_out_at_the_version_byte():
    assert first_verdict(JMUX) == (5, Sniff.NO_MATCH)


def test_tls_client_hellos_are_ruled_out():
    for record in TLS:
        n, verdict = first_verdict(record)
        assert verdict is Sniff.NO_MATCH and n <= 16, record[:16].hex()


def test_http_is_ruled_out():
    assert first_verdict(HTTP) == (5, Sniff.NO_MATCH)  # "GET /": "/" is no version 0


def test_each_field_rules_out():
    def with_byte(i: int, value: int) -> bytes:
        return SETUP_2015[:i] + bytes([value]) + SETUP_2015[i + 1:]

    assert sniff(with_byte(0, 0x80)[:1]) is Sniff.NO_MATCH  # R bit
    assert sniff(bytes.fromhex("00000011")) is Sniff.NO_MATCH  # length 17 < 18
    assert sniff(bytes.fromhex("00000012")) is Sniff.NEED_MORE  # 18: the smallest SETUP
    assert sniff(with_byte(4, 1)[:5]) is Sniff.NO_MATCH  # version 1
    assert sniff(with_byte(5, 0xA0)[:6]) is Sniff.NO_MATCH  # I flag
    assert sniff(with_byte(5, 0x7F)) is Sniff.MATCH  # M, L and undefined flags: fine
    assert sniff(with_byte(6, 1)[:7]) is Sniff.NO_MATCH  # type 0x01xx
    assert sniff(with_byte(7, 0x11)[:8]) is Sniff.NO_MATCH  # REQUEST_RESPONSE first
    for i in range(8, 16):
        assert sniff(with_byte(i, 1)[:i + 1]) is Sniff.NO_MATCH, i  # stream id not 0


@given(st.binary(max_size=40))
def test_never_raises_and_is_monotonic(data):
    verdicts = assert_monotonic(sniff, data)
    if len(data) >= 16:
        assert verdicts[-1] is not Sniff.NEED_MORE
