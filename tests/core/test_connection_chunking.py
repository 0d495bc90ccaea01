"""RSocketConnection: how the bytes are cut and interleaved does not change what happens.

A transport delivers a byte stream cut anywhere (spec §Framing Protocol Usage: TCP needs the
frame length because it "only provides a stream abstraction"), and the two directions of a
connection are independent ("No assumptions about ordering across sources is assumed").  A
valid conversation -- SETUP, all five interaction models, fragments, KEEPALIVE -- is recorded
once; replaying its bytes to fresh connections in any chunking and any interleaving of the two
directions must give the same events (and the same answers) as feeding it whole.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.core.events import (
    MetadataPushReceived,
    PayloadReceived,
    RequestReceived,
    SetupReceived,
)
from rsocket_tx.core.frames import FrameType
from rsocket_tx.core.payload import Payload

from .conn_helpers import feed_bytewise, make_client, make_server, split_frames

FRAG = 64


def _blob(n: int, seed: int) -> bytes:
    return bytes((i * 13 + seed) & 0xFF for i in range(n))


def _client_side():
    """A fresh client that has made every request of the conversation (deterministic)."""
    client = make_client(fragment_size=FRAG, now=0.0)
    ids = (
        client.request_response(Payload(_blob(300, 1), b"rr-meta")),
        client.request_stream(Payload(b"count", None), 3),
        client.request_channel(Payload(_blob(100, 2), b""), 2, complete=True),
    )
    client.fire_and_forget(Payload(b"fnf", b"fnf-meta"))
    client.metadata_push(b"client-push")
    client.tick(1.0)  # one KEEPALIVE
    return client, ids


def _server_side():
    return make_server(fragment_size=FRAG, now=0.0)


def _record():
    """Run the conversation once, fed whole; return its bytes, events and answers."""
    client, (rr, stream, channel) = _client_side()
    c_bytes = client.data_to_send()
    server = _server_side()
    server_events = server.receive_data(c_bytes)
    server_answer = server.data_to_send()  # the KEEPALIVE echo
    server.send_payload(rr, Payload(_blob(200, 3), _blob(90, 4)))
    for i in range(3):
        server.send_payload(stream, Payload(b"%d" % i))
    server.send_complete(stream)
    server.send_payload(channel, Payload(b"c0"))
    server.send_payload(channel, Payload(_blob(150, 5)), complete=True)
    server.fire_and_forget(Payload(_blob(120, 6)))
    server.metadata_push(b"server-push")
    s_bytes = server_answer + server.data_to_send()
    client_events = client.receive_data(s_bytes)
    client_answer = client.data_to_send()
    return c_bytes, s_bytes, server_events, server_answer, client_events, client_answer


C_BYTES, S_BYTES, SERVER_EVENTS, SERVER_ANSWER, CLIENT_EVENTS, CLIENT_ANSWER = _record()


def test_recorded_conversation_is_what_it_claims() -> None:
    assert len(split_frames(C_BYTES)) > 10 and len(split_frames(S_BYTES)) > 10
    assert [type(e) for e in SERVER_EVENTS] == [
        SetupReceived, RequestReceived, RequestReceived, RequestReceived, RequestReceived,
        MetadataPushReceived]
    assert SERVER_EVENTS[1].payload == Payload(_blob(300, 1), b"rr-meta")
    assert SERVER_EVENTS[3].payload == Payload(_blob(100, 2), b"")
    assert len(CLIENT_EVENTS) == 9
    assert CLIENT_EVENTS[0] == PayloadReceived(1, Payload(_blob(200, 3), _blob(90, 4)), True)
    assert CLIENT_EVENTS[-2] == RequestReceived(2, FrameType.REQUEST_FNF, Payload(_blob(120, 6)), 0,
                                                 False)
    assert CLIENT_EVENTS[-1] == MetadataPushReceived(b"server-push")
    assert SERVER_ANSWER and CLIENT_ANSWER == b""
    # replays are deterministic
    assert _client_side()[0].data_to_send() == C_BYTES


def test_one_byte_at_a_time_gives_the_same_events() -> None:
    server = _server_side()
    assert feed_bytewise(server, C_BYTES) == SERVER_EVENTS
    assert server.data_to_send() == SERVER_ANSWER
    client, _ = _client_side()
    client.data_to_send()
    assert feed_bytewise(client, S_BYTES) == CLIENT_EVENTS


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(data))), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=150, deadline=None)
@given(c_cuts=st.lists(st.integers(1, len(C_BYTES) - 1), max_size=60),
       s_cuts=st.lists(st.integers(1, len(S_BYTES) - 1), max_size=60),
       data=st.data())
def test_any_chunking_and_interleaving_gives_the_same_events(c_cuts, s_cuts, data) -> None:
    client, _ = _client_side()
    client.data_to_send()
    server = _server_side()
    to_server = _chunks(C_BYTES, c_cuts)
    to_client = _chunks(S_BYTES, s_cuts)
    order = data.draw(st.permutations([True] * len(to_server) + [False] * len(to_client)))
    server_events, client_events = [], []
    for towards_server in order:
        if towards_server:
            server_events.extend(server.receive_data(to_server.pop(0)))
        else:
            client_events.extend(client.receive_data(to_client.pop(0)))
    assert server_events == SERVER_EVENTS
    assert client_events == CLIENT_EVENTS
    assert server.data_to_send() == SERVER_ANSWER
    assert client.data_to_send() == CLIENT_ANSWER
    assert server.is_open and client.is_open
