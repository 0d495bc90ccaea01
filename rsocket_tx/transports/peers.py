"""Who is on the other end? Naming a peer that speaks another protocol by its first bytes.

A client pointed at the wrong port, or a server given the wrong kind of client, should say
what it met instead of timing out or reporting a bare protocol error. The one-port server
already tells protocols apart by a connection's first bytes (:mod:`rsocket_tx.mux.sniff`,
:mod:`rsocket_tx.transports.oneport`); this module puts the same sniffers to a second use:

- :func:`guess_client`: the first bytes a *server* received. Every protocol of
  :data:`~rsocket_tx.transports.oneport.PROTOCOLS` is asked (its ``sniff``), then a TLS
  ClientHello (:func:`~rsocket_tx.transports.oneport.sniff_tls`) and an HTTP request (a
  WebSocket upgrade). The answer names the client and the ``twistd`` plugin that serves it.
- :func:`guess_server`: the first bytes a *client* received. A server answers a client of
  another protocol in its own words before it closes: an HTTP status line (``HTTP/1.1 400 Bad
  Request``: a WebSocket or web port), a TLS record (an alert, or a ServerHello), the Jini ERI
  mux's ServerConnectionHeader (``Jmux``), the Reactive Streams network protocol's serverHello
  (``F2 52 53 4E``), an RSocket 1.0 frame on stream 0 (its ERROR[INVALID_SETUP], whose text is
  quoted), a 2015 ReactiveSocket draft frame on stream 0 (its SETUP_ERROR). The answer names
  the server's protocol and the client to use.

Both are pure functions of the bytes (no I/O), called only when a connection is rejected or
ends before its first frame, never on the path of a working connection. A guess is only made
on a positive match: bytes that match nothing give None, and the caller says what it knows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..mux.sniff import Sniff

__all__ = ["PeerGuess", "guess_client", "guess_server", "silent_server", "closed_server"]


@dataclass(frozen=True, slots=True)
class PeerGuess:
    """What a connection's first bytes say about its peer.

    :ivar protocol: the peer's protocol: a name of
        :data:`~rsocket_tx.transports.oneport.PROTOCOLS` (``"rsocket"``, ``"jini-mux"``,
        ``"rsnet"``, ``"rs2015"``), or ``"tls"`` or ``"http"``.
    :ivar what: the peer in words (``"a Jini ERI mux client"``, ``"the server answered in
        HTTP (HTTP/1.1 400 Bad Request)"``).
    :ivar advice: what to do (``"serve it with `twistd jini-mux` ..."``, ``"connect with
        ws://host:port/path"``).
    """

    protocol: str
    what: str
    advice: str

    def __str__(self) -> str:
        return f"{self.what}: {self.advice}"


# -- clients, as a server sees them ---------------------------------------------------------------

_ONE_PORT = "or `twistd mux`, which serves every protocol of rsocket_tx on one port"

#: protocol name -> (the client in words, the twistd plugin that serves it)
_CLIENTS = {
    "rsocket": ("an RSocket 1.0 client", "twistd rsocket"),
    "jini-mux": ("a Jini ERI mux client", "twistd jini-mux"),
    "rsnet": ("a Reactive Streams network (RS-network) client", "twistd rsnet"),
    "rs2015": ("a 2015 ReactiveSocket draft client", "twistd rs2015"),
    "yamux": ("a yamux client", "twistd yamux"),
}

#: the methods of an HTTP/1.1 request line (RFC 9110 §9), each followed by a space
_HTTP_METHODS = tuple(m + b" " for m in (b"GET", b"HEAD", b"POST", b"PUT", b"DELETE",
                                         b"CONNECT", b"OPTIONS", b"TRACE", b"PATCH", b"PRI"))


def _http_request(prefix: bytes) -> bool:
    return any(prefix.startswith(method) for method in _HTTP_METHODS)


def guess_client(prefix: bytes, *, exclude: str | None = None) -> PeerGuess | None:
    """Name the client whose connection began with ``prefix``, if another protocol's sniffer
    claims it.

    :param prefix: the first bytes the server received (16 are enough for every sniffer;
        fewer may leave a protocol undecided, which then is not guessed).
    :param exclude: the server's own protocol name (its sniffer is not asked).
    :returns: a :class:`PeerGuess` (``protocol`` a name of
        :data:`~rsocket_tx.transports.oneport.PROTOCOLS`, ``"tls"`` or ``"http"``), or None
        when nothing matches. Never raises.
    """
    from .oneport import PROTOCOLS, sniff_tls  # (oneport imports every protocol: on use)

    for name, description in PROTOCOLS.items():
        if name == exclude or description.sniff(prefix) is not Sniff.MATCH:
            continue
        what, plugin = _CLIENTS.get(name, (f"a {name} client", "twistd mux"))
        advice = (f"serve it with `{plugin}` ({_ONE_PORT})" if plugin != "twistd mux"
                  else f"serve it with `twistd mux --protocol {name}`")
        return PeerGuess(name, what, advice)
    if sniff_tls(prefix) is Sniff.MATCH:
        return PeerGuess("tls", "a TLS client (its ClientHello)",
                         "serve TLS on this port (a tls:// or ssl: endpoint), or have the "
                         "client connect without TLS (tcp://)")
    if _http_request(prefix):
        line = _first_line(prefix)
        upgrade = " (a WebSocket upgrade?)" if prefix.startswith(b"GET ") else ""
        return PeerGuess("http", f"an HTTP client{upgrade}: {line!r}",
                         "serve WebSocket on this port (a ws:// endpoint), or have the client "
                         "connect with tcp://")
    return None


# -- servers, as a client sees them ---------------------------------------------------------------

_TLS_ALERT = 0x15
_TLS_HANDSHAKE = 0x16
_TLS_SERVER_HELLO = 0x02
_JINI_MAGIC = b"Jmux"  # (both connection headers begin with it; Jini ERI mux §ConnectionHeader)
_RSNET_SERVER_HELLO = bytes.fromhex("f252534e")  # serverHello: 0xF2 and "RSN" (docs/rsnet.rst)
# RSocket 1.0: a server's first frames on stream 0 (type << 2 in byte 7 of a length-prefixed
# frame): LEASE 0x02, KEEPALIVE 0x03, ERROR 0x0B
_RSOCKET_STREAM_ZERO_TYPES = {0x02 << 2, 0x03 << 2, 0x0B << 2}
_RSOCKET_ERROR = 0x0B << 2
# the 2015 draft: SETUP_ERROR 0x0002, LEASE 0x0003, ERROR 0x0021 on stream 0 (64 bits)
_RS2015_STREAM_ZERO_TYPES = {0x0002, 0x0003, 0x0021}


def _first_line(prefix: bytes, limit: int = 80) -> str:
    line = prefix.split(b"\r\n", 1)[0].split(b"\n", 1)[0][:limit]
    return line.decode("ascii", "replace")


def _tls_record(prefix: bytes) -> int | None:
    """The content type of a TLS record header (RFC 8446 §5.1: type, legacy version 3.x,
    16-bit length) at the start of ``prefix``, else None."""
    if len(prefix) >= 5 and prefix[0] in (_TLS_ALERT, _TLS_HANDSHAKE) and prefix[1] == 3 \
            and prefix[2] <= 4 and 0 < int.from_bytes(prefix[3:5], "big") <= (1 << 14) + 2048:
        return prefix[0]
    return None


def _rsocket_frame(prefix: bytes) -> str | None:
    """An RSocket 1.0 server's first frame on stream 0 (RSocket 1.0 Protocol §Framing Format),
    in words (an ERROR's code and text quoted), else None."""
    if len(prefix) < 9 or prefix[3:7] != b"\x00\x00\x00\x00" \
            or prefix[7] & 0xFC not in _RSOCKET_STREAM_ZERO_TYPES:
        return None
    length = int.from_bytes(prefix[0:3], "big")
    if prefix[7] & 0xFC != _RSOCKET_ERROR:
        return "it sent an RSocket 1.0 frame on stream 0"
    if length < 10:
        return None
    from ..core import errors as E
    from ..core.frames import ErrorFrame, decode

    try:
        frame = decode(prefix[3:3 + length])
    except E.FrameDecodeError:  # (cut short by the bytes kept: the code alone)
        frame = None
    if not isinstance(frame, ErrorFrame):
        code = E.error_code_name(int.from_bytes(prefix[9:13], "big")) if len(prefix) >= 13 \
            else "?"
        return f"it answered ERROR[{code}]"
    text = frame.data.decode("utf-8", "replace")
    return f"it answered ERROR[{E.error_code_name(frame.error_code)}]: {text}"


def _rs2015_frame(prefix: bytes) -> bool:
    """A 2015 ReactiveSocket draft server's frame on stream 0 (draft §Frame Header: 31-bit
    length including itself, version 0, flags, 16-bit type, 64-bit stream id)."""
    return (len(prefix) >= 16 and not prefix[0] & 0x80
            and int.from_bytes(prefix[0:4], "big") >= 16 and prefix[4] == 0
            and int.from_bytes(prefix[6:8], "big") in _RS2015_STREAM_ZERO_TYPES
            and not any(prefix[8:16]))


def guess_server(prefix: bytes, *, exclude: str | None = None) -> PeerGuess | None:
    """Name the server that answered a client with ``prefix`` (the first bytes the client
    received), if they are another protocol's.

    :param prefix: the first bytes received (at least 16 for every guess; more quote an
        RSocket ERROR's text and an HTTP status line whole).
    :param exclude: the client's own protocol name (``"rsocket"``, ``"rs2015"``): its own
        server's frames are not guessed.
    :returns: a :class:`PeerGuess`, or None when the bytes match nothing known. Never raises.
    """
    if prefix.startswith(b"HTTP/"):
        return PeerGuess("http", f"the server answered in HTTP ({_first_line(prefix)})",
                         "this looks like a WebSocket (or web) port; connect with "
                         "ws://host:port/path (wss:// over TLS)")
    record = _tls_record(prefix)
    if record == _TLS_ALERT:
        return PeerGuess("tls", "the server answered with a TLS alert",
                         "the port speaks TLS; connect with tls://host:port (wss:// for "
                         "WebSocket over TLS)")
    if record == _TLS_HANDSHAKE and len(prefix) >= 6 and prefix[5] == _TLS_SERVER_HELLO:
        return PeerGuess("tls", "the server answered with a TLS handshake record",
                         "the port speaks TLS; connect with tls://host:port")
    if prefix.startswith(_JINI_MAGIC) and exclude != "jini-mux":
        return PeerGuess("jini-mux", "the server speaks the Jini ERI multiplexing protocol",
                         "use `rsocket-tx jini` (rsocket_tx.jini.JiniMuxClient)")
    if prefix.startswith(_RSNET_SERVER_HELLO) and exclude != "rsnet":
        return PeerGuess("rsnet", "the server speaks the Reactive Streams network protocol",
                         "use `rsocket-tx rsnet` (rsocket_tx.rsnet.client.connect)")
    if exclude != "rsocket":
        said = _rsocket_frame(prefix)
        if said is not None:
            return PeerGuess("rsocket", f"the server speaks RSocket 1.0 ({said})",
                             "connect with an RSocket 1.0 client: `rsocket-tx` "
                             "(rsocket_tx.connect), not the 2015 draft's")
    if exclude != "rs2015" and _rs2015_frame(prefix):
        return PeerGuess("rs2015", "the server speaks the 2015 ReactiveSocket draft",
                         "use `rsocket-tx rs2015` (rsocket_tx.reactivesocket.client.connect)")
    return None


def silent_server(waited_ms: int, wire_name: str) -> str:
    """Words for a server that sent no byte at all in the ``waited_ms`` milliseconds (the
    client's max lifetime) after the client connected and sent its first frame.

    :param wire_name: the client's protocol in words (``"RSocket"``).
    """
    return (f"the server never answered: not a byte in the {waited_ms} ms after connecting, "
            f"not even to our KEEPALIVE, so it does not seem to speak {wire_name} on this port "
            "(a WebSocket or web port waits so: connect with ws://host:port/path); the "
            "server's log says what it saw")


def closed_server(wire_name: str) -> str:
    """Words for a server that closed the connection without sending a byte.

    :param wire_name: the client's protocol in words (``"RSocket"``).
    """
    return (f"the server closed the connection without sending a byte: it may not speak "
            f"{wire_name} on this port (a TLS port closes so: connect with tls://host:port); "
            "the server's log says what it saw")
