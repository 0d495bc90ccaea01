"""Write the seed corpus of every fuzz target from the golden vectors of the test suite.

The golden vectors are written by hand from the specs (``tests/core/test_frames_golden.py``,
``tests/extensions/test_*.py``, ``tests/jini/test_codec_golden.py``,
``tests/rsnet/test_codec_golden.py``, ``tests/reactivesocket/test_frames_golden.py``); each
target gets them in
its own input format (:mod:`fuzz.harness`), alone and as short conversations. The corpus is
small on purpose: the fuzzer grows its own in the work directory (``build/fuzz``), and only
these seeds are committed.

Usage (from the repository root): ``python -m fuzz.make_corpus`` rewrites
``fuzz/corpus/<target>/``.
"""

from __future__ import annotations

import hashlib
import importlib
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from .harness import seed_input

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "corpus"


def _golden(module: str, name: str) -> list[tuple]:
    """The ``pytest.param`` values of the list ``name`` in test module ``module``."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    params = getattr(importlib.import_module(module), name)
    return [tuple(p.values) for p in params]


def _prefixed(frame: bytes) -> bytes:
    return len(frame).to_bytes(3, "big") + frame


# ------------------------------------------------------------------------------- RSocket

def _frames() -> dict[str, bytes]:
    """Golden frame vectors (no length prefix) by kind: the frame class name."""
    out: dict[str, list[bytes]] = {}
    for frame, vector in _golden("core.test_frames_golden", "ALL_VECTORS"):
        out.setdefault(type(frame).__name__, []).append(vector)
    return out  # type: ignore[return-value]


def rsocket_frames() -> Iterable[bytes]:
    for vectors in _frames().values():
        yield from vectors


def rsocket_framing() -> Iterable[bytes]:
    frames = [v for vs in _frames().values() for v in vs]
    stream = b"".join(_prefixed(f) for f in frames)
    yield seed_input(0xFF, [stream])
    yield seed_input(0xFF, [stream[i:i + 7] for i in range(0, len(stream), 7)])
    yield seed_input(0x10, [_prefixed(f) for f in frames[:8]])  # max 70 bytes: some too large


def rsocket_metadata() -> Iterable[bytes]:
    for index, (module, name) in enumerate([
            ("extensions.test_routing", "GOLDEN"), ("extensions.test_auth", "GOLDEN"),
            ("extensions.test_mime", "MIME_GOLDEN"), (None, None),
            ("extensions.test_tracing", "GOLDEN")]):
        if module is None:  # accept MIME types: a list of MIME type ids and strings
            yield bytes([index]) + bytes.fromhex("85a1") + b"\x10application/x.foo"
            continue
        for values in _golden(module, name):
            yield bytes([index]) + values[-1]
    for values in _golden("extensions.test_composite", "GOLDEN"):
        yield b"\x80" + values[-1]
        yield b"\xc0" + values[-1]  # parse_metadata, composite


def _server_conversations(prefixed: bool) -> Iterable[tuple[int, list]]:
    from .drivers import rsocket as R
    frames = _frames()
    wrap = _prefixed if prefixed else (lambda f: f)
    mode = 0 if prefixed else R.MESSAGES
    setup = frames["SetupFrame"][0]
    requests = (frames["RequestResponseFrame"] + frames["RequestStreamFrame"]
                + frames["RequestChannelFrame"] + frames["RequestFnfFrame"])
    streams = frames["RequestNFrame"] + frames["CancelFrame"] + frames["PayloadFrame"]
    conn = frames["KeepaliveFrame"] + frames["MetadataPushFrame"] + frames["ErrorFrame"]
    for s in frames["SetupFrame"]:
        yield mode, [wrap(s)]
    for r in frames["ResumeFrame"]:
        yield mode | R.RESUME, [wrap(r)]
    yield mode, [wrap(setup)] + [wrap(f) for f in requests]
    yield mode | R.PRESET, [wrap(f) for f in requests + streams]
    yield mode | R.PRESET | R.SMALL, [wrap(f) for f in requests + streams + conn]
    yield mode | R.PRESET | R.LEASE, [(13, 10), wrap(requests[0]), (4, 0x81)]
    yield mode | R.PRESET | R.RESUME, [wrap(requests[0]), (14, 0), (15, 1), wrap(streams[0])]
    # requests, then answers and time through the API
    yield mode | R.PRESET, [wrap(requests[1]), (4, 0x80), (8, 0x80), (9, 40), (11, 20)]


def _rsocket_pair() -> tuple[list[bytes], list[bytes]]:
    """A client and a server talking (fragment size 64): a fragmented REQUEST_CHANNEL,
    REQUEST_STREAM and REQUEST_RESPONSE, fragmented and whole PAYLOADs both ways, REQUEST_N,
    CANCEL, METADATA_PUSH, then ERROR[CONNECTION_CLOSE] with a stream open. Returns the bytes
    each side received, read by read. Our own encoder writes these, past the golden vectors:
    they lead the fuzzer to the reassembly and stream states that random bytes seldom reach."""
    from rsocket_tx.core.config import ConnectionConfig
    from rsocket_tx.core.connection import Role, RSocketConnection
    from rsocket_tx.core.frames import ErrorFrame, encode
    from rsocket_tx.core.framing import frame_with_length
    from rsocket_tx.core.payload import Payload

    from .drivers import rsocket as R
    config = ConnectionConfig(fragment_size=64)
    client = RSocketConnection(Role.CLIENT, config, setup=R.setup_frame(0))
    server = RSocketConnection(Role.SERVER, config)
    to_server: list[bytes] = []
    to_client: list[bytes] = []

    def pump() -> None:
        data = client.data_to_send()
        if data:
            to_server.append(data)
            server.receive_data(data, 0.0)
        data = server.data_to_send()
        if data:
            to_client.append(data)
            client.receive_data(data, 0.0)

    pump()
    channel = client.request_channel(Payload(b"c" * 150, b"m" * 100), 3)
    stream = client.request_stream(Payload(b"s" * 70), 2)
    response = client.request_response(Payload(b"r", b"meta" * 40))
    pump()
    server.send_request_n(channel, 5)
    pump()
    client.send_payload(channel, Payload(b"p" * 300, b"q" * 80))
    client.send_payload(channel, Payload(b"n"))
    server.send_payload(stream, Payload(b"x" * 200))
    server.send_payload(response, Payload(b"y" * 10, b"z" * 100), complete=True)
    pump()
    client.send_request_n(stream, 3)
    client.send_cancel(stream)
    client.metadata_push(b"push")
    server.send_payload(channel, Payload(b"back"))
    pump()
    to_server.append(frame_with_length(encode(ErrorFrame(stream_id=0, error_code=0x102,
                                                         data=b"bye"))))
    return to_server, to_client


def rsocket_server() -> Iterable[bytes]:
    from .drivers import rsocket as R
    for prefixed in (True, False):
        for variant, items in _server_conversations(prefixed):
            yield seed_input(variant, items)
    to_server, _ = _rsocket_pair()
    for variant in (0, R.SMALL, R.LEASE):
        yield seed_input(variant, to_server[:2] + [(8, 0x80), (4, 0x80)] + to_server[2:])


def rsocket_client() -> Iterable[bytes]:
    from .drivers import rsocket as R
    frames = _frames()
    answers = frames["PayloadFrame"] + frames["ErrorFrame"] + frames["RequestNFrame"]
    conn = frames["KeepaliveFrame"] + frames["LeaseFrame"] + frames["MetadataPushFrame"]
    # open streams 1, 3, 5 (response, stream, channel), then the server's answers
    opening = [(0, 1), (2, 5), (3, 5)]
    for prefixed in (True, False):
        wrap = _prefixed if prefixed else (lambda f: f)
        mode = 0 if prefixed else R.MESSAGES
        yield seed_input(mode, opening + [wrap(f) for f in answers])
        yield seed_input(mode | R.LEASE, [wrap(f) for f in frames["LeaseFrame"]] + opening)
        yield seed_input(mode | R.SMALL, opening + [wrap(f) for f in conn + answers])
        yield seed_input(mode | R.RESUME, opening + [(14, 0), (15, 0)]
                         + [wrap(f) for f in frames["ResumeOkFrame"] + answers])
        yield seed_input(mode, opening + [(9, 20), (10, 0), (9, 200), (10, 0)])
    _, to_client = _rsocket_pair()
    # the same streams as the pair's client: a channel (1), a stream (3), a response (5)
    opening = [(3, 0x62), (2, 1), (0, 0x10)]
    for variant in (0, R.SMALL, R.RESUME):
        yield seed_input(variant, opening + to_client + [(14, 0), (15, 0)])


# ------------------------------------------------------------------------------- Jini

#: Jini ERI mux golden vectors, as spelled in tests/jini/test_codec_golden.py
JINI_MESSAGES = [bytes.fromhex(x) for x in [
    "00000000", "00000003616263", "02000003627965", "0400beef", "0600beef",
    "08000003c3a921", "10034000", "1a7f0003", "1e00ffff", "20090000", "22090000",
    "220900026e6f", "207f0000", "30010000", "307f0000", "40020000",
    "800500026869", "900500026869", "840500026869", "940500026869", "8c0500026869",
    "860500026869", "8e0500026869", "9400000f303132333435363738396162636465",
]]
JINI_HEADER = bytes.fromhex("4a6d7578 01 0080 00")
JINI_HEADERS = [JINI_HEADER, bytes.fromhex("4a6d7578 01 0000 00"),
                bytes.fromhex("4a6d7578 01 0001 00"), bytes.fromhex("4a6d7578 01 ffff 00")]


def jini_messages() -> Iterable[bytes]:
    for m in JINI_MESSAGES:
        yield b"\x00" + m
    for header in JINI_HEADERS:
        yield b"\xf0" + header
        yield b"\xf1" + header


def jini_stream() -> Iterable[bytes]:
    body = b"".join(JINI_MESSAGES)
    yield seed_input(0, [JINI_HEADER + body])
    yield seed_input(1, [JINI_HEADER] + JINI_MESSAGES)
    yield seed_input(2, [body[i:i + 3] for i in range(0, len(body), 3)])


def _data(sid: int, flags: int, body: bytes) -> bytes:
    return bytes((flags, sid)) + len(body).to_bytes(2, "big") + body


def jini_server() -> Iterable[bytes]:
    from .drivers import jini as J
    h = JINI_HEADER
    echo = bytes.fromhex("9400000f303132333435363738396162636465")
    # the client opens sessions, sends data, aborts, acknowledges; we answer through the API
    yield seed_input(0, [h, echo, (1, 0x85)])
    yield seed_input(0, [h, _data(1, 0x90, b"req"), _data(1, 0x84, b"!"), (1, 0x87),
                         bytes.fromhex("40010000")])
    yield seed_input(J.PRESET, [_data(2, 0x90, b"x"), bytes.fromhex("10024000"),
                                bytes.fromhex("20020000"), (7, 0), bytes.fromhex("06000000")])
    yield seed_input(J.PRESET | J.SMALL | J.SMALL_RATION,
                     [_data(0, 0x90, b"a" * 200), _data(0, 0x80, b"b" * 100), (2, 0x80),
                      _data(1, 0x94, b""), _data(2, 0x94, b""), (8, 1)])
    yield seed_input(J.PRESET | J.UNLIMITED, [h_ for h_ in JINI_MESSAGES])


def jini_client() -> Iterable[bytes]:
    from .drivers import jini as J
    h = JINI_HEADER
    # we open sessions and send requests; the server answers
    yield seed_input(0, [h, (0, 0), (1, 0x41), _data(0, 0x8c, b"answer")])
    yield seed_input(J.PRESET, [(0, 0), (1, 0x40), _data(0, 0x86, b"ok"), (6, 0x80),
                                bytes.fromhex("30000000")])
    yield seed_input(J.PRESET, [(0, 0), (0, 0), (1, 0x80), (1, 0x81),
                                bytes.fromhex("22000002") + b"no", bytes.fromhex("10014000"),
                                (7, 0), bytes.fromhex("06000000"), bytes.fromhex("02000000")])
    yield seed_input(J.PRESET | J.SMALL | J.SMALL_RATION,
                     [(0, 0), (1, 0xfc), bytes.fromhex("1e00ffff"), (10, 200), (10, 200)])
    yield seed_input(J.UNLIMITED, [h_ for h_ in JINI_MESSAGES])


# ------------------------------------------------------------------------------- RS-network

def _rsnet_vectors() -> list[tuple[object, int, bytes]]:
    """(message, elementSize, bytes) of tests/rsnet/test_codec_golden.py (subscriber 1 has
    elementSize 4 there)."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    module = importlib.import_module("rsnet.test_codec_golden")
    return [(m, size, bytes.fromhex(hexa)) for m, size, hexa in module.VECTORS]


