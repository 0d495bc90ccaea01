"""Bugs the fuzzer found in the 2015 ReactiveSocket draft's connection
(:mod:`rsocket_tx.reactivesocket.connection`), each as a behaviour test; the crash inputs
themselves are replayed from ``fuzz/regressions/reactivesocket_*``."""

from __future__ import annotations

from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.core.events import PayloadReceived, RequestReceived, SetupReceived
from rsocket_tx.core.payload import Payload
from rsocket_tx.reactivesocket import frames as F
from rsocket_tx.reactivesocket.connection import ReactiveSocketConnection, Role

SETUP = F.SetupFrame(metadata_mime_type=b"application/x.meta", data_mime_type=b"text/plain")


def test_response_metadata_larger_than_the_fragment_size_is_fragmented_too() -> None:
    # fuzz/regressions/reactivesocket_server/crash-response-metadata-over-fragment-size: a
    # RESPONSE carried all its metadata in its first fragment, a frame over fragment_size
    config = ConnectionConfig(fragment_size=64)
    client = ReactiveSocketConnection(Role.CLIENT, config, setup=SETUP)
    server = ReactiveSocketConnection(Role.SERVER, config)
    [setup] = server.receive_data(client.data_to_send(), 0.0)
    assert isinstance(setup, SetupReceived)
    sid = client.request_response(Payload(b"q"))
    [request] = server.receive_data(client.data_to_send(), 0.0)
    assert isinstance(request, RequestReceived)
    payload = Payload(b"d" * 150, b"m" * 200)
    server.send_payload(sid, payload, complete=True)
    out = server.data_to_send()
    frames = F.FrameReader(1 << 20).feed(out)
    assert len(frames) > 1
    assert all(len(f) <= 64 for f in frames), [len(f) for f in frames]
    events = client.receive_data(out, 0.0)
    assert events == [PayloadReceived(sid, payload, True)]
