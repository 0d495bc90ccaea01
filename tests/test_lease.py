"""Leases on Twisted connections, both directions (spec §Lease Semantics, §LEASE Frame,
§Connection Establishment).

A client and a server connected in memory (iosim) on one Clock: the requester fails fast with
:class:`LeaseError` without a valid lease (none yet, used up, expired), the responder grants
what its policy decides and answers requests beyond its grant with ERROR[REJECTED]. A few
tests use real loopback TCP (``connect``/``serve``) and the ``twistd``/CLI options.
"""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import Clock
from twisted.test.iosim import connectedServerAndClient
from twisted_support import EchoResponder, Harness, parse, server_protocol, wait, wire

from rsocket_tx import (
    FixedRateLeasePolicy,
    Lease,
    LeaseError,
    LeasePolicy,
    Payload,
    Responder,
    RSocketClientFactory,
    RSocketServerFactory,
)
from rsocket_tx.client import make_setup
from rsocket_tx.core.errors import (
    ConnectionLostError,
    LocalProtocolError,
    RejectedError,
    RejectedSetupError,
)
from rsocket_tx.core.frames import (
    ErrorFrame,
    FrameType,
    LeaseFrame,
    PayloadFrame,
    RequestFnfFrame,
    RequestResponseFrame,
    RequestStreamFrame,
)
from rsocket_tx.lease import (
    LEASE_EXPIRED,
    LEASE_USED_UP,
    MAX_LEASE_VALUE,
    NO_LEASE,
    ConcurrencyLeasePolicy,
)

REJECTED = 0x202


class Recording(LeasePolicy):
    """Grants ``lease`` (or None) every ``interval`` ms and records every call."""

    def __init__(self, lease: Lease | None, interval: int = 1_000) -> None:
        self.lease = lease
        self.interval = interval
        self.calls: list = []

    def next_lease(self, now, stats):
        self.calls.append((now, stats))
        return self.lease


class Counting(EchoResponder):
    served: list

    def __init__(self) -> None:
        self.served = []

    def request_response(self, payload):
        self.served.append(payload.data)
        return super().request_response(payload)

    def fire_and_forget(self, payload):
        self.served.append(payload.data)


class Pair:
    """A client and a server in memory on one Clock, logging the frames each sends.

    :param server_policy: what the server grants (None: the server's default).
    :param client_lease: ``connect(lease=...)``: False, True or the client's policy.
    """

    def __init__(self, server_policy=None, client_lease=True, *, server_responder=None,
                 client_responder=None, fragment_size=None) -> None:
        self.clock = Clock()
        self.sent = {"client": [], "server": []}
        self.server_responder = server_responder or Counting()
        self.client_responder = client_responder or Counting()

        def logger(side):
            return lambda direction, frame: (
                direction == "send" and self.sent[side].append(frame))

        server_factory = RSocketServerFactory(lambda: self.server_responder, reactor=self.clock,
                                              lease_policy=server_policy,
                                              fragment_size=fragment_size,
                                              frame_logger=logger("server"))
        client_policy = client_lease if isinstance(client_lease, LeasePolicy) else None
        client_factory = RSocketClientFactory(
            make_setup(lease=bool(client_lease), max_lifetime=60_000),
            self.client_responder, reactor=self.clock, lease_policy=client_policy,
            fragment_size=fragment_size, frame_logger=logger("client"))
        self.client, self.server, self.pump = connectedServerAndClient(
            lambda: server_factory.buildProtocol(None),
            lambda: client_factory.buildProtocol(None), clock=self.clock)
        self.rsocket = self.client.rsocket
        self.pump.flush()

    def frames(self, side: str, frame_type: FrameType) -> list:
        return [f for f in self.sent[side] if f.frame_type == frame_type]

    def requests(self, side: str) -> list:
        return [f for f in self.sent[side]
                if FrameType.REQUEST_RESPONSE <= f.frame_type <= FrameType.REQUEST_CHANNEL]

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.pump.flush()

    def request(self, data: bytes = b"x") -> Deferred:
        d = self.rsocket.request_response(Payload(data))
        self.pump.flush()
        return d


