"""The ``--debug`` frame log of the RSocket faces (``twistd rsocket --debug``, ``twistd
rs2015 --debug``, ``rsocket-tx ... --debug``): one line per frame sent or received,
with no credential in it.

A frame's metadata is decoded with the extension codecs (:mod:`rsocket_tx.extensions`) in the
connection's metadata MIME type, which the log learns from the connection's SETUP:

* authentication metadata (``message/x.rsocket.authentication.v0``, Extensions/Security/
  Authentication.md), as the connection's metadata or as an entry of composite metadata
  (``message/x.rsocket.composite-metadata.v0``), in SETUP or in any other frame, is shown
  decoded and masked: ``simple`` with its username and ``password=***``, ``bearer`` as
  ``token=***``, any other type with only the length of its payload;
* metadata that does not parse in that MIME type (and a fragment of it: a frame with the
  FOLLOWS flag, or one continuing it) is shown as its length only, never as raw bytes;
* other metadata, and data, are shown as bytes (cut at 64), with the password of any URI's
  ``user:password@`` masked, and any ``secrets`` given (the CLI's own) masked.

A frame logger that sees no SETUP (a resumed connection's new transport, or a plain call of
the logger) does not know the MIME type: it masks authentication entries of metadata that
parses as composite metadata and shows other metadata as bytes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable

from twisted.logger import Logger

from ..core.errors import error_code_name
from ..extensions.auth import BearerAuth, Credentials, SimpleAuth, decode_auth
from ..extensions.composite import CompositeEntry, decode_composite
from ..extensions.mimetypes import AUTHENTICATION, COMPOSITE_METADATA, MetadataDecodeError

__all__ = [
    "URI_PASSWORD",
    "FrameDescriber",
    "describe_frame",
    "describe_metadata",
    "make_frame_logger",
    "mask_uri_passwords",
]

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


def _masked_bytes(value: bytes, secrets: Iterable[bytes]) -> bytes:
    for secret in secrets:
        if secret:
            value = value.replace(secret, _MASK.encode())
    return _URI_PASSWORD_BYTES.sub(
        lambda m: m.group(0)[:m.start(1) - m.start(0)] + _MASK.encode() + b"@", value)


def _shown_bytes(value: bytes, secrets: Iterable[bytes]) -> str:
    value = _masked_bytes(value, secrets)
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
    return f"{entry.mime_type}:{_shown_bytes(entry.content, secrets)}"


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
    return _shown_bytes(metadata, secrets)


def _mime_type(value: bytes) -> str:
    return bytes(value).decode("ascii", "replace").strip().lower()


def describe_frame(frame, secrets: Iterable[bytes] = (), *, metadata_mime_type: str | None = None,
                   continuation: bool = False) -> str:
    """One line describing a decoded frame, for the ``--debug`` log.

    :param frame: a frame object of :mod:`rsocket_tx.core.frames` (or of
        :mod:`rsocket_tx.reactivesocket.frames`).
    :param secrets: bytes shown as ``***`` wherever they occur in a data or metadata field
        (credentials given on the command line), before the field is cut.
    :param metadata_mime_type: the connection's metadata MIME type (from its SETUP), or None
        when unknown; a SETUP frame's own is used for it.
    :param continuation: the frame continues a fragmented one (its metadata is a fragment).
    :returns: e.g. ``"REQUEST_STREAM stream=1 initial_request_n=256 data=b'5'"``: the type, the
        stream id, then each field; boolean flags appear by name when set, ``None`` fields are
        left out, bytes longer than 64 are cut (the full length is shown), error codes by name,
        metadata decoded with authentication masked (:func:`describe_metadata`).
    """
    secrets = tuple(secrets)
    frame_type = getattr(frame, "frame_type", None)
    name = getattr(frame_type, "name", None) or type(frame).__name__
    if not dataclasses.is_dataclass(frame):
        return f"{name} {frame!r}"
    setup_mime_type = getattr(frame, "metadata_mime_type", None)
    if name == "SETUP" and isinstance(setup_mime_type, bytes):
        metadata_mime_type = _mime_type(setup_mime_type)
    fragment = continuation or bool(getattr(frame, "follows", False))
    parts = [name, f"stream={getattr(frame, 'stream_id', 0)}"]
    for field in dataclasses.fields(frame):
        if field.name == "stream_id":
            continue
        value = getattr(frame, field.name)
        if isinstance(value, bool):
            if value:
                parts.append(field.name)
        elif value is None:
            continue
        elif field.name == "metadata" and isinstance(value, (bytes, bytearray, memoryview)):
            parts.append("metadata=" + describe_metadata(value, metadata_mime_type, secrets,
                                                         fragment=fragment))
        elif isinstance(value, (bytes, bytearray, memoryview)):
            parts.append(f"{field.name}={_shown_bytes(bytes(value), secrets)}")
        elif field.name == "error_code":
            parts.append(f"error_code={error_code_name(value)}")
        else:
            parts.append(f"{field.name}={value}")
    return " ".join(parts)


class FrameDescriber:
    """Describes the frames of one connection, both ways (:func:`describe_frame`): it learns
    the metadata MIME type from the SETUP and which frames continue a fragmented one.

    :param secrets: bytes never shown (see :func:`describe_frame`).
    :param learn: learn the MIME type from SETUP frames (False for a describer shared by
        several connections, which cannot tell whose SETUP it saw).
    """

    __slots__ = ("secrets", "metadata_mime_type", "_learn", "_following")

    def __init__(self, secrets: Iterable[bytes] = (), *, learn: bool = True) -> None:
        self.secrets = tuple(secrets)
        #: the connection's metadata MIME type once its SETUP was seen, else None
        self.metadata_mime_type: str | None = None
        self._learn = learn
        self._following: set[tuple[str, int]] = set()  # (direction, stream id) mid-fragment

    def describe(self, direction: str, frame) -> str:
        """The line of ``frame`` (without the direction).

        :param direction: ``"send"`` or ``"recv"``.
        """
        if self._learn and getattr(getattr(frame, "frame_type", None), "name", None) == \
                "SETUP" and isinstance(getattr(frame, "metadata_mime_type", None), bytes):
            self.metadata_mime_type = _mime_type(frame.metadata_mime_type)
        key = (direction, getattr(frame, "stream_id", 0))
        continuation = key in self._following
        if getattr(frame, "follows", False):
            self._following.add(key)
        else:
            self._following.discard(key)
        return describe_frame(frame, self.secrets, metadata_mime_type=self.metadata_mime_type,
                              continuation=continuation)


def make_frame_logger(
    emit: Callable[[str], None] | None = None, secrets: Iterable[bytes] = (),
) -> Callable[[str, object], None]:
    """Build a ``frame_logger`` for :func:`rsocket_tx.serve` / :func:`rsocket_tx.connect`.

    A protocol calls the logger's ``for_connection(log)`` with its
    :class:`~rsocket_tx.bridge.ConnectionLogger` and logs that connection's frames through
    what it returns: each connection gets its own :class:`FrameDescriber` (its SETUP's
    metadata MIME type decides how its metadata is decoded and masked).

    :param emit: called with one line per frame (``"send REQUEST_RESPONSE stream=1 ..."``);
        ``None``: log it with :mod:`twisted.logger` at level debug, namespace
        ``rsocket_tx.frames``, each line carrying the connection id and peer
        (``"[c17 127.0.0.1:54321] recv REQUEST_RESPONSE stream=1"``).
    :param secrets: bytes never shown (see :func:`describe_frame`).
    :returns: ``frame_logger(direction, frame)``, ``direction`` being ``"send"`` or ``"recv"``.
    """
    secrets = tuple(secrets)

    def writer(log) -> Callable[[str, str], None]:
        if emit is not None:
            return lambda direction, description: emit(f"{direction} {description}")
        return lambda direction, description: log.debug(
            "{direction} {description}", direction=direction, description=description)

    def logger_for(describer: FrameDescriber,
                   write: Callable[[str, str], None]) -> Callable[[str, object], None]:
        def frame_logger(direction: str, frame) -> None:
            write(direction, describer.describe(direction, frame))
        return frame_logger

    # a plain call (no connection): shared by whoever calls it, so it learns no MIME type
    frame_logger = logger_for(FrameDescriber(secrets, learn=False),
                              writer(Logger(namespace="rsocket_tx.frames")))

    def for_connection(connection_log) -> Callable[[str, object], None]:
        log = None if emit is not None else connection_log.child("rsocket_tx.frames")
        return logger_for(FrameDescriber(secrets), writer(log))

    frame_logger.for_connection = for_connection  # type: ignore[attr-defined]
    return frame_logger
