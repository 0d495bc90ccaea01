"""Property tests of the Reactive Streams network codec: every message round-trips, however the
bytes are cut, and decoding is total (messages, need more, or ProtocolError; nothing else)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.config import MAX_ID, MAX_LONG, RSNetConfig
from rsocket_tx.rsnet.errors import ProtocolError

ids = st.integers(0, MAX_ID)
longs = st.integers(0, MAX_LONG)
texts = st.text(max_size=40)
blobs = st.binary(max_size=300)
FIXED_SIZE = 3  # subscribers with an odd id use elementSize 3 in these tests


def element_size(sid: int) -> int:
    return FIXED_SIZE if sid % 2 else 0


even_ids = ids.map(lambda n: n & ~1)
odd_ids = ids.map(lambda n: n | 1)

messages = st.one_of(
    st.builds(C.ClientHello, longs, st.lists(ids, max_size=8).map(tuple)),
    st.builds(C.ServerHello, longs, st.lists(ids, max_size=8).map(tuple)),
    st.builds(C.Subscribe, texts, ids, longs),
    st.builds(C.Request, ids, longs),
    st.builds(C.Cancel, ids),
    st.builds(C.OnSubscribe, ids, st.integers(0, 1 << 20)),
    st.builds(C.OnNext, even_ids, blobs),
    st.builds(C.OnNext, odd_ids, st.binary(min_size=3, max_size=3)),
    st.builds(lambda sid, els: C.OnNextPacked(sid, len(els), b"".join(els)), odd_ids,
              st.lists(st.binary(min_size=3, max_size=3), min_size=1, max_size=20)),
    st.builds(C.OnNextPart, ids, ids, blobs),
    st.builds(C.OnNextLastPart, ids, ids, blobs),
    st.builds(C.OnComplete, ids),
    st.builds(C.OnError, ids, texts),
    st.builds(C.Goodbye, texts),
    st.just(C.GoodbyeAck()),
)


def encoded(m: C.Message) -> bytes:
    sid = getattr(m, "subscriber", 0)
    return C.encode(m, element_size(sid) if isinstance(m, C.OnNext | C.OnNextPacked) else 0)


@given(st.lists(messages, min_size=1, max_size=12), st.data())
@settings(max_examples=300)
def test_round_trip_cut_anywhere(batch: list[C.Message], data: st.DataObject) -> None:
    wire = b"".join(encoded(m) for m in batch)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=6)))
    decoder = C.MessageDecoder()
    got: list[C.Message] = []
    last = 0
    for cut in [*cuts, len(wire)]:
        decoder.receive_data(wire[last:cut])
        last = cut
        while (m := decoder.next_message(element_size)) is not None:
            got.append(m)
    assert got == batch
    assert decoder.buffered == 0


@given(messages)
def test_encoding_is_the_shortest_form(m: C.Message) -> None:
    # re-encoding what was decoded gives the same bytes: one encoding per message
    wire = encoded(m)
    decoded, rest = C.decode(wire, element_size=element_size)
    assert rest == b"" and [encoded(x) for x in decoded] == [wire]


SMALL = RSNetConfig(max_string_length=16, max_element_size=32, max_packed_size=32,
                    max_extensions=4, max_buffered_input=64)


@given(st.binary(max_size=200), st.sampled_from([RSNetConfig(), SMALL]))
@settings(max_examples=500)
def test_decoding_any_bytes_is_total(data: bytes, config: RSNetConfig) -> None:
    try:
        messages, rest = C.decode(data, config, element_size)
    except ProtocolError as exc:
        assert str(exc)
        return
    assert all(isinstance(m, C.Message) for m in messages)
    assert data.endswith(rest) and len(rest) <= config.max_buffered_input


@given(st.lists(messages, min_size=1, max_size=4), st.binary(min_size=1, max_size=40))
def test_valid_messages_then_garbage(batch: list[C.Message], garbage: bytes) -> None:
    wire = b"".join(encoded(m) for m in batch)
    try:
        got, _ = C.decode(wire + garbage, element_size=element_size)
    except ProtocolError:
        return
    assert got[:len(batch)] == batch
