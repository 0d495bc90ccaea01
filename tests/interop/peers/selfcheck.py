"""Validate the peer harness without rsocket_tx: every peer client against every peer server.

Usage (project venv)::

    python tests/interop/peers/selfcheck.py [--client PEER ...] [--server PEER ...] [-v]
        [--transport tcp|ws|ws-websockets]

``--transport`` (default tcp) is used by every program that speaks it; with ``ws-websockets``
(rsocket-py only) the js programs use their ``ws``.

Each scenario states what a correct run looks like, derived from ``peers.CAPABILITIES``, so a
PASS also confirms the capability table.  Exit code 0 if nothing FAILed.  Takes ~1-2 minutes.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import peers  # noqa: E402
from peers import PeerUnsupported, datas, digest_of, pattern, payload_bytes  # noqa: E402

BIG = 100_000
#: --transport
TRANSPORT = "tcp"


def transport_of(peer: str) -> str:
    """The transport ``peer``'s program uses in this run."""
    if TRANSPORT == "tcp":
        return "tcp"
    return TRANSPORT if TRANSPORT in peers.PEERS[peer].transports else "ws"


def supports(peer: str, capability: str) -> bool:
    """:func:`peers.supports` on the transport ``peer`` uses in this run."""
    return peers.supports(peer, capability, transport_of(peer))


def reason(peer: str, capability: str) -> str:
    return peers.reason(peer, capability, transport_of(peer))


class Skip(Exception):
    pass


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def absent_metadata(client, metadata):
    """What 'no metadata' looks like in a client's result."""
    if client == "rsocket-py":
        return metadata in (None, b"")  # rsocket-py reports absent metadata as b""
    return metadata is None


def expect_echo_metadata(client, server, sent, got):
    # empty metadata comes back as such only where the client sends it, the server echoes it
    # and the client reports it: "client:empty-metadata", "server:echo-empty-metadata",
    # "client:receive-empty-metadata"
    if sent == b"" and all(supports(peer, capability) for peer, capability in (
            (client, "client:empty-metadata"), (server, "server:echo-empty-metadata"),
            (client, "client:receive-empty-metadata"))):
        check(got == b"", f"metadata {got!r}, expected b''")
    elif sent and supports(server, "server:echo-metadata"):
        check(got == sent, f"metadata {got!r}, expected {sent!r}")
    else:
        check(absent_metadata(client, got), f"metadata {got!r}, expected absent")


def run(client, server, interaction, **options):
    try:
        return peers.run_client(client, server.port, interaction,
                                transport=transport_of(client), **options)
    except PeerUnsupported as exc:
        raise Skip(f"client: {exc.reason}") from None


def need(peer, capability):
    if not supports(peer, capability):
        raise Skip(reason(peer, capability))


# ------------------------------------------------------------------------------- scenarios

def rr_small(client, server):
    r = run(client, server, "request-response", data="hello", metadata="md")
    check(r["exit_code"] == 0, r)
    data, metadata = payload_bytes(r["payload"])
    check(data == b"hello", r)
    expect_echo_metadata(client, server.peer, b"md", metadata)
    ev = server.wait_event("request", interaction="request-response")
    check(payload_bytes(ev) == (b"hello", b"md"), ev)


def rr_no_metadata(client, server):
    r = run(client, server, "request-response", data="x")
    data, metadata = payload_bytes(r["payload"])
    check(data == b"x" and absent_metadata(client, metadata), r)
    ev = server.wait_event("request", interaction="request-response")
    check(absent_metadata(server.peer, payload_bytes(ev)[1]), ev)


def rr_empty_metadata(client, server):
    r = run(client, server, "request-response", data="x", metadata=b"")
    data, metadata = payload_bytes(r["payload"])
    check(data == b"x", r)
    expect_echo_metadata(client, server.peer, b"", metadata)


def rr_binary(client, server):
    blob = bytes(range(256))
    r = run(client, server, "request-response", data=blob, metadata=blob[::-1])
    data, metadata = payload_bytes(r["payload"])
    check(data == blob, r)
    expect_echo_metadata(client, server.peer, blob[::-1], metadata)


def rr_error(client, server):
    r = run(client, server, "request-response", data="error:boom")
    check(r["exit_code"] == 1 and r["error"] == {"code": 0x201, "message": "boom"}, r)


def rr_big(client, server, fragment=None):
    if ("--fragment" in server.argv
            and not supports(server.peer, "server:complete-on-last-fragment")
            and not supports(client, "client:reassemble-past-complete")):
        raise Skip(reason(client, "client:reassemble-past-complete"))
    r = run(client, server, "request-response", data_size=BIG, metadata_size=1000,
            fragment=fragment)
    want = digest_of(pattern(BIG), pattern(1000))
    got = r["payload"]
    check(got["data_len"] == BIG and got["data_sha256"] == want["data_sha256"], r)
    if supports(server.peer, "server:echo-metadata"):
        check(got["metadata_sha256"] == want["metadata_sha256"], r)
    ev = server.wait_event("request", interaction="request-response")
    check(ev["data_sha256"] == want["data_sha256"], "server saw wrong data")
    check(ev["metadata_sha256"] == want["metadata_sha256"], "server saw wrong metadata")


