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
from collections.abc import Callable, Iterable

from twisted.logger import Logger

from ..core.errors import error_code_name
from ..extensions.redaction import (
    URI_PASSWORD,
    describe_metadata,
    mask_uri_passwords,
    shown_bytes,
)

__all__ = [
    "URI_PASSWORD",
    "FrameDescriber",
    "describe_frame",
    "describe_metadata",
    "make_frame_logger",
    "mask_uri_passwords",
]

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
            parts.append(f"{field.name}={shown_bytes(bytes(value), secrets)}")
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

    # (a function attribute, read with getattr by the protocol)
    frame_logger.__dict__["for_connection"] = for_connection
    return frame_logger
