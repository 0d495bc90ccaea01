"""``RSocket.fire_and_forget_many``: the bulk form of fire-and-forget. The same REQUEST_FNF
frames as one ``fire_and_forget`` per payload, one Deferred per batch, fired once the batch is
handed to the transport; interceptors still see each request."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet.defer import Deferred
from twisted_support import LoggedPair, wait

from rsocket_tx import Payload, Responder
from rsocket_tx.client import make_setup
from rsocket_tx.core import errors as E
from rsocket_tx.core.frames import FrameType
from rsocket_tx.extensions import COMPOSITE_METADATA
from rsocket_tx.interceptors import Interaction, Interceptor, Side

aio = pytest_twisted.ensureDeferred


class Collecting(Responder):
    """Collects what fire-and-forget delivers; ``arrived`` fires once ``expected`` came."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.seen: list[Payload] = []
        self.expected = expected
        self.arrived: Deferred = Deferred()

    def fire_and_forget(self, payload):
        self.seen.append(payload)
        if len(self.seen) == self.expected:
            self.arrived.callback(self.seen)


@aio
async def test_batch_reaches_the_responder_in_order(harness):
    responder = Collecting(1000)
    rs = await harness.connect(await harness.serve(lambda: responder))
    d = rs.fire_and_forget_many([Payload(b"%d" % i) for i in range(1000)])
    assert isinstance(d, Deferred) and not d.called  # written at the end of this turn
    assert await wait(d) is None
    seen = await wait(responder.arrived)
    assert [p.data for p in seen] == [b"%d" % i for i in range(1000)]
    # the connection goes on as before, one by one too
    assert await wait(rs.fire_and_forget(Payload(b"after"))) is None


@aio
async def test_values_and_options_apply_to_each_payload(harness):
    responder = Collecting(3)
    rs = await harness.connect(await harness.serve(lambda: responder),
                               data_mime_type="application/json")
    await wait(rs.fire_and_forget_many([{"n": 1}, [2], Payload(b"3", b"m")]))
    seen = await wait(responder.arrived)
    assert [p.data for p in seen] == [b'{"n":1}', b"[2]", b"3"]
    assert seen[2].metadata == b"m"


def test_frames_are_those_of_one_fire_and_forget_each():
    def frames(send) -> list:
        pair = LoggedPair(Responder, make_setup(metadata_mime_type=COMPOSITE_METADATA))
        for _ in range(3):
            pair.clock.advance(0)
            pair.pump.flush()
        send(pair.rsocket)
        for _ in range(3):
            pair.clock.advance(0)
            pair.pump.flush()
        return [f for f in pair.sent["client"] if f.frame_type == FrameType.REQUEST_FNF]

    payloads = [Payload(b"a"), Payload(b"b" * 300)]
    one = frames(lambda rs: [rs.fire_and_forget(p, route="log.append") for p in payloads])
    many = frames(lambda rs: rs.fire_and_forget_many(payloads, route="log.append"))
    assert len(one) == 2 and many == one
    assert b"log.append" in many[0].metadata


@aio
async def test_too_large_payload_sends_nothing(harness):
    responder = Collecting(1)
    rs = await harness.connect(await harness.serve(lambda: responder),
                               max_send_buffer_size=4096)
    with pytest.raises(ValueError, match="max_send_buffer_size"):
        rs.fire_and_forget_many([Payload(b"small"), Payload(b"x" * 10_000)])
    await wait(rs.fire_and_forget(Payload(b"only")))
    seen = await wait(responder.arrived)
    assert [p.data for p in seen] == [b"only"]


@aio
async def test_closed_connection_raises(harness):
    rs = await harness.connect(await harness.serve(lambda: Collecting(1)))
    await wait(rs.close())
    with pytest.raises(E.LocalProtocolError, match="closed"):
        rs.fire_and_forget_many([Payload(b"x")])


@aio
async def test_interceptors_see_each_request(harness):
    started: list = []

    class Recorder(Interceptor):
        def request_started(self, request) -> None:
            if request.side is Side.REQUESTER:
                started.append(request.interaction)

    responder = Collecting(5)
    rs = await harness.connect(await harness.serve(lambda: responder),
                               interceptors=[Recorder()])
    await wait(rs.fire_and_forget_many([Payload(b"%d" % i) for i in range(5)]))
    await wait(responder.arrived)
    assert started == [Interaction.FIRE_AND_FORGET] * 5
