"""parse_metadata / build_metadata: what requesters and responders use.

Composite vectors are written by hand from ``Extensions/CompositeMetadata.md`` with entries per
``Routing.md``, ``Security/Authentication.md``, ``PerStreamDataMimeTypesDefinition.md`` and
``Tracing-Zipkin.md`` (see the sibling golden tests for each entry's layout).
"""

from __future__ import annotations

import pytest

from rsocket_tx.extensions import (
    AUTHENTICATION,
    COMPOSITE_METADATA,
    ROUTING,
    BearerAuth,
    CompositeEntry,
    CustomAuth,
    RequestMetadata,
    SimpleAuth,
    ZipkinTrace,
    build_metadata,
    parse_metadata,
)

from .helpers import h

ROUTE_ENTRY = h("fe", "000009", "08") + b"orders.7"  # routing 0x7E|0x80, 9 bytes: 8 'orders.7'
SIMPLE_ENTRY = h("fc", "00000b", "80", "0004") + b"userpass"  # auth 0xFC, 11 bytes
MIME_ENTRY = h("fa", "000001", "85")  # mime-type 0x7A|0x80 = 0xFA, 1 byte: application/json
ACCEPT_ENTRY = h("fb", "000002", "85", "a1")  # accept 0xFB: application/json, text/plain
TRACE_ENTRY = h("fd", "000011", "a0", "0000000000000001", "0000000000000002")  # I|S, 17 bytes
CUSTOM_ENTRY = h("02") + b"x/y" + h("000002") + b"hi"


def test_parse_full_composite() -> None:
    wire = ROUTE_ENTRY + SIMPLE_ENTRY + MIME_ENTRY + ACCEPT_ENTRY + TRACE_ENTRY + CUSTOM_ENTRY
    md = parse_metadata(wire, COMPOSITE_METADATA)
    assert md.route == "orders.7"
    assert md.tags == ["orders.7"]
    assert md.auth == SimpleAuth("user", "pass")
    assert md.data_mime_type == "application/json"
    assert md.accept_mime_types == ["application/json", "text/plain"]
    assert md.tracing == ZipkinTrace(trace_id=1, span_id=2, sampled=True)
    assert [e.mime_type for e in md.entries] == [
        "message/x.rsocket.routing.v0",
        "message/x.rsocket.authentication.v0",
        "message/x.rsocket.mime-type.v0",
        "message/x.rsocket.accept-mime-types.v0",
        "message/x.rsocket.tracing-zipkin.v0",
        "x/y",
    ]
    assert md.entries[-1].content == b"hi"
    assert md.errors == []


def test_build_composite_matches_the_hand_written_wire() -> None:
    wire = build_metadata(
        COMPOSITE_METADATA,
        route="orders.7",
        auth=SimpleAuth("user", "pass"),
        data_mime_type="application/json",
        accept_mime_types=["application/json", "text/plain"],
        tracing=ZipkinTrace(trace_id=1, span_id=2, sampled=True),
        entries=[("x/y", b"hi")],
    )
    assert wire == (
        ROUTE_ENTRY + SIMPLE_ENTRY + MIME_ENTRY + ACCEPT_ENTRY + TRACE_ENTRY + CUSTOM_ENTRY
    )


def test_build_composite_with_several_tags_and_composite_entries() -> None:
    wire = build_metadata(
        COMPOSITE_METADATA, route=["a", "b"], entries=[CompositeEntry("x/y", b"hi")]
    )
    assert wire == h("fe", "000004", "0161", "0162") + CUSTOM_ENTRY
    md = parse_metadata(wire, COMPOSITE_METADATA)
    assert (md.route, md.tags) == ("a", ["a", "b"])


def test_bad_entries_are_reported_and_the_rest_is_used() -> None:
    wire = (
        h("fe", "000002", "05", "61")  # routing entry whose tag says 5 bytes, has 1
        + h("d0", "000000")  # unknown well-known id 0x50
        + SIMPLE_ENTRY
        + h("fa", "000001", "d0")  # data MIME type with an unknown id
        + h("fe", "000003", "02") + b"ok"  # a second, good routing entry
        + h("fc", "000001", "81")  # a second authentication entry: bearer ''
        + h("85", "000009", "00")  # truncated last entry
    )
    md = parse_metadata(wire, COMPOSITE_METADATA)
    assert md.auth == SimpleAuth("user", "pass")  # the first one wins
    assert md.route == "ok" and md.tags == ["ok"]
    assert md.data_mime_type is None
    assert len(md.entries) == 7
    assert len(md.errors) == 5
    assert md.errors[0].startswith("entry 0 (message/x.rsocket.routing.v0): routing tag 0")
    assert md.errors[1].startswith("entry 1: unknown well-known MIME type id 0x50")
    assert md.errors[2].startswith("entry 3 (message/x.rsocket.mime-type.v0): unknown")
    assert md.errors[3] == (
        "entry 5 (message/x.rsocket.authentication.v0): more than one authentication entry; "
        "the first one is used"
    )
    assert md.errors[4].startswith("entry 6: truncated entry")


