"""The Jini ERI mux's sniff function (rsocket_tx.jini.codec.sniff, for the one-port server):
golden first bytes from Jini ERI Multiplexing Protocol §ClientConnectionHeader Message."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.jini.codec import WEBSOCKET_SUBPROTOCOL, ClientConnectionHeader, sniff
from rsocket_tx.mux.sniff import Sniff

# "Jmux", version 1, initialRation 0x0080 (x 256 = 32768 bytes), reserved 0: River's header
HEADER = bytes.fromhex("4a6d7578 01 0080 00".replace(" ", ""))


def test_the_magic_decides():
    for n in range(4):
        assert sniff(HEADER[:n]) is Sniff.NEED_MORE, n
    for n in range(4, len(HEADER) + 1):
        assert sniff(HEADER[:n]) is Sniff.MATCH, n


def test_a_bad_version_is_still_jini_for_its_connection_to_answer():
    """§ClientConnectionHeader: a server answers an invalid header with Error, so the bytes
    are handed to the Jini connection, not refused by the sniffer."""
    assert sniff(b"Jmux\x02\x00\x80\x00") is Sniff.MATCH
    assert sniff(b"Jmux\x01\x00\x80\x07") is Sniff.MATCH


def test_other_bytes_are_not_jini():
    assert sniff(b"j") is Sniff.NO_MATCH
    assert sniff(b"Jm") is Sniff.NEED_MORE
    assert sniff(b"JmuX") is Sniff.NO_MATCH
    assert sniff(b"GET / HTTP/1.1\r\n") is Sniff.NO_MATCH
    assert sniff(b"\x00\x00\x28\x00") is Sniff.NO_MATCH


def test_our_own_client_header_is_recognised():
    assert sniff(ClientConnectionHeader.for_ration(32768).encode()) is Sniff.MATCH


def test_websocket_subprotocol_name():
    assert WEBSOCKET_SUBPROTOCOL == "jini-mux"


@given(st.binary(max_size=16))
def test_never_raises(data):
    assert isinstance(sniff(data), Sniff)