def rsnet_stream() -> Iterable[bytes]:
    vectors = _rsnet_vectors()
    plain = [v for _, size, v in vectors if not size]
    yield seed_input(0, [b"".join(plain)])
    yield seed_input(4 << 1, [v for _, _, v in vectors])  # subscriber 1: elementSize 4
    yield seed_input(1, [b"".join(plain)[i:i + 5] for i in range(0, len(b"".join(plain)), 5)])


def rsnet_messages() -> Iterable[bytes]:
    for _, size, vector in _rsnet_vectors():
        yield bytes((size << 1,)) + vector  # subscriber 1's elementSize, as rsnet_stream


def _rsnet_peer(client: bool) -> Iterable[bytes]:
    from .drivers import rsnet as N
    vectors = {type(m).__name__: v for m, size, v in _rsnet_vectors() if not size}
    hello = bytes.fromhex("f2 52534e 00 00" if client else "f1 52534e 00 00")
    peer = [vectors[n] for n in ("Subscribe", "Request", "Cancel", "OnSubscribe", "OnNext",
                                 "OnNextPart", "OnNextLastPart", "OnComplete", "OnError")]
    # the peer subscribes to our publisher 1 and we answer; we subscribe and it answers
    yield seed_input(0, [hello, bytes.fromhex("01 05 7469636b73 01 0a"), (3, 0x80), (4, 0x80),
                         (6, 0x80)])
    yield seed_input(N.PRESET, [(0, 0x09), bytes.fromhex("04 00 00"),
                                bytes.fromhex("05 00 02 6869"), bytes.fromhex("09 00"), (1, 0x80)])
    yield seed_input(N.PRESET | N.SMALL, [(0, 0x08), (0, 0x08)] + peer)
    yield seed_input(N.PRESET, [bytes.fromhex("01 00 00 05"), (3, 0x83), (5, 0x85), (4, 0x80),
                                (8, 0x81), bytes.fromhex("0c")])
    yield seed_input(0, [hello] + peer + [vectors["Goodbye"]])


