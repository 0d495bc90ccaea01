"""Memory after an attack (rsocket_tx.transports.memory): the memory freed by closed
connections goes back to the system.

* the trim policy on a Clock with a fake trim function: one check ``delay`` after a close,
  however many close; at most one per ``interval``; a trim only past ``threshold`` free
  bytes; nothing at all without a trim function (no glibc);
* every :class:`~rsocket_tx.transports.limits.ConnectionLimit` release tells its trimmer;
* for real: a ``twistd rsocket`` server on defaults, attacked by connections that each fill
  hundreds of MiB of reassembly in 16 KiB fragments that never finish, comes back near its
  resting resident size once they have closed (it stayed some 300 MiB above it before).
"""

from __future__ import annotations

import os
import re
import select
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from rsocket_tx.transports import memory
from rsocket_tx.transports.limits import ConnectionLimit
from rsocket_tx.transports.memory import MemoryTrimmer

MiB = 1024 * 1024
REPO = Path(__file__).resolve().parent.parent
TWISTD = "import sys; sys.argv[0] = 'twistd'; from twisted.scripts.twistd import run; run()"


class FakeAllocator:
    """A trim function and a free-bytes reading the test controls."""

    def __init__(self, free: int | None = 100 * MiB) -> None:
        self.free = free
        self.trims: list[float] = []
        self.clock = Clock()

    def trim(self) -> bool:
        self.trims.append(self.clock.seconds())
        return True

    def free_bytes(self) -> int | None:
        return self.free

    def trimmer(self, **kwargs) -> MemoryTrimmer:
        return MemoryTrimmer(self.trim, free_bytes=self.free_bytes, reactor=self.clock,
                             **kwargs)


# -- the policy --------------------------------------------------------------------------------


def test_a_wave_of_closes_is_one_check_after_the_delay():
    alloc = FakeAllocator()
    trimmer = alloc.trimmer(delay=1.0, interval=5.0)
    for _ in range(100):
        trimmer.connection_closed()
    assert len(alloc.clock.getDelayedCalls()) == 1
    alloc.clock.advance(0.9)
    assert alloc.trims == []
    alloc.clock.advance(0.1)
    assert alloc.trims == [1.0]
    assert (trimmer.checks, trimmer.trims) == (1, 1)
    assert not trimmer.pending and alloc.clock.getDelayedCalls() == []


def test_a_churn_of_closes_trims_at_most_once_per_interval():
    alloc = FakeAllocator()
    trimmer = alloc.trimmer(delay=1.0, interval=5.0)
    # a connection closes every 250 ms for 20 s
    for _ in range(80):
        trimmer.connection_closed()
        alloc.clock.advance(0.25)
    alloc.clock.pump([0.25] * 40)  # then none for 10 s
    assert alloc.trims == [1.0, 6.0, 11.0, 16.0, 21.0]


def test_a_close_long_after_the_last_check_waits_only_the_delay():
    alloc = FakeAllocator()
    trimmer = alloc.trimmer(delay=1.0, interval=5.0)
    trimmer.connection_closed()
    alloc.clock.pump([1.0, 60.0])
    trimmer.connection_closed()
    alloc.clock.advance(1.0)
    assert alloc.trims == [1.0, 62.0]


def test_below_the_threshold_a_check_does_not_trim():
    alloc = FakeAllocator(free=16 * MiB - 1)
    trimmer = alloc.trimmer(threshold=16 * MiB)
    trimmer.connection_closed()
    alloc.clock.advance(60)
    assert alloc.trims == []
    assert (trimmer.checks, trimmer.trims) == (1, 0)
    alloc.free = 16 * MiB  # the next close, once the allocator holds enough free
    trimmer.connection_closed()
    alloc.clock.advance(60)
    assert len(alloc.trims) == 1
    assert (trimmer.checks, trimmer.trims) == (2, 1)


