"""Hand-built RSocket frames and a non-blocking socket driver for the stress benchmark's attacks.

The attacks of :mod:`benchmarks.stress` talk to the server under test the way an attacker
would: plain sockets, frames written byte by byte from RSocket 1.0 Protocol §Framing, no
rsocket_tx code on the sending side. Wire format of a frame over TCP::

    length (24 bits) | stream id (32 bits, high bit 0) | type (6 bits) flags (10 bits) | body

:class:`RawDriver` runs many :class:`RawConn` at once with :mod:`selectors` (epoll): non-blocking
connects, writes from shared buffers (a 16 MiB body is one ``bytes`` object written to every
connection, not copied), and a small parser that records the frames the server answers with
(enough to see ERROR codes and PAYLOAD answers) and when the server closed the connection.
"""

from __future__ import annotations

import errno
import selectors
import socket
import struct
import time

# RSocket 1.0 Protocol §Frame Types
SETUP = 0x01
KEEPALIVE = 0x03
REQUEST_RESPONSE = 0x04
REQUEST_FNF = 0x05
REQUEST_STREAM = 0x06
PAYLOAD = 0x0A
ERROR = 0x0B
# flags (§Frame Header Format and each frame's section)
FLAG_METADATA = 0x100
FLAG_FOLLOWS = 0x80
FLAG_RESUME_ENABLE = 0x80
FLAG_COMPLETE = 0x40
FLAG_NEXT = 0x20

#: The largest value of the 24-bit length prefix (§Framing): 16,777,215 bytes.
MAX_LENGTH = 0xFFFFFF
#: The largest max lifetime / keepalive interval a SETUP can declare (31 bits), in ms.
MAX_INT31 = 2**31 - 1

#: RSocket 1.0 Protocol §Error Codes, for the table.
ERROR_NAMES = {
    0x001: "INVALID_SETUP", 0x002: "UNSUPPORTED_SETUP", 0x003: "REJECTED_SETUP",
    0x004: "REJECTED_RESUME", 0x101: "CONNECTION_ERROR", 0x102: "CONNECTION_CLOSE",
    0x201: "APPLICATION_ERROR", 0x202: "REJECTED", 0x203: "CANCELED", 0x204: "INVALID",
}


def prefix(length: int) -> bytes:
    """The 3-byte big-endian length prefix of a frame of ``length`` bytes."""
    return length.to_bytes(3, "big")


def frame(stream_id: int, frame_type: int, flags: int, body: bytes = b"") -> bytes:
    """One frame with its length prefix: header (stream id, type and flags) then ``body``."""
    header = struct.pack(">IH", stream_id, (frame_type << 10) | flags)
    return prefix(len(header) + len(body)) + header + body


def setup(keepalive: int = 20_000, lifetime: int = 90_000, token: bytes | None = None,
          metadata_mime: bytes = b"application/octet-stream",
          data_mime: bytes = b"application/octet-stream") -> bytes:
    """A SETUP frame, version 1.0, no payload (§SETUP Frame); ``token`` sets the R flag."""
    body = struct.pack(">HHII", 1, 0, keepalive, lifetime)
    flags = 0
    if token is not None:
        flags |= FLAG_RESUME_ENABLE
        body += struct.pack(">H", len(token)) + token
    body += bytes([len(metadata_mime)]) + metadata_mime + bytes([len(data_mime)]) + data_mime
    return frame(0, SETUP, flags, body)


def request_response(stream_id: int, data: bytes, follows: bool = False) -> bytes:
    """REQUEST_RESPONSE with data only (§REQUEST_RESPONSE Frame); ``follows`` sets F."""
    return frame(stream_id, REQUEST_RESPONSE, FLAG_FOLLOWS if follows else 0, data)


def payload_fragment_header(stream_id: int, data_length: int, follows: bool) -> bytes:
    """Length prefix and header of a PAYLOAD frame carrying ``data_length`` bytes of data
    that continue a fragmented request (§Fragmentation And Reassembly: F on every fragment
    but the last, N on the last); the data itself is written separately (shared buffer)."""
    flags = FLAG_FOLLOWS if follows else FLAG_NEXT
    return prefix(6 + data_length) + struct.pack(">IH", stream_id, (PAYLOAD << 10) | flags)