def lease_error(call) -> LeaseError:
    with pytest.raises(LeaseError) as info:
        call()
    return info.value


# ------------------------------------------------------------------------------ establishment


def test_the_setup_lease_flag_is_honoured_and_both_sides_grant_at_once():
    pair = Pair(FixedRateLeasePolicy(ttl=10_000, requests=5),
                FixedRateLeasePolicy(ttl=20_000, requests=2))
    setup = pair.sent["client"][0]
    assert setup.frame_type == FrameType.SETUP and setup.lease
    assert pair.server.rsocket.is_open
    assert pair.frames("server", FrameType.LEASE) == [LeaseFrame(ttl=10_000,
                                                                 number_of_requests=5)]
    assert pair.frames("client", FrameType.LEASE) == [LeaseFrame(ttl=20_000,
                                                                 number_of_requests=2)]
    assert pair.client.lease.enabled and pair.server.lease.enabled
    assert pair.client.lease.received == Lease(10_000, 5)
    assert pair.client.lease.granted == Lease(20_000, 2)
    assert pair.server.lease.received == Lease(20_000, 2)
    assert pair.client.lease.available() == 5
    assert pair.server.lease.available() == 2


def test_a_server_without_a_policy_grants_an_unlimited_lease():
    pair = Pair(None, True)
    assert pair.frames("server", FrameType.LEASE) == [
        LeaseFrame(ttl=MAX_LEASE_VALUE, number_of_requests=MAX_LEASE_VALUE)]
    assert pair.frames("client", FrameType.LEASE) == [
        LeaseFrame(ttl=MAX_LEASE_VALUE, number_of_requests=MAX_LEASE_VALUE)]
    assert pair.request().result == Payload(b"x")


def test_without_the_lease_flag_there_are_no_leases():
    pair = Pair(FixedRateLeasePolicy(ttl=1_000, requests=1), client_lease=False)
    assert not pair.sent["client"][0].lease
    assert pair.frames("server", FrameType.LEASE) == []
    assert pair.frames("client", FrameType.LEASE) == []
    assert not pair.client.lease.enabled
    assert pair.client.lease.available() is None
    assert pair.client.lease.stats() is None
    for i in range(3):  # the policy's single request does not limit anything
        assert pair.request(b"%d" % i).result == Payload(b"%d" % i)
    with pytest.raises(LocalProtocolError, match="does not use leases"):
        pair.client.lease.send(Lease(1_000, 1))


def test_a_lease_frame_on_a_connection_without_leases_is_ignored():
    pair = Pair(client_lease=False)
    pair.client.dataReceived(wire(LeaseFrame(ttl=1_000, number_of_requests=0)))
    assert pair.client.lease.received is None
    assert pair.request().result == Payload(b"x")


# ------------------------------------------------------------------------------ requester


def test_a_request_without_a_lease_fails_fast_and_sends_nothing():
    pair = Pair(Recording(None))  # the server's policy grants nothing
    assert pair.frames("server", FrameType.LEASE) == []
    for call in (lambda: pair.rsocket.request_response(Payload(b"a")),
                 lambda: pair.rsocket.fire_and_forget(Payload(b"b")),
                 lambda: pair.rsocket.request_stream(Payload(b"c")),
                 lambda: pair.rsocket.request_channel(Payload(b"d"))):
        err = lease_error(call)
        assert err.reason == NO_LEASE
        assert isinstance(err, RejectedError) and isinstance(err, LocalProtocolError)
        assert "no lease from the peer yet" in str(err)
    pair.pump.flush()
    assert pair.requests("client") == []
    assert pair.server_responder.served == []


