"""Two well-behaved connections under random interleavings (hypothesis state machine): both
sides subscribe, request, cancel (and reuse ids at once), publish fixed-size, packed, split and
plain elements, and bytes cross in arbitrary pieces. Whatever the order, no side ever sees a
protocol violation, every subscription receives exactly its own elements, in order, within
its demand, and nothing after its cancel or terminal signal (Reactive Streams §1.1, §1.7,
§3.6, §3.12; the draft's id reuse rule)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.connection import Role, RSNetConnection
from rsocket_tx.rsnet.errors import LocalProtocolError
from rsocket_tx.rsnet.events import (
    CancelReceived,
    ConnectionClosed,
    Event,
    HelloReceived,
    OnCompleteReceived,
    OnErrorReceived,
    OnNextReceived,
    OnSubscribeReceived,
    RequestReceived,
    SubscribeReceived,
)

SIZE = 12  # every element is b"%06d%06d" % (generation, index)
SIDES = ("client", "server")


class Sub:
    """A subscription as its subscriber's application sees it."""

    def __init__(self, gen: int, demand: int) -> None:
        self.gen = gen
        self.requested = demand
        self.received = 0
        self.subscribed = False
        self.ended = False


class Pub:
    """A subscription as its publisher's application sees it."""

    def __init__(self, gen: int, sid: int) -> None:
        self.gen = gen
        self.sid = sid
        self.sent = 0
        self.size: int | None = None  # None: onSubscribe not sent yet


