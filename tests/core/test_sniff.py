"""RSocket 1.0's sniff function (rsocket_tx.core.sniff, for the one-port server): golden first
bytes written from the spec text (RSocket 1.0 Protocol §Framing Format, §SETUP Frame, §RESUME
Frame, §Connection Establishment), every prefix of them, and what rules a connection out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from sniff_support import assert_monotonic

from rsocket_tx.client import make_setup
from rsocket_tx.core.frames import encode
from rsocket_tx.core.framing import frame_with_length
from rsocket_tx.core.sniff import SNIFF_SIZE, WEBSOCKET_SUBPROTOCOL, sniff
from rsocket_tx.mux.sniff import Sniff

# SETUP, no flags, version 1.0, keepalive 30000 ms, max lifetime 90000 ms, MIME types
# "text/plain" twice, no payload: 6 + 4 + 4 + 4 + 1 + 10 + 1 + 10 = 40 bytes after the length
SETUP = bytes.fromhex(
    "000028"            # frame length 40
    "00000000"          # stream id 0
    "0400"              # SETUP (0x01 << 10), no flags
    "0001" "0000"       # major 1, minor 0
    "00007530"          # time between KEEPALIVE frames 30000 ms
    "00015f90"          # max lifetime 90000 ms
) + b"\x0atext/plain" + b"\x0atext/plain"

# SETUP with the M, R and L flags (0x100, 0x80, 0x40), a 2-byte resume token, two empty MIME
# types and empty metadata (a 3-byte length): 6 + 4 + 4 + 4 + 2 + 2 + 1 + 1 + 3 = 27 bytes
SETUP_FLAGS = bytes.fromhex(
    "00001b" "00000000" "05c0" "0001" "0000" "00007530" "00015f90" "0002" "abcd"
) + b"\x00" + b"\x00" + bytes.fromhex("000000")

# RESUME, version 1.0, token "tokn", last received server position 5, first available
# client position 0: 6 + 4 + 2 + 4 + 8 + 8 = 32 bytes after the length
RESUME = bytes.fromhex(
    "000020" "00000000" "3400" "0001" "0000" "0004"
) + b"tokn" + (5).to_bytes(8, "big") + (0).to_bytes(8, "big")


def test_setup_is_recognised_after_its_first_eleven_bytes():
    assert SNIFF_SIZE == 11
    for n in range(SNIFF_SIZE):
        assert sniff(SETUP[:n]) is Sniff.NEED_MORE, n
    for n in range(SNIFF_SIZE, len(SETUP) + 1):
        assert sniff(SETUP[:n]) is Sniff.MATCH, n


def test_setup_with_flags_and_resume_is_recognised():
    assert sniff(SETUP_FLAGS) is Sniff.MATCH


def test_resume_is_recognised():
    for n in range(SNIFF_SIZE):
        assert sniff(RESUME[:n]) is Sniff.NEED_MORE, n
    assert sniff(RESUME[:SNIFF_SIZE]) is Sniff.MATCH
    assert sniff(RESUME) is Sniff.MATCH


def test_our_own_setup_frame_is_recognised():
    """A cross-check of the golden vectors: the SETUP our client sends."""
    assert sniff(frame_with_length(encode(make_setup()))) is Sniff.MATCH


def test_a_non_zero_stream_id_rules_it_out_at_once():
    bad = SETUP[:6] + b"\x01" + SETUP[7:]
    assert sniff(bad[:6]) is Sniff.NEED_MORE
    assert sniff(bad[:7]) is Sniff.NO_MATCH
    assert sniff(SETUP[:3] + b"\x80") is Sniff.NO_MATCH


def test_other_first_frames_are_not_rsocket():
    # KEEPALIVE (0x03), REQUEST_RESPONSE (0x04), LEASE (0x02), RESUME_OK (0x0E), ERROR (0x0B)
    for type_byte in (0x0C, 0x10, 0x08, 0x38, 0x2C, 0x00, 0xFC):
        frame = SETUP[:7] + bytes([type_byte]) + SETUP[8:]
        assert sniff(frame[:8]) is Sniff.NO_MATCH, hex(type_byte)


def test_the_ignore_and_metadata_bits_do_not_matter():
    for low in range(4):
        assert sniff(SETUP[:7] + bytes([0x04 | low]) + SETUP[8:]) is Sniff.MATCH
        assert sniff(RESUME[:7] + bytes([0x34 | low]) + RESUME[8:]) is Sniff.MATCH


def test_another_major_version_is_not_this_protocol():
    assert sniff(SETUP[:9] + b"\x00\x02" + SETUP[11:]) is Sniff.NO_MATCH
    assert sniff(SETUP[:9] + b"\x00\x00" + SETUP[11:]) is Sniff.NO_MATCH
    assert sniff(SETUP[:9] + b"\x01") is Sniff.NO_MATCH  # decided at the first byte that differs
    assert sniff(SETUP[:9] + b"\x00\x01\x00\x07") is Sniff.MATCH  # any minor version


def test_a_frame_shorter_than_its_type_allows_is_not_rsocket():
    assert sniff(b"\x00\x00\x13" + SETUP[3:11]) is Sniff.NO_MATCH  # SETUP needs 20 bytes
    assert sniff(b"\x00\x00\x14" + SETUP[3:11]) is Sniff.MATCH
    assert sniff(b"\x00\x00\x1b" + RESUME[3:11]) is Sniff.NO_MATCH  # RESUME needs 28
    assert sniff(b"\x00\x00\x1c" + RESUME[3:11]) is Sniff.MATCH


def test_websocket_subprotocol_name():
    assert WEBSOCKET_SUBPROTOCOL == "rsocket"


@given(st.binary(max_size=64))
def test_never_raises_and_is_monotonic(data):
    """Any bytes give a verdict; once decided, more bytes never change it."""
    assert_monotonic(sniff, data)