def test_the_lease_is_used_up_by_every_kind_of_request():
    pair = Pair(FixedRateLeasePolicy(ttl=60_000, requests=4))
    assert pair.request(b"1").result == Payload(b"1")
    pair.rsocket.fire_and_forget(Payload(b"2"))
    stream = pair.rsocket.request_stream(Payload(b"1"))
    channel = pair.rsocket.request_channel(Payload(b"4"))
    pair.pump.flush()
    assert pair.client.lease.available() == 0
    err = lease_error(lambda: pair.rsocket.request_response(Payload(b"5")))
    assert err.reason == LEASE_USED_UP
    assert "lease of 4 requests is used up" in err.message
    pair.pump.flush()
    assert len(pair.requests("client")) == 4
    assert pair.server.lease.stats().total_rejected == 0
    del stream, channel


def test_the_lease_expires_after_its_ttl():
    pair = Pair(FixedRateLeasePolicy(ttl=1_000, requests=10, interval=5_000))
    assert pair.request().result == Payload(b"x")
    pair.advance(0.999)
    assert pair.client.lease.available() == 9
    pair.advance(0.001)
    assert pair.client.lease.available() == 0
    err = lease_error(lambda: pair.rsocket.request_response(Payload(b"late")))
    assert err.reason == LEASE_EXPIRED
    assert "time-to-live of 1000 ms" in err.message
    pair.advance(4.0)  # the policy's next round renews it
    assert pair.client.lease.available() == 10
    assert pair.request(b"again").result == Payload(b"again")


def test_a_fragmented_request_counts_once():
    pair = Pair(FixedRateLeasePolicy(ttl=60_000, requests=1), fragment_size=64)
    d = pair.request(b"z" * 1_000)
    (first,) = pair.requests("client")
    assert first.follows and len(pair.frames("client", FrameType.PAYLOAD)) > 1  # fragments
    assert d.result == Payload(b"z" * 1_000)
    assert pair.server.lease.stats().total_accepted == 1
    assert pair.server.lease.stats().total_rejected == 0


def test_a_zero_lease_stops_all_requests():
    pair = Pair(FixedRateLeasePolicy(ttl=60_000, requests=5))
    pair.server.lease.send(Lease(60_000, 0))
    pair.pump.flush()
    err = lease_error(lambda: pair.rsocket.request_response(Payload(b"x")))
    assert err.reason == LEASE_USED_UP and "allows 0 requests" in err.message


# ------------------------------------------------------------------------------ waiting


def test_when_available_waits_for_the_next_lease():
    pair = Pair(FixedRateLeasePolicy(ttl=10_000, requests=1))
    assert pair.client.lease.when_available().called  # a lease allows one now
    pair.request()
    waiting = pair.client.lease.when_available()
    assert not waiting.called
    pair.advance(9.999)
    assert not waiting.called
    pair.advance(0.001)  # the next LEASE
    assert waiting.called
    assert pair.request(b"after").result == Payload(b"after")


def test_when_available_fails_when_the_connection_closes():
    pair = Pair(Recording(None))
    waiting = pair.client.lease.when_available()
    failures = []
    waiting.addErrback(failures.append)
    pair.rsocket.close()
    pair.pump.flush()
    assert len(failures) == 1
    later = []
    pair.client.lease.when_available().addErrback(later.append)
    assert len(later) == 1 and later[0].check(ConnectionLostError)  # fails at once from now on


def test_when_available_can_be_cancelled():
    pair = Pair(Recording(None))
    waiting = pair.client.lease.when_available()
    waiting.cancel()
    waiting.addErrback(lambda f: f.trap(CancelledError))
    pair.server.lease.send(Lease(1_000, 1))
    pair.pump.flush()
    assert pair.client.lease.available() == 1


# ------------------------------------------------------------------------------ responder


def server_on_string_transport(policy, responder=None):
    """A server protocol on a StringTransport: frames fed by hand, as a client that does not
    honour leases would send them."""
    served = Counting() if responder is None else responder
    proto, transport, clock = server_protocol(lambda: served, lease_policy=policy)
    return proto, transport, clock, served


