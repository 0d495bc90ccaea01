"""Responders that our twistd server serves to the third-party clients in the interop tests.

Started as ``twistd -n --pidfile= rsocket --responder tests.interop.responders:InteropResponder``
(the repository root must be on ``sys.path``: the tests put it in ``PYTHONPATH``).

:class:`InteropResponder` behaves like :class:`rsocket_tx.apps.demo.DemoResponder` plus the peers'
``error:`` convention (``tests/interop/peers/README.md``):

* request-response echoes data and metadata; data starting with ``error:`` answers
  ERROR[APPLICATION_ERROR] with the rest of the data as the message;
* request-stream: data is a decimal count N (empty: 10), the stream is ``b"0"`` … ``b"N-1"``;
  data starting with ``error:`` answers ERROR[APPLICATION_ERROR] before any item;
* request-channel echoes every payload (the first one included); a first payload whose data
  *or metadata* starts with ``error:`` answers ERROR[APPLICATION_ERROR] (the peer clients
  always send ``b"0"`` as the first data, so metadata is how they can ask for an error);
* fire-and-forget and metadata-push are only reported.

A SETUP whose data starts with ``reject:`` is refused with ERROR[REJECTED_SETUP] carrying the
rest of the data as the message (reported as ``setup_rejected``).

Everything it sees is reported as one log line ``INTEROP-EVENT {json}`` (twisted.logger, so it
lands on twistd's stdout), which the tests read: ``setup``, ``request`` (``interaction`` +
payload), ``fnf`` (payload), ``metadata_push`` (metadata), ``stream_end`` (``outcome``:
``complete`` or ``closed`` — the source was closed early, i.e. cancelled — and ``sent``),
``channel_next`` (payload), ``channel_inbound_end`` (``outcome``: ``complete``, ``error`` with
``code``/``message``, or ``cancelled``).  A payload is described as in ``peers.py``: ``data``
and ``metadata`` in base64 (only when at most 256 bytes, else None), plus ``data_len``,
``data_sha256``, ``metadata_len`` and ``metadata_sha256`` (the metadata ones None when absent).
"""

from __future__ import annotations

import base64
import hashlib
import json

from twisted.logger import Logger

from rsocket_tx import ApplicationError, Payload, Responder, RSocketError
from rsocket_tx.apps.demo import parse_count
from rsocket_tx.core.errors import RejectedSetupError

__all__ = ["InteropResponder", "EVENT_MARKER", "describe"]

#: Prefix of the log lines carrying an event (followed by one JSON object).
EVENT_MARKER = "INTEROP-EVENT "

_SHOWN = 256

log = Logger(namespace="interop")


def _b64(value: bytes | None) -> str | None:
    if value is None or len(value) > _SHOWN:
        return None
    return base64.b64encode(value).decode("ascii")


def describe(data: bytes | None, metadata: bytes | None) -> dict:
    """JSON-able description of a payload (see the module docstring)."""
    data = bytes(data or b"")
    return {
        "data": _b64(data),
        "metadata": _b64(metadata),
        "data_len": len(data),
        "data_sha256": hashlib.sha256(data).hexdigest(),
        "metadata_len": None if metadata is None else len(metadata),
        "metadata_sha256": None if metadata is None else hashlib.sha256(metadata).hexdigest(),
    }


def report(event: str, **fields) -> None:
    """Log one event line (``INTEROP-EVENT {json}``)."""
    # The JSON goes in as a field so that braces in it are not taken for format fields.
    log.info("INTEROP-EVENT {json}", json=json.dumps({"event": event, **fields}))


def _application_error(payload: Payload, *, metadata_too: bool = False) -> ApplicationError | None:
    for value in (payload.data, payload.metadata if metadata_too else None):
        if value is not None and value.startswith(b"error:"):
            return ApplicationError(value[len(b"error:"):].decode("utf-8", "replace"))
    return None


class InteropResponder(Responder):
    """The demo responder plus the ``error:`` convention, reporting what it sees."""

    def accept_setup(self, setup):
        data = setup.payload.data or b""
        if data.startswith(b"reject:"):
            report("setup_rejected", message=data[len(b"reject:"):].decode("utf-8", "replace"))
            raise RejectedSetupError(data[len(b"reject:"):].decode("utf-8", "replace"))
        report("setup", version=list(setup.version), keepalive=setup.keepalive_interval,
               lifetime=setup.max_lifetime, data_mime_type=setup.data_mime_type,
               metadata_mime_type=setup.metadata_mime_type,
               **describe(setup.payload.data, setup.payload.metadata))

    def request_response(self, payload: Payload) -> Payload:
        report("request", interaction="request-response",
               **describe(payload.data, payload.metadata))
        error = _application_error(payload)
        if error is not None:
            raise error
        return Payload(payload.data, payload.metadata)

    def fire_and_forget(self, payload: Payload) -> None:
        report("fnf", **describe(payload.data, payload.metadata))

    def metadata_push(self, metadata: bytes) -> None:
        described = describe(b"", metadata)
        report("metadata_push", **{k: v for k, v in described.items() if k.startswith("meta")})

    def request_stream(self, payload: Payload):
        report("request", interaction="request-stream",
               **describe(payload.data, payload.metadata))
        error = _application_error(payload)
        if error is not None:
            raise error
        return self._count(parse_count(payload.data))

    @staticmethod
    def _count(count: int):
        sent = 0
        outcome = "closed"
        try:
            for i in range(count):
                sent += 1  # handed to the library (it pulls only as credit allows)
                yield Payload(str(i).encode("ascii"))
            outcome = "complete"
        finally:
            # GeneratorExit (the pump closed us: cancel) leaves outcome "closed"
            report("stream_end", outcome=outcome, sent=sent)

    def request_channel(self, payload: Payload, inbound):
        report("request", interaction="request-channel",
               **describe(payload.data, payload.metadata))
        error = _application_error(payload, metadata_too=True)
        if error is not None:
            raise error
        return self._echo(payload, inbound)

    @staticmethod
    async def _echo(first: Payload, inbound):
        yield Payload(first.data, first.metadata)
        outcome: dict = {"outcome": "cancelled"}
        try:
            async for item in inbound:
                report("channel_next", **describe(item.data, item.metadata))
                yield Payload(item.data, item.metadata)
            outcome = {"outcome": "complete"}
        except RSocketError as exc:
            outcome = {"outcome": "error", "code": exc.error_code, "message": exc.message}
            raise
        finally:
            report("channel_inbound_end", **outcome)
