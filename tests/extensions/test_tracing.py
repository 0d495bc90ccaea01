"""Zipkin tracing golden vectors (``Extensions/Tracing-Zipkin.md`` §Metadata Contents).

Flags byte, bit 0 first: I D S N T P - -, so I = 0x80, D = 0x40, S = 0x20, N = 0x10, T = 0x08,
P = 0x04 (the same values as rsocket-java's ``TracingMetadataCodec``).  Then, when I is set, the
trace id (8 bytes, 16 with T), the span id (8) and, with P, the parent span id (8), big-endian.
"""

from __future__ import annotations

import pytest

from rsocket_tx.extensions import (
    MetadataDecodeError,
    ZipkinTrace,
    decode_tracing,
    encode_tracing,
)

from .helpers import h

GOLDEN = [
    # flags only, N: a health check that must not be sampled
    pytest.param(ZipkinTrace(sampled=False), h("10"), id="not-sampled-no-ids"),
    pytest.param(ZipkinTrace(), h("00"), id="no-decision-no-ids"),
    pytest.param(ZipkinTrace(debug=True), h("40"), id="debug-no-ids"),
    pytest.param(
        ZipkinTrace(trace_id=1, span_id=2),
        # I = 0x80 | trace id 1 (8 bytes) | span id 2 (8 bytes)
        h("80", "0000000000000001", "0000000000000002"),
        id="ids-64-bit",
    ),
    pytest.param(
        ZipkinTrace(trace_id=0x0102030405060708, span_id=0xA, parent_span_id=0xB, sampled=True),
        # I|S|P = 0x80 + 0x20 + 0x04 = 0xA4 | trace | span | parent
        h("a4", "0102030405060708", "000000000000000a", "000000000000000b"),
        id="sampled-with-parent",
    ),
    pytest.param(
        ZipkinTrace(trace_id=(1 << 127) | 5, span_id=(1 << 64) - 1, trace_id_128=True),
        # I|T = 0x88 | 128-bit trace id 0x8000...0005 | span id all ones
        h("88", "80000000000000000000000000000005", "ffffffffffffffff"),
        id="128-bit-trace-id",
    ),
    pytest.param(
        ZipkinTrace(trace_id=7, span_id=8, parent_span_id=9, debug=True, trace_id_128=True),
        # I|D|T|P = 0x80 + 0x40 + 0x08 + 0x04 = 0xCC
        h("cc", "00000000000000000000000000000007", "0000000000000008", "0000000000000009"),
        id="debug-128-with-parent",
    ),
]


@pytest.mark.parametrize(("trace", "wire"), GOLDEN)
def test_encode_golden(trace: ZipkinTrace, wire: bytes) -> None:
    assert encode_tracing(trace) == wire


@pytest.mark.parametrize(("trace", "wire"), GOLDEN)
def test_decode_golden(trace: ZipkinTrace, wire: bytes) -> None:
    assert decode_tracing(wire) == trace


def test_sampled_wins_over_not_sampled_and_reserved_bits_are_ignored() -> None:
    # S and N both set: "N ignored when S is set"; the two low bits are reserved
    assert decode_tracing(h("33")) == ZipkinTrace(sampled=True)


def test_flags_t_and_p_without_ids_are_ignored() -> None:
    assert decode_tracing(h("0c")) == ZipkinTrace()


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"", "empty"),
        (h("10", "00"), "1 byte, got 2 bytes"),
        (h("80") + bytes(15), "is 17 bytes, got 16 bytes"),
        (h("88") + bytes(16), "is 25 bytes, got 17 bytes"),
        (h("84") + bytes(16), "is 25 bytes, got 17 bytes"),
        (h("8c") + bytes(33), "is 33 bytes, got 34 bytes"),
    ],
)
def test_decode_rejects(wire: bytes, message: str) -> None:
    with pytest.raises(MetadataDecodeError, match=message):
        decode_tracing(wire)


@pytest.mark.parametrize(
    ("trace", "exc", "message"),
    [
        (ZipkinTrace(trace_id=1), ValueError, "span_id is required"),
        (ZipkinTrace(span_id=1), ValueError, "need a trace_id"),
        (ZipkinTrace(trace_id_128=True), ValueError, "need a trace_id"),
        (ZipkinTrace(trace_id=1 << 64, span_id=1), ValueError, "set trace_id_128=True"),
        (
            ZipkinTrace(trace_id=1 << 128, span_id=1, trace_id_128=True),
            ValueError,
            "unsigned 128-bit",
        ),
        (ZipkinTrace(trace_id=-1, span_id=1), ValueError, "unsigned 64-bit"),
        (ZipkinTrace(trace_id=1, span_id=1 << 64), ValueError, "span_id must be an unsigned"),
        (ZipkinTrace(trace_id=1, span_id=1, parent_span_id=-2), ValueError, "parent_span_id"),
        (ZipkinTrace(trace_id="1", span_id=1), TypeError, "trace_id must be an int, not str"),
        (ZipkinTrace(sampled=1), TypeError, "sampled must be True, False or None"),
        ("trace", TypeError, "must be a ZipkinTrace, not str"),
    ],
)
def test_encode_rejects(trace: object, exc: type, message: str) -> None:
    with pytest.raises(exc, match=message):
        encode_tracing(trace)  # type: ignore[arg-type]