def test_the_responder_rejects_requests_beyond_its_grant():
    proto, transport, clock, served = server_on_string_transport(
        FixedRateLeasePolicy(ttl=60_000, requests=2))
    proto.dataReceived(wire(make_setup(lease=True)))
    assert parse(transport.value()) == [LeaseFrame(ttl=60_000, number_of_requests=2)]
    transport.clear()
    proto.dataReceived(wire(*(RequestResponseFrame(stream_id=sid, data=b"%d" % sid)
                              for sid in (1, 3, 5, 7))))
    frames = parse(transport.value())
    assert [(f.stream_id, f.data) for f in frames if isinstance(f, PayloadFrame)] == \
        [(1, b"1"), (3, b"3")]
    errors = [f for f in frames if isinstance(f, ErrorFrame)]
    assert [(e.stream_id, e.error_code) for e in errors] == [(5, REJECTED), (7, REJECTED)]
    assert errors[0].data == b"request rejected: the lease's requests are used up"
    assert served.served == [b"1", b"3"]
    stats = proto.lease.stats()
    assert (stats.accepted, stats.rejected, stats.total_rejected) == (2, 2, 2)


def test_the_responder_rejects_every_kind_of_request_beyond_its_grant():
    proto, transport, clock, served = server_on_string_transport(
        FixedRateLeasePolicy(ttl=60_000, requests=0))
    proto.dataReceived(wire(make_setup(lease=True)))
    transport.clear()
    proto.dataReceived(wire(RequestFnfFrame(stream_id=1, data=b"f"),
                            RequestStreamFrame(stream_id=3, initial_request_n=5, data=b"2"),
                            RequestResponseFrame(stream_id=5, data=b"r")))
    errors = [f for f in parse(transport.value()) if isinstance(f, ErrorFrame)]
    assert [(e.stream_id, e.error_code) for e in errors] == \
        [(1, REJECTED), (3, REJECTED), (5, REJECTED)]
    assert served.served == []


def test_the_responder_rejects_a_request_before_any_grant():
    proto, transport, clock, served = server_on_string_transport(Recording(None))
    proto.dataReceived(wire(make_setup(lease=True), RequestResponseFrame(stream_id=1)))
    errors = [f for f in parse(transport.value()) if isinstance(f, ErrorFrame)]
    assert [(e.stream_id, e.error_code, e.data) for e in errors] == [
        (1, REJECTED, b"request rejected: no lease was granted to this requester")]
    assert served.served == []


def test_the_responder_rejects_after_ttl_and_grace():
    proto, transport, clock, served = server_on_string_transport(
        FixedRateLeasePolicy(ttl=1_000, requests=10, interval=60_000))
    proto.dataReceived(wire(make_setup(lease=True)))
    clock.advance(1.0 + 1.0)  # the ttl, then the default grace of 1000 ms
    proto.dataReceived(wire(RequestResponseFrame(stream_id=1, data=b"in time")))
    clock.advance(0.001)
    proto.dataReceived(wire(RequestResponseFrame(stream_id=3, data=b"late")))
    errors = [f for f in parse(transport.value()) if isinstance(f, ErrorFrame)]
    assert [(e.stream_id, e.error_code) for e in errors] == [(3, REJECTED)]
    assert b"lease expired" in errors[0].data
    assert served.served == [b"in time"]


def test_a_rejected_fragmented_request_is_dropped_with_its_fragments():
    proto, transport, clock, served = server_on_string_transport(
        FixedRateLeasePolicy(ttl=60_000, requests=0))
    proto.dataReceived(wire(make_setup(lease=True)))
    transport.clear()
    proto.dataReceived(wire(RequestResponseFrame(stream_id=1, data=b"a", follows=True),
                            PayloadFrame(stream_id=1, data=b"b", follows=True),
                            PayloadFrame(stream_id=1, data=b"c", next=True)))
    frames = parse(transport.value())
    assert [(f.stream_id, f.error_code) for f in frames] == [(1, REJECTED)]
    assert served.served == []