def test_duplicate_mime_and_tracing_entries_first_wins_silently() -> None:
    other_mime = h("fa", "000001", "a1")  # text/plain
    other_trace = h("fd", "000001", "10")
    md = parse_metadata(MIME_ENTRY + other_mime + TRACE_ENTRY + other_trace, COMPOSITE_METADATA)
    assert md.data_mime_type == "application/json"
    assert md.tracing == ZipkinTrace(trace_id=1, span_id=2, sampled=True)
    assert md.errors == []


def test_parse_routing_and_authentication_mime_types() -> None:
    md = parse_metadata(h("08") + b"orders.7" + h("02") + b"v1", ROUTING)
    assert (md.route, md.tags, md.entries) == ("orders.7", ["orders.7", "v1"], [])
    md = parse_metadata(h("81") + b"tok", AUTHENTICATION)
    assert md.auth == BearerAuth("tok")
    md = parse_metadata(h("08") + b"x-api-key" + b"k", AUTHENTICATION)
    assert md.auth == CustomAuth("x-api-key", b"k")


def test_parse_reports_malformed_non_composite_metadata() -> None:
    md = parse_metadata(h("05") + b"ab", ROUTING)
    assert md.tags == [] and md.route is None
    assert md.errors == [
        "message/x.rsocket.routing.v0 metadata: routing tag 0 is truncated: its length byte "
        "says 5 bytes but only 2 remain"
    ]
    md = parse_metadata(h("80"), AUTHENTICATION)
    assert md.auth is None and len(md.errors) == 1


def test_parse_tolerates_parameters_and_case_in_the_metadata_mime_type() -> None:
    md = parse_metadata(ROUTE_ENTRY, "Message/X.RSocket.Composite-Metadata.v0; v=1")
    assert md.route == "orders.7"


@pytest.mark.parametrize(
    ("metadata", "mime"),
    [
        (None, COMPOSITE_METADATA),
        (b"", COMPOSITE_METADATA),
        (b"\xff\x00", "application/json"),  # opaque metadata MIME type
        (b"\xff\x00", None),
        (b"\xff\x00", ["unhashable"]),
    ],
)
def test_parse_empty_or_opaque(metadata: bytes | None, mime: str) -> None:
    assert parse_metadata(metadata, mime) == RequestMetadata()


def test_parse_non_bytes_is_reported() -> None:
    md = parse_metadata("fe000009", COMPOSITE_METADATA)  # type: ignore[arg-type]
    assert md.errors == ["metadata must be bytes, not str"]
    assert parse_metadata(bytearray(ROUTE_ENTRY), COMPOSITE_METADATA).route == "orders.7"


def test_build_routing_and_authentication_mime_types() -> None:
    assert build_metadata(ROUTING, route="orders.7") == h("08") + b"orders.7"
    assert build_metadata(ROUTING, route=["a", "b"]) == h("0161", "0162")
    assert build_metadata(AUTHENTICATION, auth=BearerAuth("t")) == h("81") + b"t"


def test_build_nothing_is_empty() -> None:
    for mime in (COMPOSITE_METADATA, ROUTING, AUTHENTICATION, "application/json"):
        assert build_metadata(mime) == b""


@pytest.mark.parametrize(
    ("mime", "kwargs", "message"),
    [
        (ROUTING, {"auth": BearerAuth("t")}, "cannot send auth .* carries only a route"),
        (
            ROUTING,
            {"route": "a", "tracing": ZipkinTrace()},
            "cannot send route, tracing .* carries only a route",
        ),
        (AUTHENTICATION, {"route": "a"}, "cannot send route .* carries only auth"),
        ("application/json", {"route": "a"}, "carries no extension metadata"),
        ("application/json", {"entries": [("x/y", b"")]}, "cannot send entries"),
    ],
)
def test_build_refuses_what_the_metadata_mime_type_cannot_carry(
    mime: str, kwargs: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as info:
        build_metadata(mime, **kwargs)
    assert f"must be {COMPOSITE_METADATA}" in str(info.value)


def test_build_passes_on_argument_errors() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        build_metadata(COMPOSITE_METADATA, route="")
    with pytest.raises(TypeError, match="SimpleAuth, BearerAuth or CustomAuth"):
        build_metadata(COMPOSITE_METADATA, auth=("u", "p"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="wrap one MIME type"):
        build_metadata(COMPOSITE_METADATA, accept_mime_types="text/plain")


def test_round_trip_through_build_and_parse() -> None:
    md = parse_metadata(
        build_metadata(
            COMPOSITE_METADATA,
            route="r",
            auth=CustomAuth("x-api-key", b"k"),
            data_mime_type="application/x.custom",
            accept_mime_types=["application/cbor"],
            tracing=ZipkinTrace(sampled=False),
        ),
        COMPOSITE_METADATA,
    )
    assert md.route == "r"
    assert md.auth == CustomAuth("x-api-key", b"k")
    assert md.data_mime_type == "application/x.custom"
    assert md.accept_mime_types == ["application/cbor"]
    assert md.tracing == ZipkinTrace(sampled=False)
    assert md.errors == []
