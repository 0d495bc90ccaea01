"""The well-known MIME type table (``Extensions/WellKnownMimeTypes.md``) and its constants.

The table below is transcribed by hand from the spec's "Mappings" table, row by row.
"""

from __future__ import annotations

import pytest

from rsocket_tx.extensions import (
    ACCEPT_MIME_TYPES,
    APPLICATION_CBOR,
    APPLICATION_JSON,
    AUTHENTICATION,
    COMPOSITE_METADATA,
    MIME_TYPE,
    OCTET_STREAM,
    ROUTING,
    TEXT_PLAIN,
    TRACING_ZIPKIN,
    WELL_KNOWN_MIME_TYPES,
    mime_type_id,
    mime_type_name,
)

SPEC_TABLE = [
    ("application/avro", 0x00),
    ("application/cbor", 0x01),
    ("application/graphql", 0x02),
    ("application/gzip", 0x03),
    ("application/javascript", 0x04),
    ("application/json", 0x05),
    ("application/octet-stream", 0x06),
    ("application/pdf", 0x07),
    ("application/vnd.apache.thrift.binary", 0x08),
    ("application/vnd.google.protobuf", 0x09),
    ("application/xml", 0x0A),
    ("application/zip", 0x0B),
    ("audio/aac", 0x0C),
    ("audio/mp3", 0x0D),
    ("audio/mp4", 0x0E),
    ("audio/mpeg3", 0x0F),
    ("audio/mpeg", 0x10),
    ("audio/ogg", 0x11),
    ("audio/opus", 0x12),
    ("audio/vorbis", 0x13),
    ("image/bmp", 0x14),
    ("image/gif", 0x15),
    ("image/heic-sequence", 0x16),
    ("image/heic", 0x17),
    ("image/heif-sequence", 0x18),
    ("image/heif", 0x19),
    ("image/jpeg", 0x1A),
    ("image/png", 0x1B),
    ("image/tiff", 0x1C),
    ("multipart/mixed", 0x1D),
    ("text/css", 0x1E),
    ("text/csv", 0x1F),
    ("text/html", 0x20),
    ("text/plain", 0x21),
    ("text/xml", 0x22),
    ("video/H264", 0x23),
    ("video/H265", 0x24),
    ("video/VP8", 0x25),
    ("application/x-hessian", 0x26),
    ("application/x-java-object", 0x27),
    ("application/cloudevents+json", 0x28),
    ("application/x-capnp", 0x29),
    ("application/x-flatbuffers", 0x2A),
    ("message/x.rsocket.mime-type.v0", 0x7A),
    ("message/x.rsocket.accept-mime-types.v0", 0x7B),
    ("message/x.rsocket.authentication.v0", 0x7C),
    ("message/x.rsocket.tracing-zipkin.v0", 0x7D),
    ("message/x.rsocket.routing.v0", 0x7E),
    ("message/x.rsocket.composite-metadata.v0", 0x7F),
]

def test_table_is_exactly_the_spec_table() -> None:
    assert dict(WELL_KNOWN_MIME_TYPES) == {id_: name for name, id_ in SPEC_TABLE}
    assert len(WELL_KNOWN_MIME_TYPES) == 49


@pytest.mark.parametrize(("name", "id_"), SPEC_TABLE)
def test_lookups_both_ways(name: str, id_: int) -> None:
    assert mime_type_id(name) == id_
    assert mime_type_name(id_) == name


def test_reserved_and_unknown_ids_have_no_name() -> None:
    for id_ in (0x2B, 0x50, 0x79):
        assert mime_type_name(id_) is None
    assert mime_type_id("application/x-unknown") is None


def test_lookup_is_exact_like_rsocket_java() -> None:
    # rsocket-java WellKnownMimeType.fromString is an exact map lookup.
    assert mime_type_id("video/h264") is None
    assert mime_type_id("application/json; charset=utf-8") is None
    assert mime_type_id("video/H264") == 0x23


def test_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        WELL_KNOWN_MIME_TYPES[0x50] = "x/y"  # type: ignore[index]


def test_constants() -> None:
    assert COMPOSITE_METADATA == "message/x.rsocket.composite-metadata.v0"
    assert ROUTING == "message/x.rsocket.routing.v0"
    assert AUTHENTICATION == "message/x.rsocket.authentication.v0"
    assert MIME_TYPE == "message/x.rsocket.mime-type.v0"
    assert ACCEPT_MIME_TYPES == "message/x.rsocket.accept-mime-types.v0"
    assert TRACING_ZIPKIN == "message/x.rsocket.tracing-zipkin.v0"
    assert APPLICATION_JSON == "application/json"
    assert APPLICATION_CBOR == "application/cbor"
    assert OCTET_STREAM == "application/octet-stream"
    assert TEXT_PLAIN == "text/plain"