def test_the_client_responder_enforces_its_leases_too():
    """The server-side requester mirrors the client's: the client grants, and rejects."""
    pair = Pair(FixedRateLeasePolicy(ttl=60_000, requests=5),
                FixedRateLeasePolicy(ttl=60_000, requests=1))
    server_rs = pair.server.rsocket
    d = server_rs.request_response(Payload(b"from server"))
    pair.pump.flush()
    assert d.result == Payload(b"from server")
    err = lease_error(lambda: server_rs.request_response(Payload(b"second")))
    assert err.reason == LEASE_USED_UP
    # a server that ignored its lease: the client's responder answers ERROR[REJECTED]
    pair.client.dataReceived(wire(RequestResponseFrame(stream_id=4, data=b"ignored")))
    rejected = [f for f in pair.frames("client", FrameType.ERROR) if f.stream_id == 4]
    assert [f.error_code for f in rejected] == [REJECTED]
    assert pair.client_responder.served == [b"from server"]


def test_the_peer_sees_a_rejection_as_a_rejected_error():
    """A requester that sent beyond the lease anyway gets RejectedError from the responder."""
    pair = Pair(FixedRateLeasePolicy(ttl=60_000, requests=1))
    pair.client._conn.requester_lease.remaining = 5  # a requester that miscounts
    first, second = pair.request(b"1"), pair.request(b"2")
    assert first.result == Payload(b"1")
    failures = []
    second.addErrback(failures.append)
    assert failures[0].check(RejectedError) and not failures[0].check(LeaseError)
    assert "used up" in failures[0].value.message


# ------------------------------------------------------------------------------ policies


def test_the_policy_is_called_with_stats_and_its_grants_arrive():
    policy = Recording(Lease(2_000, 3, b"meta"), interval=500)
    pair = Pair(policy)
    assert len(policy.calls) == 1 and policy.calls[0][1].leases_sent == 0
    pair.request()
    pair.advance(0.5)
    assert len(policy.calls) == 2
    now, stats = policy.calls[1]
    assert now == pytest.approx(0.5)
    assert (stats.leases_sent, stats.accepted, stats.remaining) == (1, 1, 2)
    assert stats.lease == Lease(2_000, 3, b"meta")
    pair.advance(0.5)
    assert len(pair.frames("server", FrameType.LEASE)) == 3
    assert pair.client.lease.received == Lease(2_000, 3, b"meta")


@pytest.mark.logs_failure("the policy's exception is logged on the connection's logger (its "
                          "id and peer first) and the connection stays",
                          match=r"^\[c\d+ [^\]]+\] the lease policy .* failed")
def test_a_failing_policy_is_logged_and_asked_again():
    class Flaky(LeasePolicy):
        interval = 1_000
        calls = 0

        def next_lease(self, now, stats):
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("policy bug")
            return Lease(10_000, 1)

    policy = Flaky()
    pair = Pair(policy)
    assert pair.server.rsocket.is_open
    assert pair.frames("server", FrameType.LEASE) == []
    pair.advance(1.0)
    assert pair.frames("server", FrameType.LEASE) == [LeaseFrame(ttl=10_000,
                                                                 number_of_requests=1)]
    assert pair.request().result == Payload(b"x")



@pytest.mark.logs_failure("the policies' bugs are logged and the connection stays",
                          match=r"the lease policy .* (failed in next_lease|has a bad interval)"
                                r"(.|\n)*(TypeError: .*next_lease must return|"
                                r"RuntimeError: interval bug|ValueError: .*interval)")
def test_a_policy_with_a_bad_interval_or_result_is_logged_and_the_connection_goes_on():
    class BadInterval(LeasePolicy):
        """The server's: its interval raises, then is out of range."""

        reads = 0

        @property
        def interval(self):
            self.reads += 1
            if self.reads == 1:
                raise RuntimeError("interval bug")
            return 0

        def next_lease(self, now, stats):
            return Lease(60_000, 5)

    class BadResult(LeasePolicy):
        """The client's: it first returns a tuple instead of a Lease."""

        interval = 2_000
        calls = 0

        def next_lease(self, now, stats):
            self.calls += 1
            return (60_000, 5) if self.calls == 1 else Lease(60_000, 5)

    server_policy, client_policy = BadInterval(), BadResult()
    pair = Pair(server_policy, client_policy)
    assert pair.server.rsocket.is_open and pair.rsocket.is_open
    assert pair.frames("client", FrameType.LEASE) == []  # the tuple was not sent
    assert pair.request().result == Payload(b"x")  # the server's lease arrived
    # the server's next rounds come every DEFAULT_LEASE_INTERVAL (1 s), the client's every 2 s
    pair.advance(1.0)
    assert len(pair.frames("server", FrameType.LEASE)) == 2
    assert pair.frames("client", FrameType.LEASE) == []
    pair.advance(1.0)
    assert len(pair.frames("server", FrameType.LEASE)) == 3
    assert pair.frames("client", FrameType.LEASE) == [LeaseFrame(ttl=60_000,
                                                                 number_of_requests=5)]
    assert pair.server.lease.available() == 5

