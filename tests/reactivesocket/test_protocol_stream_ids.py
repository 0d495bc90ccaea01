"""The 2015-draft server over an in-memory transport answers a client that opens its streams
on even ids (seed 001 §Stream Identifiers has no odd/even rule): the whole Twisted path, from
the bytes in to the Responder and back, with golden bytes from the draft's frame layout."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from rsocket_tx.core.payload import Payload
from rsocket_tx.reactivesocket import ReactiveSocketServerFactory
from rsocket_tx.responder import Responder


def h(*fields: str) -> bytes:
    return bytes.fromhex("".join(fields).replace(" ", ""))


class Echo(Responder):
    def request_response(self, payload):
        return Payload(b"re:" + payload.data)

    def request_stream(self, payload):
        return [Payload(b"a"), Payload(b"b")]


#: SETUP (§Setup Frame): length 18, version 0, no flags, type 0x0001, stream 0, two empty
#: MIME types, no data
SETUP = h("00000012", "00", "00", "0001", "0000000000000000", "00", "00")


def test_requests_on_even_stream_ids_are_answered():
    clock = Clock()
    transport = StringTransport()
    server = ReactiveSocketServerFactory(Echo, reactor=clock).buildProtocol(None)
    server.makeConnection(transport)
    server.dataReceived(
        SETUP
        # REQUEST_RESPONSE on stream 2, data "q"
        + h("00000011", "00", "00", "0011", "0000000000000002", "71")
        # REQUEST_STREAM on stream 4, initial request n 5, data "s"
        + h("00000019", "00", "00", "0013", "0000000000000004", "0000000000000005", "73"))
    clock.advance(0)
    assert transport.value() == (
        h("00000014", "00", "10", "0020", "0000000000000002", b"re:q".hex())  # RESPONSE+C
        + h("00000011", "00", "00", "0020", "0000000000000004", "61")        # RESPONSE "a"
        + h("00000011", "00", "00", "0020", "0000000000000004", "62")        # RESPONSE "b"
        + h("00000010", "00", "10", "0020", "0000000000000004"))             # COMPLETE


class FailingSource(Responder):
    def request_stream(self, payload):
        def items():
            yield Payload(b"a")
            raise KeyError("missing-key")
        return items()


@pytest.mark.logs_failure("a stream source on a client's even stream id raises",
                          match=r"KeyError: 'missing-key'")
def test_a_failing_stream_source_on_an_even_id_is_logged_as_the_servers():
    # the server serves stream 2 (the client opened it): the source's bug is the server's to
    # log with its traceback, not an error of a request of its own that reaches a caller
    clock = Clock()
    transport = StringTransport()
    server = ReactiveSocketServerFactory(FailingSource, reactor=clock).buildProtocol(None)
    server.makeConnection(transport)
    server.dataReceived(
        SETUP
        # REQUEST_STREAM on stream 2, initial request n 5, data "s"
        + h("00000019", "00", "00", "0013", "0000000000000002", "0000000000000005", "73"))
    clock.advance(0)
    out = transport.value()
    # RESPONSE "a" on stream 2, then an ERROR (type 0x0021, §Error Frame) on stream 2
    assert out.startswith(h("00000011", "00", "00", "0020", "0000000000000002", "61"))
    assert h("0021", "0000000000000002") in out[17:]