def rsnet_server() -> Iterable[bytes]:
    return _rsnet_peer(client=False)


def rsnet_client() -> Iterable[bytes]:
    return _rsnet_peer(client=True)


# ------------------------------------------------------------------------------- 2015 draft

def _draft_frames() -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    for frame, vector in _golden("reactivesocket.test_frames_golden", "VECTORS"):
        out.setdefault(type(frame).__name__, []).append(vector)
    return out


def _word(frame: bytes) -> bytes:
    return (len(frame) + 4).to_bytes(4, "big") + frame


def reactivesocket_frames() -> Iterable[bytes]:
    frames = [v for vs in _draft_frames().values() for v in vs]
    yield seed_input(0xFF, [b"".join(_word(f) for f in frames)])
    for f in frames:
        yield seed_input(0x40, [_word(f)])


def reactivesocket_frame() -> Iterable[bytes]:
    return [v for vs in _draft_frames().values() for v in vs]


def reactivesocket_server() -> Iterable[bytes]:
    from .drivers import rsocket as R
    frames = _draft_frames()
    setup = [f for f in frames["SetupFrame"]]
    requests = (frames.get("RequestResponseFrame", []) + frames.get("RequestStreamFrame", [])
                + frames.get("RequestSubFrame", []) + frames.get("RequestFnfFrame", []))
    rest = [f for name, fs in frames.items() if name not in ("SetupFrame",) for f in fs]
    for prefixed in (True, False):
        wrap = _word if prefixed else (lambda f: f)
        mode = 0 if prefixed else R.MESSAGES
        for s in setup:
            yield seed_input(mode, [wrap(s)] + [wrap(f) for f in requests] + [(4, 0x80)])
        yield seed_input(mode | R.PRESET, [wrap(f) for f in rest])
        yield seed_input(mode | R.PRESET | R.SMALL, [wrap(f) for f in requests] + [(4, 0x80),
                                                                                   (5, 0x81)])


