"""Tests for rsocket_tx.mux.outbox: FIFO order, byte count, drain empties."""

from __future__ import annotations

from rsocket_tx.mux.outbox import Outbox


def test_append_extend_drain() -> None:
    box = Outbox()
    assert not box and len(box) == 0 and box.nbytes == 0
    box.append(b"abc")
    box.extend([b"de", b"", b"f"])
    assert box and len(box) == 4 and box.nbytes == 6
    assert box.drain() == [b"abc", b"de", b"", b"f"]
    assert not box and len(box) == 0 and box.nbytes == 0
    assert box.drain() == []


def test_drained_list_is_not_reused() -> None:
    box = Outbox()
    box.append(b"1")
    first = box.drain()
    box.append(b"2")
    assert first == [b"1"]
    assert box.drain() == [b"2"]


def test_extend_accepts_a_generator() -> None:
    box = Outbox()
    box.extend(bytes([i]) for i in range(3))
    assert box.nbytes == 3 and box.drain() == [b"\x00", b"\x01", b"\x02"]


def test_clear_drops_everything() -> None:
    box = Outbox()
    box.extend([b"ab", b"c"])
    box.clear()
    assert not box and box.nbytes == 0 and box.drain() == []
    box.append(b"d")
    assert box.drain() == [b"d"]


def test_append_after_drain_goes_to_the_new_queue() -> None:
    box = Outbox()
    append = box.append
    append(b"1")
    assert box.drain() == [b"1"]
    box.append(b"2")
    assert len(box) == 1 and box.nbytes == 1


def test_drain_returns_a_plain_list() -> None:
    box = Outbox()
    box.append(b"xy")
    chunks = box.drain()
    assert type(chunks) is list and chunks == [b"xy"]
    assert "0 chunks" in repr(box)