def rr_big_frag64(client, server):
    need(client, "client:fragment")
    rr_big(client, server, fragment=64)


def rr_big_frag1000(client, server):
    need(client, "client:fragment")
    rr_big(client, server, fragment=1000)


def fnf(client, server):
    r = run(client, server, "fire-and-forget", data="x", metadata="y")
    check(r == {"peer": client, "interaction": "fire-and-forget", "sent": True,
                "exit_code": 0}, r)
    ev = server.wait_event("fnf")
    check(payload_bytes(ev) == (b"x", b"y"), ev)


def fnf_big(client, server, fragment=None):
    run(client, server, "fire-and-forget", data_size=BIG, fragment=fragment)
    ev = server.wait_event("fnf")
    check(ev["data_sha256"] == digest_of(pattern(BIG))["data_sha256"], ev["data_len"])


def fnf_big_frag(client, server):
    need(client, "client:fragment")
    fnf_big(client, server, fragment=100)


def metadata_push(client, server):
    need(client, "client:metadata-push")
    need(server.peer, "server:metadata-push")
    r = run(client, server, "metadata-push", metadata="mp")
    check(r["sent"] is True, r)
    ev = server.wait_event("metadata_push")
    if client == "rsocket-js-0.0.27" and not supports(server.peer,
                                                      "server:metadata-push-without-m-flag"):
        check(ev["metadata_len"] == 0, f"expected the metadata to be lost: {ev}")
        return
    check(ev["metadata_len"] == 2 and payload_bytes({"data": "", **ev})[1] == b"mp", ev)


def stream_batches(client, server):
    need(server.peer, "server:request-n")
    r = run(client, server, "request-stream", data="5", request_n=2)
    check(datas(r) == [b"0", b"1", b"2", b"3", b"4"] and r["completed"], r)
    ns = []
    while len(ns) < 3:
        ev = server.wait_event("request_n", interaction="request-stream")
        ns.append((ev["n"], ev["initial"]))
    check(ns == [(2, True), (2, False), (2, False)], ns)


def stream_default(client, server):
    r = run(client, server, "request-stream")
    check(datas(r) == [str(i).encode() for i in range(10)] and r["completed"], r)


def stream_zero(client, server):
    r = run(client, server, "request-stream", data="0")
    check(datas(r) == [] and r["completed"], r)


def stream_take(client, server):
    need(server.peer, "server:request-n")
    r = run(client, server, "request-stream", data="10", request_n=3, take=4)
    check(datas(r) == [b"0", b"1", b"2", b"3"] and r["cancelled"] and not r["completed"], r)
    ev = server.wait_event("cancel", interaction="request-stream")
    check(ev["sent"] == 6, ev)  # 3 + 3 requested before the 4th arrived


def stream_error(client, server):
    r = run(client, server, "request-stream", data="error:bad")
    check(r["exit_code"] == 1 and r["error"] == {"code": 0x201, "message": "bad"}
          and r["payloads"] == [], r)


def stream_big_metadata_frag(client, server):
    need(client, "client:fragment")
    r = run(client, server, "request-stream", data="3", metadata_size=5000, fragment=64,
            digest=True)
    check([p["data_sha256"] for p in r["payloads"]]
          == [digest_of(str(i).encode())["data_sha256"] for i in range(3)], r)
    # (matching the data: a late event of the previous scenario may still be in the queue)
    ev = server.wait_event("request", interaction="request-stream",
                           data_sha256=digest_of(b"3")["data_sha256"])
    check(ev["metadata_sha256"] == digest_of(b"", pattern(5000))["metadata_sha256"], ev)


def channel(client, server, completion=None, count=4, request_n=2):
    if completion is not None:
        need(client, f"client:completion-{completion}")
    if (count == 1 and (completion or peers.PEERS[client].default_completion) == "flag"
            and not supports(server.peer, "server:channel-initial-complete")):
        # known quirk: the responder never sees the end of the channel
        try:
            run(client, server, "request-channel", count=1, completion=completion, timeout=5)
        except peers.PeerFailure:
            return
        raise AssertionError("expected the channel to hang (server:channel-initial-complete)")
    if not supports(client, "client:request-n"):
        request_n = None  # the client's own default (rsocket-rust: 2^31-1, no REQUEST_N)
    r = run(client, server, "request-channel", count=count, request_n=request_n,
            completion=completion)
    check(datas(r) == [str(i).encode() for i in range(count)] and r["completed"], r)
    ev = server.wait_event("channel_inbound_complete")
    if completion is not None and server.peer != "rsocket-js-0.0.27":
        expected = "request" if count == 1 and completion == "flag" else completion
        check(ev["form"] == expected, ev)


