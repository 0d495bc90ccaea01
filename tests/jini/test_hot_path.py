"""The Jini mux's hot path (issue 14): what goes on the wire for one round trip, the merging of
a read's Data into one chunk, the idle timer that is not rescheduled per session, and the
default ration and fragment size. Clock and StringTransport only: nothing sleeps."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from rsocket_tx.jini import JiniMuxConfig
from rsocket_tx.jini import codec as C
from rsocket_tx.jini.client import JiniClientProtocol
from rsocket_tx.jini.config import (
    DEFAULT_FRAGMENT_SIZE,
    DEFAULT_INITIAL_RATION,
    DEFAULT_MAX_CONNECTION_BUFFER,
    RIVER_INITIAL_RATION,
)
from rsocket_tx.jini.connection import JiniMuxConnection, Role
from rsocket_tx.jini.events import DataReceived, RationIncreased, SessionAborted
from rsocket_tx.jini.protocol import merge_data
from rsocket_tx.jini.server import Dispatcher

from .clock_helpers import assert_shut_down_after, server_on_clock
from .conn_helpers import river_config, sent

#: River's connection header (32,768-byte ration)
RIVER_HEADER = bytes.fromhex("4a6d7578 01 0080 00")


class ReadAllEcho(Dispatcher):
    """River's echo: the whole body, then the same bytes back."""

    async def dispatch(self, request: Any) -> None:
        body = await request.read_all()
        request.response.write(body)


def client_on_clock(**settings: Any) -> tuple[JiniClientProtocol, StringTransport, Clock]:
    """A client protocol past its handshake with River's server header."""
    clock = Clock()
    protocol = JiniClientProtocol(clock, JiniMuxConfig(**settings))
    transport = StringTransport()
    protocol.makeConnection(transport)
    protocol.dataReceived(RIVER_HEADER)
    transport.clear()  # (our header)
    return protocol, transport, clock


# ----------------------------------------------------------------------------- one round trip


def test_a_request_written_and_finished_in_one_turn_is_one_data_with_open_and_eof():
    """River's client sends a small request as one Data with open+eof (0x94): so do we, when
    the body is written and finished in the same reactor turn."""
    protocol, transport, clock = client_on_clock()
    request = protocol.new_request()
    request.write(b"fifteen bytes!!")
    request.finish()
    clock.advance(0)
    assert transport.value() == bytes.fromhex("94 00 000f") + b"fifteen bytes!!"


def test_a_write_alone_goes_out_by_the_end_of_the_turn():
    protocol, transport, clock = client_on_clock()
    request = protocol.new_request()
    request.write(b"part")
    assert request.writer.pending == 4  # (handed to the connection at the end of the turn)
    clock.advance(0)
    assert transport.value() == bytes.fromhex("90 00 0004") + b"part"  # open, no eof
    assert request.writer.pending == 0
    transport.clear()
    request.write(b"rest")
    request.finish()
    clock.advance(0)
    assert transport.value() == bytes.fromhex("84 00 0004") + b"rest"  # eof


def test_written_data_goes_out_before_an_abort():
    protocol, transport, clock = client_on_clock()
    request = protocol.new_request()
    request.write(b"abc")
    request.abort("no")
    clock.advance(0)
    assert transport.value() == bytes.fromhex("90 00 0003") + b"abc" + \
        C.Abort(0, False, b"no").encode()


def test_the_server_answers_a_small_request_with_one_data_with_eof_and_close():
    """River's 15-byte echo (MUX-PROTOCOLS.md): ``C→S 94 00 000f <15 bytes>``,
    ``S→C 8c 00 000f <15 bytes>``: the response, its eof and the close in one message."""
    server, transport, clock = server_on_clock(ReadAllEcho, initial_ration=RIVER_INITIAL_RATION)
    server.dataReceived(RIVER_HEADER + bytes.fromhex("94 00 000f") + b"fifteen bytes!!")
    clock.advance(0)
    assert transport.value() == RIVER_HEADER + bytes.fromhex("8c 00 000f") + b"fifteen bytes!!"
    assert server.connection.active_sessions == 0  # (terminated with respect to us)


# ----------------------------------------------------------------------------- merged Data


def test_merge_data_joins_runs_of_one_session_and_keeps_the_rest_in_place():
    ration = RationIncreased(3, 10, 10)
    events = [DataReceived(1, b"a"), DataReceived(1, b"b"), DataReceived(1, b"c"),
              DataReceived(2, b"x"), ration, DataReceived(1, b"d"),
              DataReceived(1, b"e", eof=True)]
    assert merge_data(events) == [DataReceived(1, b"abc"), DataReceived(2, b"x"), ration,
                                  DataReceived(1, b"de", eof=True)]
    # the events given are not changed
    assert events[0] == DataReceived(1, b"a")


