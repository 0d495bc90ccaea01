"""``rsocket_tx.rsnet.codec.sniff``: a clientHello is told apart from the first bytes of every
other protocol of the one-port server, from the clientHello alone (``docs/rsnet.rst``
§Telling it apart on a shared port). The other protocols' first bytes are written by hand from
their specifications."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.mux import Sniff
from rsocket_tx.rsnet import codec as C


def h(text: str) -> bytes:
    return bytes.fromhex(text)


OURS = [
    C.encode(C.ClientHello()),
    C.encode(C.ClientHello(0, (1, 2, 3))),
    C.encode(C.ClientHello(7, ())),  # another version is still this protocol
]

OTHERS = {
    # RSocket 1.0 over TCP: 24-bit length, stream id 0, type<<10|flags, major 1, minor 0
    "rsocket-setup": h("00002a 00000000 0400 0001 0000"),
    "rsocket-setup-metadata-lease": h("000040 00000000 0540 0001 0000"),
    "rsocket-resume": h("00001c 00000000 3400 0001 0000"),
    # a 64 KiB SETUP: the first byte is no longer 0
    "rsocket-setup-64k": h("010000 00000000 0400 0001 0000"),
    # a SETUP of 0xF15253 bytes (15.8 MiB, legal): its first three bytes are those of our
    # clientHello; the stream id 0 at byte 3 tells it apart
    "rsocket-setup-same-length-bytes": h("f15253 00000000 0400 0001 0000"),
    # the 2015 ReactiveSocket draft: 31-bit length with the header, version 0, flags, SETUP
    # 0x0001, 64-bit stream id 0
    "reactivesocket-2015-setup": h("00000018 00 00 0001 0000000000000000"),
    "reactivesocket-2015-setup-16m": h("7fffffff 00 40 0001 0000000000000000"),
    # the Jini ERI mux client connection header: "Jmux", version 1, ration 0x0080, 0
    "jini-jmux": h("4a6d7578 01 0080 00"),
    # TLS records: handshake (0x16), versions 3.0 to 3.4, length, ClientHello (1)
    "tls-1.0": h("16 0301 0200 01 0001fc 0303"),
    "tls-1.2": h("16 0303 00c8 01 0000c4 0303"),
    "tls-1.3-record-version": h("16 0301 00f4 01 0000f0 0303"),
    # an SSL 2.0-compatible ClientHello: top bit of the first byte set, then type 1
    "sslv2-compatible-hello": h("802e 01 0301 0015 0000 0010"),
    "http-get": b"GET /rsnet HTTP/1.1\r\nHost: x\r\n",
    "http2-preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
}


@pytest.mark.parametrize("hello", OURS, ids=["v0", "v0-ext", "v7"])
def test_every_client_hello_matches_within_its_own_bytes(hello: bytes) -> None:
    assert hello.startswith(h("f1 52534e"))
    assert C.sniff(hello) is Sniff.MATCH
    assert C.sniff(hello[:C.SNIFF_SIZE]) is Sniff.MATCH
    for n in range(C.SNIFF_SIZE):
        assert C.sniff(hello[:n]) is Sniff.NEED_MORE
    # what follows the hello does not matter
    assert C.sniff(hello + C.encode(C.Subscribe("x", 0, 1))) is Sniff.MATCH


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_no_other_protocol_matches_at_any_length(name: str) -> None:
    data = OTHERS[name]
    verdicts = [C.sniff(data[:n]) for n in range(1, len(data) + 1)]
    assert Sniff.MATCH not in verdicts
    assert verdicts[-1] is Sniff.NO_MATCH
    # decided within the first four bytes
    assert C.sniff(data[:C.SNIFF_SIZE]) is Sniff.NO_MATCH


def test_the_rsocket_sniffer_does_not_claim_a_client_hello() -> None:
    from rsocket_tx.core.sniff import sniff as rsocket_sniff
    for hello in OURS:
        assert rsocket_sniff(hello) is Sniff.NO_MATCH


def test_the_empty_prefix_needs_more() -> None:
    assert C.sniff(b"") is Sniff.NEED_MORE


def test_a_server_hello_is_not_a_connection_start() -> None:
    assert C.sniff(C.encode(C.ServerHello())) is Sniff.NO_MATCH


@given(st.binary(max_size=16))
def test_sniff_is_total_and_agrees_with_the_prefix(data: bytes) -> None:
    verdict = C.sniff(data)
    if data[:4] == h("f1 52534e"):
        assert verdict is Sniff.MATCH
    elif h("f1 52534e").startswith(data):
        assert verdict is Sniff.NEED_MORE
    else:
        assert verdict is Sniff.NO_MATCH