def test_without_a_free_bytes_reading_every_check_trims():
    alloc = FakeAllocator(free=None)
    trimmer = alloc.trimmer(threshold=16 * MiB)
    assert trimmer.check() is True
    assert len(alloc.trims) == 1


def test_without_a_trim_function_nothing_is_scheduled():
    clock = Clock()
    trimmer = MemoryTrimmer(None, reactor=clock)
    assert not trimmer.enabled
    trimmer.connection_closed()
    assert clock.getDelayedCalls() == []
    assert trimmer.check() is False
    assert trimmer.checks == 0


def test_cancel_drops_the_scheduled_check():
    alloc = FakeAllocator()
    trimmer = alloc.trimmer()
    trimmer.connection_closed()
    trimmer.cancel()
    alloc.clock.advance(60)
    assert alloc.trims == [] and not trimmer.pending


@pytest.mark.parametrize("name", ["delay", "interval", "threshold"])
def test_negative_settings_are_refused(name):
    with pytest.raises(ValueError, match=f"{name} must be >= 0"):
        MemoryTrimmer(lambda: True, **{name: -1})


def test_every_release_of_a_connection_limit_tells_its_trimmer():
    alloc = FakeAllocator()
    trimmer = alloc.trimmer(delay=1.0)
    limit = ConnectionLimit(2, trimmer=trimmer, reactor=alloc.clock)
    assert limit.acquire() and limit.acquire()
    limit.release()
    assert trimmer.pending
    limit.release()
    alloc.clock.advance(1.0)
    assert len(alloc.trims) == 1


def test_connection_limits_share_the_process_trimmer_by_default():
    assert ConnectionLimit(1).trimmer is ConnectionLimit(2).trimmer is memory.process_trimmer()


GLIBC = memory.process_trimmer().enabled


