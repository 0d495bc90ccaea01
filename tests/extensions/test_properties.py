"""Property tests for the extension and data codecs: round trips, and fuzzing that shows
``decode_composite``/``parse_metadata`` never raise, ``decode_*`` raise only
``MetadataDecodeError`` and data codecs only ``DataDecodeError`` on arbitrary bytes.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rsocket_tx.codecs import CBOR, JSON, TEXT, DataDecodeError
from rsocket_tx.extensions import (
    AUTHENTICATION,
    COMPOSITE_METADATA,
    ROUTING,
    WELL_KNOWN_MIME_TYPES,
    BearerAuth,
    CompositeEntry,
    CustomAuth,
    MetadataDecodeError,
    RequestMetadata,
    SimpleAuth,
    ZipkinTrace,
    build_metadata,
    decode_accept_mime_types,
    decode_auth,
    decode_composite,
    decode_mime_type,
    decode_routing,
    decode_tracing,
    encode_accept_mime_types,
    encode_auth,
    encode_composite,
    encode_mime_type,
    encode_routing,
    encode_tracing,
    parse_metadata,
)

# No timing assertions: hypothesis' per-example deadline is disabled.
COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

utf8_text = st.text(alphabet=st.characters(codec="utf-8"))
ascii_names = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1,
                      max_size=128)
well_known_names = st.sampled_from(sorted(WELL_KNOWN_MIME_TYPES.values()))
mime_names = well_known_names | ascii_names
tags = utf8_text.filter(lambda t: 1 <= len(t.encode()) <= 255)
u64 = st.integers(min_value=0, max_value=2**64 - 1)
u128 = st.integers(min_value=0, max_value=2**128 - 1)

# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------


@COMMON
@given(st.lists(st.tuples(mime_names, st.binary(max_size=64)), max_size=8))
def test_composite_round_trip(entries: list[tuple[str, bytes]]) -> None:
    decoded = decode_composite(encode_composite(entries))
    assert [(e.mime_type, e.content) for e in decoded] == entries
    assert all(e.error is None for e in decoded)


@COMMON
@given(st.lists(st.tuples(mime_names, st.binary(max_size=16)), min_size=1, max_size=6),
       st.data())
def test_every_truncation_keeps_the_complete_entries(entries, data) -> None:
    wire = encode_composite(entries)
    boundaries = [0]
    for entry in entries:
        boundaries.append(boundaries[-1] + len(encode_composite([entry])))
    cut = data.draw(st.integers(min_value=0, max_value=len(wire) - 1))
    decoded = decode_composite(wire[:cut])
    complete = [e for e in decoded if e.error is None]
    assert [(e.mime_type, e.content) for e in complete] == entries[: len(complete)]
    if cut in boundaries:  # cut between entries: nothing partial to report
        assert len(decoded) == boundaries.index(cut)
        assert len(complete) == len(decoded)
    else:  # the partial entry is reported on exactly one, final entry
        assert len(decoded) == len(complete) + 1
        assert decoded[-1].error is not None and "truncated" in decoded[-1].error


@COMMON
@given(st.lists(tags, min_size=1, max_size=8))
def test_routing_round_trip(values: list[str]) -> None:
    assert decode_routing(encode_routing(values)) == values


credentials = st.one_of(
    st.builds(SimpleAuth, utf8_text.filter(lambda u: len(u.encode()) <= 65535), utf8_text),
    st.builds(BearerAuth, utf8_text),
    st.builds(CustomAuth, ascii_names.filter(lambda n: n not in ("simple", "bearer")),
              st.binary(max_size=64)),
    st.builds(CustomAuth, st.integers(min_value=2, max_value=127), st.binary(max_size=64)),
)


@COMMON
@given(credentials)
def test_auth_round_trip(creds) -> None:
    assert decode_auth(encode_auth(creds)) == creds


@COMMON
@given(mime_names)
def test_mime_type_round_trip(mime: str) -> None:
    assert decode_mime_type(encode_mime_type(mime)) == mime


@COMMON
@given(st.lists(mime_names, min_size=1, max_size=8))
def test_accept_mime_types_round_trip(mimes: list[str]) -> None:
    assert decode_accept_mime_types(encode_accept_mime_types(mimes)) == mimes


@st.composite
def traces(draw) -> ZipkinTrace:
    sampled = draw(st.sampled_from([None, True, False]))
    debug = draw(st.booleans())
    if draw(st.booleans()):
        return ZipkinTrace(sampled=sampled, debug=debug)
    wide = draw(st.booleans())
    return ZipkinTrace(
        trace_id=draw(u128 if wide else u64),
        span_id=draw(u64),
        parent_span_id=draw(st.none() | u64),
        sampled=sampled,
        debug=debug,
        trace_id_128=wide,
    )


@COMMON
@given(traces())
def test_tracing_round_trip(trace: ZipkinTrace) -> None:
    assert decode_tracing(encode_tracing(trace)) == trace


@COMMON
@given(
    st.none() | st.lists(tags, min_size=1, max_size=3),
    st.none() | credentials,
    st.none() | mime_names,
    st.none() | st.lists(mime_names, min_size=1, max_size=3),
    st.none() | traces(),
    st.lists(st.tuples(ascii_names, st.binary(max_size=8)), max_size=3),
)
def test_build_then_parse_round_trip(route, auth, data_mime, accept, trace, extra) -> None:
    known = set(WELL_KNOWN_MIME_TYPES.values())
    extra = [(name, content) for name, content in extra if name not in known]
    wire = build_metadata(COMPOSITE_METADATA, route=route, auth=auth, data_mime_type=data_mime,
                          accept_mime_types=accept, tracing=trace, entries=extra)
    md = parse_metadata(wire, COMPOSITE_METADATA)
    assert md.errors == []
    assert md.tags == (route or [])
    assert md.route == (route[0] if route else None)
    assert md.auth == auth
    assert md.data_mime_type == data_mime
    assert md.accept_mime_types == (accept or [])
    assert md.tracing == trace
    assert [(e.mime_type, e.content) for e in md.entries[len(md.entries) - len(extra):]] == extra


def containers(children):
    """Lists and string-keyed maps of ``children`` (the recursive step of the JSON and CBOR
    values; a named function: hypothesis misreads the source of a lambda spanning lines and
    warns that it does not use its argument)."""
    return st.lists(children, max_size=4) | st.dictionaries(utf8_text, children, max_size=4)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | utf8_text
    | st.floats(allow_nan=False, allow_infinity=False),
    containers,
    max_leaves=20,
)


@COMMON
@given(json_values)
def test_json_round_trip(value) -> None:
    assert JSON.decode(JSON.encode(value)) == value


cbor_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | utf8_text | st.binary(max_size=16) | st.floats(allow_nan=False),
    containers,
    max_leaves=20,
)


@COMMON
@given(cbor_values)
def test_cbor_round_trip(value) -> None:
    assert CBOR.decode(CBOR.encode(value)) == value


@COMMON
@given(utf8_text)
def test_text_round_trip(value: str) -> None:
    assert TEXT.decode(TEXT.encode(value)) == value


# ---------------------------------------------------------------------------------------------
# Fuzz: arbitrary bytes
# ---------------------------------------------------------------------------------------------

# Bytes that look like composite metadata more often than uniform noise does.
entry_like = st.lists(
    st.one_of(
        st.binary(max_size=8),
        st.sampled_from([b"\x85", b"\xd0", b"\xfe", b"\xfc", b"\xfa", b"\xfb", b"\xfd", b"\x18"]),
        st.integers(min_value=0, max_value=40).map(lambda n: n.to_bytes(3, "big")),
        st.binary(min_size=1, max_size=1).map(lambda b: b + b"\x00\x00\x01"),
    ),
    max_size=12,
).map(b"".join)
fuzz_bytes = st.binary(max_size=300) | entry_like


@FUZZ
@given(fuzz_bytes)
def test_decode_composite_never_raises(data: bytes) -> None:
    entries = decode_composite(data)
    assert all(isinstance(e, CompositeEntry) for e in entries)
    # only a truncated entry can end decoding early, and it is the last one; an error on any
    # earlier entry is a skippable one (unknown id or non-ASCII name: no MIME type name)
    for entry in entries[:-1]:
        assert entry.error is None or entry.mime_type is None


@FUZZ
@given(
    fuzz_bytes,
    st.sampled_from([COMPOSITE_METADATA, ROUTING, AUTHENTICATION, "application/json", ""])
    | st.text(max_size=40),
)
def test_parse_metadata_never_raises(data: bytes, mime: str) -> None:
    md = parse_metadata(data, mime)
    assert isinstance(md, RequestMetadata)
    assert all(isinstance(error, str) for error in md.errors)


@FUZZ
@given(fuzz_bytes)
def test_parse_composite_entries_of_each_extension_never_raise(payload: bytes) -> None:
    # wrap arbitrary bytes as the content of every extension entry
    wire = encode_composite(
        [(mime, payload) for mime in (ROUTING, AUTHENTICATION, "message/x.rsocket.mime-type.v0",
                                      "message/x.rsocket.accept-mime-types.v0",
                                      "message/x.rsocket.tracing-zipkin.v0")]
    )
    md = parse_metadata(wire, COMPOSITE_METADATA)
    assert len(md.entries) == 5
    assert len(md.errors) <= 5


def _is_str_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


#: each extension decoder, its encoder and what it documents to return
DECODERS = [
    (decode_routing, encode_routing, _is_str_list),
    (decode_auth, encode_auth, lambda v: isinstance(v, (SimpleAuth, BearerAuth, CustomAuth))),
    (decode_mime_type, encode_mime_type, lambda v: isinstance(v, str)),
    (decode_accept_mime_types, encode_accept_mime_types, _is_str_list),
    (decode_tracing, encode_tracing, lambda v: isinstance(v, ZipkinTrace)),
]


@FUZZ
@given(fuzz_bytes, st.sampled_from(DECODERS))
def test_decoders_raise_only_metadata_decode_error(data: bytes, codec) -> None:
    """Arbitrary bytes either raise MetadataDecodeError saying what is wrong, or decode to a
    value of the documented type; nothing else.  Decoding is lenient (an empty routing tag
    decodes, the encoder refuses it), but what the encoder writes decodes to the same value."""
    decoder, encoder, documented = codec
    try:
        value = decoder(data)
    except MetadataDecodeError as error:
        assert str(error)
        return
    assert documented(value), value
    try:
        again = encoder(value)
    except ValueError:
        return  # lenient decoding: a value we would not write ourselves
    assert decoder(again) == value


JSON_TYPES = (type(None), bool, int, float, str, list, dict)


def _is_json_value(value) -> bool:
    if isinstance(value, list):
        return all(_is_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v) for k, v in value.items())
    return isinstance(value, JSON_TYPES)


@FUZZ
@given(st.binary(max_size=200), st.sampled_from([JSON, CBOR, TEXT]))
def test_data_codecs_raise_only_data_decode_error(data: bytes, codec) -> None:
    """Arbitrary bytes either decode or raise DataDecodeError saying what is wrong, nothing
    else; what decodes is what the codec documents: text is the UTF-8 decoding, JSON a JSON
    value (None for empty data), CBOR exactly one data item (one more byte after it is an
    error)."""
    try:
        value = codec.decode(data)
    except DataDecodeError as error:
        assert str(error)
        assert data, "empty data always decodes"
        return
    if codec is TEXT:
        assert value == data.decode("utf-8")
    elif codec is JSON:
        assert _is_json_value(value)
        assert (value is None) if not data.strip() else True
    elif data:
        with pytest.raises(DataDecodeError):
            CBOR.decode(data + b"\x00")
    else:
        assert value is None
