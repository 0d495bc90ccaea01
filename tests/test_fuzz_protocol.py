"""Hostile bytes never escape as exceptions: whatever a peer sends after (or instead of) a valid
SETUP, the sans-IO connection returns events (at worst a ConnectionClosed with an ERROR queued
for the peer) and the Twisted protocol on top of it keeps running its responder.

The sans-IO half runs hypothesis-built inputs through the atheris target ``rsocket_server``
(``fuzz/``, ``make fuzz``), so both engines check the same invariants."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted_support import server_protocol

from fuzz.drivers.rsocket import PRESET
from fuzz.harness import seed_input
from fuzz.targets import rsocket_server
from rsocket_tx import Payload, Responder
from rsocket_tx.client import make_setup
from rsocket_tx.core.frames import FrameType, decode, encode
from rsocket_tx.core.framing import FrameReader, frame_with_length

SETUP = frame_with_length(encode(make_setup()))

# frames with a plausible header (a known type, random flags, a small stream id) and a random
# body: these reach deep into the state machine, unlike uniformly random bytes
plausible_frame = st.builds(
    lambda stream_id, frame_type, flags, body: frame_with_length(
        struct.pack(">IH", stream_id, (frame_type << 10) | flags) + body),
    st.integers(0, 8),
    st.sampled_from([int(t) for t in FrameType] + [0x10, 0x3E]),
    st.integers(0, 0x3FF),
    st.binary(max_size=40),
)
chunked = st.lists(st.one_of(plausible_frame, st.binary(max_size=30)), max_size=30)


@settings(max_examples=400, deadline=None)
@given(chunked)
def test_core_never_raises_on_hostile_input(chunks):
    # the oracle is the atheris target's (fuzz/drivers/rsocket.py): receive_data never raises,
    # the chunk that ends the connection reports it once, as the last event, nothing comes
    # after it, and whatever it queued for the peer is well-formed frames
    rsocket_server.one_input(seed_input(PRESET, chunks))


class Echo(Responder):
    def request_response(self, payload):
        return payload

    def request_stream(self, payload):
        return (Payload(b"%d" % i) for i in range(3))

    def request_channel(self, payload, inbound):
        return [payload]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunked)
def test_protocol_never_raises_on_hostile_input(chunks):
    proto, transport, clock = server_protocol(Echo)
    proto.dataReceived(SETUP)
    for chunk in chunks:
        proto.dataReceived(chunk)  # must not raise
        clock.advance(0)
    frames = FrameReader().feed(transport.value())
    for frame in frames:
        decode(frame)  # everything we sent is a valid frame
    if not proto._conn.is_open:
        assert transport.disconnecting
