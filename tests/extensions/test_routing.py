"""Routing metadata golden vectors (``Extensions/Routing.md`` §Metadata Contents).

Each tag is ``|Tag Length (8 bits)| Tag (UTF-8)|``; vectors are written field by field.
"""

from __future__ import annotations

import pytest

from rsocket_tx.extensions import MetadataDecodeError, decode_routing, encode_routing

from .helpers import h

GOLDEN = [
    # one tag: length 8, 'orders.7'
    pytest.param(["orders.7"], h("08") + b"orders.7", id="one-tag"),
    # two tags in order: 8 'orders.7', 2 'v1'
    pytest.param(["orders.7", "v1"], h("08") + b"orders.7" + h("02") + b"v1", id="two-tags"),
    # UTF-8: 'é' is c3 a9, so '/café' is 6 bytes
    pytest.param(["/café"], h("06", "2f636166c3a9"), id="utf8-length-in-bytes"),
    # 255-byte tag: length 0xff
    pytest.param(["x" * 255], h("ff") + b"x" * 255, id="longest-tag"),
]


@pytest.mark.parametrize(("tags", "wire"), GOLDEN)
def test_encode_golden(tags: list[str], wire: bytes) -> None:
    assert encode_routing(tags) == wire


@pytest.mark.parametrize(("tags", "wire"), GOLDEN)
def test_decode_golden(tags: list[str], wire: bytes) -> None:
    assert decode_routing(wire) == tags


def test_encode_takes_any_iterable() -> None:
    assert encode_routing(t for t in ("a", "b")) == h("01", "61", "01", "62")


def test_decode_empty_and_zero_length_tags() -> None:
    assert decode_routing(b"") == []
    assert decode_routing(h("00", "01", "61")) == ["", "a"]
    assert decode_routing(bytearray(h("01", "61"))) == ["a"]


@pytest.mark.parametrize(
    ("tags", "exc", "message"),
    [
        ([], ValueError, "at least one tag"),
        ([""], ValueError, "must not be empty"),
        (["é" * 128], ValueError, "256 UTF-8 bytes; the limit is 255"),
        (["\ud800"], ValueError, "UTF-8"),
        ([b"orders"], TypeError, "must be a str, not bytes"),
        ("orders.7", TypeError, "not a single str; wrap one tag in a list"),
    ],
)
def test_encode_rejects(tags: object, exc: type, message: str) -> None:
    with pytest.raises(exc, match=message):
        encode_routing(tags)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (h("05") + b"abc", "tag 0 is truncated: its length byte says 5 bytes but only 3 remain"),
        (h("01", "61", "02", "62"), "tag 1 is truncated"),
        (h("02", "c328"), "tag 0 is not valid UTF-8"),
    ],
)
def test_decode_rejects(wire: bytes, message: str) -> None:
    with pytest.raises(MetadataDecodeError, match=message):
        decode_routing(wire)


def test_decode_rejects_non_bytes() -> None:
    with pytest.raises(TypeError, match="not str"):
        decode_routing("abc")  # type: ignore[arg-type]
