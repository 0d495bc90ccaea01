"""RSocket metadata extensions (:mod:`rsocket_tx.extensions`): the first byte picks the
decoder, the rest is the metadata.

Expected: :class:`~rsocket_tx.extensions.MetadataDecodeError` from the ``decode_*``
functions; :func:`~rsocket_tx.extensions.decode_composite` and
:func:`~rsocket_tx.extensions.parse_metadata` never raise, and ``parse_metadata`` reports no
decoder bug (its "cannot be decoded (SomeError: ...)" catch-all). A value that decodes and
that the encoder accepts encodes to bytes that decode to the same value.
"""

from rsocket_tx.extensions import (
    AUTHENTICATION,
    COMPOSITE_METADATA,
    ROUTING,
    CompositeEntry,
    MetadataDecodeError,
    decode_accept_mime_types,
    decode_auth,
    decode_composite,
    decode_mime_type,
    decode_routing,
    decode_tracing,
    encode_accept_mime_types,
    encode_auth,
    encode_mime_type,
    encode_routing,
    encode_tracing,
    parse_metadata,
)

from ..harness import check

PROTOCOL = "rsocket"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.extensions",)

CODECS = [
    (decode_routing, encode_routing),
    (decode_auth, encode_auth),
    (decode_mime_type, encode_mime_type),
    (decode_accept_mime_types, encode_accept_mime_types),
    (decode_tracing, encode_tracing),
]
MIME_TYPES = [COMPOSITE_METADATA, ROUTING, AUTHENTICATION]


def one_input(data: bytes) -> None:
    if not data:
        return
    choice, body = data[0], data[1:]
    if choice < 0x80:
        decoder, encoder = CODECS[choice % len(CODECS)]
        try:
            value = decoder(body)
        except MetadataDecodeError:
            return
        try:
            again = encoder(value)
        except ValueError:
            return  # lenient decoding: a value the encoder refuses to write
        check(decoder(again) == value, "round trip of %r", value)
    elif choice < 0xC0:
        entries = decode_composite(body)
        check(all(isinstance(e, CompositeEntry) for e in entries), "entries %r", entries)
    else:
        result = parse_metadata(body, MIME_TYPES[choice % len(MIME_TYPES)])
        for error in result.errors:
            check("cannot be decoded (" not in error, "a decoder raised: %s", error)
