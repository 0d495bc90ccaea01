"""rsocket_tx.testing: the in-memory connected pair applications test their responders with,
and the pytest-twisted recipe of docs/guides.rst (a real loopback server and client)."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import task
from twisted.internet.defer import Deferred

from rsocket_tx import (
    ApplicationError,
    ConnectionCloseError,
    Payload,
    RejectedSetupError,
    Responder,
    connect,
    route,
    serve,
)
from rsocket_tx.testing import ConnectedPair, NotFiredError, connected_pair


class Greeter(Responder):
    def request_response(self, payload):
        if payload.data == b"nobody":
            raise ApplicationError("who is nobody?")
        return Payload(b"hello " + payload.data)

    def request_stream(self, payload):
        return (Payload(str(i).encode()) for i in range(int(payload.data)))

    async def request_channel(self, payload, inbound):
        async for item in inbound:
            yield Payload(item.data.upper())


def test_request_response_goes_through_the_protocol():
    pair = connected_pair(Greeter)
    assert isinstance(pair, ConnectedPair)
    assert pair.client.is_open and pair.server.is_open
    assert isinstance(pair.responder, Greeter)
    assert pair.responder.rsocket is pair.server
    d = pair.client.request_response(Payload(b"you"))
    assert not d.called  # nothing moves until the pair is pumped
    assert pair.result(d) == Payload(b"hello you")


def test_an_error_from_the_responder_is_raised_by_result():
    pair = connected_pair(Greeter)
    with pytest.raises(ApplicationError, match="who is nobody"):
        pair.result(pair.client.request_response(Payload(b"nobody")))


def test_streams_and_channels():
    pair = connected_pair(Greeter)
    items = pair.result(pair.client.request_stream(Payload(b"3"), prefetch=1).collect())
    assert [p.data for p in items] == [b"0", b"1", b"2"]
    channel = pair.client.request_channel(Payload(b"a"), [Payload(b"b"), Payload(b"c")])
    assert [p.data for p in pair.result(channel.collect())] == [b"B", b"C"]


def test_time_moves_only_when_the_clock_is_advanced():
    clock = task.Clock()

    class Slow(Responder):
        def request_response(self, payload):
            return task.deferLater(clock, 5, lambda: payload)

    pair = connected_pair(Slow, clock=clock)
    assert pair.clock is clock
    d = pair.client.request_response(Payload(b"later"))
    with pytest.raises(NotFiredError):
        pair.result(d)
    pair.advance(4.9)
    assert not d.called
    pair.advance(0.1)
    assert pair.result(d) == Payload(b"later")
    assert pair.result(d) == Payload(b"later")  # asked again: the same result


def test_the_server_requests_the_clients_responder():
    pair = connected_pair(Responder, client_responder=Greeter())
    assert pair.result(pair.server.request_response(Payload(b"server"))) == \
        Payload(b"hello server")


def test_routes_and_json_with_setup_options():
    class Orders(Responder):
        @route("orders.{id}")
        def order(self, request, id):
            return {"id": int(id), "quantity": request.data["quantity"]}

    pair = connected_pair(Orders, data_mime_type="application/json",
                          metadata_mime_type="message/x.rsocket.composite-metadata.v0")
    d = pair.client.request_response({"quantity": 2}, route="orders.7", decode=True)
    assert pair.result(d) == {"id": 7, "quantity": 2}


def test_a_rejected_setup_closes_the_client():
    class Closed(Responder):
        def accept_setup(self, setup):
            raise RejectedSetupError(f"not today, {setup.payload.data.decode()}")

    pair = connected_pair(Closed, setup_payload=Payload(b"alice"))
    assert isinstance(pair.responder, Closed)
    assert not pair.client.is_open
    assert isinstance(pair.client.close_reason, RejectedSetupError)
    assert "not today, alice" in str(pair.client.close_reason)


def test_close_fails_what_is_open_and_leaves_nothing_scheduled():
    pair = connected_pair(Greeter)
    answered = pair.client.request_response(Payload(b"x"))
    pair.flush()
    pending: Deferred = pair.client.request_response(Payload(b"y"))  # not sent yet
    pair.close()
    assert not pair.client.is_open and not pair.server.is_open
    assert pair.clock.getDelayedCalls() == []
    assert pair.result(answered) == Payload(b"hello x")
    with pytest.raises(ConnectionCloseError):
        pair.result(pending)


# --------------------------------------------------------------------- the pytest-twisted recipe
# (docs/guides.rst shows this fixture and test; keep them in step)


@pytest_twisted.async_yield_fixture
async def greeter_client():
    port = await serve("tcp:0:interface=127.0.0.1", Greeter)
    rsocket = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}")
    yield rsocket
    await rsocket.close()
    await port.stopListening()


@pytest_twisted.ensureDeferred
async def test_greeter_over_tcp(greeter_client):
    response = await greeter_client.request_response(Payload(b"tcp"))
    assert response == Payload(b"hello tcp")
    items = [p.data async for p in greeter_client.request_stream(Payload(b"2"))]
    assert items == [b"0", b"1"]