class TwoPeers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        config = RSNetConfig(max_part_size=5)  # 12-byte elements are split when size is 0
        self.conn = {"client": RSNetConnection(Role.CLIENT, config),
                     "server": RSNetConnection(Role.SERVER, config)}
        self.wire = {"client": b"", "server": b""}  # bytes sent by that side, not delivered
        self.subs: dict[str, dict[int, Sub]] = {"client": {}, "server": {}}
        self.pubs: dict[str, dict[int, Pub]] = {"client": {}, "server": {}}
        # generations of the subscribes each side sent, in order; matched by the peer's
        # SubscribeReceived events in the same order
        self.gens: dict[str, list[int]] = {"client": [], "server": []}
        self.seen: dict[str, int] = {"client": 0, "server": 0}
        self.next_gen = 0

    @staticmethod
    def other(side: str) -> str:
        return "server" if side == "client" else "client"

    # --- moving bytes -------------------------------------------------------------------

    def take(self, side: str) -> None:
        self.wire[side] += self.conn[side].data_to_send()

    @rule(side=st.sampled_from(SIDES), fraction=st.floats(0, 1))
    def deliver(self, side: str, fraction: float) -> None:
        """Deliver part of what ``side`` sent to its peer."""
        self.take(side)
        data = self.wire[side]
        n = int(len(data) * fraction)
        self.wire[side] = data[n:]
        peer = self.other(side)
        self.handle(peer, self.conn[peer].receive_data(data[:n]))

    def handle(self, side: str, events: list[Event]) -> None:
        subs, pubs = self.subs[side], self.pubs[side]
        for e in events:
            assert not isinstance(e, ConnectionClosed), e
            if isinstance(e, HelloReceived):
                continue
            if isinstance(e, SubscribeReceived):
                gen = self.gens[self.other(side)][self.seen[side]]
                self.seen[side] += 1
                assert e.subscriber_id not in pubs
                pubs[e.subscriber_id] = Pub(gen, e.subscriber_id)
            elif isinstance(e, RequestReceived):
                assert e.subscriber_id in pubs
            elif isinstance(e, CancelReceived):
                assert e.reason == "" and e.by_peer
                del pubs[e.subscriber_id]
            else:
                s = subs[e.subscriber_id]
                assert not s.ended
                if isinstance(e, OnSubscribeReceived):
                    assert not s.subscribed
                    s.subscribed = True
                elif isinstance(e, OnNextReceived):
                    assert s.subscribed
                    assert e.element == b"%06d%06d" % (s.gen, s.received), (e, s.gen)
                    s.received += 1
                    assert s.received <= s.requested  # §1.1
                elif isinstance(e, OnCompleteReceived | OnErrorReceived):
                    assert s.subscribed
                    if isinstance(e, OnErrorReceived):
                        assert e.by_peer and e.error == f"gen {s.gen}"
                    del subs[e.subscriber_id]
                else:  # pragma: no cover
                    raise AssertionError(e)

    # --- subscriber side ----------------------------------------------------------------

    @rule(side=st.sampled_from(SIDES), demand=st.integers(0, 3))
    def subscribe(self, side: str, demand: int) -> None:
        gen = self.next_gen
        self.next_gen += 1
        sid = self.conn[side].subscribe("p", demand)
        assert sid not in self.subs[side]
        self.subs[side][sid] = Sub(gen, demand)
        self.gens[side].append(gen)

    @rule(side=st.sampled_from(SIDES), pick=st.integers(0, 7), n=st.integers(1, 4))
    def request(self, side: str, pick: int, n: int) -> None:
        subs = self.subs[side]
        if subs:
            sid = sorted(subs)[pick % len(subs)]
            self.conn[side].request(sid, n)
            subs[sid].requested += n

    @rule(side=st.sampled_from(SIDES), pick=st.integers(0, 7))
    def cancel(self, side: str, pick: int) -> None:
        subs = self.subs[side]
        if subs:
            sid = sorted(subs)[pick % len(subs)]
            self.conn[side].cancel(sid)
            del subs[sid]

    # --- publisher side -----------------------------------------------------------------

    def pick_pub(self, side: str, pick: int) -> Pub | None:
        pubs = self.pubs[side]
        return pubs[sorted(pubs)[pick % len(pubs)]] if pubs else None

    @rule(side=st.sampled_from(SIDES), pick=st.integers(0, 7), fixed=st.booleans())
    def on_subscribe(self, side: str, pick: int, fixed: bool) -> None:
        p = self.pick_pub(side, pick)
        if p is not None and p.size is None:
            p.size = SIZE if fixed else 0
            self.conn[side].on_subscribe(p.sid, p.size)

    @rule(side=st.sampled_from(SIDES), pick=st.integers(0, 7), count=st.integers(1, 3),
          packed=st.booleans())
    def on_next(self, side: str, pick: int, count: int, packed: bool) -> None:
        p = self.pick_pub(side, pick)
        if p is None or p.size is None:
            return
        conn = self.conn[side]
        count = min(count, conn.demand(p.sid))
        if count == 0:
            try:
                conn.on_next(p.sid, b"%06d%06d" % (p.gen, p.sent))
            except LocalProtocolError:
                return
            raise AssertionError("on_next beyond demand was accepted")
        elements = [b"%06d%06d" % (p.gen, p.sent + i) for i in range(count)]
        if packed and p.size:
            conn.on_next_packed(p.sid, elements)
        else:
            for element in elements:
                conn.on_next(p.sid, element)
        p.sent += count

    @rule(side=st.sampled_from(SIDES), pick=st.integers(0, 7), error=st.booleans())
    def terminate(self, side: str, pick: int, error: bool) -> None:
        p = self.pick_pub(side, pick)
        if p is None:
            return
        if error:
            self.conn[side].on_error(p.sid, f"gen {p.gen}")
        else:
            self.conn[side].on_complete(p.sid)
        del self.pubs[side][p.sid]

    # --- at the end: everything delivered ------------------------------------------------

    @rule()
    def flush(self) -> None:
        for _ in range(4):
            for side in SIDES:
                self.deliver(side, 1.0)

    @invariant()
    def both_open(self) -> None:
        assert self.conn["client"].is_open and self.conn["server"].is_open

    def teardown(self) -> None:
        self.flush()
        for side in SIDES:
            peer = self.other(side)
            # every live subscription the subscriber knows is known to the publisher, with
            # the same generation, unless a terminal or cancel is still crossing (none is now)
            for sid, s in self.subs[side].items():
                p = self.pubs[peer].get(sid)
                assert p is not None and p.gen == s.gen
                assert s.received == p.sent
                assert s.subscribed == (p.size is not None)


TwoPeers.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                      deadline=None)
test_two_peers = TwoPeers.TestCase
