"""Routed responders our twistd server serves to the third-party routing clients.

Started as ``twistd -n --pidfile= rsocket --responder
tests.interop.routed_responders:RoutedInterop`` (the repository root on ``sys.path``, as
``conftest.OurServer`` arranges).  The connection's metadata MIME type is composite metadata and
its data MIME type ``application/json`` (what the routing clients send).

Credentials (the same as ``peers/py/routing_server.py``'s defaults): ``simple`` user ``alice``
password ``secret`` (principal ``"alice"``), ``bearer`` token ``t0ken`` (principal
``"service"``).  :class:`RoutedInterop` serves anonymous requests too (``required=False``);
:class:`StrictRoutedInterop` refuses requests that are authenticated neither by the SETUP nor by
themselves.  Bad SETUP credentials: ERROR[REJECTED_SETUP]; bad request credentials (or a custom
auth type): ERROR[REJECTED].

Routes:

====================================  ================  ===================================
route                                 interaction       answer
====================================  ================  ===================================
``echo``                              request-response  the *seen* document (below)
``users.{user}.orders.{order}``       request-response  ``{"user", "order", "principal"}``
``fail``                              request-response  ERROR[APPLICATION_ERROR]
                                                        ``failed as asked``
anything else                         request-response  the fallback: ``{"fallback": route}``
``echo.stream``                       request-stream    seen, then ``{"index": i}`` for i <
                                                        ``data["count"]`` (default 2)
``echo.channel``                      request-channel   seen (``"index": 0``), then per
                                                        inbound payload ``{"index", "data"}``
``echo.fnf``                          fire-and-forget   only the ``routed`` event
====================================  ================  ===================================

Other routes of request-stream, request-channel and fire-and-forget have no fallback: the router
answers ERROR[REJECTED] naming the route.

The *seen* document: ``route``, ``tags``, ``variables``, ``principal``, ``auth`` (the request's
own credentials: ``{"type": "simple", "username", "password"}``, ``{"type": "bearer",
"token"}``, ``{"type": <custom type>, "payload_b64"}``), ``setup_auth`` (the SETUP's),
``data_mime_type`` (the request's, per-stream or the connection's), ``per_stream_mime`` (the
per-stream entry only), ``accept_mime_types``, ``data`` (decoded: JSON value or text),
``entries`` (every composite entry: ``mime``, ``id``, ``content_b64``), ``errors``.  Each routed
request is also logged as ``INTEROP-EVENT {"event": "routed", "interaction", "seen"}`` (see
``responders.py``), and so is each SETUP (``setup`` with ``auth``, ``data_mime_type``,
``metadata_mime_type``).
"""

from __future__ import annotations

import base64
import json

from rsocket_tx import ApplicationError, Payload, Responder, route
from rsocket_tx.authentication import AnyAuthenticator, BearerAuthenticator, SimpleAuthenticator
from rsocket_tx.extensions import APPLICATION_JSON, BearerAuth, SimpleAuth
from tests.interop.responders import report

__all__ = ["RoutedInterop", "StrictRoutedInterop", "USERS", "TOKENS"]

USERS = {"alice": "secret"}
TOKENS = {"t0ken": "service"}


def _b64(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def describe_auth(credentials) -> dict | None:
    if credentials is None:
        return None
    if isinstance(credentials, SimpleAuth):
        return {"type": "simple", "username": credentials.username,
                "password": credentials.password}
    if isinstance(credentials, BearerAuth):
        return {"type": "bearer", "token": credentials.token}
    return {"type": credentials.auth_type, "payload_b64": _b64(credentials.payload)}


def _jsonable(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"b64": _b64(bytes(value))}
    return value


def seen(request) -> dict:
    """What a routed request carried, as our library decoded it."""
    metadata = request.metadata
    setup = request.responder.setup
    return {
        "interaction": request.interaction,
        "route": request.route,
        "tags": list(metadata.tags),
        "variables": dict(request.variables),
        "principal": request.principal,
        "auth": describe_auth(request.auth),
        "setup_auth": describe_auth(setup.auth if setup is not None else None),
        "data_mime_type": request.data_mime_type,
        "per_stream_mime": metadata.data_mime_type,
        "accept_mime_types": list(metadata.accept_mime_types),
        "data": _jsonable(request.data) if request.payload.data else None,
        "entries": [{"mime": e.mime_type, "id": e.mime_id, "content_b64": _b64(e.content)}
                    for e in metadata.entries],
        "errors": list(metadata.errors),
    }


def _reported(request) -> dict:
    document = seen(request)
    report("routed", interaction=request.interaction.replace("_", "-"), seen=document)
    return document


def _answer(request, document):
    """A JSON response: through the codec when the response MIME type is JSON, else as an
    explicit JSON Payload (e.g. a text/plain request gets JSON bytes back)."""
    if request.response_mime_type == APPLICATION_JSON:
        return document
    return Payload(json.dumps(document).encode("utf-8"))


class RoutedInterop(Responder):
    """The routed interop responder (module docstring); anonymous requests are served."""

    authenticator = AnyAuthenticator(SimpleAuthenticator(USERS), BearerAuthenticator(TOKENS),
                                     required=False)

    def accept_setup(self, setup):
        report("setup", auth=describe_auth(setup.auth), data_mime_type=setup.data_mime_type,
               metadata_mime_type=setup.metadata_mime_type)
        return super().accept_setup(setup)

    @route("echo")
    def echo(self, request):
        return _answer(request, _reported(request))

    @route("users.{user}.orders.{order}")
    def order(self, request, user: str, order: str):
        _reported(request)
        return _answer(request, {"user": user, "order": order,
                                 "principal": request.principal})

    @route("fail")
    def fail(self, request):
        _reported(request)
        raise ApplicationError("failed as asked")

    @route.fallback("request_response")
    def fallback(self, request):
        _reported(request)
        return _answer(request, {"fallback": request.route})

    @route("echo.stream", interaction="request_stream")
    def stream(self, request):
        document = _reported(request)
        data = request.data if request.payload.data else None
        count = data.get("count", 2) if isinstance(data, dict) else 2
        return [document] + [{"index": i} for i in range(count)]

    @route("echo.channel", interaction="request_channel")
    async def channel(self, request):
        document = _reported(request)
        document["index"] = 0
        yield document
        index = 1
        async for payload in request.inbound:
            item = {"index": index, "data": _jsonable(request.decode(payload))}
            report("channel_next", **item)
            yield item
            index += 1

    @route("echo.fnf", interaction="fire_and_forget")
    def fnf(self, request) -> None:
        _reported(request)


class StrictRoutedInterop(RoutedInterop):
    """:class:`RoutedInterop` whose requests must be authenticated (SETUP or request)."""

    authenticator = AnyAuthenticator(SimpleAuthenticator(USERS), BearerAuthenticator(TOKENS),
                                     required=True)