def reactivesocket_client() -> Iterable[bytes]:
    from .drivers import rsocket as R
    frames = _draft_frames()
    answers = [f for name, fs in frames.items()
               if name in ("ResponseFrame", "ErrorFrame", "RequestNFrame", "LeaseFrame",
                           "SetupErrorFrame", "MetadataPushFrame") for f in fs]
    opening = [(0, 1), (2, 5)]
    for prefixed in (True, False):
        wrap = _word if prefixed else (lambda f: f)
        mode = 0 if prefixed else R.MESSAGES
        yield seed_input(mode, opening + [wrap(f) for f in answers])
        yield seed_input(mode | R.LEASE | R.SMALL, [wrap(f) for f in answers] + opening)


# ------------------------------------------------------------------------------- yamux

def _yamux_vectors() -> list[bytes]:
    """The frames of tests/yamux/test_codec_golden.py."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    return [wire for _, wire in importlib.import_module("yamux.test_codec_golden").GOLDEN]


def yamux_frames() -> Iterable[bytes]:
    vectors = _yamux_vectors()
    yield seed_input(0xFF, [b"".join(vectors)])
    for wire in vectors:
        yield seed_input(0x40, [wire])


def _yamux_peer(client: bool) -> Iterable[bytes]:
    from .drivers import yamux as Y
    # the peer's ids are the other side's parity: odd when we are the server
    sid = 2 if client else 1
    syn = bytes.fromhex("00 01 0001") + sid.to_bytes(4, "big") + bytes(4)
    data = bytes.fromhex("00 00 0000") + sid.to_bytes(4, "big") + (3).to_bytes(4, "big") + b"abc"
    fin = bytes.fromhex("00 01 0004") + sid.to_bytes(4, "big") + bytes(4)
    ping = bytes.fromhex("00 02 0001 00000000 00000007")
    update = bytes.fromhex("00 01 0000") + sid.to_bytes(4, "big") + (65536).to_bytes(4, "big")
    # the peer opens a stream, we accept, both send and close; we open one and send
    yield seed_input(0, [syn, (4, 0x80), data, (1, 0x85), fin, (2, 0x80), ping, (0, 0),
                         (1, 0x81), update, (9, 40)])
    yield seed_input(Y.SMALL, [syn, syn[:4] + (sid + 2).to_bytes(4, "big") + bytes(4),
                               syn[:4] + (sid + 4).to_bytes(4, "big") + bytes(4), (4, 0x80),
                               (6, 0), (10, 0), (10, 0)])
    yield seed_input(0, [(0, 0), (1, 0x3F), (1, 0x3F), (7, 0), syn,
                         bytes.fromhex("00 03 0000 00000000 00000001")])
    yield seed_input(Y.SMALL, [(0, 0), (2, 0x80), (10, 0), (3, 0x80), (8, 1)])


def yamux_server() -> Iterable[bytes]:
    return _yamux_peer(client=False)


def yamux_client() -> Iterable[bytes]:
    return _yamux_peer(client=True)


SEEDS: dict[str, Callable[[], Iterable[bytes]]] = {
    "rsocket_frames": rsocket_frames,
    "rsocket_framing": rsocket_framing,
    "rsocket_metadata": rsocket_metadata,
    "rsocket_server": rsocket_server,
    "rsocket_client": rsocket_client,
    "jini_messages": jini_messages,
    "jini_stream": jini_stream,
    "jini_server": jini_server,
    "jini_client": jini_client,
    "rsnet_messages": rsnet_messages,
    "rsnet_stream": rsnet_stream,
    "rsnet_server": rsnet_server,
    "rsnet_client": rsnet_client,
    "reactivesocket_frame": reactivesocket_frame,
    "reactivesocket_frames": reactivesocket_frames,
    "reactivesocket_server": reactivesocket_server,
    "reactivesocket_client": reactivesocket_client,
    "yamux_frames": yamux_frames,
    "yamux_server": yamux_server,
    "yamux_client": yamux_client,
}


def write(name: str, seeds: Iterable[bytes]) -> int:
    """Replace ``fuzz/corpus/<name>/`` with ``seeds`` (file names: SHA-1 of the content)."""
    directory = CORPUS / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    count = 0
    for seed in seeds:
        path = directory / hashlib.sha1(seed).hexdigest()
        if not path.exists():
            path.write_bytes(seed)
            count += 1
    return count


def main() -> None:
    for name, make in SEEDS.items():
        print(f"{name}: {write(name, make())} seeds")


if __name__ == "__main__":
    main()