class RawConn:
    """One attacker (or raw client) connection: what to write, what came back, when it ended.

    :ivar out: buffers still to write, in order (``bytes`` or ``memoryview``).
    :ivar frames: ``(stream_id, type, flags, body)`` the server sent (bodies of PAYLOAD and
        ERROR frames are kept; others are dropped to save memory).
    :ivar started: ``time.monotonic()`` when connect() was issued.
    :ivar connected: seconds from ``started`` until the connect completed (None: not yet).
    :ivar closed: seconds from ``started`` until the server closed it (None: still open).
    :ivar sent: bytes written.
    """

    __slots__ = ("sock", "out", "inbuf", "frames", "started", "connected", "closed", "sent",
                 "reset", "tag", "first_frame_at")

    def __init__(self, sock: socket.socket, tag: object = None) -> None:
        self.sock = sock
        self.out: list = []
        self.inbuf = bytearray()
        self.frames: list[tuple[int, int, int, bytes]] = []
        self.started = time.monotonic()
        self.connected: float | None = None
        self.closed: float | None = None
        self.first_frame_at: float | None = None
        self.sent = 0
        self.reset = False
        self.tag = tag

    @property
    def is_open(self) -> bool:
        return self.closed is None

    @property
    def pending(self) -> int:
        return sum(len(b) for b in self.out)

    def errors(self) -> list[str]:
        """The ERROR frames received, as ``"NAME"`` strings (§Error Codes)."""
        names = []
        for _, ftype, _, body in self.frames:
            if ftype == ERROR and len(body) >= 4:
                code = int.from_bytes(body[:4], "big")
                names.append(ERROR_NAMES.get(code, hex(code)))
        return names

    def error_texts(self) -> list[str]:
        return [body[4:].decode("utf-8", "replace") for _, t, _, body in self.frames
                if t == ERROR and len(body) >= 4]

    def payloads(self, stream_id: int) -> list[bytes]:
        return [body for sid, t, _, body in self.frames if t == PAYLOAD and sid == stream_id]

    def _parse(self) -> None:
        buf = self.inbuf
        pos = 0
        while len(buf) - pos >= 3:
            length = int.from_bytes(buf[pos:pos + 3], "big")
            if len(buf) - pos - 3 < length:
                break
            start = pos + 3
            if length >= 6:
                sid, tf = struct.unpack_from(">IH", buf, start)
                ftype, flags = tf >> 10, tf & 0x3FF
                body = bytes(buf[start + 6:start + length]) if ftype in (PAYLOAD, ERROR) else b""
                self.frames.append((sid & 0x7FFFFFFF, ftype, flags, body))
                if self.first_frame_at is None:
                    self.first_frame_at = time.monotonic() - self.started
            pos = start + length
        del buf[:pos]


class RawDriver:
    """Drive many :class:`RawConn` at once on one epoll selector, in the calling thread."""

    def __init__(self) -> None:
        self.sel = selectors.DefaultSelector()
        self.conns: list[RawConn] = []

    def open(self, host: str, port: int, tag: object = None, rcvbuf: int | None = None) -> RawConn:
        """Start a non-blocking connect to ``(host, port)``; returns the connection at once."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        conn = RawConn(sock, tag)
        err = sock.connect_ex((host, port))
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            conn.closed = 0.0
            conn.reset = True
            return conn
        self.sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
        self.conns.append(conn)
        return conn

    def write(self, conn: RawConn, *buffers) -> None:
        if conn.closed is not None:
            return
        conn.out.extend(memoryview(b) if len(b) > 65536 else b for b in buffers)
        self._interest(conn)

    def _interest(self, conn: RawConn) -> None:
        events = selectors.EVENT_READ
        if conn.out or conn.connected is None:
            events |= selectors.EVENT_WRITE
        try:
            self.sel.modify(conn.sock, events, conn)
        except (KeyError, ValueError):
            pass

    def close(self, conn: RawConn, abort: bool = False) -> None:
        """Close ``conn`` ourselves (``abort``: with a RST, as a killed client would)."""
        if conn.closed is None:
            conn.closed = time.monotonic() - conn.started
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        if abort:
            try:
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        conn.sock.close()
        conn.out.clear()

    def close_all(self, abort: bool = False) -> None:
        for conn in self.conns:
            if conn.sock.fileno() >= 0:
                self.close(conn, abort)
        self.conns = []

    def _lost(self, conn: RawConn, reset: bool) -> None:
        conn.reset = reset
        conn.closed = time.monotonic() - conn.started
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        conn.out.clear()

    def run(self, timeout: float, until=None, tick=None) -> bool:
        """Serve I/O for up to ``timeout`` seconds, or until ``until()`` is true (checked
        between rounds); ``tick()`` is called between rounds too (e.g. to sample the server's
        memory). Returns True if ``until()`` became true."""
        end = time.monotonic() + timeout
        while True:
            if until is not None and until():
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            if tick is not None:
                tick()
            for key, events in self.sel.select(min(left, 0.05)):
                conn = key.data
                if conn.closed is not None:
                    continue
                if events & selectors.EVENT_WRITE:
                    if conn.connected is None:
                        err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                        if err:
                            self._lost(conn, True)
                            continue
                        conn.connected = time.monotonic() - conn.started
                    self._send(conn)
                    if conn.closed is not None:
                        continue
                if events & selectors.EVENT_READ:
                    self._recv(conn)

    def _send(self, conn: RawConn) -> None:
        while conn.out:
            buf = conn.out[0]
            try:
                n = conn.sock.send(buf)
            except BlockingIOError:
                break
            except OSError:
                self._lost(conn, True)
                return
            conn.sent += n
            if n == len(buf):
                conn.out.pop(0)
            else:
                conn.out[0] = memoryview(buf)[n:]
                break
        self._interest(conn)

    def _recv(self, conn: RawConn) -> None:
        try:
            data = conn.sock.recv(262144)
        except BlockingIOError:
            return
        except OSError:
            self._lost(conn, True)
            return
        if not data:
            self._lost(conn, False)
            return
        conn.inbuf += data
        conn._parse()