def test_merge_data_stops_at_eof_and_returns_the_list_when_nothing_merges():
    after_eof = [DataReceived(1, b"a", eof=True), DataReceived(1, b"b")]  # (an id reused)
    assert merge_data(after_eof) is after_eof
    aborted = [DataReceived(1, b"a"), SessionAborted(1, False, "x", by_peer=True),
               DataReceived(1, b"b")]
    assert merge_data(aborted) is aborted
    ack = [DataReceived(1, b"a"), DataReceived(1, b"b", eof=True, ack_required=True)]
    assert merge_data(ack) == [DataReceived(1, b"ab", eof=True, ack_required=True)]


def test_the_data_of_one_read_is_one_chunk_and_one_ration_top_up():
    """River sends 1 KiB Data: the 32 of a 32 KiB read reach the application as one chunk,
    and the ration is topped up once (to the initial ration, River's rule)."""
    server, transport, clock = server_on_clock(ReadAllEcho, initial_ration=RIVER_INITIAL_RATION)
    chunks: list[bytes] = []

    class Reader(Dispatcher):
        async def dispatch(self, request: Any) -> None:
            async for chunk in request.body:
                chunks.append(chunk)

    server.dispatcher = Reader()
    body = bytes(range(256)) * 128  # 32 KiB
    wire = b"".join(C.Data(0, body[i:i + 1024], open=not i).encode()
                    for i in range(0, len(body), 1024))
    server.dataReceived(RIVER_HEADER + wire)
    clock.advance(0)
    assert chunks == [body]
    messages = sent_messages(transport.value()[len(RIVER_HEADER):])
    assert messages == [C.IncrementRation(0, 32_768, 0)]


def sent_messages(wire: bytes) -> list[C.Message]:
    decoder = C.MessageDecoder(None)
    return list(decoder.feed(wire))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- idle timer


def test_sessions_one_after_another_keep_the_connection_and_the_timer_is_not_rescheduled():
    """A session a second for 20 s on a 3 s idle timeout: never idle for 3 s, never shut
    down, and the idle timer is the one delayed call, not one more per session; the
    shutdown comes 3 s after the last session ended."""
    server, transport, clock = server_on_clock(ReadAllEcho, idle_timeout=3_000)
    server.dataReceived(RIVER_HEADER)
    timers = len(clock.getDelayedCalls())
    seen = set(clock.getDelayedCalls())
    for _ in range(20):
        clock.advance(1)
        server.dataReceived(C.Data(0, b"x", open=True, eof=True).encode())
        clock.advance(0)
        assert server.is_open and not transport.disconnecting
        assert len(clock.getDelayedCalls()) <= timers
        seen.update(clock.getDelayedCalls())
    # when it fires early it is scheduled for the rest (2 s here): about one call per 2 s,
    # not one per session (21 and more)
    assert len(seen) <= 12
    assert_shut_down_after(transport, clock, 3)


def test_a_session_in_progress_when_the_timer_fires_keeps_the_connection():
    server, transport, clock = server_on_clock(ReadAllEcho, idle_timeout=3_000)
    server.dataReceived(RIVER_HEADER)
    clock.advance(2)
    server.dataReceived(C.Data(0, b"x", open=True).encode())  # no eof: in progress
    clock.advance(5)
    assert server.is_open and not transport.disconnecting
    server.dataReceived(C.Data(0, b"", eof=True).encode())
    clock.advance(0)
    assert_shut_down_after(transport, clock, 3)


# ----------------------------------------------------------------------------- defaults


def test_the_default_ration_and_fragment_size():
    config = JiniMuxConfig()
    assert config.initial_ration == DEFAULT_INITIAL_RATION == 131_072
    assert config.fragment_size == DEFAULT_FRAGMENT_SIZE == 16_384
    # a peer keeping to its rations on every session never passes max_connection_buffer
    assert config.max_sessions * config.initial_ration <= DEFAULT_MAX_CONNECTION_BUFFER
    assert config.max_connection_buffer == DEFAULT_MAX_CONNECTION_BUFFER
    assert river_config().initial_ration == 32_768 and river_config().fragment_size == 1_024


def test_the_default_header_announces_128_kib_and_data_goes_in_16_kib_fragments():
    client = JiniMuxConnection(Role.CLIENT)
    assert b"".join(client.chunks_to_send()) == bytes.fromhex("4a6d7578 01 0200 00")
    client.receive_data(bytes.fromhex("4a6d7578 01 0200 00"), 0.0)  # a server like us
    sid = client.open_session()
    body = bytes(40_000)
    assert client.send_data(sid, body, eof=True) == 40_000
    data = sent(client)
    assert [len(m.data) for m in data] == [16_384, 16_384, 7_232]  # type: ignore[attr-defined]
    assert [(m.open, m.eof) for m in data] == [(True, False), (False, False),  # type: ignore
                                               (False, True)]