def test_the_concurrency_policy_grants_what_open_streams_leave():
    class Hold(Counting):
        def request_response(self, payload):
            return Deferred()  # never answers: the stream stays open

    pair = Pair(ConcurrencyLeasePolicy(max_concurrent=3, ttl=1_000),
                server_responder=Hold())
    assert pair.client.lease.available() == 3
    for _ in range(2):
        pair.request()
    pair.advance(1.0)
    assert pair.client.lease.received == Lease(1_000, 1)  # 3 - 2 open


def test_the_policy_stops_with_the_connection():
    policy = Recording(Lease(1_000, 1))
    pair = Pair(policy)
    pair.rsocket.close()
    pair.pump.flush()
    calls = len(policy.calls)
    pair.advance(5.0)
    assert len(policy.calls) == calls
    assert not [c for c in pair.clock.getDelayedCalls() if c.active()]


def test_send_lease_by_hand():
    pair = Pair(Recording(None))
    pair.server.lease.send(Lease(5_000, 2, b"now"))
    pair.pump.flush()
    assert pair.client.lease.received == Lease(5_000, 2, b"now")
    assert pair.server.lease.granted == Lease(5_000, 2, b"now")
    assert pair.request().result == Payload(b"x")


def test_a_server_may_still_reject_a_setup_asking_for_leases():
    class NoLeases(Responder):
        def accept_setup(self, setup):
            if setup.lease:
                raise RejectedSetupError("this server does not do leases")

    pair = Pair(FixedRateLeasePolicy(ttl=1_000, requests=1), server_responder=NoLeases())
    assert pair.frames("server", FrameType.LEASE) == []
    assert isinstance(pair.client.close_reason, RejectedSetupError)


# ------------------------------------------------------------------------------ connect()


def test_ready_waits_for_the_first_lease_and_fails_on_rejection():
    pair = Pair(Recording(None))
    ready = pair.client._ready()
    assert not ready.called
    pair.server.lease.send(Lease(1_000, 1))
    pair.pump.flush()
    assert ready.called


def test_ready_fails_when_no_lease_arrives_within_max_lifetime():
    pair = Pair(Recording(None))
    ready = pair.client._ready()
    failures = []
    ready.addErrback(failures.append)
    pair.advance(59.999)
    assert failures == []
    pair.advance(0.001)
    assert failures and failures[0].check(LeaseError)
    assert failures[0].value.reason == NO_LEASE
    assert "60000 ms" in failures[0].value.message


class Pending(Counting):
    """A responder whose request-response never answers; ``cancelled`` counts the answers
    cancelled (the connection closed under them)."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = 0

    def request_response(self, payload):
        self.served.append(payload.data)

        def cancelled(d):
            self.cancelled += 1

        return Deferred(cancelled)


def test_no_lease_within_max_lifetime_closes_the_connection_with_its_cleanup():
    """Regression: when the max lifetime passed without a LEASE, the first-lease Deferred was
    failed twice (by the no-lease timer, then by the connection-closed handler, which raised
    AlreadyCalledError and skipped the rest of the close): the client's pending answers were
    not cancelled, the server's pending request never failed and the connection stayed."""
    pair = Pair(Recording(None), client_responder=Pending())  # the server grants nothing
    ready = pair.client._ready()
    failures = []
    ready.addErrback(failures.append)
    # the client grants the server leases: the server's request waits for the client's answer
    pending = pair.server.rsocket.request_response(Payload(b"q"))
    pair.pump.flush()
    assert pair.client_responder.served == [b"q"] and not pending.called
    closed = pair.client.when_closed()
    pair.advance(59.999)
    assert failures == [] and not closed.called
    pair.advance(0.001)
    assert failures and failures[0].value.reason == NO_LEASE
    assert pair.client_responder.cancelled == 1  # the client's pending answer was cancelled
    assert pair.client._handlers == {} and pair.client._ended
    assert closed.called  # the transport is gone: the session ended
    server_failure = []
    pending.addErrback(server_failure.append)
    assert server_failure and server_failure[0].check(ConnectionLostError)  # failed, not hung


