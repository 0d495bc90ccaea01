"""Shared helpers of the rsocket-py routing peers (routing_server.py, routing_client.py).

Everything about composite metadata here goes through rsocket-py's own codecs
(``rsocket.extensions``): these programs show what *that library* writes and reads.  The JSON
forms are documented in ``README.md`` ("Routing and composite metadata").
"""

from __future__ import annotations

import base64
import json

from rsocket.extensions.authentication import (
    Authentication,
    AuthenticationBearer,
    AuthenticationSimple,
)
from rsocket.extensions.authentication_content import AuthenticationContent
from rsocket.extensions.composite_metadata import CompositeMetadata
from rsocket.extensions.routing import RoutingMetadata
from rsocket.extensions.stream_data_mimetype import StreamDataMimetype, StreamDataMimetypes

COMPOSITE = "message/x.rsocket.composite-metadata.v0"
APPLICATION_JSON = "application/json"


def text(value) -> str | None:
    """bytes/str/WellKnownMimeType -> str (None stays None)."""
    if value is None:
        return None
    name = getattr(value, "name", value)  # WellKnownMimeType has .name (bytes)
    if isinstance(name, (bytes, bytearray)):
        return bytes(name).decode("utf-8", "replace")
    return str(name)


def b64(data) -> str:
    return base64.b64encode(bytes(data or b"")).decode("ascii")


def describe_auth(authentication: Authentication | None) -> dict | None:
    """``{"type": "simple", "username", "password"}`` / ``{"type": "bearer", "token"}`` /
    ``{"type": <name>, "payload_b64"}``."""
    if authentication is None:
        return None
    if isinstance(authentication, AuthenticationSimple):
        return {"type": "simple", "username": text(authentication.username),
                "password": text(authentication.password)}
    if isinstance(authentication, AuthenticationBearer):
        return {"type": "bearer", "token": text(authentication.token)}
    return {"type": text(authentication.type), "payload_b64": b64(authentication.serialize())}


def describe_entries(composite: CompositeMetadata) -> list[dict]:
    """Every entry rsocket-py decoded: ``mime`` + ``content_b64`` (the library's re-serialised
    content), plus ``tags`` (routing), ``auth`` (authentication), ``data_mime`` (per-stream
    MIME) or ``accept`` (accept MIME types) for the entries it understands."""
    out = []
    for item in composite.items:
        entry = {"mime": text(item.encoding), "content_b64": b64(item.serialize())}
        if isinstance(item, RoutingMetadata):
            entry["tags"] = [text(tag) for tag in item.tags]
        elif isinstance(item, AuthenticationContent):
            entry["auth"] = describe_auth(item.authentication)
        elif isinstance(item, StreamDataMimetype):
            entry["data_mime"] = text(item.data_encoding)
        elif isinstance(item, StreamDataMimetypes):
            entry["accept"] = [text(mime) for mime in item.data_encodings]
        out.append(entry)
    return out


def parse_composite(metadata: bytes | None) -> tuple[CompositeMetadata | None, str | None]:
    """(rsocket-py's CompositeMetadata, None) or (None, the error it raised)."""
    if not metadata:
        return CompositeMetadata(), None
    try:
        return CompositeMetadata().parse(bytes(metadata)), None
    except Exception as exc:  # noqa: BLE001 - the library's own failure is what we report
        return None, f"{type(exc).__name__}: {exc}"


def summarize(composite: CompositeMetadata | None) -> dict:
    """route / tags / auth / data_mime_type / accept_mime_types / custom entries of a parsed
    composite metadata (what a routed request carried)."""
    out = {"route": None, "tags": [], "auth": None, "data_mime_type": None,
           "accept_mime_types": [], "custom": []}
    if composite is None:
        return out
    for item in composite.items:
        if isinstance(item, RoutingMetadata):
            if not out["tags"]:
                out["tags"] = [text(tag) for tag in item.tags]
                out["route"] = out["tags"][0] if out["tags"] else None
        elif isinstance(item, AuthenticationContent):
            if out["auth"] is None:
                out["auth"] = describe_auth(item.authentication)
        elif isinstance(item, StreamDataMimetype):
            out["data_mime_type"] = text(item.data_encoding)
        elif isinstance(item, StreamDataMimetypes):
            out["accept_mime_types"] = [text(mime) for mime in item.data_encodings]
        else:
            out["custom"].append({"mime": text(item.encoding), "content_b64": b64(item.content),
                                  "text": _utf8(item.content)})
    return out


def _utf8(data) -> str | None:
    try:
        return bytes(data or b"").decode("utf-8")
    except UnicodeDecodeError:
        return None


def describe_data(data, mime: str | None) -> dict:
    """``data`` (UTF-8 text or None), ``data_b64`` and ``json`` (parsed when the MIME type is
    JSON and the text parses, else None)."""
    raw = bytes(data or b"")
    decoded = _utf8(raw)
    parsed = None
    if decoded is not None and decoded != "" and mime is not None and (
            mime == APPLICATION_JSON or mime.endswith("+json")):
        try:
            parsed = json.loads(decoded)
        except ValueError:
            parsed = None
    return {"data": decoded, "data_b64": b64(raw), "json": parsed}


def split_pair(value: str, sep: str, what: str) -> tuple[str, str]:
    if sep not in value:
        raise ValueError(f"{what} must look like a{sep}b, got {value!r}")
    left, right = value.split(sep, 1)
    return left, right
