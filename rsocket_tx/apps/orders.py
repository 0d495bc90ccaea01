"""A routed, authenticated order service: the example of the extensions documentation.

Serve it with ``twistd -n rsocket --listen tcp:7878 --responder
rsocket_tx.apps.orders:OrderService`` (or ``rsocket-tx serve`` with the same options). Clients
send routes and credentials in composite metadata (``message/x.rsocket.composite-metadata.v0``)
and JSON data (the SETUP's data MIME type, ``application/json``, or a per-stream MIME entry;
CBOR works the same way). Routes:

==================  ================  ===================================================
route               interaction       what it does
==================  ================  ===================================================
``orders.create``   request-response  data ``{"item": str, "qty": int}`` -> the new order
``orders.{id}``     request-response  the order with that id (ERROR[INVALID] if unknown)
``orders.feed``     request-stream    every order so far, then complete (data: optional
                                      ``{"owner": str}`` filter)
``orders.bulk``     request-channel   each inbound ``{"item", "qty"}`` creates an order; the
                                      created orders stream back
``orders.audit``    fire-and-forget   logs the data with the caller's name
==================  ================  ===================================================

Every request must be authenticated, in the SETUP or in the request: the ``simple`` type with
user ``alice`` / password ``secret`` or ``bob`` / ``hunter2``, or the ``bearer`` token
``demo-token`` (principal ``service``). Set ``RSOCKET_TX_ORDERS_USERS`` to
``user:password,user:password`` to replace the demo users. An unknown route gets ERROR[REJECTED]
naming it and listing the routes. Orders are kept in memory, shared by all connections of one
server process.
"""

from __future__ import annotations

import itertools
import os

from twisted.logger import Logger

from ..authentication import AnyAuthenticator, BearerAuthenticator, SimpleAuthenticator
from ..core.errors import InvalidError, RejectedError
from ..responder import Responder
from ..routing import Request, route

__all__ = ["OrderService", "OrderBook", "DEMO_USERS", "DEMO_TOKENS"]

#: The demo users (username -> password), unless ``RSOCKET_TX_ORDERS_USERS`` is set.
DEMO_USERS = {"alice": "secret", "bob": "hunter2"}
#: The demo bearer tokens (token -> principal).
DEMO_TOKENS = {"demo-token": "service"}


def _users() -> dict[str, str]:
    spec = os.environ.get("RSOCKET_TX_ORDERS_USERS")
    if not spec:
        return dict(DEMO_USERS)
    users = {}
    for item in spec.split(","):
        name, sep, password = item.partition(":")
        if not sep or not name:
            raise ValueError(f"RSOCKET_TX_ORDERS_USERS: expected user:password[,...], "
                             f"got {item!r}")
        users[name] = password
    return users


class OrderBook:
    """Orders in memory: ``{"id": str, "item": str, "qty": int, "owner": str}`` dicts."""

    def __init__(self) -> None:
        self.orders: dict[str, dict] = {}
        self._ids = itertools.count(1)

    def create(self, data, owner: str) -> dict:
        """Validate ``data`` (``{"item": non-empty str, "qty": int >= 1}``) and store an order.

        :raises InvalidError: the data is not such an object.
        """
        if not isinstance(data, dict):
            raise InvalidError(f"an order is an object {{\"item\", \"qty\"}}, "
                               f"got {type(data).__name__}")
        item, qty = data.get("item"), data.get("qty")
        if not isinstance(item, str) or not item:
            raise InvalidError("order.item must be a non-empty string")
        if not isinstance(qty, int) or isinstance(qty, bool) or qty < 1:
            raise InvalidError("order.qty must be an integer >= 1")
        order_id = str(next(self._ids))
        order = {"id": order_id, "item": item, "qty": qty, "owner": owner}
        self.orders[order_id] = order
        return order


class OrderService(Responder):
    """The order service (see the module docstring); one instance per connection."""

    log = Logger()
    book = OrderBook()
    authenticator = AnyAuthenticator(SimpleAuthenticator(_users()),
                                     BearerAuthenticator(DEMO_TOKENS))

    @route("orders.create")
    def create(self, request: Request):
        return self.book.create(request.data, request.principal)

    @route("orders.{id}")
    def get(self, request: Request, id: str):  # noqa: A002 - the route's variable name
        order = self.book.orders.get(id)
        if order is None:
            raise InvalidError(f"no order {id!r}")
        return order

    @route("orders.feed", interaction="request_stream")
    def feed(self, request: Request):
        wanted = None
        if request.payload.data:
            query = request.data
            wanted = query.get("owner") if isinstance(query, dict) else None
        return [o for o in list(self.book.orders.values())
                if wanted is None or o["owner"] == wanted]

    @route("orders.bulk", interaction="request_channel")
    async def bulk(self, request: Request):
        yield self.book.create(request.data, request.principal)
        assert request.inbound is not None  # (a channel's request has its inbound stream)
        async for payload in request.inbound:
            yield self.book.create(request.decode(payload), request.principal)

    @route("orders.audit", interaction="fire_and_forget")
    def audit(self, request: Request) -> None:
        self.log.info("audit from {who}: {data!r}", who=request.principal, data=request.data)

    @route.fallback()
    def unknown(self, request: Request):
        router = self._router
        assert router is not None  # (a class with routes has its router)
        routes = sorted({r for rs in router.routes().values() for r in rs})
        raise RejectedError(f"no route {request.route!r} for "
                            f"{request.interaction.replace('_', '-')}; this service has "
                            f"{', '.join(routes)}")
