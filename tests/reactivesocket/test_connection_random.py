"""Two ReactiveSocketConnections driven by random sequences of requests, answers, cancels and
request-n (hypothesis): nothing raises, and once the bytes have moved both sides agree on
which streams are open and every item sent arrived, in order, within the credit granted."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.core import errors as E
from rsocket_tx.core.events import PayloadReceived, RequestReceived, StreamErrored
from rsocket_tx.core.payload import Payload

from .conn_helpers import Pair

ops = st.lists(st.tuples(
    st.sampled_from(["rr", "stream", "sub", "fnf", "next", "complete", "error", "cancel",
                     "request_n", "pump"]),
    st.integers(0, 7), st.integers(1, 5)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops, st.sampled_from([None, 64]))
def test_random_interleavings(operations, fragment_size):
    pair = Pair(server_config={} if fragment_size is None else {"fragment_size": fragment_size})
    client, server = pair.client, pair.server
    opened: list[int] = []
    sent: dict[int, list[bytes]] = {}
    received: dict[int, list[bytes]] = {}
    counter = 0

    def collect():
        pair.pump()
        client_events, server_events = pair.take()
        for e in server_events:
            assert isinstance(e, RequestReceived) or e.__class__.__name__ in (
                "CancelReceived", "RequestNReceived", "StreamErrored"), e
        for e in client_events:
            if isinstance(e, PayloadReceived) and e.payload is not None:
                received.setdefault(e.stream_id, []).append(e.payload.data)
            else:
                assert isinstance(e, (PayloadReceived, StreamErrored)), e

    for op, index, n in operations:
        sid = opened[index % len(opened)] if opened else None
        if op == "rr":
            opened.append(client.request_response(Payload(b"q")))
        elif op == "stream":
            opened.append(client.request_stream(Payload(b"s"), n))
        elif op == "sub":
            opened.append(client.request_subscription(Payload(b"u"), n))
        elif op == "fnf":
            client.fire_and_forget(Payload(b"f"))
        elif sid is None:
            continue
        elif op == "next" and server.credit(sid) > 0:
            counter += 1
            data = b"%d" % counter * (counter % 50)
            server.send_payload(sid, Payload(data, b"m" if counter % 3 else None))
            sent.setdefault(sid, []).append(data)
        elif op == "complete" and server.has_stream(sid):
            server.send_complete(sid)
        elif op == "error" and server.has_stream(sid):
            server.send_error(sid, E.ApplicationError("nope"))
        elif op == "cancel":
            client.send_cancel(sid)
        elif op == "request_n":
            client.send_request_n(sid, n)
        elif op == "pump":
            collect()
    collect()
    for sid in opened:
        assert client.has_stream(sid) == server.has_stream(sid), sid
    for sid, items in received.items():
        assert items == sent[sid][:len(items)], sid
    assert client.is_open and server.is_open