@pytest_twisted.ensureDeferred
async def test_connect_with_lease_over_tcp():
    harness = Harness()
    try:
        port = await harness.serve(EchoResponder,
                                   lease_policy=FixedRateLeasePolicy(ttl=60_000, requests=2))
        rs = await harness.connect(port, lease=True)
        # connect() fired after the first LEASE: a request may go at once
        assert await wait(rs.request_response(Payload(b"1"))) == Payload(b"1")
        assert await wait(rs.request_response(Payload(b"2"))) == Payload(b"2")
        with pytest.raises(LeaseError) as info:
            rs.request_response(Payload(b"3"))
        assert info.value.reason == LEASE_USED_UP
    finally:
        await harness.cleanup()


@pytest_twisted.ensureDeferred
async def test_connect_with_lease_fails_when_the_setup_is_rejected():
    class NoLeases(Responder):
        def accept_setup(self, setup):
            raise RejectedSetupError("no leases here")

    harness = Harness()
    try:
        port = await harness.serve(NoLeases)
        with pytest.raises((RejectedSetupError, ConnectionLostError)):
            await harness.connect(port, lease=True)
    finally:
        await harness.cleanup()


# ------------------------------------------------------------------------------ twistd / CLI


def test_twistd_lease_options_make_a_fixed_rate_policy():
    from rsocket_tx.faces.tap import Options, makeService

    options = Options()
    options.parseOptions(["--lease-ttl", "2000", "--lease-requests", "7", "--lease-interval",
                          "500", "--lease-grace", "250"])
    settings = options["settings"]
    policy = settings.make_lease_policy()
    assert isinstance(policy, FixedRateLeasePolicy)
    assert (policy.lease, policy.interval) == (Lease(2_000, 7), 500)
    factory = makeService(options).factory
    assert isinstance(factory.lease_policy, FixedRateLeasePolicy)
    assert factory.lease_policy.lease == Lease(2_000, 7)
    assert factory.config.lease_grace == 250


def test_cli_serve_takes_the_lease_options():
    from rsocket_tx.faces.main import parse_args

    settings = parse_args(["serve", "--lease-ttl", "1000", "--lease-requests", "0"]).settings
    assert settings.make_lease_policy().lease == Lease(1_000, 0)
    settings = parse_args(["serve", "--lease-policy",
                           "rsocket_tx.lease:UnlimitedLeasePolicy"]).settings
    assert type(settings.make_lease_policy()).__name__ == "UnlimitedLeasePolicy"
    assert parse_args(["serve"]).settings.make_lease_policy() is None


