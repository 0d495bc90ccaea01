"""FrameReader bounds: the first frame's own limit, the frames before an oversize prefix, and
what a frame arriving a byte at a time costs (spec §Framing Protocol Usage: a 24-bit
big-endian length, excluding itself, before each frame)."""

from __future__ import annotations

import tracemalloc

import pytest

from rsocket_tx.core.errors import FrameTooLargeError
from rsocket_tx.core.framing import FrameReader

CANCEL_1 = bytes.fromhex("00000001" "2400")  # stream 1, CANCEL (0x09 << 10)


def prefixed(body: bytes) -> bytes:
    return len(body).to_bytes(3, "big") + body


def test_the_first_frame_has_its_own_limit() -> None:
    reader = FrameReader(max_frame_size=1000, first_frame_size=100)
    with pytest.raises(FrameTooLargeError, match="first frame length 101 exceeds the max "
                                                 "setup frame size of 100 bytes"):
        reader.feed(b"\x00\x00\x65")
    assert reader.buffered == 0


def test_after_the_first_prefix_max_frame_size_applies() -> None:
    reader = FrameReader(max_frame_size=1000, first_frame_size=100)
    first = b"s" * 100
    later = b"x" * 1000
    assert reader.feed(prefixed(first) + prefixed(later)) == [first, later]
    assert reader.first_frame_size is None
    with pytest.raises(FrameTooLargeError, match="frame length 1001 exceeds the max frame size"):
        reader.feed(b"\x00\x03\xe9")


def test_the_first_prefix_is_checked_across_reads() -> None:
    reader = FrameReader(max_frame_size=1000, first_frame_size=100)
    assert reader.feed(b"\x00") == []
    assert reader.feed(b"\x00") == []
    with pytest.raises(FrameTooLargeError):
        reader.feed(b"\x65")


def test_a_partial_first_frame_within_its_limit_waits() -> None:
    reader = FrameReader(max_frame_size=1000, first_frame_size=100)
    assert reader.feed(b"\x00\x00\x64" + b"s" * 50) == []
    assert reader.buffered == 53
    assert reader.feed(b"s" * 50 + b"\x00\x03\xe8") == [b"s" * 100]  # then a 1,000 prefix: ok


def test_the_frames_before_an_oversize_prefix_come_with_the_error() -> None:
    reader = FrameReader(max_frame_size=10)
    with pytest.raises(FrameTooLargeError) as info:
        reader.feed(prefixed(CANCEL_1) + prefixed(CANCEL_1) + b"\x00\x00\x0b")
    assert info.value.frames == [CANCEL_1, CANCEL_1]
    assert reader.buffered == 0


def test_a_frame_completed_from_pieces_before_an_oversize_prefix() -> None:
    reader = FrameReader(max_frame_size=10)
    data = prefixed(CANCEL_1)
    assert reader.feed(data[:4]) == []
    with pytest.raises(FrameTooLargeError) as info:
        reader.feed(data[4:] + b"\xff\xff\xff")
    assert info.value.frames == [CANCEL_1]


def test_a_frame_sent_a_byte_at_a_time_holds_no_object_per_byte() -> None:
    # 100,000 one-byte reads: kept as separate bytes objects they would cost some 40 bytes
    # each (4 MB); gathered, about the bytes themselves
    size = 100_000
    pieces = [b"z"] * (size - 1)  # (one shared object: allocated before the measure)
    tracemalloc.start()
    try:
        reader = FrameReader()
        reader.feed(size.to_bytes(3, "big"))
        for piece in pieces:
            reader.feed(piece)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reader.buffered == size + 2
    assert held < size * 1.3, held
    [frame] = reader.feed(b"z")
    assert frame == b"z" * size and isinstance(frame, bytes)
