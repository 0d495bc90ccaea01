"""Request metadata as requesters and responders see it: :func:`parse_metadata` turns a
request's metadata into a :class:`RequestMetadata`, :func:`build_metadata` composes it.

The connection's metadata MIME type (from SETUP) decides the layout:

* ``message/x.rsocket.composite-metadata.v0`` (``Extensions/CompositeMetadata.md``): entries of
  routing (``Routing.md``), authentication (``Security/Authentication.md``), data MIME type and
  accept MIME types (``PerStreamDataMimeTypesDefinition.md``), Zipkin tracing
  (``Tracing-Zipkin.md``) and anything else;
* ``message/x.rsocket.routing.v0``: the metadata is routing tags only;
* ``message/x.rsocket.authentication.v0``: the metadata is authentication only;
* anything else: the metadata is opaque to this layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .auth import Credentials, decode_auth, encode_auth
from .composite import CompositeEntry, decode_composite, encode_composite
from .mime import (
    decode_accept_mime_types,
    decode_mime_type,
    encode_accept_mime_types,
    encode_mime_type,
)
from .mimetypes import (
    ACCEPT_MIME_TYPES,
    AUTHENTICATION,
    COMPOSITE_METADATA,
    MIME_TYPE,
    ROUTING,
    TRACING_ZIPKIN,
    MetadataDecodeError,
)
from .routing import decode_routing, encode_routing
from .tracing import ZipkinTrace, decode_tracing, encode_tracing

__all__ = ["RequestMetadata", "parse_metadata", "build_metadata"]


@dataclass(slots=True)
class RequestMetadata:
    """What a request's metadata says.

    :param route: the first routing tag, or ``None``.
    :param tags: every routing tag, in order (from all routing entries).
    :param auth: the credentials of the first authentication entry, or ``None``.
    :param data_mime_type: the per-stream data MIME type of the first such entry, or ``None``
        (then the connection's data MIME type applies).
    :param accept_mime_types: every acceptable response data MIME type, in order.
    :param tracing: the first Zipkin tracing entry, or ``None``.
    :param entries: every composite metadata entry in order (``[]`` unless the connection's
        metadata MIME type is composite).
    :param errors: problems found, one message per affected entry; :func:`parse_metadata`
        reports here instead of raising.
    """

    route: str | None = None
    tags: list[str] = field(default_factory=list)
    auth: Credentials | None = None
    data_mime_type: str | None = None
    accept_mime_types: list[str] = field(default_factory=list)
    tracing: ZipkinTrace | None = None
    entries: list[CompositeEntry] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


_KINDS = {COMPOSITE_METADATA: 1, ROUTING: 2, AUTHENTICATION: 3}
_COMPOSITE, _ROUTING, _AUTHENTICATION = 1, 2, 3


def _kind(metadata_mime_type: object) -> int | None:
    if not isinstance(metadata_mime_type, str):
        return None
    kind = _KINDS.get(metadata_mime_type)
    if kind is None:
        # Tolerate parameters and case: "Message/X.RSocket.Routing.v0; foo=bar".
        kind = _KINDS.get(metadata_mime_type.partition(";")[0].strip().lower())
    return kind


def _add_routing(result: RequestMetadata, content: bytes) -> str | None:
    tags = decode_routing(content)
    result.tags.extend(tags)
    if result.route is None and tags:
        result.route = tags[0]
    return None


def _add_auth(result: RequestMetadata, content: bytes) -> str | None:
    credentials = decode_auth(content)
    if result.auth is not None:
        return "more than one authentication entry; the first one is used"
    result.auth = credentials
    return None


def _add_mime_type(result: RequestMetadata, content: bytes) -> str | None:
    mime = decode_mime_type(content)
    if result.data_mime_type is None:
        result.data_mime_type = mime
    return None


def _add_accept(result: RequestMetadata, content: bytes) -> str | None:
    result.accept_mime_types.extend(decode_accept_mime_types(content))
    return None


def _add_tracing(result: RequestMetadata, content: bytes) -> str | None:
    trace = decode_tracing(content)
    if result.tracing is None:
        result.tracing = trace
    return None


_HANDLERS: dict[str | None, Callable[[RequestMetadata, bytes], str | None]] = {
    ROUTING: _add_routing,
    AUTHENTICATION: _add_auth,
    MIME_TYPE: _add_mime_type,
    ACCEPT_MIME_TYPES: _add_accept,
    TRACING_ZIPKIN: _add_tracing,
}


def parse_metadata(metadata: bytes | None, metadata_mime_type: str) -> RequestMetadata:
    """Read a request's metadata.  Never raises.

    With composite metadata every entry lands in ``entries``; routing entries fill ``tags`` and
    ``route``, authentication ``auth``, data MIME type ``data_mime_type``, accept MIME types
    ``accept_mime_types`` and Zipkin tracing ``tracing``; where an extension appears more than
    once the first entry wins (a second authentication entry is also reported in ``errors``).
    An entry that cannot be read is reported in ``errors`` (``"entry 2 (...): ..."``) and the
    others are still used.

    :param metadata: the request's metadata bytes, or ``None``.
    :param metadata_mime_type: the connection's metadata MIME type (SETUP); parameters and case
        are tolerated.
    :returns: a new :class:`RequestMetadata` (empty for no metadata or an opaque MIME type).
    """
    result = RequestMetadata()
    if metadata is None:
        return result
    if metadata.__class__ is not bytes:
        if not isinstance(metadata, (bytes, bytearray, memoryview)):
            result.errors.append(f"metadata must be bytes, not {type(metadata).__name__}")
            return result
        metadata = bytes(metadata)
    if not metadata:
        return result
    kind = _kind(metadata_mime_type)
    if kind is None:
        return result
    errors = result.errors
    if kind == _COMPOSITE:
        entries = decode_composite(metadata)
        result.entries = entries
        for index, entry in enumerate(entries):
            if entry.error is not None:
                errors.append(f"entry {index}: {entry.error}")
                continue
            handler = _HANDLERS.get(entry.mime_type)
            if handler is None:
                continue
            try:
                problem = handler(result, entry.content)
            except MetadataDecodeError as exc:
                problem = str(exc)
            except Exception as exc:  # a decoder bug must not escape
                problem = f"cannot be decoded ({type(exc).__name__}: {exc})"
            if problem is not None:
                errors.append(f"entry {index} ({entry.mime_type}): {problem}")
        return result
    try:
        if kind == _ROUTING:
            _add_routing(result, metadata)
        else:
            result.auth = decode_auth(metadata)
    except MetadataDecodeError as exc:
        errors.append(f"{metadata_mime_type} metadata: {exc}")
    except Exception as exc:  # a decoder bug must not escape
        errors.append(
            f"{metadata_mime_type} metadata cannot be decoded ({type(exc).__name__}: {exc})"
        )
    return result


def _routing_tags(route: str | Sequence[str]) -> bytes:
    return encode_routing([route] if isinstance(route, str) else route)


def build_metadata(
    metadata_mime_type: str,
    *,
    route: str | Sequence[str] | None = None,
    auth: Credentials | None = None,
    data_mime_type: str | None = None,
    accept_mime_types: Sequence[str] | None = None,
    tracing: ZipkinTrace | None = None,
    entries: Iterable[CompositeEntry | tuple[str, bytes]] = (),
) -> bytes:
    """Compose a request's metadata for a connection whose metadata MIME type is
    ``metadata_mime_type``.

    * composite: one entry per argument given, in the order routing, authentication, data MIME
      type, accept MIME types, tracing, then ``entries``;
    * routing: the routing tags of ``route`` only;
    * authentication: the authentication metadata of ``auth`` only.

    Arguments left ``None`` (and empty ``entries``) add nothing; with nothing to send the result
    is ``b""`` whatever the MIME type.

    :param metadata_mime_type: the connection's metadata MIME type (SETUP).
    :param route: the route, or every routing tag (route first).
    :param auth: per-request credentials.
    :param data_mime_type: the data MIME type of this request's payloads.
    :param accept_mime_types: the response data MIME types the requester accepts.
    :param tracing: Zipkin trace context.
    :param entries: further composite entries, :class:`CompositeEntry` or
        ``(mime_type, content)`` tuples.
    :raises ValueError: an argument the metadata MIME type cannot carry (the message says the
        connection's metadata MIME type must be composite), or an invalid value (see
        :func:`encode_routing`, :func:`encode_auth`, :func:`encode_mime_type`,
        :func:`encode_accept_mime_types`, :func:`encode_tracing`, :func:`encode_composite`).
    :raises TypeError: an argument of the wrong type.
    """
    kind = _kind(metadata_mime_type)
    if kind == _COMPOSITE:
        parts: list[CompositeEntry | tuple[str, bytes]] = []
        if route is not None:
            parts.append((ROUTING, _routing_tags(route)))
        if auth is not None:
            parts.append((AUTHENTICATION, encode_auth(auth)))
        if data_mime_type is not None:
            parts.append((MIME_TYPE, encode_mime_type(data_mime_type)))
        if accept_mime_types is not None:
            parts.append((ACCEPT_MIME_TYPES, encode_accept_mime_types(accept_mime_types)))
        if tracing is not None:
            parts.append((TRACING_ZIPKIN, encode_tracing(tracing)))
        parts.extend(entries)
        return encode_composite(parts)
    given = [
        name
        for name, value in (
            ("route", route),
            ("auth", auth),
            ("data_mime_type", data_mime_type),
            ("accept_mime_types", accept_mime_types),
            ("tracing", tracing),
        )
        if value is not None
    ]
    entries = list(entries)
    if entries:
        given.append("entries")
    if not given:
        return b""
    if kind == _ROUTING and route is not None and given == ["route"]:
        return _routing_tags(route)
    if kind == _AUTHENTICATION and auth is not None and given == ["auth"]:
        return encode_auth(auth)
    if kind == _ROUTING:
        carries = "only a route"
    elif kind == _AUTHENTICATION:
        carries = "only auth"
    else:
        carries = "no extension metadata"
    raise ValueError(
        f"cannot send {', '.join(given)} with metadata MIME type {metadata_mime_type!r}, which "
        f"carries {carries}; the connection's metadata MIME type must be {COMPOSITE_METADATA}"
    )