@pytest.mark.parametrize("options, message", [
    ({"lease_ttl": "1000"}, "--lease-ttl: needs --lease-requests too"),
    ({"lease_requests": "5"}, "--lease-requests: needs --lease-ttl too"),
    ({"lease_interval": "10"}, "--lease-interval: needs --lease-ttl"),
    ({"lease_ttl": "0", "lease_requests": "1"}, "--lease-ttl: must be at least 1"),
    ({"lease_ttl": str(2**31), "lease_requests": "1"}, "--lease-ttl: must be at most"),
    ({"lease_ttl": "1", "lease_requests": "-1"}, "--lease-requests: must be at least 0"),
    ({"lease_ttl": "1", "lease_requests": str(2**31)}, "--lease-requests: must be at most"),
    ({"lease_ttl": "1", "lease_requests": "1", "lease_interval": "0"},
     "--lease-interval: must be at least 1"),
    ({"lease_grace": "-1"}, "--lease-grace: must be at least 0"),
    ({"lease_ttl": "1", "lease_requests": "x"}, "--lease-requests: expected an integer"),
    ({"lease_policy": "rsocket_tx.lease:UnlimitedLeasePolicy", "lease_ttl": "1",
      "lease_requests": "1"}, "give either --lease-policy or --lease-ttl"),
    ({"lease_policy": "no_such_module_xyz:P"}, "cannot import module 'no_such_module_xyz'"),
    ({"lease_policy": "rsocket_tx.lease:Nope"}, "has no attribute 'Nope'"),
    ({"lease_policy": "rsocket_tx.lease:Lease"}, "is not a rsocket_tx.lease.LeasePolicy"),
    ({"lease_policy": "rsocket_tx.lease:FixedRateLeasePolicy"},
     "cannot be built with no arguments"),
    ({"lease_policy": "nocolon"}, "expected package.module:Name"),
])
def test_lease_options_past_their_limits(options, message):
    from rsocket_tx.faces.tap import SettingsError, parse_server_settings

    with pytest.raises(SettingsError) as info:
        parse_server_settings(**options)
    assert message in str(info.value)


@pytest_twisted.ensureDeferred
async def test_a_server_built_from_lease_options_grants_and_enforces():
    from twisted.internet import reactor

    from rsocket_tx import connect
    from rsocket_tx.faces.tap import build_service, parse_server_settings

    service = build_service(parse_server_settings(
        listen=["tcp:0:interface=127.0.0.1"], lease_ttl="60000", lease_requests="2"), reactor)
    service.startService()
    rs = None
    try:
        [port] = await wait(service.when_listening())
        rs = await wait(connect(f"tcp://127.0.0.1:{port.getHost().port}", reactor=reactor,
                                lease=True))
        assert rs._protocol.lease.received == Lease(60_000, 2)
        for data in (b"a", b"b"):
            assert await wait(rs.request_response(Payload(data))) == Payload(data)
        with pytest.raises(LeaseError):
            rs.request_response(Payload(b"c"))
    finally:
        if rs is not None:
            await wait(rs.close())
        await wait(service.stopService())


def test_connect_rejects_a_bad_lease_argument():
    from rsocket_tx import connect

    with pytest.raises(TypeError, match="lease must be True, False or"):
        connect("tcp://127.0.0.1:1", lease="yes")
    with pytest.raises(TypeError, match="lease_policy must be"):
        RSocketServerFactory(EchoResponder, lease_policy=object())


# ------------------------------------------------------------------------------ resume


def test_a_resumed_session_restarts_leases_both_ways():
    """Spec §Resume Operation: "LEASE semantics MUST be restarted upon a new connection by
    sending a LEASE frame"."""
    from test_resume import _setup

    net, rs, responder, factory = _setup(
        server_kw={"lease_policy": FixedRateLeasePolicy(ttl=600_000, requests=2)},
        client_kw={"lease": FixedRateLeasePolicy(ttl=600_000, requests=1)})
    client = rs._protocol
    [server] = factory.connections
    for data in (b"1", b"2"):
        d = rs.request_response(Payload(data))
        net.flush()
        assert d.result == Payload(data)
    with pytest.raises(LeaseError):
        rs.request_response(Payload(b"3"))
    refused = []
    server.rsocket.request_response(Payload(b"s")).addErrback(refused.append)
    net.flush()
    assert server.lease.available() == 0
    assert refused[0].check(RejectedError)  # the client's responder serves no requests
    net.cut()
    net.advance(0.2)
    assert rs.resumes == 1
    assert client.lease.available() == 2  # the server granted again on the new connection
    assert server.lease.available() == 1  # and so did the client
    d = rs.request_response(Payload(b"3"))
    net.flush()
    assert d.result == Payload(b"3")
