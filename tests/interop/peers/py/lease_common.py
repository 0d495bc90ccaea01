"""Shared parts of the rsocket-py 0.4.20 lease peers (lease_server.py, lease_client.py).

* :class:`RepeatingLeasePublisher`: the LEASE frames a peer grants: ``requests`` requests for
  ``ttl`` ms, once or every ``interval`` ms (rsocket-py's own ``SingleLeasePublisher`` sends
  one lease only).  Each lease sent prints a ``lease_sent`` event.
* :class:`EchoHandler`: request-response answers ``echo:<data>``; fire-and-forget prints a
  ``fnf`` event.  Every request prints a ``request`` event.
* :func:`lease_received`: the ``lease_received`` event of a LEASE frame that arrived.
* :func:`to_peer_error`: an exception of an rsocket-py request as ``{code, message}``.

rsocket-py facts these rely on (rsocket/rsocket_base.py, rsocket/lease.py):

* ``honor_lease=True`` sets the SETUP L flag (client) and makes the requester wait for a lease:
  a request the current lease does not allow is *queued*, and sent when a later LEASE allows
  it (never failed).  A lease counts from its reception.
* a SETUP with L reaching an ``RSocketServer`` without a ``lease_publisher`` is refused with
  ERROR[UNSUPPORTED_SETUP]; with one, the publisher is subscribed and its leases are sent.
* the responder side never enforces what it granted: requests beyond it are served.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from peer_common import emit
from reactivestreams.publisher import Publisher
from rsocket.error_codes import ErrorCode
from rsocket.exceptions import RSocketProtocolError
from rsocket.helpers import create_future
from rsocket.lease import DefinedLease
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler


class RepeatingLeasePublisher(Publisher):
    """Grant ``requests`` requests for ``ttl`` ms at once, then every ``interval`` ms (None:
    only once)."""

    def __init__(self, requests: int, ttl: int, interval: int | None, who: str):
        self.requests = requests
        self.ttl = ttl
        self.interval = interval
        self.who = who
        self.tasks: list[asyncio.Task] = []

    def subscribe(self, subscriber):
        self.tasks.append(asyncio.create_task(self._run(subscriber)))

    async def _run(self, subscriber):
        while True:
            subscriber.on_next(DefinedLease(
                maximum_request_count=self.requests,
                maximum_lease_time=timedelta(milliseconds=self.ttl)))
            emit({"event": "lease_sent", "by": self.who, "ttl": self.ttl,
                  "requests": self.requests})
            if self.interval is None:
                return
            await asyncio.sleep(self.interval / 1000.0)


class EchoHandler(BaseRequestHandler):
    """request-response -> ``echo:<data>``; fire-and-forget -> a ``fnf`` event."""

    who = "peer"

    async def request_response(self, payload: Payload):
        data = bytes(payload.data or b"").decode("utf-8", "replace")
        emit({"event": "request", "by": self.who, "interaction": "request-response",
              "data": data})
        return create_future(Payload(b"echo:" + (payload.data or b"")))

    async def request_fire_and_forget(self, payload: Payload):
        data = bytes(payload.data or b"").decode("utf-8", "replace")
        emit({"event": "request", "by": self.who, "interaction": "fire-and-forget",
              "data": data})


def lease_received(frame, who: str) -> dict:
    """The event of a LEASE frame received by ``who`` ("server" or "client")."""
    event = {"event": "lease_received", "by": who, "ttl": frame.time_to_live,
             "requests": frame.number_of_requests}
    emit(event)
    return event


def to_peer_error(exc: BaseException) -> dict | None:
    """rsocket-py raises RuntimeError(message) for APPLICATION_ERROR and
    RSocketProtocolError(error_code, data) for every other code."""
    if isinstance(exc, RSocketProtocolError):
        return {"code": int(exc.error_code), "message": exc.data or ""}
    if type(exc) is RuntimeError:
        return {"code": int(ErrorCode.APPLICATION_ERROR), "message": str(exc)}
    return None


async def request_sequence(rsocket, count: int, wait: float, prefix: str = "") -> list[dict]:
    """Send ``count`` request-responses one after another (data ``<prefix><i>``), each given
    ``wait`` seconds: ``{"index", "payload"}``, ``{"index", "error": {code, message}}`` or
    ``{"index", "queued": True}`` (no answer in time: rsocket-py still holds it for a lease)."""
    results = []
    for i in range(count):
        entry: dict = {"index": i}
        future = asyncio.ensure_future(rsocket.request_response(
            Payload(f"{prefix}{i}".encode())))
        try:
            response = await asyncio.wait_for(asyncio.shield(future), wait)
        except TimeoutError:
            entry["queued"] = True  # left queued: a later LEASE may still send it
        except Exception as exc:  # noqa: BLE001 - classified
            error = to_peer_error(exc)
            if error is None:
                raise
            entry["error"] = error
        else:
            entry["payload"] = bytes(response.data or b"").decode("utf-8", "replace")
        emit({"event": "result", **entry})
        results.append(entry)
    return results
