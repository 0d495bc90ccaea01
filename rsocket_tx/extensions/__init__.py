"""Sans-IO codecs for the RSocket metadata extensions (``shared/specs/rsocket-1.0/Extensions/``).

* :mod:`.mimetypes`: the well-known MIME type table and MIME type constants;
* :mod:`.composite`: composite metadata (``CompositeMetadata.md``);
* :mod:`.routing`: routing tags (``Routing.md``);
* :mod:`.auth`: authentication, simple, bearer and custom types (``Security/``);
* :mod:`.mime`: per-stream data MIME type and accept MIME types
  (``PerStreamDataMimeTypesDefinition.md``);
* :mod:`.tracing`: Zipkin tracing (``Tracing-Zipkin.md``);
* :mod:`.metadata`: :func:`parse_metadata` / :func:`build_metadata` for requesters and responders.

Nothing here does I/O or imports Twisted.  ``encode_*`` raise ``TypeError``/``ValueError`` for a
caller's wrong argument; ``decode_*`` raise :class:`MetadataDecodeError` for malformed bytes;
:func:`decode_composite` and :func:`parse_metadata` never raise.
"""

from .auth import (
    WELL_KNOWN_AUTH_TYPES,
    BearerAuth,
    Credentials,
    CustomAuth,
    SimpleAuth,
    decode_auth,
    encode_auth,
)
from .composite import CompositeEntry, decode_composite, encode_composite
from .metadata import RequestMetadata, build_metadata, parse_metadata
from .mime import (
    decode_accept_mime_types,
    decode_mime_type,
    encode_accept_mime_types,
    encode_mime_type,
)
from .mimetypes import (
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
    MetadataDecodeError,
    mime_type_id,
    mime_type_name,
)
from .routing import decode_routing, encode_routing
from .tracing import ZipkinTrace, decode_tracing, encode_tracing

__all__ = [
    "MetadataDecodeError",
    "WELL_KNOWN_MIME_TYPES",
    "mime_type_id",
    "mime_type_name",
    "COMPOSITE_METADATA",
    "ROUTING",
    "AUTHENTICATION",
    "MIME_TYPE",
    "ACCEPT_MIME_TYPES",
    "TRACING_ZIPKIN",
    "APPLICATION_JSON",
    "APPLICATION_CBOR",
    "OCTET_STREAM",
    "TEXT_PLAIN",
    "CompositeEntry",
    "encode_composite",
    "decode_composite",
    "encode_routing",
    "decode_routing",
    "WELL_KNOWN_AUTH_TYPES",
    "SimpleAuth",
    "BearerAuth",
    "CustomAuth",
    "Credentials",
    "encode_auth",
    "decode_auth",
    "encode_mime_type",
    "decode_mime_type",
    "encode_accept_mime_types",
    "decode_accept_mime_types",
    "ZipkinTrace",
    "encode_tracing",
    "decode_tracing",
    "RequestMetadata",
    "parse_metadata",
    "build_metadata",
]
