"""Cross-check against rsocket-py 0.4.20 (``rsocket/extensions/``): what we encode, it decodes,
and the other way round, for composite metadata with routing, simple auth, bearer auth, a custom
MIME type entry, a data MIME type and accept MIME types.

Where rsocket-py deviates, these tests assert our behaviour, not theirs:

* custom auth types: its ``AuthenticationContent.parse`` looks the type up in a dict of simple and
  bearer only and fails (``KeyError``) on anything else; we decode ``CustomAuth``;
* an unknown well-known MIME id in composite metadata makes its whole ``CompositeMetadata.parse``
  raise ``RSocketUnknownMimetype``; we report that entry and keep the others;
* its well-known table stops at 0x28 (no ``application/x-capnp`` 0x29 nor
  ``application/x-flatbuffers`` 0x2A); ours has every row of the spec's table.
"""

from __future__ import annotations

import pytest

from rsocket_tx.extensions import (
    AUTHENTICATION,
    COMPOSITE_METADATA,
    MIME_TYPE,
    ROUTING,
    BearerAuth,
    CompositeEntry,
    CustomAuth,
    SimpleAuth,
    decode_auth,
    decode_composite,
    encode_accept_mime_types,
    encode_auth,
    encode_composite,
    encode_mime_type,
    encode_routing,
    mime_type_name,
    parse_metadata,
)

from .helpers import h

rs_helpers = pytest.importorskip("rsocket.extensions.helpers")
rs_composite = pytest.importorskip("rsocket.extensions.composite_metadata")
rs_auth = pytest.importorskip("rsocket.extensions.authentication")
rs_auth_content = pytest.importorskip("rsocket.extensions.authentication_content")
rs_routing = pytest.importorskip("rsocket.extensions.routing")
rs_mime = pytest.importorskip("rsocket.extensions.stream_data_mimetype")

CUSTOM = "application/x.rsocket.tx1"  # 25 bytes: both sides write 0x18


def ours() -> bytes:
    return encode_composite(
        [
            (ROUTING, encode_routing(["orders.7", "v1"])),
            (AUTHENTICATION, encode_auth(SimpleAuth("user", "pässword"))),
            (AUTHENTICATION, encode_auth(BearerAuth("tok"))),
            (CUSTOM, b"abc"),
            (MIME_TYPE, encode_mime_type("application/json")),
            ("message/x.rsocket.accept-mime-types.v0",
             encode_accept_mime_types(["application/cbor", "x/custom"])),
        ]
    )


def theirs() -> bytes:
    return rs_helpers.composite(
        rs_helpers.route("orders.7", "v1"),
        rs_helpers.authenticate_simple("user", "pässword"),
        rs_helpers.authenticate_bearer("tok"),
        rs_helpers.metadata_item(b"abc", CUSTOM.encode()),
        rs_helpers.data_mime_type(b"application/json"),
        rs_helpers.data_mime_types(b"application/cbor", b"x/custom"),
    )


def test_both_encoders_write_the_same_bytes() -> None:
    wire = theirs()
    assert wire == ours()
    # and the custom MIME entry is the interop shape: length byte 0x18 for 25 bytes
    assert h("18") + CUSTOM.encode() + h("000003") + b"abc" in wire


def test_rsocket_py_decodes_ours() -> None:
    items = rs_composite.CompositeMetadata().parse(ours()).items
    assert len(items) == 6
    route, simple, bearer, custom, mime, accept = items
    assert isinstance(route, rs_routing.RoutingMetadata)
    assert route.tags == [b"orders.7", b"v1"]
    assert isinstance(simple, rs_auth_content.AuthenticationContent)
    assert isinstance(simple.authentication, rs_auth.AuthenticationSimple)
    assert simple.authentication.username == b"user"
    assert simple.authentication.password == "pässword".encode()
    assert isinstance(bearer.authentication, rs_auth.AuthenticationBearer)
    assert bearer.authentication.token == b"tok"
    assert custom.encoding == CUSTOM.encode()
    assert custom.content == b"abc"
    assert isinstance(mime, rs_mime.StreamDataMimetype)
    assert mime.data_encoding == b"application/json"
    assert isinstance(accept, rs_mime.StreamDataMimetypes)
    assert accept.data_encodings == [b"application/cbor", b"x/custom"]


def test_we_decode_rsocket_py() -> None:
    wire = theirs()
    entries = decode_composite(wire)
    assert [e.error for e in entries] == [None] * 6
    assert entries[3] == CompositeEntry(CUSTOM, b"abc")
    assert decode_auth(entries[1].content) == SimpleAuth("user", "pässword")
    assert decode_auth(entries[2].content) == BearerAuth("tok")
    md = parse_metadata(wire, COMPOSITE_METADATA)
    assert md.route == "orders.7"
    assert md.tags == ["orders.7", "v1"]
    assert md.auth == SimpleAuth("user", "pässword")
    assert md.data_mime_type == "application/json"
    assert md.accept_mime_types == ["application/cbor", "x/custom"]
    # the second authentication entry (bearer) is reported, not silently merged
    assert md.errors == [
        "entry 2 (message/x.rsocket.authentication.v0): more than one authentication entry; "
        "the first one is used"
    ]


def test_routing_only_metadata_matches() -> None:
    theirs_tags = rs_routing.RoutingMetadata(["orders.7", "v1"]).serialize()
    assert theirs_tags == encode_routing(["orders.7", "v1"])
    assert parse_metadata(theirs_tags, ROUTING).tags == ["orders.7", "v1"]


def test_custom_auth_type_from_rsocket_py_decodes_here() -> None:
    # rsocket-py writes any auth type name through serialize_128max_value: length - 1.
    class ApiKey(rs_auth.Authentication):
        type = b"x-api-key"

        def serialize(self) -> bytes:
            return b"k3y"

        def parse(self, buffer: bytes) -> None:  # pragma: no cover - rsocket-py cannot get here
            raise AssertionError

    content = rs_auth_content.AuthenticationContent(ApiKey()).serialize()
    assert content == h("08") + b"x-api-key" + b"k3y"
    assert decode_auth(content) == CustomAuth("x-api-key", b"k3y")
    # rsocket-py deviates: its own parse of this content fails (KeyError on the type);
    # we decode it, in a composite too.
    wire = encode_composite([(AUTHENTICATION, content)])
    assert parse_metadata(wire, COMPOSITE_METADATA).auth == CustomAuth("x-api-key", b"k3y")


def test_where_rsocket_py_raises_we_report_per_entry() -> None:
    # rsocket-py: RSocketUnknownMimetype for the whole composite.  Ours: one entry's error.
    wire = theirs() + h("d0", "000001", "00") + rs_helpers.composite(rs_helpers.route("x"))
    entries = decode_composite(wire)
    assert [e.error is None for e in entries] == [True] * 6 + [False, True]
    assert parse_metadata(wire, COMPOSITE_METADATA).tags == ["orders.7", "v1", "x"]


def test_well_known_ids_rsocket_py_lacks() -> None:
    assert mime_type_name(0x29) == "application/x-capnp"
    assert mime_type_name(0x2A) == "application/x-flatbuffers"
    (entry,) = decode_composite(h("a9", "000000"))  # 0x80 | 0x29
    assert entry == CompositeEntry("application/x-capnp", b"", mime_id=0x29)