def channel_flag(client, server):
    channel(client, server, "flag")


def channel_frame(client, server):
    channel(client, server, "frame")


def channel_one_flag(client, server):
    channel(client, server, "flag", count=1)


def channel_one_frame(client, server):
    channel(client, server, "frame", count=1)


def channel_many(client, server):
    channel(client, server, count=50, request_n=7)


def channel_metadata(client, server):
    r = run(client, server, "request-channel", count=3, metadata="m")
    check(datas(r) == [b"0", b"1", b"2"], r)
    for p in r["payloads"]:
        expect_echo_metadata(client, server.peer, b"m", payload_bytes(p)[1])


def channel_take(client, server):
    if not supports(client, "client:cancel-channel"):
        raise Skip(reason(client, "client:cancel-channel"))
    need(server.peer, "server:request-n")
    r = run(client, server, "request-channel", count=10, request_n=2, take=3)
    check(datas(r) == [b"0", b"1", b"2"] and r["cancelled"], r)
    server.wait_event("cancel", interaction="request-channel")


def setup_payload(client, server):
    if not supports(client, "client:setup-single-write") and not supports(
            server.peer, "server:survives-split-setup"):
        raise Skip(reason(server.peer, "server:survives-split-setup"))
    r = run(client, server, "request-response", data="x", setup_data="sd", setup_metadata="sm")
    check(payload_bytes(r["payload"])[0] == b"x", r)
    ev = server.wait_event("setup")
    check(payload_bytes(ev) == (b"sd", b"sm"), ev)
    if supports(server.peer, "server:setup-details"):
        check(ev["data_mime_type"] == ev["metadata_mime_type"] == "application/octet-stream"
              and ev["keepalive"] == 20000 and ev["lifetime"] == 90000, ev)


SCENARIOS = [
    rr_small, rr_no_metadata, rr_empty_metadata, rr_binary, rr_error, rr_big, rr_big_frag64,
    rr_big_frag1000, fnf, fnf_big, fnf_big_frag, metadata_push, stream_batches, stream_default,
    stream_zero, stream_take, stream_error, stream_big_metadata_frag, channel, channel_flag,
    channel_frame, channel_one_flag, channel_one_frame, channel_many, channel_metadata,
    channel_take, setup_payload,
]


def server_configs(peer):
    """(label, start_server kwargs, scenarios) per server configuration."""
    configs = [("default", {}, SCENARIOS)]
    for completion in ("flag", "frame"):
        if supports(peer, f"server:completion-{completion}"):
            configs.append((f"completion={completion}", {"completion": completion},
                            [stream_batches, stream_take, channel, channel_one_frame]))
    if supports(peer, "server:fragment"):
        for size in (64, 1000):
            configs.append((f"fragment={size}", {"fragment": size},
                            [rr_small, rr_big, rr_big_frag64, stream_default, channel_metadata]))
    return configs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", action="append", choices=list(peers.PEERS))
    parser.add_argument("--server", action="append", choices=list(peers.PEERS))
    parser.add_argument("-k", help="only scenarios whose name contains this")
    parser.add_argument("-v", action="store_true")
    parser.add_argument("--transport", choices=peers.TRANSPORTS, default="tcp")
    args = parser.parse_args()
    global TRANSPORT
    TRANSPORT = args.transport
    peers.ensure_installed()
    counts = {"PASS": 0, "SKIP": 0, "FAIL": 0}
    for server_peer in args.server or peers.PEERS:
        for label, kwargs, scenarios in server_configs(server_peer):
            for client_peer in args.client or peers.PEERS:
                with peers.start_server(server_peer, transport=transport_of(server_peer),
                                        **kwargs) as server:
                    for scenario in scenarios:
                        if args.k and args.k not in scenario.__name__:
                            continue
                        name = f"{client_peer:26} -> {server_peer:26} [{label}] {scenario.__name__}"
                        try:
                            server.drain_events()
                            scenario(client_peer, server)
                            status, detail = "PASS", ""
                        except Skip as exc:
                            status, detail = "SKIP", str(exc)
                        except Exception as exc:  # noqa: BLE001 - report and go on
                            status = "FAIL"
                            detail = (traceback.format_exc() if args.v
                                      else f"{type(exc).__name__}: {str(exc)[:300]}")
                        counts[status] += 1
                        if status != "PASS" or args.v:
                            print(f"{status} {name}  {detail}", flush=True)
                    code = server.stop()
                    if code not in (0, None):
                        counts["FAIL"] += 1
                        print(f"FAIL server {server_peer} [{label}] exited {code}: "
                              f"{server.stderr[-500:]}", flush=True)
    print(counts)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
