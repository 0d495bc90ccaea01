"""The sans-IO lease state (``rsocket_tx.core.lease``): requester and responder accounting,
the policies, and every limit pushed past (spec §Lease Semantics, §LEASE Frame).

Time is the ``now`` argument (seconds); a lease's time-to-live is in milliseconds.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.core import frames as F
from rsocket_tx.core import lease as L
from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.core.errors import LeaseError, LocalProtocolError, RejectedError
from rsocket_tx.core.events import LeaseReceived, RequestReceived
from rsocket_tx.core.lease import (
    ConcurrencyLeasePolicy,
    FixedRateLeasePolicy,
    Lease,
    LeasePolicy,
    LeaseStats,
    RequesterLease,
    ResponderLease,
    UnlimitedLeasePolicy,
)
from rsocket_tx.core.payload import Payload

from .conn_helpers import Pair, error_frames, sent, setup_frame, wire

# ------------------------------------------------------------------------------ Lease values


def test_lease_values_at_their_limits():
    assert Lease(0, 0).number_of_requests == 0
    top = Lease(L.MAX_LEASE_VALUE, L.MAX_LEASE_VALUE, b"m")
    assert (top.ttl, top.number_of_requests, top.metadata) == (2**31 - 1, 2**31 - 1, b"m")


@pytest.mark.parametrize("ttl, n", [(-1, 1), (1, -1), (2**31, 1), (1, 2**31), (1.5, 1),
                                    (True, 1), (1, None)])
def test_lease_values_past_their_limits(ttl, n):
    with pytest.raises(ValueError, match="must be an integer in"):
        Lease(ttl, n)


def test_lease_metadata_must_be_bytes():
    with pytest.raises(ValueError, match="metadata must be bytes"):
        Lease(1, 1, "text")


# ------------------------------------------------------------------------------ requester


def test_requester_without_a_lease_may_send_nothing():
    lease = RequesterLease()
    assert lease.available(0.0) == 0
    assert lease.expires_at is None
    with pytest.raises(LeaseError) as info:
        lease.use(0.0)
    assert info.value.reason == L.NO_LEASE
    assert "no lease from the peer yet" in info.value.message
    assert lease.sent == 0


def test_lease_error_is_a_local_rejection():
    err = LeaseError(L.LEASE_USED_UP, "request not sent: x")
    assert isinstance(err, RejectedError)
    assert isinstance(err, LocalProtocolError)
    assert err.error_code == 0x202
    assert str(err) == "REJECTED: request not sent: x"


def test_requester_counts_requests_and_refuses_the_one_past_the_lease():
    lease = RequesterLease()
    lease.receive(Lease(10_000, 3), now=100.0)
    for expected_left in (2, 1, 0):
        lease.use(100.0)
        assert lease.available(100.0) == expected_left
    assert lease.sent == 3
    with pytest.raises(LeaseError) as info:
        lease.use(100.0)
    assert info.value.reason == L.LEASE_USED_UP
    assert "lease of 3 requests is used up" in info.value.message
    assert lease.sent == 3 and lease.remaining == 0  # the refused one is not counted


def test_requester_lease_expires_after_its_ttl_from_reception():
    lease = RequesterLease()
    lease.receive(Lease(1_500, 100), now=10.0)
    assert lease.expires_at == pytest.approx(11.5)
    lease.use(11.499)
    assert lease.available(11.499) == 99
    assert lease.available(11.5) == 0
    with pytest.raises(LeaseError) as info:
        lease.use(11.5)
    assert info.value.reason == L.LEASE_EXPIRED
    assert "time-to-live of 1500 ms" in info.value.message


def test_requester_check_counts_nothing():
    lease = RequesterLease()
    lease.receive(Lease(1_000, 1), now=0.0)
    lease.check(0.0)
    lease.check(0.0)
    assert lease.available(0.0) == 1


def test_the_last_lease_received_overrides_the_previous_one():
    lease = RequesterLease()
    lease.receive(Lease(60_000, 5), now=0.0)
    lease.use(0.0)
    lease.receive(Lease(1_000, 1), now=1.0)  # fewer requests and a shorter ttl: not added
    assert lease.available(1.0) == 1
    assert lease.expires_at == pytest.approx(2.0)
    assert lease.leases_received == 2
    assert lease.sent == 0
    lease.use(1.0)
    with pytest.raises(LeaseError):
        lease.use(1.0)
    lease.receive(Lease(1_000, 2), now=5.0)  # a new lease after expiry allows again
    lease.use(5.0)
    assert lease.available(5.0) == 1


@pytest.mark.parametrize("ttl, n, reason, words", [
    (0, 10, L.LEASE_EXPIRED, "time-to-live of 0 ms: it stops all requests"),
    (10_000, 0, L.LEASE_USED_UP, "allows 0 requests: it stops all requests"),
])
def test_a_zero_lease_stops_all_requests(ttl, n, reason, words):
    lease = RequesterLease()
    lease.receive(Lease(1_000, 5), now=0.0)
    lease.receive(Lease(ttl, n), now=0.5)
    with pytest.raises(LeaseError) as info:
        lease.use(0.5)
    assert info.value.reason == reason
    assert words in info.value.message


@given(st.integers(0, 50), st.integers(1, 10_000), st.lists(st.floats(0, 20), max_size=80))
def test_requester_never_sends_more_than_the_lease_within_its_ttl(n, ttl, times):
    lease = RequesterLease()
    lease.receive(Lease(ttl, n), now=0.0)
    sent = 0
    for now in sorted(times):
        try:
            lease.use(now)
        except LeaseError:
            continue
        sent += 1
        assert now < ttl / 1000.0
    assert sent <= n
    assert sent == lease.sent


# ------------------------------------------------------------------------------ responder


def test_responder_rejects_requests_before_granting_any():
    lease = ResponderLease()
    assert lease.accept(0.0) == "request rejected: no lease was granted to this requester"
    assert (lease.accepted, lease.rejected, lease.total_rejected) == (0, 1, 1)
    assert lease.expires_at is None


def test_responder_counts_requests_and_rejects_the_one_past_its_grant():
    lease = ResponderLease()
    lease.grant(Lease(10_000, 2), now=0.0)
    assert lease.accept(0.1) is None
    assert lease.accept(0.2) is None
    assert lease.accept(0.3) == "request rejected: the lease's requests are used up"
    assert (lease.accepted, lease.rejected) == (2, 1)
    assert lease.remaining(0.3) == 0


def test_responder_rejects_after_ttl_plus_grace():
    lease = ResponderLease(grace=200)
    lease.grant(Lease(1_000, 10), now=0.0)
    assert lease.grace == 200
    assert lease.accept(1.2) is None  # within the grace: the peer's clock started later
    assert lease.remaining(1.2) == 9
    assert lease.accept(1.2001) == "request rejected: the lease expired (time-to-live 1000 ms)"
    assert lease.remaining(1.2001) == 0


def test_responder_default_grace():
    lease = ResponderLease()
    assert lease.grace == L.DEFAULT_LEASE_GRACE
    lease.grant(Lease(1_000, 10), now=0.0)
    assert lease.accept(1.0 + L.DEFAULT_LEASE_GRACE / 1000.0) is None
    assert lease.accept(1.0 + L.DEFAULT_LEASE_GRACE / 1000.0 + 0.001) is not None


def test_responder_zero_grace_is_strict():
    lease = ResponderLease(grace=0)
    lease.grant(Lease(1_000, 10), now=0.0)
    assert lease.accept(1.0) is None
    assert lease.accept(1.0001) is not None


@pytest.mark.parametrize("grace", [-1, 2**31, 0.5])
def test_responder_grace_past_its_limits(grace):
    with pytest.raises(ValueError, match="grace must be an integer"):
        ResponderLease(grace=grace)


def test_a_renewal_adds_what_the_peer_may_still_have_in_flight():
    lease = ResponderLease(grace=0)
    lease.grant(Lease(1_000, 5), now=0.0)
    for _ in range(3):
        assert lease.accept(0.1) is None
    lease.grant(Lease(1_000, 5), now=0.9)  # 2 of the old lease may still be in flight
    assert lease.remaining(0.9) == 7
    assert (lease.accepted, lease.rejected, lease.leases_sent) == (0, 0, 2)
    for _ in range(7):
        assert lease.accept(1.0) is None
    assert lease.accept(1.0) is not None
    assert lease.total_accepted == 10 and lease.total_rejected == 1


def test_a_renewal_after_expiry_starts_afresh():
    lease = ResponderLease(grace=0)
    lease.grant(Lease(1_000, 5), now=0.0)
    lease.grant(Lease(1_000, 2), now=3.0)
    assert lease.remaining(3.0) == 2
    assert lease.expires_at == pytest.approx(4.0)


def test_a_shorter_renewal_keeps_the_longer_validity_for_what_is_in_flight():
    lease = ResponderLease(grace=0)
    lease.grant(Lease(10_000, 5), now=0.0)
    lease.grant(Lease(100, 1), now=1.0)
    assert lease.expires_at == pytest.approx(10.0)


def test_a_zero_grant_stops_everything_but_what_is_in_flight():
    lease = ResponderLease(grace=0)
    lease.grant(Lease(1_000, 2), now=0.0)
    lease.grant(Lease(1_000, 0), now=0.5)  # "stop": the 2 in flight are still honoured
    assert lease.accept(0.6) is None
    assert lease.accept(0.6) is None
    assert lease.accept(0.6) is not None
    lease.grant(Lease(1_000, 0), now=5.0)  # after expiry: nothing at all
    assert lease.accept(5.0) is not None


def test_responder_stats():
    lease = ResponderLease()
    empty = lease.stats(0.0)
    assert empty == LeaseStats(leases_sent=0, lease=None, remaining=0, expires_at=None,
                               accepted=0, rejected=0, total_accepted=0, total_rejected=0,
                               active_streams=0)
    lease.grant(Lease(2_000, 3), now=1.0)
    lease.accept(1.0)
    stats = lease.stats(1.5, active_streams=4)
    assert stats.leases_sent == 1
    assert stats.lease == Lease(2_000, 3)
    assert stats.remaining == 2
    assert stats.expires_at == pytest.approx(3.0)
    assert (stats.accepted, stats.total_accepted, stats.active_streams) == (1, 1, 4)


@given(st.integers(0, 30), st.lists(st.floats(0, 5), max_size=60))
def test_responder_accepts_exactly_the_grant_within_its_validity(n, times):
    lease = ResponderLease(grace=0)
    lease.grant(Lease(2_000, n), now=0.0)
    accepted = [t for t in sorted(times) if lease.accept(t) is None]
    assert len(accepted) <= n
    assert all(t <= 2.0 for t in accepted)
    assert len(accepted) == min(n, sum(1 for t in times if t <= 2.0))


# ------------------------------------------------------------------------------ policies


def test_fixed_rate_policy_grants_the_same_lease_every_ttl():
    policy = FixedRateLeasePolicy(ttl=5_000, requests=100)
    stats = ResponderLease().stats(0.0)
    assert policy.interval == 5_000
    assert policy.next_lease(0.0, stats) == Lease(5_000, 100)
    assert policy.next_lease(99.0, stats) == Lease(5_000, 100)
    assert "ttl=5000" in repr(policy) and "requests=100" in repr(policy)


def test_fixed_rate_policy_interval_and_metadata():
    policy = FixedRateLeasePolicy(ttl=5_000, requests=0, interval=1_000, metadata=b"why")
    assert policy.interval == 1_000
    assert policy.next_lease(0.0, ResponderLease().stats(0.0)) == Lease(5_000, 0, b"why")


@pytest.mark.parametrize("kwargs, name", [
    ({"ttl": 0, "requests": 1}, "ttl"),
    ({"ttl": 2**31, "requests": 1}, "ttl"),
    ({"ttl": 1, "requests": -1}, "number_of_requests"),
    ({"ttl": 1, "requests": 2**31}, "number_of_requests"),
    ({"ttl": 1, "requests": 1, "interval": 0}, "interval"),
    ({"ttl": 1, "requests": 1, "interval": 2**31}, "interval"),
])
def test_fixed_rate_policy_settings_past_their_limits(kwargs, name):
    with pytest.raises(ValueError, match=f"{name} must be an integer"):
        FixedRateLeasePolicy(**kwargs)


def test_concurrency_policy_grants_what_keeps_streams_under_the_limit():
    policy = ConcurrencyLeasePolicy(max_concurrent=10, ttl=500)
    lease = ResponderLease()
    assert policy.interval == 500
    assert policy.next_lease(0.0, lease.stats(0.0, active_streams=3)) == Lease(500, 7)
    assert policy.next_lease(0.0, lease.stats(0.0, active_streams=10)) == Lease(500, 0)
    assert policy.next_lease(0.0, lease.stats(0.0, active_streams=12)) == Lease(500, 0)
    assert "max_concurrent=10" in repr(policy)


@pytest.mark.parametrize("kwargs, name", [
    ({"max_concurrent": 0}, "max_concurrent"),
    ({"max_concurrent": 1, "ttl": 0}, "ttl"),
    ({"max_concurrent": 1, "interval": 0}, "interval"),
])
def test_concurrency_policy_settings_past_their_limits(kwargs, name):
    with pytest.raises(ValueError, match=f"{name} must be an integer"):
        ConcurrencyLeasePolicy(**kwargs)


def test_unlimited_policy_grants_the_largest_lease():
    policy = UnlimitedLeasePolicy()
    assert policy.next_lease(0.0, ResponderLease().stats(0.0)) == \
        Lease(L.MAX_LEASE_VALUE, L.MAX_LEASE_VALUE)
    assert policy.interval == L.MAX_LEASE_VALUE


def test_the_base_policy_must_be_overridden():
    with pytest.raises(NotImplementedError):
        LeasePolicy().next_lease(0.0, ResponderLease().stats(0.0))


def test_a_policy_grant_round_trip_between_responder_and_requester():
    """What the policy decides, the responder records and the requester obeys: the requester
    never sends what the responder would reject."""
    policy = FixedRateLeasePolicy(ttl=1_000, requests=4)
    responder, requester = ResponderLease(grace=0), RequesterLease()
    now = 0.0
    for _ in range(3):  # three lease periods back to back
        lease = policy.next_lease(now, responder.stats(now))
        responder.grant(lease, now)
        requester.receive(lease, now)
        sent = 0
        while True:
            try:
                requester.use(now)
            except LeaseError:
                break
            assert responder.accept(now) is None
            sent += 1
        assert sent == 4
        now += policy.interval / 1000.0


# ------------------------------------------------------------------------------ connection
# RSocketConnection with leases: a client and a server driven against each other, no I/O.


def lease_pair(**config):
    pair = Pair(setup=setup_frame(lease=True), client_config=config, server_config=config)
    pair.client.data_to_send()
    return pair


def test_the_server_honours_the_lease_flag():
    pair = lease_pair()
    assert pair.server.is_open
    assert pair.client.lease_enabled and pair.server.lease_enabled
    assert pair.server.data_to_send() == b""  # what to grant is the application's choice
    assert pair.client.lease_available() == 0 and pair.server.lease_available() == 0


def test_without_the_flag_no_lease_state_and_lease_frames_are_ignored():
    pair = Pair()
    assert not pair.client.lease_enabled
    assert pair.client.requester_lease is None and pair.client.responder_lease is None
    assert pair.client.lease_available() is None and pair.client.lease_stats() is None
    events = pair.client.receive_data(wire(F.LeaseFrame(ttl=1, number_of_requests=0)))
    assert [type(e) for e in events] == [LeaseReceived]  # reported, but means nothing
    assert pair.client.request_response(Payload(b"x")) == 1
    with pytest.raises(LocalProtocolError, match="does not use leases"):
        pair.server.send_lease(Lease(1_000, 1))


def test_a_request_without_a_lease_is_not_sent_and_uses_no_stream_id():
    pair = lease_pair()
    with pytest.raises(LeaseError) as info:
        pair.client.request_response(Payload(b"x"))
    assert info.value.reason == L.NO_LEASE
    assert pair.client.data_to_send() == b""
    assert pair.client.stream_count == 0
    pair.server.send_lease(Lease(1_000, 1))
    pair.to_client()
    assert pair.client.request_response(Payload(b"x")) == 1  # the first stream id


def test_the_server_grant_reaches_the_client_and_is_counted():
    pair = lease_pair()
    pair.server.send_lease(Lease(10_000, 2, b"m"), now=0.0)
    events = pair.to_client()
    assert [type(e) for e in events] == [LeaseReceived]
    assert events[0].lease == F.LeaseFrame(ttl=10_000, number_of_requests=2, metadata=b"m")
    assert pair.client.requester_lease.lease == Lease(10_000, 2, b"m")
    assert pair.client.lease_available() == 2
    pair.client.fire_and_forget(Payload(b"1"))
    pair.client.request_stream(Payload(b"2"), 5)
    with pytest.raises(LeaseError) as info:
        pair.client.request_channel(Payload(b"3"), 1)
    assert info.value.reason == L.LEASE_USED_UP
    events = pair.to_server()
    assert [type(e) for e in events] == [RequestReceived, RequestReceived]
    assert pair.server.lease_stats().accepted == 2


def test_an_invalid_request_uses_no_lease():
    pair = lease_pair()
    pair.server.send_lease(Lease(10_000, 1))
    pair.to_client()
    with pytest.raises(ValueError):
        pair.client.request_stream(Payload(b"x"), 0)
    assert pair.client.lease_available() == 1
    assert pair.client.request_stream(Payload(b"x"), 1) == 1


def test_the_client_asks_for_a_tick_when_the_lease_expires():
    pair = lease_pair()
    pair.server.send_lease(Lease(300, 5))
    pair.client.receive_data(pair.server.data_to_send(), now=0.1)
    assert pair.client.next_deadline() == pytest.approx(0.4)  # before the 1 s keepalive
    pair.client.tick(0.4)
    assert pair.client.lease_available() == 0
    with pytest.raises(LeaseError) as info:
        pair.client.request_response(Payload(b"late"))
    assert info.value.reason == L.LEASE_EXPIRED
    assert pair.client.next_deadline() == pytest.approx(1.0)  # the keepalive again


def test_the_responder_rejects_past_its_grant_and_serves_within_it():
    pair = lease_pair()
    pair.server.send_lease(Lease(10_000, 1))
    pair.to_client()
    pair.client.requester_lease.remaining = 3  # a requester that does not honour the lease
    pair.client.request_response(Payload(b"1"))
    pair.client.request_response(Payload(b"2"))
    events = pair.to_server()
    assert [(type(e), e.stream_id) for e in events] == [(RequestReceived, 1)]
    errors = error_frames(sent(pair.server))
    assert [(e.stream_id, e.error_code) for e in errors] == [(3, 0x202)]
    assert errors[0].data == b"request rejected: the lease's requests are used up"
    assert pair.server.peer_stream_count == 1  # the rejected request holds no stream
    stats = pair.server.lease_stats()
    assert (stats.accepted, stats.rejected, stats.active_streams) == (1, 1, 1)


def test_the_responder_counts_a_fragmented_request_once():
    pair = lease_pair(fragment_size=64)
    pair.server.send_lease(Lease(10_000, 1))
    pair.to_client()
    pair.client.request_response(Payload(b"y" * 500))
    events = pair.to_server()
    assert [type(e) for e in events] == [RequestReceived]
    assert events[0].payload.data == b"y" * 500
    assert pair.server.lease_stats().total_accepted == 1


def test_a_rejected_fragmented_request_is_dropped_with_its_fragments():
    pair = lease_pair(fragment_size=64)
    pair.server.send_lease(Lease(10_000, 0))
    pair.to_client()
    pair.client.requester_lease.remaining = 1
    pair.client.request_response(Payload(b"y" * 500))
    assert pair.to_server() == []
    assert [(e.stream_id, e.error_code) for e in error_frames(sent(pair.server))] == \
        [(1, 0x202)]
    assert pair.server.stream_count == 0


def test_the_client_grants_the_server_too():
    pair = lease_pair()
    pair.client.send_lease(Lease(10_000, 1))
    pair.to_server()
    assert pair.server.lease_available() == 1
    assert pair.server.request_response(Payload(b"from server")) == 2
    with pytest.raises(LeaseError):
        pair.server.request_response(Payload(b"again"))


def test_the_lease_grace_setting():
    pair = lease_pair(lease_grace=0)
    assert pair.server.responder_lease.grace == 0
    with pytest.raises(ValueError, match="lease_grace must be an integer"):
        ConnectionConfig(lease_grace=-1)
    with pytest.raises(ValueError, match="lease_grace must be an integer"):
        ConnectionConfig(lease_grace=2**31)


def test_send_lease_on_a_closed_connection():
    pair = lease_pair()
    pair.server.close()
    with pytest.raises(LocalProtocolError, match="closed"):
        pair.server.send_lease(Lease(1, 1))
