"""Frame-logging TCP relay used to observe what the peers put on the wire.

Usage::

    python frameproxy.py --target PORT [--port 0] [--timeout SECONDS]

Listens on 127.0.0.1 (prints ``LISTENING <port>``), relays every connection to
127.0.0.1:PORT chunk by chunk (segmentation preserved as far as TCP allows) and prints one
JSON line per RSocket frame seen in either direction::

    {"conn": 1, "dir": "c2s", "type": "REQUEST_STREAM", "stream": 1, "flags": ["M"],
     "length": 17, "request_n": 5, "metadata_len": 2, "data_len": 1}

plus ``{"conn": 1, "dir": "c2s", "chunk": N}`` for each TCP read when ``--chunks`` is given.
Only a debugging aid for README.md; the pytest tests do not use it.  Stops after --timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys

TYPES = {
    0x01: "SETUP", 0x02: "LEASE", 0x03: "KEEPALIVE", 0x04: "REQUEST_RESPONSE",
    0x05: "REQUEST_FNF", 0x06: "REQUEST_STREAM", 0x07: "REQUEST_CHANNEL", 0x08: "REQUEST_N",
    0x09: "CANCEL", 0x0A: "PAYLOAD", 0x0B: "ERROR", 0x0C: "METADATA_PUSH", 0x0D: "RESUME",
    0x0E: "RESUME_OK", 0x3F: "EXT",
}
WITH_PAYLOAD = {0x04, 0x05, 0x06, 0x07, 0x0A}


def flag_names(frame_type: int, flags: int) -> list[str]:
    names = []
    if flags & 0x200:
        names.append("I")
    if flags & 0x100:
        names.append("M")
    if flags & 0x80:
        names.append({0x01: "R", 0x03: "R"}.get(frame_type, "F"))
    if flags & 0x40:
        names.append({0x01: "L"}.get(frame_type, "C"))
    if flags & 0x20:
        names.append("N")
    return names


def describe(frame: bytes) -> dict:
    if len(frame) < 6:
        return {"malformed": frame.hex()}
    stream_id, word = struct.unpack_from(">IH", frame)
    frame_type, flags = word >> 10, word & 0x3FF
    out: dict = {"type": TYPES.get(frame_type, hex(frame_type)), "stream": stream_id,
                 "flags": flag_names(frame_type, flags), "length": len(frame)}
    body = frame[6:]
    try:
        if frame_type == 0x01:
            major, minor, keepalive, lifetime = struct.unpack_from(">HHII", body)
            pos = 12
            if flags & 0x80:
                (token_len,) = struct.unpack_from(">H", body, pos)
                pos += 2 + token_len
            mime_len = body[pos]
            metadata_mime = body[pos + 1:pos + 1 + mime_len].decode("latin-1")
            pos += 1 + mime_len
            mime_len = body[pos]
            data_mime = body[pos + 1:pos + 1 + mime_len].decode("latin-1")
            pos += 1 + mime_len
            out.update(version=[major, minor], keepalive=keepalive, lifetime=lifetime,
                       metadata_mime=metadata_mime, data_mime=data_mime)
            body = body[pos:]
            frame_type = -1  # payload follows
        elif frame_type in (0x06, 0x07):
            (out["request_n"],) = struct.unpack_from(">I", body)
            body = body[4:]
        elif frame_type == 0x08:
            (out["request_n"],) = struct.unpack_from(">I", body)
            body = b""
        elif frame_type == 0x0B:
            (code,) = struct.unpack_from(">I", body)
            out.update(code=code, message=body[4:].decode("utf-8", "replace"))
            body = b""
        elif frame_type == 0x03:
            (out["position"],) = struct.unpack_from(">Q", body)
            out["data_len"] = len(body) - 8
            body = b""
        elif frame_type == 0x0C:
            out["metadata_len"] = len(body)
            body = b""
        if frame_type in WITH_PAYLOAD or frame_type == -1:
            if flags & 0x100:
                metadata_len = int.from_bytes(body[:3], "big")
                out["metadata_len"] = metadata_len
                body = body[3 + metadata_len:]
            out["data_len"] = len(body)
            if 0 < len(body) <= 16:
                out["data"] = body.decode("latin-1")
    except (struct.error, IndexError) as exc:
        out["malformed"] = str(exc)
    return out


class Relay:
    def __init__(self, conn: int, direction: str, chunks: bool):
        self.conn = conn
        self.direction = direction
        self.chunks = chunks
        self.buffer = b""

    def feed(self, data: bytes) -> None:
        if self.chunks:
            self.log({"chunk": len(data)})
        self.buffer += data
        while len(self.buffer) >= 3:
            length = int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < 3 + length:
                break
            frame, self.buffer = self.buffer[3:3 + length], self.buffer[3 + length:]
            self.log(describe(frame))

    def log(self, obj: dict) -> None:
        sys.stdout.write(json.dumps({"conn": self.conn, "dir": self.direction, **obj}) + "\n")
        sys.stdout.flush()


async def pump(reader, writer, relay: Relay) -> None:
    try:
        while data := await reader.read(65536):
            relay.feed(data)
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        relay.log({"eof": True})
        writer.close()


async def main(args) -> None:
    counter = 0

    async def on_connection(reader, writer):
        nonlocal counter
        counter += 1
        conn = counter
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", args.target)
        await asyncio.gather(
            pump(reader, up_writer, Relay(conn, "c2s", args.chunks)),
            pump(up_reader, writer, Relay(conn, "s2c", args.chunks)),
        )

    server = await asyncio.start_server(on_connection, "127.0.0.1", args.port)
    print(f"LISTENING {server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.sleep(args.timeout)  # lifetime bound of this debugging tool, not a sync
    server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", type=int, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--chunks", action="store_true")
    asyncio.run(main(parser.parse_args()))
