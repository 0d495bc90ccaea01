"""Credentials kept out of logs: metadata and bytes described for a log line with no
password, token or other credential in it.

Authentication metadata (``message/x.rsocket.authentication.v0``, RSocket Extensions
Security/Authentication.md), as a connection's metadata or as an entry of composite metadata
(``message/x.rsocket.composite-metadata.v0``, Extensions/CompositeMetadata.md), is decoded and
masked: ``simple`` keeps its username and shows ``password=***``, ``bearer`` shows
``token=***``, any other type only the length of its payload. Metadata that does not parse in
its MIME type is shown as its length only. Other bytes are shown cut at
:data:`SHOWN_BYTES`, with the password of any URI's ``user:password@`` masked.

Used by the ``--debug`` frame log (:mod:`rsocket_tx.faces.framelog`) and by the responders that
log what they do not handle (:class:`rsocket_tx.responder.Responder`, the demo). No I/O, no
Twisted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .auth import BearerAuth, Credentials, SimpleAuth, decode_auth
from .composite import CompositeEntry, decode_composite
from .mimetypes import AUTHENTICATION, COMPOSITE_METADATA, MetadataDecodeError

__all__ = ["SHOWN_BYTES", "URI_PASSWORD", "describe_any_metadata", "describe_metadata",
           "mask_uri_passwords", "masked_bytes", "shown_bytes"]

#: The password of a URI's user information, ``scheme://user:PASSWORD@`` (group 1).
URI_PASSWORD = re.compile(r"://[^/?#@:\s]*:([^/?#@\s]+)@")
_URI_PASSWORD_BYTES = re.compile(URI_PASSWORD.pattern.encode())

#: Bytes of a data or metadata field shown before it is cut.
SHOWN_BYTES = 64

_MASK = "***"


def mask_uri_passwords(text: str) -> str:
    """``text`` with the password of each ``scheme://user:password@`` in it shown as ``***``
    (``tcp://bob:***@host:7878``)."""
    return URI_PASSWORD.sub(lambda m: m.group(0)[:m.start(1) - m.start(0)] + _MASK + "@", text)


def masked_bytes(value: bytes, secrets: Iterable[bytes] = ()) -> bytes:
    """``value`` with each of ``secrets`` and each URI password shown as ``***``."""
    for secret in secrets:
        if secret:
            value = value.replace(secret, _MASK.encode())
    return _URI_PASSWORD_BYTES.sub(
        lambda m: m.group(0)[:m.start(1) - m.start(0)] + _MASK.encode() + b"@", value)


def shown_bytes(value: bytes, secrets: Iterable[bytes] = ()) -> str:
    """``value`` for a log line: masked (:func:`masked_bytes`), its repr cut at
    :data:`SHOWN_BYTES` with the whole length after it."""
    value = masked_bytes(value, secrets)
    if len(value) <= SHOWN_BYTES:
        return repr(value)
    return f"{value[:SHOWN_BYTES]!r}...<{len(value)} bytes>"


def _describe_credentials(credentials: Credentials) -> str:
    if isinstance(credentials, SimpleAuth):
        return f"simple(username={credentials.username!r}, password={_MASK})"
    if isinstance(credentials, BearerAuth):
        return f"bearer(token={_MASK})"
    return f"{credentials.auth_type!r}(<{len(credentials.payload)} bytes hidden>)"


def _describe_auth(content: bytes) -> str:
    try:
        return "auth:" + _describe_credentials(decode_auth(content))
    except MetadataDecodeError:
        return f"<{len(content)} bytes: not valid authentication metadata, not shown>"


def _describe_entry(entry: CompositeEntry, secrets: Iterable[bytes]) -> str:
    if entry.mime_type == AUTHENTICATION:
        return _describe_auth(entry.content)
    return f"{entry.mime_type}:{shown_bytes(entry.content, secrets)}"


def describe_metadata(metadata: bytes | bytearray | memoryview, mime_type: str | None,
                      secrets: Iterable[bytes] = (), *, fragment: bool = False) -> str:
    """A frame's metadata for the log, with no credential in it (see the module docstring).

    :param metadata: the metadata bytes.
    :param mime_type: the connection's metadata MIME type (lower case), or None if unknown.
    :param secrets: bytes shown as ``***`` wherever they occur.
    :param fragment: the bytes are a fragment of the metadata (FOLLOWS, or a frame continuing
        one): with an authentication, composite or unknown MIME type only the length is shown.
    :returns: e.g. ``"composite[message/x.rsocket.routing.v0:b'\\x04echo',
        auth:simple(username='alice', password=***)]"``.
    """
    metadata = bytes(metadata)
    if mime_type in (AUTHENTICATION, COMPOSITE_METADATA, None) and fragment and metadata:
        return f"<{len(metadata)} bytes of a fragment, not shown>"
    if mime_type == AUTHENTICATION:
        return _describe_auth(metadata)
    if mime_type in (COMPOSITE_METADATA, None):
        entries = decode_composite(metadata)  # never raises: a bad entry has ``error`` set
        parsed = not any(entry.error for entry in entries)
        if parsed and any(entry.mime_type == AUTHENTICATION for entry in entries):
            return "composite[" + ", ".join(_describe_entry(entry, secrets)
                                            for entry in entries) + "]"
        if not parsed and mime_type is not None:
            return f"<{len(metadata)} bytes: not valid composite metadata, not shown>"
    return shown_bytes(metadata, secrets)


def describe_any_metadata(metadata: bytes | bytearray | memoryview | None) -> str:
    """Metadata whose MIME type is not known, for a log line: composite metadata that parses
    has its authentication entries masked; metadata that decodes as ``simple`` or ``bearer``
    authentication metadata is shown masked; anything else as bytes, cut and with URI
    passwords masked (:func:`describe_metadata` with no MIME type).

    :param metadata: the metadata bytes, or None (shown as ``None``).
    :returns: the text for the log.
    """
    if metadata is None:
        return "None"
    metadata = bytes(metadata)
    shown = describe_metadata(metadata, None)
    if shown.startswith("composite["):
        return shown
    try:
        credentials = decode_auth(metadata)
    except MetadataDecodeError:
        return shown
    if isinstance(credentials, (SimpleAuth, BearerAuth)):
        return "auth:" + _describe_credentials(credentials)
    return shown