def own_resident() -> int:
    """This process's resident size in bytes (Linux /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc_trim: Linux with glibc only")
def test_glibc_gives_back_freed_heap_pieces_when_trimmed():
    # 64 MiB in 16 KiB pieces (in the heap: below the mmap threshold), a 1 KiB piece kept
    # after every 16th so that the heap cannot shrink from its top
    pieces, kept = [], []
    for i in range(4096):
        pieces.append(bytes(16 * 1024))
        if i % 16 == 0:
            kept.append(bytes(1024))  # (above 512 bytes: from malloc too)
    with_pieces = own_resident()
    del pieces
    free = memory.glibc_free_bytes()
    assert free is None or free >= 48 * MiB  # (None before glibc 2.33)
    assert memory.glibc_malloc_trim() is True
    assert own_resident() <= with_pieces - 48 * MiB
    assert kept


# -- for real: twistd rsocket after a reassembly attack ---------------------------------------

#: Attack size: connections x bytes of unfinished fragments each (under the default
#: max_reassembly_buffer_size and max_reassembled_size of 64 MiB), in 16 KiB fragments (below
#: glibc's mmap threshold: they live in the heap, which glibc does not give back by itself).
ATTACKERS = 8
HELD_EACH = 40 * MiB
FRAGMENT = 16 * 1024
#: How far above its resting size the server may stay once the attackers have closed. Before
#: the trimmer it stayed some 300 MiB above (8 x 40 MiB held at the peak); with it, within a
#: few MiB.
ALLOWED_ABOVE_REST = 100 * MiB
#: Seconds the server has to come back (it trims about 1 s after the closes).
COME_BACK_WITHIN = 15.0


def frame(stream_id: int, frame_type: int, flags: int, body: bytes = b"") -> bytes:
    """A length-prefixed frame (RSocket 1.0 §Framing, §Frame Header Format)."""
    header = struct.pack(">IH", stream_id, (frame_type << 10) | flags)
    return (len(header) + len(body)).to_bytes(3, "big") + header + body


SETUP = frame(0, 0x01, 0, struct.pack(">HHII", 1, 0, 20_000, 90_000) + b"\x00\x00")
FOLLOWS = 0x80


def request_response(stream_id: int, data: bytes, follows: bool = False) -> bytes:
    return frame(stream_id, 0x04, FOLLOWS if follows else 0, data)


def payload_fragment(stream_id: int, data: bytes) -> bytes:
    """A PAYLOAD frame continuing a fragmented request, with F (never the last)."""
    return frame(stream_id, 0x0A, FOLLOWS, data)


def read_frame_on(sock: socket.socket, stream_id: int, timeout: float) -> bytes:
    """Read frames until one on ``stream_id`` comes (its type and body); fail at ``timeout``."""
    sock.settimeout(timeout)
    buf = b""
    while True:
        while len(buf) >= 3 and len(buf) - 3 >= int.from_bytes(buf[:3], "big"):
            length = int.from_bytes(buf[:3], "big")
            body, buf = buf[3:3 + length], buf[3 + length:]
            if struct.unpack(">I", body[:4])[0] & 0x7FFFFFFF == stream_id:
                return body[4:]
        data = sock.recv(65536)
        assert data, "the server closed the connection"
        buf += data


def resident(pid: int) -> int:
    """VmRSS of process ``pid``, in bytes (Linux /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


class TwistdServer:
    """``twistd -n rsocket`` on a free loopback port, defaults otherwise."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", TWISTD, "-n", "--pidfile=", "rsocket", "--listen",
             "tcp:port=0:interface=127.0.0.1"],
            cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.output = b""
        found = self.read_until(re.compile(rb"listening on 127\.0\.0\.1:(\d+)"), 60)
        self.port = int(found.group(1))

    def read_until(self, pattern: re.Pattern[bytes], timeout: float) -> re.Match[bytes]:
        end = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while not (found := pattern.search(self.output)):
            left = end - time.monotonic()
            assert left > 0, f"no {pattern.pattern!r} in:\n{self.output.decode()}"
            if select.select([fd], [], [], left)[0]:
                data = os.read(fd, 65536)
                assert data, f"twistd ended:\n{self.output.decode()}"
                self.output += data
        return found

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        sock.sendall(SETUP)
        return sock

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


@pytest.mark.skipif(not (sys.platform.startswith("linux") and GLIBC),
                    reason="measures /proc/PID/status and glibc's heap: Linux with glibc only")
def test_a_server_gives_back_the_memory_of_closed_reassembly_attackers():
    server = TwistdServer()
    attackers: list[socket.socket] = []
    try:
        good = server.connect()  # the server warmed up: a connection served
        good.sendall(request_response(1, b"warm"))
        read_frame_on(good, 1, 30)
        rest = resident(server.proc.pid)

        chunk = b"\0" * FRAGMENT
        fragments = b"".join(payload_fragment(1, chunk) for _ in range(64))  # 1 MiB
        for _ in range(ATTACKERS):
            sock = server.connect()
            sock.sendall(request_response(1, chunk, follows=True))
            for _ in range(HELD_EACH // len(fragments)):
                sock.sendall(fragments)
            attackers.append(sock)
        for sock in attackers:  # answered after every fragment before it was read
            sock.sendall(request_response(3, b"all read?"))
            read_frame_on(sock, 3, 60)
        peak = resident(server.proc.pid)
        assert peak - rest > ATTACKERS * HELD_EACH * 3 // 4, (rest, peak)  # (the attack held)

        for sock in attackers:
            sock.close()
        attackers.clear()
        end = time.monotonic() + COME_BACK_WITHIN
        while (after := resident(server.proc.pid)) > rest + ALLOWED_ABOVE_REST:
            assert time.monotonic() < end, (
                f"the server stayed {(after - rest) / MiB:.0f} MiB above its resting "
                f"{rest / MiB:.0f} MiB after the attackers closed (peak {peak / MiB:.0f} MiB)")
            select.select([], [], [], 0.05)  # (between two readings of the condition)

        good.sendall(request_response(5, b"still serving?"))  # and it still serves
        read_frame_on(good, 5, 30)
        good.close()
    finally:
        for sock in attackers:
            sock.close()
        server.stop()
