"""The demo responder: what ``twistd rsocket`` and ``rsocket-tx serve`` answer with by default.

* request-response: echoes the request's data and metadata;
* request-stream: the data is a decimal count N (10 when empty); the stream is ``b"0"``,
  ``b"1"`` … ``b"N-1"``, then complete;
* request-channel: echoes every payload of the requester's stream (the one in REQUEST_CHANNEL
  first) as it arrives, and completes after the requester's stream completes;
* fire-and-forget and metadata-push: logged with :mod:`twisted.logger`.

It is handy to try a client against (``rsocket-tx stream tcp://localhost:7878 -d 5``) and is the
peer of the CLI's end-to-end tests.
"""

from __future__ import annotations

from twisted.logger import Logger

from ..core.errors import InvalidError
from ..core.payload import Payload
from ..extensions.redaction import describe_any_metadata, shown_bytes
from ..responder import Responder

__all__ = ["DemoResponder", "DEFAULT_STREAM_COUNT", "parse_count"]

#: The number of payloads of a request-stream whose data is empty.
DEFAULT_STREAM_COUNT = 10


def parse_count(data: bytes) -> int:
    """Parse the count of a demo request-stream.

    :param data: the request's data: ASCII decimal digits, surrounding whitespace allowed; empty
        (or only whitespace) means :data:`DEFAULT_STREAM_COUNT`.
    :returns: the count, >= 0.
    :raises InvalidError: (ERROR[INVALID] on the wire) if ``data`` is not a decimal count.
    """
    text = data.strip()
    if not text:
        return DEFAULT_STREAM_COUNT
    if not text.isdigit():
        shown = data if len(data) <= 32 else data[:32] + b"..."
        raise InvalidError(
            f"request-stream data must be a decimal count of payloads (or empty for "
            f"{DEFAULT_STREAM_COUNT}), got {shown!r}"
        )
    return int(text)


def _copy(payload: Payload) -> Payload:
    return Payload(payload.data, payload.metadata)


class DemoResponder(Responder):
    """Echo and count responder (see the module docstring for what each interaction does)."""

    log = Logger()

    def accept_setup(self, setup):
        """Log the connection's SETUP parameters and accept it."""
        self.log.info(
            "connection set up: version {version}, data {data_mime}, metadata {metadata_mime},"
            " keepalive {keepalive} ms, max lifetime {lifetime} ms",
            version=".".join(str(v) for v in getattr(setup, "version", ()) or ()),
            data_mime=getattr(setup, "data_mime_type", None),
            metadata_mime=getattr(setup, "metadata_mime_type", None),
            keepalive=getattr(setup, "keepalive_interval", None),
            lifetime=getattr(setup, "max_lifetime", None),
        )
        return super().accept_setup(setup)

    def request_response(self, payload: Payload) -> Payload:
        """Echo ``payload``: the response has the same data and metadata."""
        return _copy(payload)

    def request_stream(self, payload: Payload):
        """Count: ``payload.data`` is a decimal N (empty: 10); yield ``b"0"`` … ``b"N-1"``.

        :raises InvalidError: if the data is not a decimal count.
        """
        count = parse_count(payload.data)
        return (Payload(str(i).encode("ascii")) for i in range(count))

    def request_channel(self, payload: Payload, inbound):
        """Echo the requester's stream: ``payload`` first, then each inbound payload as it
        arrives; complete when the inbound side completes."""
        return self._echo(payload, inbound)

    async def _echo(self, first: Payload, inbound):
        yield _copy(first)
        async for payload in inbound:
            yield _copy(payload)

    def fire_and_forget(self, payload: Payload) -> None:
        """Log the payload (twisted.logger, level info; credentials in the metadata masked:
        :func:`~rsocket_tx.extensions.redaction.describe_any_metadata`)."""
        self.log.info("fire-and-forget: data={data} metadata={metadata}",
                      data=shown_bytes(payload.data),
                      metadata=describe_any_metadata(payload.metadata))

    def metadata_push(self, metadata: bytes) -> None:
        """Log the metadata (twisted.logger, level info; credentials masked)."""
        self.log.info("metadata-push: metadata={metadata}",
                      metadata=describe_any_metadata(metadata))
